"""How one message is written to, and read back from, a daily log.

An entry is a hidden metadata line, an Obsidian callout that shows the message,
and a block id::

    <!-- lcm:{"id":"m-…","seq":3,"prev":"m-…","role":"assistant",…,"parts":[…],"skel":{…}} -->
    > [!assistant] **assistant** · 2026-11-29 10:00:05
    > Let me read the config first.
    >
    > **tool call** `read_file` · `toolu_01`
    > ```json
    > {"path": "src/app.py"}
    > ```

    ^m-3f2a9c1b0d4e5f60

The readable strings of the message (text, thinking, tool arguments, tool
results, edits) are *lifted* out of the message into the callout; everything
else stays in ``skel``, the message with those strings replaced by ``null``.
``parts`` says, for each lifted string, where it goes back (a JSON path into
``skel``), how it is encoded (see :mod:`vaultlcm.logparts`) and how many
callout lines it takes, so reading never has to guess where a part ends:
content can hold anything without being mistaken for structure. Every callout
line starts with ``>``; structure lines never do. Metadata values too large to
keep in the hidden line (Claude Code's ``toolUseResult`` copies whole files)
are stored in ``files/`` and named in ``xf``.

Reading never raises on a damaged file: :func:`iter_entries` reports torn
tails, damaged entries and text a person added, and goes on with the rest.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .errors import CorruptVaultError
from .logparts import (
    PayloadStore,
    decode_part,
    diff_body,
    display,
    edit_pairs,
    fence,
    is_base64_payload,
    json_text,
    strip_ansi,
    strip_quote,
    text_body,
    text_kind,
)
from .messages import LINE_TEXT_KEYS, Message, format_timestamp

META_PREFIX = b"<!-- lcm:"
META_SUFFIX = b" -->"
#: How every entry this writer produces begins; a torn write at the end of a file starts so.
ENTRY_START = b'<!-- lcm:{"id":"'
#: Extra fields of a record larger than this (as JSON) go to ``files/``, not the hidden line.
METADATA_INLINE_BYTES = 2048
CALLOUT_TYPES = {"user": "user", "assistant": "assistant", "system": "system", "tool": "tool"}
IMAGE_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}


@dataclass(frozen=True)
class StoredMessage:
    """A message as the vault holds it: the message plus its place in the conversation.

    ``prev`` is the id of the message before it when it was written (how the order
    of two machines' appends is restored after a git merge); ``key`` identifies the
    source record for idempotent re-imports; ``batch`` marks an ingest call written
    to several daily logs (``[call id, first position, message count]``): its
    messages count only once the call's last message is present. ``lane`` is ``side`` (a subagent's line) or ``line`` (a
    transcript line that is no chat message); ``thread`` carries the record's own
    tree links (``uuid``/``parentUuid``) for branch detection.
    """

    message: Message
    conversation: str
    seq: int
    at: datetime
    tokens: int
    prev: str | None = None
    key: str | None = None
    batch: tuple[str, int, int] | None = None
    lane: str | None = None
    thread: dict[str, Any] | None = None
    #: ``at`` as :func:`format_timestamp` writes it, when the writer has it already (None: formatted when needed).
    stamp: str | None = field(default=None, compare=False)

    @property
    def id(self) -> str:
        assert self.message.id is not None
        return self.message.id

    @property
    def day(self) -> str:
        return _day(self.at)


@dataclass(frozen=True)
class ParsedEntry:
    """One entry found in a log file, with its byte span."""

    meta: dict[str, Any]
    start: int
    end: int
    line: int
    raw: bytes
    nbody: int = 0
    edited: bool = False

    @property
    def id(self) -> str:
        return str(self.meta["id"])


@dataclass(frozen=True)
class TornTail:
    """An incomplete entry at the very end of a file: a write torn by a crash, never acknowledged."""

    start: int
    line: int


@dataclass(frozen=True)
class Damaged:
    """Something that starts like an entry but cannot be read; the rest of the file still is."""

    start: int
    end: int
    line: int
    reason: str
    id: str | None = None


@dataclass(frozen=True)
class Foreign:
    """Text a person added outside any entry (kept as is; reported by ``doctor``)."""

    line: int
    text: str
    final_newline: bool = True


LogItem = ParsedEntry | TornTail | Damaged | Foreign


# -- writing --------------------------------------------------------------------


def _meta_line(meta: dict[str, Any]) -> str:
    # '>' only ever appears inside JSON strings, so escaping it keeps '-->' out of the comment.
    return "<!-- lcm:" + json_text(meta, indent=None).replace(">", "\\u003e") + " -->"


@dataclass
class _Renderer:
    store: PayloadStore
    count_tokens: Callable[[str], int]
    large_tokens: int
    parts: list[list[Any]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    def _add(self, path: list[Any], kind: str, header: list[str], body: list[str], opts: dict[str, Any] | None = None) -> None:
        if self.lines:
            self.lines.append("")
        part: list[Any] = [path, kind, len(header), len(body)]
        if opts:
            part.append(opts)
        self.parts.append(part)
        self.lines.extend(header)
        self.lines.extend(body)

    def _is_large(self, text: str) -> bool:
        # A token is at least one character, so short strings need no counting.
        return len(text) >= self.large_tokens and self.count_tokens(text) >= self.large_tokens

    def _file_part(self, path: list[Any], header: list[str], data: bytes, ext: str, enc: str, preview: str) -> None:
        name = self.store.put(data, ext)
        body = [f"![[{name}]]" if ext in ("png", "jpg", "gif", "webp", "svg") else f"[[{name}]] {preview}"]
        self._add(path, "file", header, body, {"f": name, "e": enc})

    def text(self, path: list[Any], text: str, header: list[str], *, fenced: bool = False) -> None:
        if self._is_large(text) or is_base64_payload(text):
            nlines = text.count("\n") + 1
            preview = f"· payload, {self.count_tokens(text):,} tokens, {nlines:,} lines"
            self._file_part(path, header, text.encode("utf-8"), "txt", "text", preview)
            return
        visible, codes = strip_ansi(text)
        kind = text_kind(visible, fenced=fenced)
        self._add(path, kind, header, text_body(visible, kind), {"ansi": codes} if codes else None)

    def heading(self, path: list[Any], text: str, header: list[str]) -> None:
        if text and "\n" not in text and text_kind(text, fenced=False) == "md" and text == text.strip():
            self._add(path, "h", header, ["#### " + text])
        else:
            self.text(path, text, header)

    def quote(self, path: list[Any], text: str, title: str) -> None:
        visible, codes = strip_ansi(text)
        if self._is_large(text) or codes or text_kind(visible, fenced=False) != "md":
            self.text(path, text, [title])
            return
        body = [">" + (" " + line if line else "") for line in text.split("\n")]
        self._add(path, "quote", [title], body)

    def json_value(self, path: list[Any], value: Any, header: list[str]) -> None:
        text = json_text(value)
        if self._is_large(text):
            self._file_part(path, header, text.encode("utf-8"), "json", "json", f"· JSON payload, {self.count_tokens(text):,} tokens")
            return
        lines = text.split("\n")
        f = fence(lines)
        self._add(path, "json", header, [f + "json", *lines, f])

    def header_only(self, header: list[str]) -> None:
        self._add([], "hdr", header, [])

    def image(self, path: list[Any], block: dict[str, Any]) -> None:
        import base64
        import binascii

        data = block["data"]
        media = str(block.get("media_type") or "")
        ext = IMAGE_EXTENSIONS.get(media, "bin")
        try:
            raw = base64.b64decode(data, validate=True)
            exact = base64.b64encode(raw).decode("ascii") == data
        except (binascii.Error, ValueError):
            exact = False
        if exact:
            self._file_part(path, [f"**image** {display(media)}"], raw, ext, "base64", "")
        else:  # not canonical base64: keep the string itself, byte for byte
            self._file_part(path, [f"**image** {display(media)}"], data.encode("utf-8"), "txt", "text", "· image data")

    def tool_call(self, path: list[Any], block: dict[str, Any]) -> None:
        head = f"**tool call** `{display(block.get('name'))}` · `{display(block.get('id'))}`"
        if "arguments" not in block:
            self.header_only([head])
            return
        args = block["arguments"]
        pairs = [p for p in edit_pairs(args) if not self._is_large(_get(args, p[0])[p[1]] + _get(args, p[0])[p[2]])]
        if not pairs:
            self.json_value([*path, "arguments"], args, [head])
            return
        # An edit reads as a diff; the other arguments (file path, flags) stay in the metadata
        # and are named in the header.
        target = args.get("file_path") or args.get("path") if isinstance(args, dict) else None
        first = True
        for sub, old_key, new_key in pairs:
            obj = _get(args, sub)
            header = [head + (f" · `{display(target)}`" if target else "")] if first else []
            self._add([*path, "arguments", *sub], "diff", header, diff_body(obj[old_key], obj[new_key]),
                      {"d": obj[old_key].count("\n") + 1, "k": [old_key, new_key]})
            first = False

    def blocks(self, blocks: list[Any], prefix: list[Any]) -> None:
        for i, block in enumerate(blocks):
            path = [*prefix, i]
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                self.text([*path, "text"], block["text"], [])
            elif kind == "thinking" and isinstance(block.get("thinking"), str):
                self.quote([*path, "thinking"], block["thinking"], "> [!thinking]- thinking")
            elif kind == "tool_call":
                self.tool_call(path, block)
            elif kind == "tool_result":
                flag = " · **error**" if block.get("is_error") else ""
                name = f" `{display(block['name'])}`" if isinstance(block.get("name"), str) else ""
                header = [f"**tool result**{name} for `{display(block.get('call_id'))}`{flag}"]
                inner = block.get("content")
                if isinstance(inner, str):
                    self.text([*path, "content"], inner, header, fenced=bool(inner))
                elif isinstance(inner, list):
                    self.header_only(header)
                    self.blocks(inner, [*path, "content"])
                else:
                    self.header_only(header)
            elif kind == "image" and isinstance(block.get("data"), str):
                self.image([*path, "data"], block)
            elif kind == "image" and isinstance(block.get("url"), str):
                self.header_only([f"![image]({display(block['url'], 2000).replace(' ', '%20')})"])
            else:
                self.json_value(path, block, [f"**{display(kind)}**"])

    def line_fields(self, extra: dict[str, Any]) -> None:
        """The texts of a non-chat record (a session title, a compaction summary), shown and searchable."""
        for key in LINE_TEXT_KEYS:
            value = extra.get(key)
            if isinstance(value, str) and value:
                if key in ("summary", "customTitle", "title"):
                    self.heading(["extra", key], value, [f"**{key}**"])
                else:
                    self.text(["extra", key], value, [f"**{key}**"])


def _get(obj: Any, path: list[Any]) -> Any:
    for key in path:
        obj = obj[key]
    return obj


def _clear(skel: Any, path: list[Any], kind: str, opts: dict[str, Any]) -> None:
    target = _get(skel, path[:-1])
    if kind == "diff":
        obj = target[path[-1]]
        for key in opts["k"]:
            obj[key] = None
    else:
        target[path[-1]] = None


def render_entry(
    sm: StoredMessage,
    store: PayloadStore,
    *,
    count_tokens: Callable[[str], int],
    large_tokens: int,
) -> bytes:
    """The bytes of one log entry for ``sm`` (externalizing payloads into ``store``)."""
    return render_entry_meta(sm, store, count_tokens=count_tokens, large_tokens=large_tokens)[0]


def render_entry_meta(
    sm: StoredMessage,
    store: PayloadStore,
    *,
    count_tokens: Callable[[str], int],
    large_tokens: int,
) -> tuple[bytes, dict[str, Any]]:
    """:func:`render_entry`, with the metadata its hidden line holds (what :func:`iter_entries` would
    parse back from those bytes), so a writer need not parse its own entry again."""
    msg = sm.message
    r = _Renderer(store, count_tokens, large_tokens)
    r.blocks(msg.content, ["content"])
    skel: dict[str, Any] = {"content": _copy_json(msg.content)}
    extra = _copy_json(msg.extra)
    if sm.lane == "line":
        r.line_fields(extra)
    if extra:
        skel["extra"] = extra
    for part in r.parts:
        if part[0]:
            _clear(skel, part[0], part[1], part[4] if len(part) > 4 else {})
    xf: dict[str, str] = {}
    for key, value in extra.items():
        if value is None:
            continue
        text = json_text(value, indent=None)
        if len(text.encode("utf-8")) > METADATA_INLINE_BYTES:
            xf[key] = store.put(text.encode("utf-8"), "json")
            extra[key] = None
    if msg.hints:
        skel["hints"] = msg.hints
    meta: dict[str, Any] = {
        "id": sm.id,
        "seq": sm.seq,
        "prev": sm.prev,
        "role": msg.role,
        "ts": msg.timestamp,
        "at": sm.stamp or format_timestamp(sm.at),
        "tok": sm.tokens,
    }
    for key, value in (("key", sm.key), ("batch", list(sm.batch) if sm.batch else None),
                       ("lane", sm.lane), ("thread", sm.thread)):
        if value is not None:
            meta[key] = value
    meta["parts"] = r.parts
    meta["skel"] = skel
    if xf:
        meta["xf"] = xf
    out = [_meta_line(meta), "> " + _title(msg, sm)]
    out.extend(">" + (" " + line if line else "") for line in r.lines)
    out.extend(["", f"^{sm.id}", "", ""])
    return "\n".join(out).encode("utf-8"), meta


def entry_from_render(data: bytes, meta: dict[str, Any], start: int) -> ParsedEntry:
    """The :class:`ParsedEntry` :func:`iter_entries` would find for an entry just rendered by
    :func:`render_entry_meta` (``data``, ``meta``) and written at offset ``start``.

    Its ``line`` is 0 (the writer does not know how many lines precede it; nothing it records needs it).
    """
    # An entry ends with its block id line and a blank line; ``raw`` stops after the block id line.
    return ParsedEntry(meta=meta, start=start, end=start + len(data), line=0, raw=data[:-1],
                       nbody=_body_line_count(meta["parts"]), edited=False)


def _day(at: datetime) -> str:
    """``at``'s date as ``YYYY-MM-DD`` (what ``strftime("%Y-%m-%d")`` gives, a tenth of its cost)."""
    if at.year >= 1000:
        return at.date().isoformat()
    return at.strftime("%Y-%m-%d")  # the C library's own rendering of a short year, kept as it was


def _title(msg: Message, sm: StoredMessage) -> str:
    when = f"{_day(sm.at)} {sm.at.hour:02d}:{sm.at.minute:02d}:{sm.at.second:02d}"
    role = display(msg.role, 60)
    if sm.lane == "side":
        thread = sm.thread or {}
        who = f" · subagent {display(thread['agent'], 40)}" if thread.get("agent") else " · subagent"
        task = f" of Task `{display(thread['task'], 60)}`" if thread.get("task") else ""
        return f"[!subagent]- **{role}**{who}{task} · {when}"
    if sm.lane == "line":
        return f"[!info]- **{role}** · {when}"
    return f"[!{CALLOUT_TYPES.get(msg.role, 'message')}] **{role}** · {when}"


# -- reading --------------------------------------------------------------------


def _set(skel: Any, path: list[Any], value: Any) -> None:
    target = _get(skel, path[:-1])
    target[path[-1]] = value


def _copy_json(value: Any) -> Any:
    """A deep copy of parsed JSON (dicts, lists, immutable scalars; nothing shared): what
    ``copy.deepcopy`` gives, without its per-object bookkeeping (a third of decoding a message)."""
    if isinstance(value, dict):
        return {k: _copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_json(v) for v in value]
    return value


def decode_entry(entry: ParsedEntry, store: PayloadStore) -> Message:
    """Rebuild the exact :class:`Message` an entry was written from.

    Raises :class:`CorruptVaultError` naming the message when a person's edit made
    its parts impossible to tell apart, or a payload file is missing.
    """
    return skel_message(entry, _fill(entry, store, copy=True))


def decode_skel_consuming(entry: ParsedEntry, store: PayloadStore) -> dict[str, Any]:
    """What :func:`decode_entry` builds its :class:`Message` from (``content``, ``extra``, ``hints``), for an
    entry read only to be decoded once and dropped (a reindex): filled in inside the entry's own parsed
    metadata instead of a copy, so the entry must not be decoded again. :func:`skel_message` gives the
    message (or the error) :func:`decode_entry` would. Raises as :func:`decode_entry`."""
    return _fill(entry, store, copy=False)


def skel_message(entry: ParsedEntry, skel: dict[str, Any]) -> Message:
    """The :class:`Message` of ``entry`` from its filled-in skeleton (:func:`decode_skel_consuming`)."""
    meta = entry.meta
    try:
        return Message(
            id=meta["id"],
            role=meta["role"],
            timestamp=meta.get("ts"),
            content=skel.get("content", []),
            extra=skel.get("extra", {}),
            hints=skel.get("hints", {}),
        )
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise _unreadable(entry, exc) from None


def _unreadable(entry: ParsedEntry, exc: Exception) -> CorruptVaultError:
    return CorruptVaultError(f"message {entry.meta.get('id')} cannot be read back ({type(exc).__name__}: {exc}); "
                             "restore the log from git", line=entry.line)


def _fill(entry: ParsedEntry, store: PayloadStore, *, copy: bool) -> dict[str, Any]:
    """The entry's skeleton with every lifted part put back (a copy of it, or itself)."""
    meta = entry.meta
    where = f"message {meta.get('id')}"
    try:
        skel = _copy_json(meta["skel"]) if copy else meta["skel"]
        nbody = entry.nbody
        # Only the body's lines are needed: the metadata and title lines, then ``nbody`` lines.
        lines = entry.raw.decode("utf-8", errors="replace").split("\n", 2 + nbody)[2 : 2 + nbody]
        try:
            body = [line[2:] if line.startswith("> ") else strip_quote(line, "body") for line in lines]
        except ValueError:
            raise CorruptVaultError(f"{where} was edited by hand: a line lost its '>'; restore the log from git") from None
        if entry.edited:
            _decode_edited(entry, skel, body, store)
        else:
            pos = 0
            for n, part in enumerate(meta["parts"]):
                path, kind, nhead, nbody = part[0], part[1], int(part[2]), int(part[3])
                opts = part[4] if len(part) > 4 else {}
                if n:
                    pos += 1  # the blank separator line between parts
                pos += nhead
                chunk = body[pos : pos + nbody]
                pos += nbody
                if kind == "hdr":
                    continue
                value = decode_part(kind, chunk, opts, store)
                if kind == "diff":
                    obj = _get(skel, path)
                    obj[opts["k"][0]], obj[opts["k"][1]] = value
                else:
                    _set(skel, path, value)
        for key, name in meta.get("xf", {}).items():
            skel["extra"][key] = json.loads(store.get(name).decode("utf-8"))
        return skel
    except CorruptVaultError:
        raise
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise _unreadable(entry, exc) from None


def _decode_edited(entry: ParsedEntry, skel: dict[str, Any], body: list[str], store: PayloadStore) -> None:
    """A hand-edited entry: readable when it holds one text part (the usual case), else an error."""
    meta = entry.meta
    parts = [p for p in meta["parts"] if p[1] != "hdr"]
    if len(meta["parts"]) == 1 and parts and parts[0][1] in ("md", "crlf") and len(parts[0]) < 5:
        path, kind, nhead = parts[0][0], parts[0][1], int(parts[0][2])
        _set(skel, path, decode_part(kind, body[nhead:], {}, store))
        return
    raise CorruptVaultError(
        f"message {meta['id']} was edited by hand and its parts can no longer be told apart; restore the log from git"
    )


def _body_line_count(parts: list[list[Any]]) -> int:
    total = sum(int(p[2]) + int(p[3]) for p in parts)
    return total + max(0, len(parts) - 1)


def _header_end(data: bytes) -> int:
    """Offset after a log's own frontmatter and title (what is not a person's text)."""
    if not data.startswith(b"---\n"):
        return 0
    end = data.find(b"\n---\n", 3)
    if end < 0:
        return 0
    pos = end + 5
    while data.startswith(b"\n", pos):
        pos += 1
    if data.startswith(b"# ", pos):
        nl = data.find(b"\n", pos)
        pos = len(data) if nl < 0 else nl + 1
    return pos


def _parse_meta(line: bytes) -> dict[str, Any] | None:
    if not line.endswith(META_SUFFIX):
        return None
    try:
        meta = json.loads(line[len(META_PREFIX) : -len(META_SUFFIX)])
        if not isinstance(meta, dict) or not isinstance(meta.get("id"), str) or not isinstance(meta.get("parts"), list):
            return None
        _body_line_count(meta["parts"])
        return meta
    except (ValueError, TypeError, IndexError, RecursionError):
        return None


def iter_entries(data: bytes, *, path: str, base_offset: int = 0, base_line: int = 1) -> Iterator[LogItem]:
    """Everything in a log file's bytes, in file order; never raises.

    Yields :class:`ParsedEntry` for each readable entry, :class:`TornTail` for an
    incomplete entry at the very end (never acknowledged: a crash tore the write),
    :class:`Damaged` for something that starts like an entry but cannot be read
    (reading goes on after it), and :class:`Foreign` for text a person added
    outside the entries. ``base_offset``/``base_line`` place ``data`` in its file
    (``data`` then starts at an entry boundary, so no header is expected).
    """
    pos = _header_end(data) if base_offset == 0 else 0
    line_no = base_line + data.count(b"\n", 0, pos)
    size = len(data)
    while pos < size:
        nl = data.find(b"\n", pos)
        line_end = size if nl < 0 else nl
        ours = data.startswith(ENTRY_START, pos)
        meta = _parse_meta(data[pos:line_end]) if nl >= 0 and ours else None
        if meta is None:
            if nl < 0 and (ours or ENTRY_START.startswith(data[pos:])):
                yield TornTail(base_offset + pos, line_no)  # cut inside its metadata line
                return
            if not ours or nl < 0:
                # A person's text (even one that starts like our comments): kept, never truncated.
                text = data[pos:line_end]
                if text.strip():
                    yield Foreign(line_no, text.decode("utf-8", errors="replace")[:200], final_newline=nl >= 0)
                pos = line_end + 1
                line_no += 1
                continue
            later = data.find(b"\n" + META_PREFIX, pos)
            end = size if later < 0 else later + 1
            yield Damaged(base_offset + pos, base_offset + end, line_no, "its metadata line is not valid JSON")
            line_no += data.count(b"\n", pos, end)
            pos = end
            continue
        start, start_line = pos, line_no
        expected = _body_line_count(meta["parts"])
        block = b"^" + meta["id"].encode()
        # metadata, title, body lines, blank line, block id line
        cursor = pos
        for _ in range(expected + 4):
            nl2 = data.find(b"\n", cursor)
            cursor = size + 1 if nl2 < 0 else nl2 + 1
            if nl2 < 0:
                break
        id_line_start = cursor - len(block) - 1
        if cursor <= size and data[id_line_start - 2 : cursor] == b"\n\n" + block + b"\n":
            nbody, edited = expected, False
        else:
            # Not where the line counts say: a person edited the entry (or removed the final
            # newline), or a crash tore it. Find the block id line before the next entry.
            later = data.find(b"\n" + META_PREFIX, pos + 1)
            limit = size if later < 0 else later + 1
            found = data.find(b"\n" + block + b"\n", pos, limit + 1)
            if found < 0 and later < 0 and data.endswith(b"\n" + block):
                found = size - len(block) - 1
            if found < 0:
                if later < 0:
                    yield TornTail(base_offset + start, start_line)
                    return
                yield Damaged(base_offset + start, base_offset + limit, start_line,
                              f"message {meta['id']} has lost its block id line ^{meta['id']}", meta["id"])
                line_no += data.count(b"\n", pos, limit)
                pos = limit
                continue
            cursor = min(size, found + len(block) + 2)
            nbody = max(0, data.count(b"\n", pos, found) - 2)  # minus the metadata and title lines, and the blank
            edited = nbody != expected or data[found - 1 : found] != b"\n"
        raw = data[start:cursor]
        if data.startswith(b"\n", cursor):
            cursor += 1  # the blank line after the block id belongs to the entry when present
        yield ParsedEntry(meta=meta, start=base_offset + start, end=base_offset + cursor, line=start_line, raw=raw,
                          nbody=nbody, edited=edited)
        line_no += data.count(b"\n", start, cursor)
        pos = cursor


def day_header(conversation: str, day: str, home_link: str) -> bytes:
    """The frontmatter and title that open a new daily log."""
    return (
        "---\n"
        f'conversation: "{home_link}"\n'
        f"date: {day}\n"
        "tags:\n"
        "  - lcm/log\n"
        "---\n"
        "\n"
        f"# {conversation} · {day}\n"
        "\n"
    ).encode("utf-8")
