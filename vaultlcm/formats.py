"""Transcript formats: turning external records into :class:`Message` and back.

===============  ===========  ====================================================
``native``       read, write  records as :meth:`Message.to_native` writes them
``openai``       read, write  Chat Completions messages (``tool_calls``, ``tool``)
``anthropic``    read, write  Messages API messages or responses (``tool_use``)
``claude-code``  read         Claude Code session JSONL (``~/.claude/projects``)
``openclaw``     read         OpenClaw session JSONL (``~/.openclaw/agents/*/sessions``)
===============  ===========  ====================================================

For ``native``, ``openai`` and ``anthropic``, ``to_records(fmt, parse(fmt, R)) == R``
for every valid ``R``. What the native model cannot say is kept in ``Message.hints``:
``format`` (the origin), ``content_string`` / ``content_null`` / ``content_missing``
(how ``content`` was written), ``timestamp_field`` (``timestamp`` came from the
record), ``tool_message`` (an OpenAI ``tool`` message became a ``tool_result``
block), ``tool_calls_empty`` and ``arguments`` (how each OpenAI ``arguments`` string
was serialized). A part that cannot be mapped exactly becomes
``{"type": "raw", "format": ..., "value": ...}`` (with ``"field": "tool_calls"`` for
OpenAI tool calls); unknown types that do not clash with native ones are kept as given.

Claude Code and OpenClaw files are read losslessly, not exactly: every line becomes a
message; lines that are not chat messages get the role ``claude-code:<type>`` /
``openclaw:<type>`` and the whole line in ``extra``.

Export to a message's own format restores it exactly. Export to another format is a
best-effort mapping into that API's shape: extras and hints are dropped, blocks the
target cannot hold (thinking in OpenAI, other providers' blocks) are left out,
``tool_result`` blocks become OpenAI ``tool`` messages or Anthropic ``user`` messages,
and non-chat lines are skipped. ``native`` export keeps everything.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from .errors import InputFormatError, UsageError
from .messages import Message, check_json_value, message_from_native, parse_timestamp

FORMATS = ("native", "openai", "anthropic", "claude-code", "openclaw")
EXPORT_FORMATS = ("native", "openai", "anthropic")

Fail = Callable[[str], InputFormatError]
# Types an unmapped part may not keep, or it would be read back as a native block.
_NATIVE_TYPES = frozenset({"text", "thinking", "tool_call", "tool_result", "image", "raw"})
_DATA_URL = re.compile(r"data:([^;,]*);base64,(.*)", re.S)
_WS = re.compile(r"[ \t\r\n]*")
_ARG_STYLES: dict[str, dict[str, Any]] = {
    "json": {},
    "json-compact": {"separators": (",", ":")},
    "json-utf8": {"ensure_ascii": False},
    "json-compact-utf8": {"separators": (",", ":"), "ensure_ascii": False},
}
_DROP: Any = object()  # what a block exporter returns for "leave it out" (None is a value)
_FORMAT_HINT = "pass --format native|openai|anthropic|claude-code|openclaw to choose the format"


# -- reading ------------------------------------------------------------------------


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        keys = [k for k, _ in pairs]
        raise _DuplicateKey(next(k for i, k in enumerate(keys) if k in keys[:i]))
    return obj


_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates)


def read_records(data: bytes, *, source: str) -> list[tuple[int, Any]]:
    """Decode a JSON array or JSON Lines document into ``(line, value)`` pairs.

    The bytes must be UTF-8 (a leading BOM is allowed). A document that is one JSON
    array gives its elements, each numbered by the line it starts on; anything else
    is JSON Lines, blank lines skipped. Values JSON cannot carry back exactly (NaN,
    infinities, overflowing numbers, lone surrogates, duplicate keys) are rejected.
    """
    body = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFormatError(f"byte 0x{body[exc.start]:02x} is not valid UTF-8; save the transcript as UTF-8",
                               source=source, line=body[: exc.start].count(b"\n") + 1) from None
    records = _read_array(text, source) if text.lstrip(" \t\r\n").startswith("[") else None
    if records is None:
        records = _read_lines(text, source)
    for line, value in records:
        check_json_value(value, where="record", fail=_failer(source, line))
    return records


def _failer(source: str, line: int) -> Fail:
    return lambda msg: InputFormatError(msg, source=source, line=line)


def _decode_error(exc: Exception, source: str, line: int) -> InputFormatError:
    if isinstance(exc, _DuplicateKey):
        msg = f"key {exc.args[0]!r} appears twice in one object; readers would keep only one, so fix the producer"
    elif isinstance(exc, RecursionError):
        msg = "JSON is nested too deeply to read"
    else:
        msg = (f"not valid JSON ({getattr(exc, 'msg', exc)}); each line must hold one JSON value "
               "(JSON Lines), or the whole file must be one JSON array")
    return InputFormatError(msg, source=source, line=line)


def _read_array(text: str, source: str) -> list[tuple[int, Any]] | None:
    """Elements of a whole-document array, or None when the text is not one array."""
    out: list[tuple[int, Any]] = []
    idx = _WS.match(text).end() + 1  # type: ignore[union-attr]
    line, pos = text.count("\n", 0, idx) + 1, idx  # lines are counted on from pos, so big files stay linear
    while True:
        idx = _WS.match(text, idx).end()  # type: ignore[union-attr]
        if not out and text.startswith("]", idx):
            break
        line, pos = line + text.count("\n", pos, idx), idx
        try:
            value, idx = _DECODER.raw_decode(text, idx)
        except (ValueError, RecursionError) as exc:
            raise _decode_error(exc, source, line + text.count("\n", pos, getattr(exc, "pos", pos))) from None
        out.append((line, value))
        idx = _WS.match(text, idx).end()  # type: ignore[union-attr]
        if not text.startswith(",", idx):
            break
        idx += 1
    if not text.startswith("]", idx):
        what = "the JSON array is not closed with ']'" if idx >= len(text) else "expected ',' or ']' after an element"
        raise InputFormatError(what, source=source, line=line + text.count("\n", pos, idx))
    if text[idx + 1:].strip(" \t\r\n"):
        return None  # JSON Lines whose first line is an array
    return out


def _read_lines(text: str, source: str) -> list[tuple[int, Any]]:
    out: list[tuple[int, Any]] = []
    # Only "\n" ends a line: U+2028 and friends may sit raw inside JSON strings.
    for number, raw in enumerate(text.split("\n"), start=1):
        if raw.strip(" \t\r\n"):
            try:
                out.append((number, _DECODER.decode(raw)))
            except (ValueError, RecursionError) as exc:
                raise _decode_error(exc, source, number) from None
    return out


# -- detection ----------------------------------------------------------------------

_CLAUDE_CODE_KEYS = ("uuid", "parentUuid", "sessionId", "leafUuid")
_OPENAI_PARTS = frozenset({"image_url", "input_audio", "file", "refusal"})
_ANTHROPIC_BLOCKS = frozenset({"tool_use", "redacted_thinking", "document", "server_tool_use", "search_result"})


def detect_format(records: list[tuple[int, Any]], *, source: str) -> str:
    """Guess the format of ``records`` (for ``--format auto``); the first decisive record wins.

    * ``claude-code``: a string ``type`` and one of ``uuid``, ``parentUuid``,
      ``sessionId``, ``leafUuid`` (or ``type`` ``file-history-snapshot``);
    * ``openclaw``: no ``role``, and ``type`` ``session``, or ``type`` ``message``
      with a nested ``message`` object;
    * ``openai``: ``tool_calls``, ``tool_call_id``, ``function_call``, ``content:
      null``, role ``developer``/``function``, or parts such as ``image_url``;
    * ``anthropic``: an API response (``type: message`` with ``model`` or
      ``stop_reason``), blocks ``tool_use``/``redacted_thinking``/``document``,
      ``tool_result`` with ``tool_use_id`` or ``image`` with ``source``;
    * ``native``: blocks ``tool_call``, ``tool_result`` with ``call_id``, or
      ``image`` with ``data``/``url``.

    Plain ``role`` + text records read the same in every format: then ``native`` if
    some record has ``id`` or ``timestamp``, else ``openai``. Empty input is ``native``.
    """
    weak_native = False
    for line, rec in records:
        if not isinstance(rec, dict):
            raise InputFormatError(f"expected a JSON object, got {type(rec).__name__}; {_FORMAT_HINT}",
                                   source=source, line=line)
        kind = rec.get("type")
        if isinstance(kind, str) and (kind == "file-history-snapshot" or any(k in rec for k in _CLAUDE_CODE_KEYS)):
            return "claude-code"
        if "role" not in rec and (kind == "session" or (kind == "message" and isinstance(rec.get("message"), dict))):
            return "openclaw"
        if not isinstance(rec.get("role"), str):
            raise InputFormatError(f"cannot tell the format: expected an object with 'role'; {_FORMAT_HINT}",
                                   source=source, line=line)
        verdict = _decisive(rec)
        if verdict:
            return verdict
        weak_native = weak_native or "id" in rec or "timestamp" in rec
    return "native" if weak_native or not records else "openai"


def _decisive(rec: dict[str, Any]) -> str | None:
    if any(k in rec for k in ("tool_calls", "tool_call_id", "function_call")) or rec.get("role") in (
            "developer", "function") or ("content" in rec and rec["content"] is None):
        return "openai"
    if rec.get("type") == "message" and ("stop_reason" in rec or "model" in rec):
        return "anthropic"
    content = rec.get("content")
    for block in content if isinstance(content, list) else ():
        kind = block.get("type") if isinstance(block, dict) else None
        if kind in _OPENAI_PARTS:
            return "openai"
        if kind in _ANTHROPIC_BLOCKS or (kind == "tool_result" and "tool_use_id" in block) or (
                kind == "image" and "source" in block):
            return "anthropic"
        if kind == "tool_call" or (kind == "tool_result" and "call_id" in block) or (
                kind == "image" and ("data" in block or "url" in block)):
            return "native"
    return None


# -- parsing ------------------------------------------------------------------------


def parse(fmt: str, records: list[tuple[int, Any]], *, source: str) -> list[Message]:
    """Turn ``(line, record)`` pairs in format ``fmt`` into messages (see the module docstring)."""
    reader = _READERS.get(fmt)
    if reader is None:
        raise UsageError(f"unknown transcript format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return [reader(rec, _failer(source, line)) for line, rec in records]


def _chat_record(rec: Any, fail: Fail, fmt: str, hints: dict[str, Any]) -> Any:
    """Check the record's shape, note how ``content`` was written, and return the raw content."""
    if not isinstance(rec, dict) or not isinstance(rec.get("role"), str) or not rec["role"]:
        got = "an object without 'role'" if isinstance(rec, dict) else type(rec).__name__
        raise fail(f"expected a JSON object with 'role' ({fmt} format), got {got}; {_FORMAT_HINT}")
    content = rec.get("content")
    if "content" not in rec:
        hints["content_missing"] = True
    elif content is None:
        hints["content_null"] = True
    elif isinstance(content, str):
        hints["content_string"] = True
    elif not isinstance(content, list):
        raise fail(f"'content' must be a string or a list of blocks, got {type(content).__name__}")
    return content


def _chat_message(rec: dict[str, Any], hints: dict[str, Any], content: list[Any], consumed: set[str]) -> Message:
    timestamp = rec.get("timestamp") if _valid_timestamp(rec.get("timestamp")) else None
    if timestamp is not None:
        hints["timestamp_field"] = True
        consumed.add("timestamp")
    extra = {k: v for k, v in rec.items() if k not in consumed}
    return Message(role=rec["role"], timestamp=timestamp, content=content, extra=extra, hints=hints)


def _valid_timestamp(value: Any) -> bool:
    try:
        return isinstance(value, str) and bool(parse_timestamp(value))
    except InputFormatError:
        return False


def _keep(value: Any, fmt: str, **where: str) -> Any:
    """An unmapped part as given, or wrapped when it would pass for a native block."""
    if isinstance(value, dict) and isinstance(value.get("type"), str) and value["type"] not in _NATIVE_TYPES:
        return value
    return {"type": "raw", "format": fmt, "value": value, **where}


def _renamed(block: dict[str, Any], kind: str, renames: dict[str, str]) -> dict[str, Any] | None:
    """``block`` as type ``kind`` with keys renamed, or None when a new name is already taken."""
    out: dict[str, Any] = {"type": kind}
    for key, value in block.items():
        if key not in renames and key in renames.values():
            return None
        if key != "type":
            out[renames.get(key, key)] = value
    return out


def _read_native(rec: Any, fail: Fail) -> Message:
    _chat_record(rec, fail, "native", {})
    try:
        message = message_from_native(rec)
    except InputFormatError as exc:
        raise fail(str(exc)) from None  # message_from_native was given no place to name
    message.hints["format"] = "native"
    return message


def _from_openai_part(part: Any) -> Any:
    if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
        return part
    inner = part.get("image_url") if isinstance(part, dict) and part.keys() == {"type", "image_url"} else None
    if isinstance(inner, dict) and part["type"] == "image_url" and isinstance(inner.get("url"), str) and (
            inner.keys() <= {"url", "detail"}):
        detail = {"detail": inner["detail"]} if "detail" in inner else {}
        if not inner["url"].startswith("data:"):
            return {"type": "image", "url": inner["url"]} | detail
        if match := _DATA_URL.fullmatch(inner["url"]):
            return {"type": "image", "media_type": match[1], "data": match[2]} | detail
    return _keep(part, "openai")


def _parse_arguments(text: str) -> tuple[Any, str]:
    """Arguments as a JSON value when that serializes back to the same string, else the string."""
    try:
        value = json.loads(text)
        check_json_value(value, where="arguments", fail=ValueError)
    except (ValueError, RecursionError):
        return text, "string"
    return next(((value, s) for s, opts in _ARG_STYLES.items() if json.dumps(value, **opts) == text), (text, "string"))


def _from_openai_call(call: Any) -> tuple[dict[str, Any], str | None]:
    fn = call.get("function") if isinstance(call, dict) and call.keys() == {"id", "type", "function"} else None
    if isinstance(fn, dict) and call["type"] == "function" and isinstance(call["id"], str) and (
            fn.keys() == {"name", "arguments"} and isinstance(fn["name"], str) and isinstance(fn["arguments"], str)):
        args, style = _parse_arguments(fn["arguments"])
        return {"type": "tool_call", "id": call["id"], "name": fn["name"], "arguments": args}, style
    return {"type": "raw", "format": "openai", "field": "tool_calls", "value": call}, None


def _read_openai(rec: Any, fail: Fail) -> Message:
    hints: dict[str, Any] = {"format": "openai"}
    raw = _chat_record(rec, fail, "openai", hints)
    consumed = {"role", "content"}
    blocks = [_from_openai_part(p) for p in raw] if isinstance(raw, list) else []
    if rec["role"] == "tool" and isinstance(rec.get("tool_call_id"), str):
        result: dict[str, Any] = {"type": "tool_result", "call_id": rec["tool_call_id"]}
        if isinstance(rec.get("name"), str):
            result["name"] = rec["name"]
            consumed.add("name")
        if isinstance(raw, (str, list)):
            result["content"] = raw if isinstance(raw, str) else blocks
        hints.pop("content_string", None)  # the string lives inside the tool_result
        hints["tool_message"], blocks = True, [result]
        consumed.add("tool_call_id")
    elif isinstance(raw, str):
        blocks = [{"type": "text", "text": raw}]
    if isinstance(calls := rec.get("tool_calls"), list):
        consumed.add("tool_calls")
        pairs = [_from_openai_call(call) for call in calls]
        blocks += [block for block, _ in pairs]
        if styles := [style for _, style in pairs if style is not None]:
            hints["arguments"] = styles
        if not calls:
            hints["tool_calls_empty"] = True
    return _chat_message(rec, hints, blocks, consumed)


def _from_anthropic_block(block: Any) -> Any:
    kind = block.get("type") if isinstance(block, dict) else None
    if kind in ("text", "thinking") and isinstance(block.get(kind), str):
        return block
    if kind == "tool_use" and isinstance(block.get("id"), str) and isinstance(block.get("name"), str):
        if (mapped := _renamed(block, "tool_call", {"input": "arguments"})) is not None:
            return mapped
    if kind == "tool_result" and isinstance(block.get("tool_use_id"), str) and (
            isinstance(block.get("content", ""), (str, list)) and isinstance(block.get("is_error", False), bool)):
        if (mapped := _renamed(block, "tool_result", {"tool_use_id": "call_id"})) is not None:
            if isinstance(block.get("content"), list):
                mapped["content"] = [_from_anthropic_block(b) for b in block["content"]]
            return mapped
    source = block.get("source") if kind == "image" and not block.keys() & {"media_type", "data", "url"} else None
    if isinstance(source, dict):
        rest = {k: v for k, v in block.items() if k not in ("type", "source")}
        if source.keys() == {"type", "media_type", "data"} and source["type"] == "base64" and (
                isinstance(source["media_type"], str) and isinstance(source["data"], str)):
            return {"type": "image", "media_type": source["media_type"], "data": source["data"]} | rest
        if source.keys() == {"type", "url"} and source["type"] == "url" and isinstance(source["url"], str):
            return {"type": "image", "url": source["url"]} | rest
    return _keep(block, "anthropic")


def _read_anthropic(rec: Any, fail: Fail) -> Message:
    hints: dict[str, Any] = {"format": "anthropic"}
    raw = _chat_record(rec, fail, "anthropic", hints)
    blocks = [{"type": "text", "text": raw}] if isinstance(raw, str) else [_from_anthropic_block(b) for b in raw or ()]
    return _chat_message(rec, hints, blocks, {"role", "content"})


def _line_message(rec: Any, fail: Fail, fmt: str, role: str | None = None, content: list[Any] | None = None,
                  hints: dict[str, Any] | None = None, consumed: tuple[str, ...] = ()) -> Message:
    """A transcript line as a message: a chat line (``role`` given) or any other line, kept whole."""
    if not isinstance(rec, dict):
        raise fail(f"expected a JSON object (a {fmt} transcript line), got {type(rec).__name__}; {_FORMAT_HINT}")
    stamp = rec.get("timestamp") if _valid_timestamp(rec.get("timestamp")) else None
    if role is None:
        kind = rec.get("type")
        return Message(role=f"{fmt}:{kind if isinstance(kind, str) and kind else 'untyped'}", timestamp=stamp,
                       extra=dict(rec), hints={"format": fmt})
    # line fields in extra, the inner message's other fields in extra["message"]
    extra = {k: v for k, v in rec.items() if k != "message" and not (k == "timestamp" and stamp is not None)}
    extra["message"] = {k: v for k, v in rec["message"].items() if k not in consumed}
    return Message(role=role, timestamp=stamp, content=content or [], extra=extra, hints=hints or {"format": fmt})


def _read_claude_code(rec: Any, fail: Fail) -> Message:
    inner: Any = rec.get("message") if isinstance(rec, dict) and rec.get("type") in ("user", "assistant") else None
    content = inner.get("content") if isinstance(inner, dict) else None
    if not isinstance(content, (str, list)):
        return _line_message(rec, fail, "claude-code")
    hints = {"format": "claude-code"} | ({"content_string": True} if isinstance(content, str) else {})
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else [
        _from_anthropic_block(b) for b in content]
    if isinstance(inner.get("role"), str) and inner["role"]:
        return _line_message(rec, fail, "claude-code", inner["role"], blocks, hints, ("role", "content"))
    return _line_message(rec, fail, "claude-code", rec["type"], blocks, hints, ("content",))


def _from_openclaw_block(block: Any) -> Any:
    kind = block.get("type") if isinstance(block, dict) else None
    mapped: dict[str, Any] | None = None
    if kind == "text" and isinstance(block.get("text"), str):
        mapped = block
    elif kind == "thinking" and isinstance(block.get("thinking"), str):
        mapped = _renamed(block, "thinking", {"thinkingSignature": "signature"})
    elif kind == "toolCall" and isinstance(block.get("id"), str) and isinstance(block.get("name"), str):
        mapped = _renamed(block, "tool_call", {})
    elif kind == "image" and isinstance(block.get("data"), str) and isinstance(block.get("mimeType"), str):
        mapped = _renamed(block, "image", {"mimeType": "media_type"})
    return mapped if mapped is not None else _keep(block, "openclaw")


def _read_openclaw(rec: Any, fail: Fail) -> Message:
    inner: Any = rec.get("message") if isinstance(rec, dict) and rec.get("type") == "message" else None
    content = inner.get("content") if isinstance(inner, dict) and isinstance(inner.get("role"), str) else None
    if not isinstance(content, (str, list)):
        return _line_message(rec, fail, "openclaw")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else [
        _from_openclaw_block(b) for b in content]
    role, consumed = inner["role"], ["content"]
    if role == "toolResult" and isinstance(inner.get("toolCallId"), str):
        result: dict[str, Any] = {"type": "tool_result", "call_id": inner["toolCallId"],
                                  "content": content if isinstance(content, str) else blocks}
        consumed.append("toolCallId")  # role "toolResult" stays in extra["message"]
        for key, field, typ in (("toolName", "name", str), ("isError", "is_error", bool)):
            if isinstance(inner.get(key), typ):
                result[field] = inner[key]
                consumed.append(key)
        role, blocks = "tool", [result]
    else:
        consumed.append("role")
    return _line_message(rec, fail, "openclaw", role, blocks, {"format": "openclaw"}, tuple(consumed))


_READERS: dict[str, Callable[[Any, Fail], Message]] = {
    "native": _read_native, "openai": _read_openai, "anthropic": _read_anthropic,
    "claude-code": _read_claude_code, "openclaw": _read_openclaw,
}


# -- writing ------------------------------------------------------------------------


def to_records(fmt: str, messages: list[Message]) -> list[dict[str, Any]]:
    """Records of ``messages`` in ``fmt`` (``native``, ``openai`` or ``anthropic``).

    Messages that came from ``fmt`` come back exactly as they were read; others are
    mapped best-effort (see the module docstring), so the number of records may differ.
    """
    if fmt == "native":
        return [_to_native(m) for m in messages]
    if fmt == "openai":
        return [rec for m in messages if not _is_line(m) for rec in _to_openai(m)]
    if fmt == "anthropic":
        return _to_anthropic([m for m in messages if not _is_line(m)])
    raise UsageError(f"cannot export to {fmt!r}; choose one of {', '.join(EXPORT_FORMATS)}")


def _origin(message: Message) -> str:
    return str(message.hints.get("format", "native"))


def _is_line(message: Message) -> bool:
    """A transcript line that is no chat message (``claude-code:summary``): API formats cannot hold it."""
    return _origin(message) in ("claude-code", "openclaw") and message.role.startswith(f"{_origin(message)}:")


def _single_text(blocks: list[Any]) -> bool:
    return len(blocks) == 1 and isinstance(blocks[0], dict) and blocks[0].keys() == {"type", "text"} and (
        blocks[0]["type"] == "text" and isinstance(blocks[0]["text"], str))


def _set_content(rec: dict[str, Any], message: Message, blocks: list[Any]) -> None:
    """``content`` as the record had it, then ``extra``, for a message exported to its own format."""
    hints = message.hints
    if hints.get("timestamp_field") and message.timestamp is not None:
        rec["timestamp"] = message.timestamp
    if "content" in rec:
        pass  # an OpenAI tool message's content came from its tool_result
    elif not blocks and hints.get("content_null"):
        rec["content"] = None
    elif hints.get("content_string") and _single_text(blocks):
        rec["content"] = blocks[0]["text"]
    elif blocks or not hints.get("content_missing"):
        rec["content"] = blocks
    rec.update(message.extra)


def _to_native(message: Message) -> dict[str, Any]:
    origin = _origin(message)
    if origin == "native":
        return message.to_native()
    # A foreign record's own "id" or "timestamp" must not overwrite the vault's.
    native = {"id": message.id, "role": message.role, "timestamp": message.timestamp, "content": message.content}
    extra = {(f"{origin}_{k}" if k in native and (v != native[k] or v is None) else k): v
             for k, v in message.extra.items()}
    return message.model_copy(update={"extra": extra}).to_export()


def _is_call(block: dict[str, Any]) -> bool:
    return block.get("type") == "tool_call" or (block.get("type") == "raw" and block.get("field") == "tool_calls")


def _openai_part(block: Any, same: bool) -> Any:
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "image":
        url = block.get("url")
        if not isinstance(url, str):
            url = f"data:{block.get('media_type', 'application/octet-stream')};base64,{block.get('data', '')}"
        inner = {"url": url} | ({"detail": block["detail"]} if same and "detail" in block else {})
        return {"type": "image_url", "image_url": inner}
    if kind == "raw" and block.get("format") == "openai":
        return block.get("value")
    if kind == "text" and not same:
        return {"type": "text", "text": block.get("text", "")}
    return block if same else _DROP


def _openai_call(block: dict[str, Any], style: str | None) -> Any:
    if block.get("type") == "raw":
        return block.get("value")
    args = block.get("arguments", {})
    if style != "string" or not isinstance(args, str):
        args = json.dumps(args, **_ARG_STYLES.get(style or "json-utf8", {}))
    return {"id": block.get("id"), "type": "function", "function": {"name": block.get("name"), "arguments": args}}


def _openai_parts(blocks: Any, same: bool) -> Any:
    if isinstance(blocks, list):
        return [p for b in blocks if (p := _openai_part(b, same)) is not _DROP]
    return blocks if isinstance(blocks, str) or same else ""


def _to_openai(message: Message) -> list[dict[str, Any]]:
    calls = [b for b in message.content if _is_call(b)]
    body = [b for b in message.content if not _is_call(b)]
    rec: dict[str, Any] = {"role": message.role}
    if _origin(message) == "openai":
        result = body[0] if message.hints.get("tool_message") and body else {}
        if result.get("type") == "tool_result":
            rec["tool_call_id"], body = result.get("call_id"), []
            rec.update({k: result[k] for k in ("name",) if k in result})
            rec.update({"content": _openai_parts(result["content"], True)} if "content" in result else {})
        _set_content(rec, message, _openai_parts(body, True))
        styles = iter(message.hints.get("arguments", []))
        if calls or message.hints.get("tool_calls_empty"):
            rec["tool_calls"] = [_openai_call(b, next(styles, None) if b["type"] == "tool_call" else None)
                                 for b in calls]
        return [rec]
    results = [b for b in body if b.get("type") == "tool_result"]
    out = [{"role": "tool", "tool_call_id": b.get("call_id"), "content": _openai_parts(b.get("content", ""), False)}
           for b in results]
    parts = _openai_parts([b for b in body if b.get("type") != "tool_result"], False)
    if parts or calls or not out:
        rec["role"] = "user" if message.role == "tool" else message.role
        rec["content"] = parts[0]["text"] if _single_text(parts) else parts or (None if calls else "")
        if calls:
            rec["tool_calls"] = [_openai_call(b, None) for b in calls]
        out.append(rec)
    return out


def _anthropic_block(block: dict[str, Any], same: bool) -> Any:
    kind = block.get("type")
    if kind == "tool_call":
        return (_renamed(block, "tool_use", {"arguments": "input"}) if same else None) or {
            "type": "tool_use", "id": block.get("id"), "name": block.get("name"), "input": block.get("arguments", {})}
    if kind == "tool_result":
        out = (_renamed(block, "tool_result", {"call_id": "tool_use_id"}) if same else None) or {
            "type": "tool_result", "tool_use_id": block.get("call_id"), "content": block.get("content", "")}
        if not same and isinstance(block.get("is_error"), bool):
            out["is_error"] = block["is_error"]
        if isinstance(block.get("content"), list):
            out["content"] = [x for b in block["content"] if (x := _anthropic_block(b, same)) is not _DROP]
        return out
    if kind == "image":
        rest = {k: v for k, v in block.items() if k not in ("type", "media_type", "data", "url")} if same else {}
        source = {"type": "url", "url": block["url"]} if isinstance(block.get("url"), str) else {
            "type": "base64", "media_type": block.get("media_type", "application/octet-stream"),
            "data": block.get("data", "")}
        return {"type": "image", "source": source} | rest
    if kind == "raw":
        return block.get("value") if block.get("format") == "anthropic" else _DROP
    if same:
        return block
    if kind in ("text", "thinking"):
        return {k: block[k] for k in ("type", kind, "signature" if kind == "thinking" else kind) if k in block}
    return _DROP


def _to_anthropic(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    merge = False  # consecutive tool messages share one user message, as the API wants
    for message in messages:
        origin = _origin(message)
        family = origin in ("anthropic", "claude-code")  # blocks are Anthropic's own
        blocks = [x for b in message.content if (x := _anthropic_block(b, family)) is not _DROP]
        rec: dict[str, Any] = {"role": message.role}
        if origin == "anthropic":
            _set_content(rec, message, blocks)
        elif message.role == "tool" and merge:
            out[-1]["content"].extend(blocks)
            continue
        else:
            rec["role"] = "user" if message.role == "tool" else message.role
            rec["content"] = blocks[0]["text"] if _single_text(blocks) and message.role != "tool" else blocks
            inner = message.extra.get("message") if origin == "claude-code" else None
            rec.update({k: v for k, v in inner.items() if k not in ("role", "content")} if isinstance(
                inner, dict) else {})
        out.append(rec)
        merge = origin != "anthropic" and message.role == "tool"
    return out
