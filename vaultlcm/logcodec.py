"""How one message is written to, and read back from, a daily log.

An entry is a hidden metadata line, an Obsidian callout that shows the message,
and a block id::

    <!-- lcm:{"id":"m-…","seq":3,"role":"assistant",…,"parts":[…],"skel":{…}} -->
    > [!assistant] **assistant** · 2026-11-29 10:00:05
    > Let me read the config first.
    >
    > **tool call** `read_file` · `toolu_01`
    > ```json
    > {"path": "src/app.py"}
    > ```

    ^m-3f2a9c1b0d4e5f60

The readable strings of the message (text, thinking, tool arguments, tool
results) are *lifted* out of the message into the callout; everything else stays
in ``skel``, the message with those strings replaced by ``null``. ``parts`` says,
for each lifted string, where it goes back (a JSON path into ``skel``), how it is
encoded, and how many callout lines it takes, so reading never has to guess
where a part ends: content can hold anything (fences, ``---``, callout markers,
lines like block ids) without being mistaken for structure. Every callout line
starts with ``>``; structure lines never do.

Part kinds: ``md`` (lines as they are), ``code`` (lines inside a fence longer
than any backtick run, used when a line would look like an Obsidian block id),
``crlf`` (``md`` with CRLF line ends), ``esc`` (a JSON string literal in a fence,
for text holding control characters), ``quote`` (a nested callout, used for
thinking), ``json`` (a JSON value, pretty-printed in a fence), ``file`` (an
externalized payload: ``f`` names the file, ``e`` says ``text``, ``json`` or
``base64``), ``hdr`` (display only; nothing to read back).
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from .errors import CorruptVaultError
from .messages import Message, format_timestamp

META_PREFIX = b"<!-- lcm:"
META_SUFFIX = b" -->"
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x85\u2028\u2029]")
_BLOCK_ID_LIKE = re.compile(r"(^|\s)\^[A-Za-z0-9-]+\s*$", re.MULTILINE)
_BACKTICKS = re.compile(r"`+")
_BASE64ISH = re.compile(r"^[A-Za-z0-9+/=\r\n]+$")
_DISPLAY_UNSAFE = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029`]")
MIN_BASE64_CHARS = 4096

CALLOUT_TYPES = {"user": "user", "assistant": "assistant", "system": "system", "tool": "tool"}


class PayloadStore(Protocol):
    """Where externalized payloads go (``files/`` of the conversation)."""

    def put(self, data: bytes, ext: str) -> str: ...
    def get(self, name: str) -> bytes: ...


@dataclass(frozen=True)
class StoredMessage:
    """A message as the vault holds it: the message plus its place in the conversation."""

    message: Message
    conversation: str
    seq: int
    at: datetime
    tokens: int

    @property
    def id(self) -> str:
        assert self.message.id is not None
        return self.message.id

    @property
    def day(self) -> str:
        return self.at.strftime("%Y-%m-%d")


@dataclass(frozen=True)
class ParsedEntry:
    """One entry found in a log file, with its byte span."""

    meta: dict[str, Any]
    start: int
    end: int
    line: int
    raw: bytes

    @property
    def id(self) -> str:
        return str(self.meta["id"])


# -- writing --------------------------------------------------------------------


def _display(text: Any, limit: int = 120) -> str:
    s = _DISPLAY_UNSAFE.sub(" ", str(text))
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _fence(lines: list[str]) -> str:
    longest = max((len(m.group()) for line in lines for m in _BACKTICKS.finditer(line)), default=0)
    return "`" * max(3, longest + 1)


def json_text(value: Any, *, indent: int | None = 2) -> str:
    """JSON for the log: UTF-8 kept readable, but never a character that breaks a line or a comment."""
    text = json.dumps(value, ensure_ascii=False, indent=indent, separators=None if indent else (",", ":"))
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").replace("\x85", "\\u0085")


def _meta_line(meta: dict[str, Any]) -> str:
    # '>' only ever appears inside JSON strings, so escaping it keeps '-->' out of the comment.
    return "<!-- lcm:" + json_text(meta, indent=None).replace(">", "\\u003e") + " -->"


class _Renderer:
    def __init__(self, store: PayloadStore, large_chars: int, count_tokens: Callable[[str], int], large_tokens: int):
        self.store = store
        self.large_chars = large_chars
        self.count_tokens = count_tokens
        self.large_tokens = large_tokens
        self.parts: list[list[Any]] = []
        self.lines: list[str] = []

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
        if self._is_large(text) or (len(text) >= MIN_BASE64_CHARS and _BASE64ISH.match(text)):
            nlines = text.count("\n") + 1
            preview = f"· payload, {self.count_tokens(text):,} tokens, {nlines:,} lines"
            self._file_part(path, header, text.encode("utf-8"), "txt", "text", preview)
            return
        if _UNSAFE.search(text):
            if "\r" in text and not _UNSAFE.search(text.replace("\r\n", "\n")):
                self._add(path, "crlf", header, text.split("\r\n"))
                return
            literal = json_text(text, indent=None)
            fence = _fence([literal])
            self._add(path, "esc", header, [fence + "json", literal, fence])
            return
        lines = text.split("\n")
        if fenced or _BLOCK_ID_LIKE.search(text):
            # Tool output is preformatted: a fence keeps its columns in Obsidian.
            fence = _fence(lines)
            self._add(path, "code", header, [fence + "text", *lines, fence])
            return
        self._add(path, "md", header, lines)

    def quote(self, path: list[Any], text: str, title: str) -> None:
        if self._is_large(text) or _UNSAFE.search(text) or _BLOCK_ID_LIKE.search(text):
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
        fence = _fence(lines)
        self._add(path, "json", header, [fence + "json", *lines, fence])

    def header_only(self, header: list[str]) -> None:
        self._add([], "hdr", header, [])

    def image(self, path: list[Any], block: dict[str, Any]) -> None:
        data = block["data"]
        media = str(block.get("media_type") or "")
        ext = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}.get(media, "bin")
        try:
            raw = base64.b64decode(data, validate=True)
            exact = base64.b64encode(raw).decode("ascii") == data
        except (binascii.Error, ValueError):
            exact = False
        if exact:
            self._file_part(path, [f"**image** {_display(media)}"], raw, ext, "base64", "")
        else:  # not canonical base64: keep the string itself, byte for byte
            self._file_part(path, [f"**image** {_display(media)}"], data.encode("utf-8"), "txt", "text", "· image data")

    def blocks(self, blocks: list[Any], prefix: list[Any]) -> None:
        for i, block in enumerate(blocks):
            path = [*prefix, i]
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                self.text([*path, "text"], block["text"], [])
            elif kind == "thinking" and isinstance(block.get("thinking"), str):
                self.quote([*path, "thinking"], block["thinking"], "> [!thinking]- thinking")
            elif kind == "tool_call":
                header = [f"**tool call** `{_display(block.get('name'))}` · `{_display(block.get('id'))}`"]
                if "arguments" in block:
                    self.json_value([*path, "arguments"], block["arguments"], header)
                else:
                    self.header_only(header)
            elif kind == "tool_result":
                flag = " · **error**" if block.get("is_error") else ""
                name = f" `{_display(block['name'])}`" if isinstance(block.get("name"), str) else ""
                header = [f"**tool result**{name} for `{_display(block.get('call_id'))}`{flag}"]
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
                self.header_only([f"![image]({_display(block['url'], 2000).replace(' ', '%20')})"])
            else:
                self.json_value(path, block, [f"**{_display(kind)}**"])


def _clear(skel: Any, path: list[Any]) -> None:
    target = skel
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = None


def render_entry(
    sm: StoredMessage,
    store: PayloadStore,
    *,
    count_tokens: Callable[[str], int],
    large_tokens: int,
) -> bytes:
    """The bytes of one log entry for ``sm`` (externalizing payloads into ``store``)."""
    msg = sm.message
    r = _Renderer(store, large_tokens, count_tokens, large_tokens)
    r.blocks(msg.content, ["content"])
    skel: dict[str, Any] = {"content": copy.deepcopy(msg.content)}
    for part in r.parts:
        if part[0]:
            _clear(skel, part[0])
    if msg.extra:
        skel["extra"] = msg.extra
    if msg.hints:
        skel["hints"] = msg.hints
    meta = {
        "id": sm.id,
        "seq": sm.seq,
        "role": msg.role,
        "ts": msg.timestamp,
        "at": format_timestamp(sm.at),
        "tok": sm.tokens,
        "parts": r.parts,
        "skel": skel,
    }
    callout = CALLOUT_TYPES.get(msg.role, "message")
    title = f"[!{callout}] **{_display(msg.role, 60)}** · {sm.at.strftime('%Y-%m-%d %H:%M:%S')}"
    out = [_meta_line(meta), "> " + title]
    out.extend(">" + (" " + line if line else "") for line in r.lines)
    out.extend(["", f"^{sm.id}", "", ""])
    return "\n".join(out).encode("utf-8")


# -- reading --------------------------------------------------------------------


def _strip_quote(line: str, where: str) -> str:
    if not line.startswith(">"):
        raise ValueError(f"expected a callout line starting with '>' ({where})")
    rest = line[1:]
    return rest[1:] if rest.startswith(" ") else rest


def _decode_part(kind: str, body: list[str], opts: dict[str, Any], store: PayloadStore) -> Any:
    if kind == "md":
        return "\n".join(body)
    if kind == "crlf":
        return "\r\n".join(body)
    if kind == "code":
        return "\n".join(body[1:-1])
    if kind == "esc":
        return json.loads(body[1])
    if kind == "quote":
        return "\n".join(_strip_quote(line, "thinking") for line in body)
    if kind == "json":
        return json.loads("\n".join(body[1:-1]))
    if kind == "file":
        data = store.get(opts["f"])
        enc = opts.get("e")
        if enc == "base64":
            return base64.b64encode(data).decode("ascii")
        if enc == "json":
            return json.loads(data.decode("utf-8"))
        return data.decode("utf-8")
    raise ValueError(f"unknown part kind {kind!r}")


def decode_entry(entry: ParsedEntry, store: PayloadStore) -> Message:
    """Rebuild the exact :class:`Message` an entry was written from."""
    meta = entry.meta
    skel = copy.deepcopy(meta["skel"])
    lines = entry.raw.decode("utf-8", errors="replace").split("\n")
    try:
        body = [_strip_quote(line, "body") for line in lines[2 : 2 + entry.meta["_nbody"]]]
    except ValueError:
        raise CorruptVaultError(f"message {meta['id']} was edited by hand: a line lost its '>'; restore the log from git") from None
    if meta.get("_edited"):
        return _decode_edited(entry, skel, body, store)
    pos = 0
    for n, part in enumerate(meta["parts"]):
        path, kind, nhead, nbody = part[0], part[1], part[2], part[3]
        opts = part[4] if len(part) > 4 else {}
        if n:
            pos += 1  # the blank separator line between parts
        pos += nhead
        chunk = body[pos : pos + nbody]
        pos += nbody
        if kind == "hdr":
            continue
        value = _decode_part(kind, chunk, opts, store)
        target = skel
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return Message(
        id=meta["id"],
        role=meta["role"],
        timestamp=meta.get("ts"),
        content=skel.get("content", []),
        extra=skel.get("extra", {}),
        hints=skel.get("hints", {}),
    )


def _decode_edited(entry: ParsedEntry, skel: dict[str, Any], body: list[str], store: PayloadStore) -> Message:
    """A hand-edited entry: readable when it holds one text part (the usual case), else an error."""
    meta = entry.meta
    parts = [p for p in meta["parts"] if p[1] != "hdr"]
    if len(meta["parts"]) == 1 and parts and parts[0][1] in ("md", "crlf"):
        path, kind, nhead = parts[0][0], parts[0][1], int(parts[0][2])
        value = _decode_part(kind, body[nhead:], {}, store)
        target = skel
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        return Message(id=meta["id"], role=meta["role"], timestamp=meta.get("ts"), content=skel.get("content", []),
                       extra=skel.get("extra", {}), hints=skel.get("hints", {}))
    raise CorruptVaultError(
        f"message {meta['id']} was edited by hand and its parts can no longer be told apart; restore the log from git"
    )


def _body_line_count(parts: list[list[Any]]) -> int:
    total = sum(int(p[2]) + int(p[3]) for p in parts)
    return total + max(0, len(parts) - 1)


def iter_entries(data: bytes, *, path: str, base_offset: int = 0, base_line: int = 1) -> Iterator[ParsedEntry | int]:
    """Entries of a log file's bytes, in file order.

    Yields :class:`ParsedEntry` objects; if the data ends in an incomplete entry
    (a write torn by a crash), yields that entry's start offset (an ``int``) last,
    so the caller can ignore or truncate it. Anything else that is not an entry
    (frontmatter, headings, blank lines) is skipped.
    """
    pos = 0
    line_no = base_line
    size = len(data)
    while pos < size:
        nl = data.find(b"\n", pos)
        if nl < 0:
            if data[pos:].startswith(META_PREFIX) or META_PREFIX.startswith(data[pos:]):
                yield base_offset + pos
                return
            raise CorruptVaultError("the file does not end with a newline", path=path, line=line_no)
        if not data.startswith(META_PREFIX, pos):
            pos = nl + 1
            line_no += 1
            continue
        start, start_line = pos, line_no
        line = data[pos:nl]
        if not line.endswith(META_SUFFIX):
            raise CorruptVaultError("a message metadata line is cut short", path=path, line=line_no)
        try:
            meta = json.loads(line[len(META_PREFIX) : -len(META_SUFFIX)])
            nbody = _body_line_count(meta["parts"])
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise CorruptVaultError(f"message metadata is not valid ({exc})", path=path, line=line_no) from None
        meta["_nbody"] = nbody
        marker = b"\n^" + str(meta.get("id")).encode() + b"\n"
        # metadata, title, body lines, blank, ^id
        need = 2 + nbody + 2
        cursor = pos
        complete = True
        for _ in range(need):
            nl = data.find(b"\n", cursor)
            if nl < 0:
                complete = False
                break
            cursor = nl + 1
        if not complete or data[cursor - len(marker) : cursor] != marker or data[cursor - len(marker) - 1 : cursor - len(marker)] != b"\n":
            # Not where the line counts say: a person edited the entry, or a crash tore it.
            found = data.find(marker, pos)
            later_entry = data.find(b"\n" + META_PREFIX, pos + 1)
            if found < 0 or (0 <= later_entry < found):
                if later_entry < 0:
                    yield base_offset + start  # torn at the end of the file: never acknowledged
                    return
                raise CorruptVaultError(
                    f"message {meta.get('id')!r} has lost its block id line ^{meta.get('id')}; restore the log from git",
                    path=path, line=start_line,
                )
            cursor = found + len(marker)
            body_lines = data[pos:found].count(b"\n") - 2  # minus the metadata and title lines, and the blank line
            meta["_nbody"] = max(0, body_lines)
            meta["_edited"] = True
        raw = data[start:cursor]
        # the blank line after the block id belongs to the entry when present
        if data.startswith(b"\n", cursor):
            cursor += 1
        yield ParsedEntry(meta=meta, start=base_offset + start, end=base_offset + cursor, line=start_line, raw=raw)
        line_no += raw.count(b"\n") + (1 if cursor > start + len(raw) else 0)
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
