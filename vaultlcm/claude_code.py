"""Claude Code sessions in the vault, with no glue: the hook and the importer.

Claude Code keeps each session as JSON Lines under ``~/.claude/projects/<project>/``
(``$CLAUDE_CONFIG_DIR/projects`` when set): ``<session-id>.jsonl`` for the main
thread and, in recent versions, ``<session-id>/subagents/agent-<id>.jsonl`` for
each subagent (every line ``isSidechain: true``); older versions wrote subagent
lines into the main file, or into ``agent-<id>.jsonl`` next to it. A session and
its subagents become **one conversation**, named after the project and the
session: ``<project folder>-<first 8 characters of the session id>``
(``ledgerly-7f3b2c1e``).

Every ingest reads the whole session (its files merged by time, so a subagent's
lines sit where they happened) and stores what is new: import keys make it
idempotent (:mod:`vaultlcm.formats`), so a hook that fires after every turn, a
re-run of ``import`` and a grown transcript all store each line once. The hook
reads only what was appended since its last event when it can prove that this
stores exactly what a full read would (:mod:`vaultlcm.claude_resume`).

:func:`run_hook` is what ``vaultlcm hook claude-code`` runs for a hook event. It
must never block or break the agent: it prints nothing on stdout, always exits
0, logs what it did (and any error) to ``hooks.log`` in the vault's state
folder, and returns within its time limit: the work runs in a detached child
process that finishes on its own if it needs longer (a first ingest of a long
session), holding the conversation's lock like any other writer.
"""

from __future__ import annotations

import heapq
import json
import os
import re
import time
import traceback
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import InvalidNameError, UsageError, VaultLCMError
from .names import MAX_NAME_BYTES, MAX_NAME_LENGTH, validate_conversation_name

if TYPE_CHECKING:
    from .ingest import IngestReport
    from .vault import Vault

#: The hook events ``install`` registers; each makes the hook ingest what is new.
HOOK_EVENTS = ("Stop", "SubagentStop", "PreCompact", "SessionEnd")
#: Hook input larger than this is not a hook event (Claude Code sends a few hundred bytes).
MAX_EVENT_BYTES = 1 << 20
HOOK_LOG = "hooks.log"
#: Sizes and times of the transcripts the hook last stored (in the state folder).
SEEN_FILE = "claude-code-sessions.json"
HOOK_LOG_MAX_BYTES = 1 << 20
#: How long a detached hook worker may run before it stops (what it stored stays stored).
WORKER_LIMIT_SECONDS = 600
_CWD = re.compile(rb'"cwd"\s*:\s*"((?:[^"\\]|\\.)*)"')
_NAME_UNSAFE = re.compile(r'[#|^:\[\]\\/*?"<>%\s]+')


def claude_dir(environ: Mapping[str, str]) -> Path:
    """Claude Code's configuration folder: ``$CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
    configured = environ.get("CLAUDE_CONFIG_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".claude"


def default_vault() -> Path:
    """Where Claude Code sessions go when no vault is named (``--vault`` / ``VAULTLCM_VAULT``)."""
    return Path.home() / ".vaultlcm" / "claude-code"


# -- sessions -------------------------------------------------------------------------


@dataclass
class Session:
    """One Claude Code session on disk: its main transcript and its subagents' transcripts."""

    main: Path
    subagents: list[Path] = field(default_factory=list)

    @property
    def session_id(self) -> str:
        return self.main.stem

    @property
    def files(self) -> list[Path]:
        return [self.main, *self.subagents]

    def stamps(self) -> dict[str, list[int]]:
        """``{file: [size, mtime]}`` of every transcript of the session (to see whether anything changed)."""
        out: dict[str, list[int]] = {}
        for path in self.files:
            try:
                st = path.stat()
            except OSError:
                continue
            out[str(path)] = [st.st_size, st.st_mtime_ns]
        return out

    def size(self) -> int:
        total = 0
        for path in self.files:
            try:
                total += path.stat().st_size
            except OSError:
                pass
        return total


def session_at(transcript: Path, extra: Iterable[Path] = ()) -> Session:
    """The session whose main transcript is ``transcript``, with every subagent transcript found next to it."""
    subagents: list[Path] = []
    folder = transcript.parent / transcript.stem / "subagents"
    if folder.is_dir():
        subagents += sorted(p for p in folder.glob("agent-*.jsonl") if p.is_file())
    for path in extra:
        if path.is_file() and path != transcript and path not in subagents:
            subagents.append(path)
    return Session(transcript, subagents)


def find_sessions(root: Path) -> list[Session]:
    """Every session under ``root``: a ``projects`` folder, one project's folder, or one transcript file."""
    if root.is_file():
        return [session_at(root)]
    if not root.is_dir():
        raise UsageError(f"{root} is not a folder; give Claude Code's projects folder (~/.claude/projects) "
                         "or one project's folder in it")
    folders = [root] if any(root.glob("*.jsonl")) else sorted(p for p in root.iterdir() if p.is_dir())
    sessions: list[Session] = []
    for folder in folders:
        mains = {p.stem: session_at(p) for p in sorted(folder.glob("*.jsonl"))
                 if p.is_file() and not p.name.startswith("agent-")}
        # Older versions kept subagent transcripts next to the sessions: attach each by its sessionId.
        for path in sorted(folder.glob("agent-*.jsonl")):
            owner = _first_value(path, b"sessionId")
            if owner in mains and path not in mains[owner].subagents:
                mains[owner].subagents.append(path)
        sessions += mains.values()
    return sessions


def _first_value(path: Path, key: bytes) -> str | None:
    pattern = re.compile(rb'"' + re.escape(key) + rb'"\s*:\s*"((?:[^"\\]|\\.)*)"')
    try:
        with path.open("rb") as fh:
            for _ in range(50):
                line = fh.readline()
                if not line:
                    break
                found = pattern.search(line)
                if found:
                    return str(json.loads(b'"' + found.group(1) + b'"'))
    except (OSError, ValueError):
        return None
    return None


def conversation_name(session: Session, data: bytes, cwd: str | None = None) -> str:
    """``<project>-<session id, 8 characters>``: the project is the folder the session started in."""
    found = _CWD.search(data)
    if found:
        try:
            cwd = json.loads(b'"' + found.group(1) + b'"')
        except ValueError:
            pass
    project = re.split(r"[\\/]", cwd.rstrip("\\/"))[-1] if cwd else ""
    if not project:
        project = session.main.parent.name.lstrip("-").rsplit("-", 1)[-1]
    sid = re.sub(r"[^A-Za-z0-9]", "", session.session_id)[:8] or "session"
    project = _clean(project)[: MAX_NAME_LENGTH - 20]
    while len(project.encode("utf-8")) > MAX_NAME_BYTES - 20:
        project = project[:-1]
    name = f"{project.strip(' .-~_')}-{sid}".strip("-")
    try:
        return validate_conversation_name(name)
    except InvalidNameError:
        return f"claude-code-{sid}"


def _clean(text: str) -> str:
    """A project folder name made safe as a conversation name (links and paths)."""
    text = "".join(" " if unicodedata.category(ch)[0] in "CZ" else ch for ch in unicodedata.normalize("NFC", text))
    return _NAME_UNSAFE.sub("-", text).strip(" .-~_")


def read_session(session: Session) -> bytes:
    """The session's transcripts as one JSON Lines document, subagents' lines merged in by time.

    Each file keeps its own order; a line without a time sits with the line before it.
    """
    texts = []
    for path in session.files:
        try:
            texts.append(path.read_bytes())
        except FileNotFoundError:
            if path == session.main:
                raise
    if len(texts) == 1:
        return texts[0]  # as it is: error messages then name the file's own line numbers
    lines = [[ln if ln.endswith(b"\n") else ln + b"\n" for ln in t.splitlines(keepends=True) if ln.strip()]
             for t in texts]
    return b"".join(line for _, line in heapq.merge(*(_timed(ls) for ls in lines), key=lambda x: x[0]))


def _timed(lines: list[bytes]) -> list[tuple[datetime, bytes]]:
    out: list[tuple[datetime | None, bytes]] = []
    last: datetime | None = None
    for line in lines:
        try:
            value = json.loads(line)
        except ValueError:
            value = None
        stamp = value.get("timestamp") if isinstance(value, dict) else None
        if isinstance(stamp, str) and stamp:
            last = _utc(stamp) or last
        out.append((last, line))
    first = next((t for t, _ in out if t is not None), _EARLIEST)
    return [(t or first, line) for t, line in out]


_EARLIEST = datetime.min.replace(tzinfo=UTC)


def _utc(stamp: str) -> datetime | None:
    from .messages import parse_timestamp

    try:
        return parse_timestamp(stamp)
    except VaultLCMError:
        return None


def ingest_session(vault: "Vault", session: Session, *, cwd: str | None = None, refresh_views: bool = True,
                   progress: Callable[[int, int], None] | None = None) -> "IngestReport":
    """Store what is new in one session (idempotent); a torn last line is left for the next call."""
    data = read_session(session)
    conv = conversation_name(session, data, cwd)
    return vault.ingest_bytes(conv, data, format="claude-code", source=str(session.main), skip_bad_lines=True,
                              keep_bad_timestamps=True, progress=progress, refresh_views=refresh_views)


def ingest_growing(vault: "Vault", session: Session, *, cwd: str | None = None, full: bool = False,
                   ) -> tuple["IngestReport", str]:
    """:func:`ingest_session` reading only what was appended since the last call, when that stores
    exactly what a full read would (:mod:`vaultlcm.claude_resume`; the hook's way).

    Returns the report (the records read before count as already stored, as in a full
    read) and how it read: ``"new lines"``, or ``"whole session: <why>"``. ``full``
    reads the whole session (and starts the state again).
    """
    from .claude_resume import RESUME_DIR, Mismatch, ResumeStore, SessionState, Step, named_in_read, read_step
    from .formats import ParseState

    store = ResumeStore(vault.layout.state_dir / RESUME_DIR)
    state = None if full else store.load(session)
    settings = _settings_stamp(vault)
    how = "whole session: asked" if full else "whole session: no state"
    step: Step | None = None
    if state is not None:
        try:
            if state.settings != settings:
                raise Mismatch("the settings changed")
            if not (state.parse.lines and state.parse.has_kind and state.parse.records):
                raise Mismatch("the state cannot be continued")
            # Someone else wrote to the conversation or deleted from it: a full read would store it again.
            if (vault.catalog.count(state.conversation), vault.catalog.last(state.conversation)[1]) != (
                    state.count, state.last_id):
                raise Mismatch("the conversation changed since")
            step = read_step(session, state.files)
            if not state.named and conversation_name(session, step.data, cwd) != state.conversation:
                raise Mismatch("the conversation name changed")
        except Mismatch as exc:
            how, step = f"whole session: {exc}", None
    if step is not None and state is not None:
        before, parse, conv, named = state.parse.records, state.parse, state.conversation, state.named
        parse.line = step.line_base
        how = "new lines"
    else:
        step = read_step(session, None)
        before, parse, named = 0, ParseState(), False
        conv = conversation_name(session, step.data, cwd)
    report = vault.ingest_bytes(conv, step.data, format="claude-code", source=str(session.main),
                                skip_bad_lines=True, keep_bad_timestamps=True, resume=parse)
    report.already_stored += before
    if not step.safe:  # a line left for later could still give a record: no state to go on from
        store.drop(session)
        return report, how
    named = named or named_in_read(step.pieces)
    count, last_id = vault.catalog.count(conv), vault.catalog.last(conv)[1]
    store.save(session, SessionState(step.files, conv, named, settings, count, last_id, parse))
    return report, how


def _settings_stamp(vault: "Vault") -> str:
    from .claude_resume import transcript_hash
    from .layout import SETTINGS_FILE

    try:
        return transcript_hash((vault.layout.root / SETTINGS_FILE).read_bytes())
    except OSError:
        return ""


# -- importing past sessions ----------------------------------------------------------


@dataclass
class ImportReport:
    """What ``import claude-code`` did, session by session."""

    sessions: list["IngestReport"] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)

    @property
    def new(self) -> int:
        return sum(r.new for r in self.sessions)

    @property
    def already_stored(self) -> int:
        return sum(r.already_stored for r in self.sessions)

    @property
    def redacted(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.sessions:
            for kind, n in r.redacted.items():
                out[kind] = out.get(kind, 0) + n
        return dict(sorted(out.items()))

    def to_dict(self) -> dict[str, Any]:
        return {"sessions": [{k: v for k, v in r.to_dict().items() if k != "ids"} for r in self.sessions],
                "new": self.new, "already_stored": self.already_stored, "redacted": self.redacted,
                "failed": [{"transcript": path, "error": error} for path, error in self.failed]}

    def describe(self) -> str:
        from .secrets import describe_counts

        convs = len({r.conversation for r in self.sessions})
        line = (f"Imported {len(self.sessions)} session(s) into {convs} conversation(s): {self.new:,} new, "
                f"{self.already_stored:,} already stored")
        if self.redacted:
            line += f"; {describe_counts(self.redacted)}"
        if self.failed:
            line += f"; {len(self.failed)} session(s) failed"
        return line


def import_sessions(vault: "Vault", root: Path, *, progress: Callable[[int, int], None] | None = None
                    ) -> ImportReport:
    """Every session under ``root`` into its own conversation; safe to run again (nothing is stored twice).

    ``progress(done, total)`` counts transcript bytes. A session that cannot be read
    is reported in ``failed`` and the others are imported.
    """
    sessions = find_sessions(root)
    sizes = [s.size() for s in sessions]
    total, done = sum(sizes), 0
    report = ImportReport()
    touched: list[str] = []
    for session, size in zip(sessions, sizes):
        if progress is not None:
            progress(done, total)

        def inner(d: int, t: int, base: int = done, size: int = size) -> None:
            if progress is not None and t:
                progress(base + size * d // t, total)

        try:
            result = ingest_session(vault, session, refresh_views=False, progress=inner)
        except (VaultLCMError, OSError) as exc:
            report.failed.append((str(session.main), " ".join(str(exc).split())))
        else:
            report.sessions.append(result)
            if result.new:
                touched.append(result.conversation)
        done += size
    if progress is not None:
        progress(total, total)
    if touched:
        vault.refresh_views(sorted(set(touched)))
    return report


# -- the hook ---------------------------------------------------------------------------


@dataclass(frozen=True)
class HookEvent:
    """The fields of a Claude Code hook event that matter here."""

    name: str
    session_id: str
    transcript: Path
    cwd: str | None = None
    agent_transcript: Path | None = None

    @classmethod
    def parse(cls, data: bytes) -> "HookEvent":
        try:
            value = json.loads(data)
        except ValueError as exc:
            raise UsageError(f"the hook event on stdin is not JSON ({exc}); Claude Code sends one JSON object") from None
        if not isinstance(value, dict):
            raise UsageError("the hook event on stdin must be a JSON object")
        path = value.get("transcript_path")
        if not isinstance(path, str) or not path:
            raise UsageError(f"the {value.get('hook_event_name', 'hook')} event has no transcript_path")
        agent = value.get("agent_transcript_path")
        return cls(
            name=str(value.get("hook_event_name") or "?"),
            session_id=str(value.get("session_id") or ""),
            transcript=Path(path).expanduser(),
            cwd=value["cwd"] if isinstance(value.get("cwd"), str) else None,
            agent_transcript=Path(agent).expanduser() if isinstance(agent, str) and agent else None,
        )


class HookLog:
    """``hooks.log`` in the vault's state folder: one line per event, never a secret."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, text: str) -> None:
        from .secrets import Redactor

        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        line = Redactor().redact_text(f"{stamp} {text}".rstrip()) + "\n"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.exists() and self.path.stat().st_size > HOOK_LOG_MAX_BYTES:
                os.replace(self.path, self.path.with_name(self.path.name + ".1"))
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(line)
        except OSError:
            pass  # nowhere to log to: the agent must still not notice


class SeenSessions:
    """What the hook last stored, per session: the size and time of each transcript (derived state).

    An event whose transcripts are exactly as they were (``SessionEnd`` right after
    ``Stop``) has nothing new and is not read again.
    """

    LIMIT = 500

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        self.sessions: dict[str, Any] = data if isinstance(data, dict) else {}

    def unchanged(self, session: Session, stamps: dict[str, list[int]]) -> bool:
        return bool(stamps) and self.sessions.get(str(session.main)) == stamps

    def record(self, session: Session, stamps: dict[str, list[int]]) -> None:
        self.sessions.pop(str(session.main), None)
        self.sessions[str(session.main)] = stamps  # newest last: the oldest go first past the limit
        while len(self.sessions) > self.LIMIT:
            self.sessions.pop(next(iter(self.sessions)))
        try:
            from .fsutil import atomic_write

            atomic_write(self.path, json.dumps(self.sessions).encode("utf-8"))
        except OSError:
            pass  # a cache: without it the next event reads the transcript again


def fallback_log(environ: Mapping[str, str]) -> HookLog:
    """Where the hook logs when it cannot open the vault: the user's cache folder."""
    return HookLog(Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vaultlcm" / HOOK_LOG)


def open_hook_vault(root: Path, *, create: bool) -> "Vault":
    """The vault at ``root``; created when missing if ``create`` (the default vault, or ``install``)."""
    from .layout import SETTINGS_FILE
    from .vault import Vault

    if not (root / SETTINGS_FILE).is_file() and create:
        return Vault.init(root)
    return Vault(root)


def handle_event(event: HookEvent, root: Path, *, create: bool, environ: Mapping[str, str]) -> None:
    """Ingest what is new in the event's session and log one line to the vault's ``hooks.log``; never raises."""
    start = time.monotonic()
    where = f"{event.name} {event.session_id[:8] or event.transcript.stem[:8]}"
    log: HookLog | None = None
    try:
        if not event.transcript.is_file():
            raise UsageError(f"transcript {event.transcript} does not exist (yet)")
        session = session_at(event.transcript, [event.agent_transcript] if event.agent_transcript else [])
        stamps = session.stamps()  # before reading: a line added meanwhile makes the next event read again
        with open_hook_vault(root, create=create) as vault:
            log = HookLog(vault.layout.state_dir / HOOK_LOG)
            seen = SeenSessions(vault.layout.state_dir / SEEN_FILE)
            if seen.unchanged(session, stamps):
                log.write(f"{where}: unchanged since the last event; nothing to do")
                return
            report, how = ingest_growing(vault, session, cwd=event.cwd)
            seen.record(session, stamps)
        log.write(f"{where}: {report.describe()} [{time.monotonic() - start:.1f}s; read {how}]")
    except VaultLCMError as exc:
        (log or fallback_log(environ)).write(f"{where}: error: {' '.join(str(exc).split())}")
    except BaseException as exc:  # noqa: BLE001 - the agent must never see a hook failure
        detail = "".join(traceback.format_exception(exc)).rstrip().replace("\n", "\n    ")
        (log or fallback_log(environ)).write(f"{where}: unexpected error: {detail}")


def run_hook(data: bytes, *, root: Path, create: bool, environ: Mapping[str, str], time_limit: float,
             detach: bool = True) -> None:
    """Handle one hook event within ``time_limit`` seconds; never raises, never prints.

    With ``detach`` (where the system can fork), the work runs in a child process
    in its own session: this returns when it is done or when the time limit is
    reached, whichever comes first, and the child goes on alone if it needs to.
    """
    try:
        event = HookEvent.parse(data)
    except VaultLCMError as exc:
        fallback_log(environ).write(f"hook: error: {' '.join(str(exc).split())}")
        return
    if not detach:
        handle_event(event, root, create=create, environ=environ)
    elif hasattr(os, "fork"):
        _run_forked(event, root, create, environ, time_limit)
    else:
        _run_threaded(event, root, create, environ, time_limit)


def _run_forked(event: HookEvent, root: Path, create: bool, environ: Mapping[str, str], time_limit: float) -> None:
    try:
        pid = os.fork()
    except OSError:
        handle_event(event, root, create=create, environ=environ)
        return
    if pid == 0:  # the worker: away from Claude Code's pipes and process group, with its own deadline
        try:
            os.setsid()
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            import signal

            signal.alarm(WORKER_LIMIT_SECONDS)
            handle_event(event, root, create=create, environ=environ)
        finally:
            os._exit(0)
    deadline = time.monotonic() + time_limit
    while time.monotonic() < deadline:
        try:
            finished, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if finished:
            return
        time.sleep(0.02)
    _worker_log(root, environ).write(f"{event.name} {event.session_id[:8]}: still working after {time_limit:g}s; "
                                     f"continuing in the background (process {pid})")


def _worker_log(root: Path, environ: Mapping[str, str]) -> HookLog:
    from .layout import STATE_DIR

    state = root / STATE_DIR
    return HookLog(state / HOOK_LOG) if state.is_dir() and os.access(state, os.W_OK) else fallback_log(environ)


def _run_threaded(event: HookEvent, root: Path, create: bool, environ: Mapping[str, str], time_limit: float) -> None:
    import threading

    worker = threading.Thread(target=handle_event, args=(event, root), kwargs={"create": create, "environ": environ},
                              daemon=True)
    worker.start()
    worker.join(time_limit)
    if worker.is_alive():
        # No fork here: stop at the limit. Ingest is crash-safe and the next event stores the rest.
        _worker_log(root, environ).write(f"{event.name} {event.session_id[:8]}: stopped at the {time_limit:g}s "
                                         "limit; the next event stores the rest")
        os._exit(0)
