"""The Claude Code hook reads only what was appended since its last event.

A hook event used to read the whole session (every transcript, merged by time)
and parse every line, then skip what was already stored: a session of n turns
cost O(n²) over its life. Each event now keeps, per session, in the vault's
state folder (derived state: deleting it costs one full read), where it stopped:

* per transcript, the offset after the last line it took whole, a hash of the
  file's first bytes and of the bytes just before that offset (a file cut short
  or rewritten no longer matches), and, when the session has subagent files, the
  time the next untimed line would take and the greatest merge time of the lines
  read (:func:`vaultlcm.claude_code.read_session` merges the files by time);
* the parse context of the document (:class:`vaultlcm.formats.ParseState`: the
  import-key counters, the last time, the subagent link maps);
* the conversation it went to and what that conversation held afterwards.

The next event parses only the lines after the offsets, as the continuation of
that context, which gives each new record the key, time and links a full read
would. It reads the whole session again, today's idempotent way, and starts a
new state whenever it cannot prove that the new lines come after the old ones
in the merged document, or anything else does not match: no state or one of
another version, another list of files, a prefix that changed, a line that a
previous event read whole and that has been continued since, a conversation
someone else wrote to or deleted from, other settings.

A line still being written (no newline yet) is left for the next event; it is
read with this one all the same, exactly as a full read would read it (it is no
record unless it is already a whole JSON value, in which case it counts as read).
"""

from __future__ import annotations

import hashlib
import heapq
import json
import os
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from .formats import ParseState

if TYPE_CHECKING:
    from .claude_code import Session

#: Where the states live, one file per session, in the vault's state folder.
RESUME_DIR = "claude-code-resume"
#: How many sessions keep a state (the newest; as :class:`~vaultlcm.claude_code.SeenSessions`).
LIMIT = 500
#: Bytes hashed at the start of a transcript and before the offset (enough to see a rewrite).
CHECK_BYTES = 4096
_VERSION = 1
_EARLIEST = datetime.min.replace(tzinfo=UTC)


@dataclass
class FileMark:
    """Where the last event stopped in one transcript."""

    path: str
    offset: int
    head: str
    back: str
    #: The offset is at the end of a whole JSON line that had no newline yet: the next byte must be one.
    open_line: bool = False
    #: Only for sessions with several files: any line read, the time the next untimed line takes,
    #: the greatest merge time of the lines read (ISO text).
    lines: bool = False
    last: str | None = None
    top: str | None = None
    #: The merge times of the lines read never went back.
    rising: bool = True
    #: Lines read (``\n`` before the offset; in a merged session, the non-blank lines): for line numbers.
    nl: int = 0


@dataclass
class SessionState:
    """What one session's next event needs to read only what is new."""

    files: list[FileMark]
    conversation: str
    #: The conversation name came from a ``cwd`` in lines already read (else it is worked out again).
    named: bool
    settings: str
    count: int
    last_id: str | None
    parse: ParseState

    def to_bytes(self) -> bytes:
        head = {"v": _VERSION, "files": [asdict(f) for f in self.files], "conversation": self.conversation,
                "named": self.named, "settings": self.settings, "count": self.count, "last_id": self.last_id}
        return json.dumps(head, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n" + (
            self.parse.to_bytes())

    @classmethod
    def from_bytes(cls, data: bytes) -> "SessionState":
        cut = data.index(b"\n")
        head = json.loads(data[:cut])
        if not isinstance(head, dict) or head.get("v") != _VERSION:
            raise ValueError("a state of another version")
        try:
            return cls([FileMark(**f) for f in head["files"]], str(head["conversation"]), bool(head["named"]),
                       str(head["settings"]), int(head["count"]), head["last_id"], ParseState.from_bytes(data[cut + 1:]))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a session state: {exc}") from None


class ResumeStore:
    """The states of the newest :data:`LIMIT` sessions, one file each (``<hash of the main path>.state``)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, session: "Session") -> Path:
        return self.folder / (hashlib.sha256(os.fsencode(session.main)).hexdigest()[:32] + ".state")

    def load(self, session: "Session") -> SessionState | None:
        try:
            return SessionState.from_bytes(self.path(session).read_bytes())
        except (OSError, ValueError):
            return None  # missing, unreadable, of another version: the event reads the whole session

    def save(self, session: "Session", state: SessionState) -> None:
        from .fsutil import atomic_write

        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            # A cache: a crash may lose it (the next event then reads the whole session), never half of it.
            atomic_write(self.path(session), state.to_bytes(), skip_if_same=False, durable=False)
            states = list(self.folder.glob("*.state"))
            if len(states) > LIMIT:
                states.sort(key=lambda p: p.stat().st_mtime_ns)
                for old in states[: len(states) - LIMIT]:
                    old.unlink(missing_ok=True)
        except OSError:
            pass

    def drop(self, session: "Session") -> None:
        try:
            self.path(session).unlink(missing_ok=True)
        except OSError:
            pass


# -- reading --------------------------------------------------------------------------


def transcript_hash(data: bytes) -> str:
    """The short hash the marks keep of a file's bytes."""
    return hashlib.sha256(data).hexdigest()[:32]


def _is_json(piece: bytes) -> bool:
    try:
        json.loads(piece.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError too
        return False
    return True


def _taken(data: bytes, merged: bool) -> tuple[int, bool, bool]:
    """How much of ``data`` (a transcript's new bytes) counts as read: ``(length, open_line, safe)``.

    Whole lines count; so does a last line without its newline that is already a whole
    JSON value (a reader takes it as a record). ``safe`` is False when the part left over
    could still give a record (a last line that ``\\r`` splits, in a merged session): then
    no state is kept.
    """
    end = data.rfind(b"\n") + 1
    tail = data[end:]
    if not tail.strip():
        return end, False, True
    if _is_json(tail):
        return len(data), True, True
    pieces = tail.splitlines() if merged else [tail]
    return end, False, not any(p.strip() and _is_json(p) for p in pieces)


def _lines(data: bytes) -> list[bytes]:
    """The non-blank lines of ``data`` as :func:`~vaultlcm.claude_code.read_session` merges them."""
    return [ln if ln.endswith(b"\n") else ln + b"\n" for ln in data.splitlines(keepends=True) if ln.strip()]


def _keys(lines: list[bytes], last: datetime | None) -> tuple[list[datetime | None], list[bool], datetime | None]:
    """Each line's time (its own, else the last one before it, from ``last`` on), whether it is JSON
    at all (a line that is not can never be a record), and the last time after them."""
    from .claude_code import _utc

    out: list[datetime | None] = []
    parsed: list[bool] = []
    for line in lines:
        try:
            value = json.loads(line)
        except ValueError:
            value, ok = None, False
        else:
            ok = True
        stamp = value.get("timestamp") if isinstance(value, dict) else None
        if isinstance(stamp, str) and stamp:
            last = _utc(stamp) or last
        out.append(last)
        parsed.append(ok)
    return out, parsed, last


def _rising(keys: list[datetime], start: datetime | None = None) -> bool:
    prev = start
    for k in keys:
        if prev is not None and k < prev:
            return False
        prev = k
    return True


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at is not None else None


def _when(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text is not None else None


@dataclass
class Step:
    """What one event hands to the vault: the document (or its new part) and the marks to keep after it."""

    data: bytes
    files: list[FileMark]
    #: Per line of ``data``'s merge, whether it counts as read (to place the ``cwd`` a name came from).
    pieces: list[tuple[bytes, bool]]
    safe: bool
    #: The document's lines before ``data`` (for error messages).
    line_base: int = 0


class Mismatch(Exception):
    """The state does not fit the session: read it whole."""


@dataclass
class _Read:
    """The new bytes of one transcript, with what is known of the bytes before them (for its next mark)."""

    path: Path
    before: FileMark | None
    new: bytes
    head: bytes  # the file's first bytes (up to CHECK_BYTES, up to the old offset)
    known: bytes  # the file's bytes from ``start`` to its end as read
    start: int

    def mark(self, taken: int, open_line: bool) -> FileMark:
        """The mark after ``taken`` more bytes, hashed from the bytes read (not read again: they are what was stored)."""
        offset = (self.before.offset if self.before else 0) + taken
        if taken == 0 and self.before is not None:
            open_line = self.before.open_line
        head = (self.head + self.known)[: min(CHECK_BYTES, offset)] if self.start == 0 else self.head
        back = self.known[max(0, offset - CHECK_BYTES) - self.start: offset - self.start]
        return FileMark(str(self.path), offset, transcript_hash(head[: min(CHECK_BYTES, offset)]),
                        transcript_hash(back), open_line)


def _read_from(path: Path, mark: FileMark | None) -> _Read:
    """The bytes of ``path`` after ``mark`` (all of it without one), once its prefix is checked."""
    if mark is None:
        data = path.read_bytes()
        return _Read(path, None, data, b"", data, 0)
    with path.open("rb") as fh:
        head = fh.read(min(CHECK_BYTES, mark.offset))
        start = max(0, mark.offset - CHECK_BYTES)
        fh.seek(start)
        rest = fh.read()
    if len(rest) < mark.offset - start or transcript_hash(head) != mark.head or (
            transcript_hash(rest[: mark.offset - start]) != mark.back):
        raise Mismatch(f"{path.name} was cut short or rewritten")
    new = rest[mark.offset - start:]
    if mark.open_line and new and not new.startswith(b"\n"):
        raise Mismatch(f"{path.name}: a line read whole was continued")
    return _Read(path, mark, new, b"" if start == 0 else head, rest, start)


def read_step(session: "Session", marks: list[FileMark] | None) -> Step:
    """The session's document after ``marks`` (the whole of it without), as
    :func:`~vaultlcm.claude_code.read_session` would give it; raises ``Mismatch``."""
    names = [str(p) for p in session.files]
    found: list[FileMark | None] = [None] * len(names)
    if marks is not None:
        # Files keep their order (the merge breaks ties by it); a new subagent file may come in anywhere,
        # once the session is merged (a first subagent file changes how the main one is read).
        by_path = {m.path: m for m in marks}
        if [n for n in names if n in by_path] != [m.path for m in marks]:
            raise Mismatch("a transcript of the session is gone")
        if len(names) > 1 and len(marks) == 1:
            raise Mismatch("a first subagent transcript")
        found = [by_path.get(n) for n in names]
    reads: list[_Read] = []
    for path, mark in zip(session.files, found):
        try:
            reads.append(_read_from(path, mark))
        except FileNotFoundError:
            if path == session.main:
                raise
            if marks is not None:
                raise Mismatch(f"{path.name} is gone") from None
            # read_session leaves it out; the next event sees another list of files and reads everything
    base = sum(r.before.nl for r in reads if r.before)
    if len(reads) == 1:
        new = reads[0].new
        taken, open_line, ok = _taken(new, False)
        mark = reads[0].mark(taken, open_line)
        mark.nl = base + new[:taken].count(b"\n")
        return Step(new, [mark], [(new[:taken], True), (new[taken:], False)], ok, base)
    out: list[FileMark] = []
    safe = True
    timed: list[list[tuple[datetime, int, bytes]]] = []
    parsed: list[list[bool]] = []
    rising = True
    for r in reads:
        before = r.before
        taken, open_line, ok = _taken(r.new, True)
        safe = safe and ok
        read, left = _lines(r.new[:taken]), _lines(r.new[taken:])
        keys, jsons, last = _keys(read, _when(before.last) if before else None)
        more, more_jsons, _ = _keys(left, last)
        keys, jsons = keys + more, jsons + more_jsons
        if before is not None and before.lines and before.last is None:
            if any(k is not None for k in keys):
                raise Mismatch(f"{r.path.name}: the first time came after untimed lines")
            first = _EARLIEST
        else:
            first = next((k for k in keys if k is not None), _EARLIEST)
        full = [k or first for k in keys]
        # The merge time of the file's last line read before (untimed lines before any time: the earliest).
        prev = (_when(before.last) or _EARLIEST) if before and before.lines else None
        mark = r.mark(taken, open_line)
        mark.lines = bool(read) or bool(before and before.lines)
        mark.last = _iso(last)
        tops = full[: len(read)] + ([d] if before and (d := _when(before.top)) else [])
        mark.top = _iso(max(tops)) if tops else None
        mark.rising = (before.rising if before else True) and _rising(full[: len(read)], prev)
        mark.nl = (before.nl if before else 0) + len(read)
        rising = rising and (before.rising if before else True) and _rising(full, prev)
        out.append(mark)
        timed.append([(k, int(n < len(read)), line) for n, (k, line) in enumerate(zip(full, read + left))])
        parsed.append(jsons)
    if marks is not None:
        _check_order(found, timed, parsed, rising)
    joined = list(heapq.merge(*timed, key=lambda x: x[0]))
    return Step(b"".join(line for _, _, line in joined), out, [(line, bool(r)) for _, r, line in joined], safe,
                base)


def _check_order(marks: list[FileMark | None], timed: list[list[tuple[datetime, int, bytes]]],
                 parsed: list[list[bool]], rising: bool) -> None:
    """Refuse unless the merge of the whole session puts every new line after every line read before.

    :func:`heapq.merge` takes the least head of the files, ties to the earlier file: as long as any old
    line is left it wins over every new one if each file's first new line comes after the greatest
    ``(time, file)`` of every other file's old lines, so the old lines keep their order and the new
    ones follow, merged among themselves. When every file's times never go back, the merge is a stable
    sort and a line that is not JSON (a torn one) can go anywhere without moving a record: only each
    file's first JSON line has to come after.
    """
    tops = [(_when(m.top), i) for i, m in enumerate(marks) if m and m.lines and m.top]
    for j, lines in enumerate(timed):
        others = [t for t in tops if t[1] != j]
        if not others:
            continue
        firsts = [k for (k, _, _), ok in zip(lines, parsed[j]) if ok or not rising]
        if firsts and (firsts[0], j) <= max(others):  # type: ignore[operator]
            raise Mismatch("a new line goes before lines already read")


def named_in_read(pieces: list[tuple[bytes, bool]]) -> bool:
    """Whether the first ``cwd`` of the document (what names the conversation) is in a line read whole."""
    from .claude_code import _CWD

    data = b"".join(p for p, _ in pieces)
    found = _CWD.search(data)
    if not found:
        return False
    at = 0
    for piece, read in pieces:
        at += len(piece)
        if found.start() < at:
            return read and found.end() <= at
    return False


__all__ = ["LIMIT", "RESUME_DIR", "FileMark", "Mismatch", "ResumeStore", "SessionState", "Step", "named_in_read",
           "read_step", "transcript_hash"]

