"""Transcript formats: turning external records into :class:`Message` and back.

=================  ===========  ==============================================
``native``         read, write  records as :meth:`Message.to_native` writes them
``openai``         read, write  Chat Completions messages (``tool_calls``, ``tool``)
``anthropic``      read, write  Messages API messages or responses (``tool_use``)
``claude-code``    read         Claude Code session JSONL (``~/.claude/projects``)
``openclaw``       read         OpenClaw session JSONL (``~/.openclaw/.../sessions``)
=================  ===========  ==============================================

For ``native``, ``openai`` and ``anthropic``, ``to_records(fmt, parse(fmt, R)) == R``
for every valid ``R``. What the native model cannot say directly is kept in
``Message.hints`` (``format`` names the origin; ``content_string``,
``content_null``, ``content_missing`` tell how ``content`` was written;
``timestamp_field`` that a ``timestamp`` came from the record; ``tool_message``
that an OpenAI ``tool`` message became a ``tool_result`` block;
``tool_calls_empty`` that ``tool_calls`` was ``[]``; ``arguments`` how each
OpenAI ``arguments`` string was serialized). A part or block that cannot be
mapped exactly is wrapped as ``{"type": "raw", "format": ..., "value": ...}``
(plus ``"field": "tool_calls"`` for OpenAI tool calls); unknown block types whose
names do not clash with native ones are kept as given.

Claude Code and OpenClaw files are read losslessly rather than exactly: every
line becomes a message, lines that are not chat messages get the role
``claude-code:<type>`` / ``openclaw:<type>`` and the whole line in ``extra``.

Exporting to the format a message came from restores it exactly. Exporting to
another format is a best-effort mapping into that API's shape: extras and the
origin's hints are dropped, blocks the target has no word for (thinking in
OpenAI, provider-specific blocks) are left out, ``tool_result`` blocks become
OpenAI ``tool`` messages or Anthropic ``user`` messages, and records whose role
names a non-chat line (``claude-code:summary``) are skipped. ``native`` export
keeps everything.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from .errors import InputFormatError, UsageError
from .messages import Message, check_json_value, message_from_native, parse_timestamp

FORMATS = ("native", "openai", "anthropic", "claude-code", "openclaw")
EXPORT_FORMATS = ("native", "openai", "anthropic")

# Block types an unknown part may not keep, or it would be read as a native block.
_NATIVE_TYPES = frozenset({"text", "thinking", "tool_call", "tool_result", "image", "raw"})
_LINE_ROLES = ("claude-code:", "openclaw:")
_DATA_URL = re.compile(r"data:([^;,]*);base64,(.*)", re.S)
_JSON_WS = " \t\r\n"
_ARG_STYLES: dict[str, dict[str, Any]] = {
    "json": {},
    "json-compact": {"separators": (",", ":")},
    "json-utf8": {"ensure_ascii": False},
    "json-compact-utf8": {"separators": (",", ":"), "ensure_ascii": False},
}
Fail = Callable[[str], InputFormatError]
_FORMAT_HINT = "pass --format native|openai|anthropic|claude-code|openclaw to choose the format"


# -- reading ----------------------------------------------------------------------


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return obj


_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates)


def read_records(data: bytes, *, source: str) -> list[tuple[int, Any]]:
    """Decode a JSON array or JSON Lines document into ``(line, value)`` pairs.

    The bytes must be UTF-8 (a leading BOM is allowed). A document whose first
    value is an array spanning the whole file is an array of records, each
    numbered by the line it starts on; anything else is JSON Lines, where blank
    lines are skipped. Values JSON cannot carry back exactly (NaN, infinities,
    overflowing numbers, lone surrogates, duplicate keys) are rejected.
    """
    body = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = body[: exc.start].count(b"\n") + 1
        raise InputFormatError(
            f"byte 0x{body[exc.start]:02x} is not valid UTF-8; save the transcript as UTF-8",
            source=source, line=line,
        ) from None
    records = _read_array(text, source) if text.lstrip(_JSON_WS).startswith("[") else None
    if records is None:
        records = _read_lines(text, source)
    for line, value in records:
        check_json_value(value, where="record", fail=_failer(source, line))
    return records


def _failer(source: str, line: int) -> Callable[[str], InputFormatError]:
    return lambda msg: InputFormatError(msg, source=source, line=line)


def _decode_error(exc: Exception, source: str, line: int) -> InputFormatError:
    if isinstance(exc, _DuplicateKey):
        msg = f"key {exc.args[0]!r} appears twice in one object; JSON readers would keep only one, so fix the producer"
    elif isinstance(exc, RecursionError):
        msg = "JSON is nested too deeply to read"
    else:
        msg = (f"not valid JSON ({getattr(exc, 'msg', exc)}); each line must hold one JSON value "
               "(JSON Lines), or the whole file must be one JSON array")
    return InputFormatError(msg, source=source, line=line)


def _read_array(text: str, source: str) -> list[tuple[int, Any]] | None:
    """Elements of a whole-document array, or None when the text is not one array."""
    out: list[tuple[int, Any]] = []
    idx = len(text) - len(text.lstrip(_JSON_WS)) + 1
    line = text.count("\n", 0, idx) + 1
    pos = idx  # line counting resumes from here so long files stay linear
    first = True
    while True:
        while idx < len(text) and text[idx] in _JSON_WS:
            idx += 1
        if first and text.startswith("]", idx):
            idx += 1
            break
        line += text.count("\n", pos, idx)
        pos = idx
        try:
            value, idx = _DECODER.raw_decode(text, idx)
        except (ValueError, RecursionError) as exc:
            at = line + text.count("\n", pos, getattr(exc, "pos", pos) or pos)
            raise _decode_error(exc, source, at) from None
        out.append((line, value))
        first = False
        while idx < len(text) and text[idx] in _JSON_WS:
            idx += 1
        if text.startswith(",", idx):
            idx += 1
        elif text.startswith("]", idx):
            idx += 1
            break
        else:
            line += text.count("\n", pos, idx)
            raise InputFormatError("expected ',' or ']' between array elements", source=source, line=line)
    if text[idx:].strip(_JSON_WS):
        return None  # e.g. JSON Lines whose first line is an array
    return out


def _read_lines(text: str, source: str) -> list[tuple[int, Any]]:
    out: list[tuple[int, Any]] = []
    # Only "\n" ends a line: U+2028 and friends may sit raw inside JSON strings.
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip(_JSON_WS):
            continue
        try:
            out.append((number, _DECODER.decode(raw)))
        except (ValueError, RecursionError) as exc:
            raise _decode_error(exc, source, number) from None
    return out


# -- detection --------------------------------------------------------------------

_CLAUDE_CODE_KEYS = ("uuid", "parentUuid", "sessionId", "leafUuid")
_OPENAI_PARTS = frozenset({"image_url", "input_audio", "file", "refusal"})
_ANTHROPIC_BLOCKS = frozenset({"tool_use", "redacted_thinking", "document", "server_tool_use", "search_result"})


def detect_format(records: list[tuple[int, Any]], *, source: str) -> str:
    """Guess the format of ``records`` (for ``--format auto``).

    Records are examined in order and the first decisive one wins:

    * ``claude-code``: an object with a string ``type`` and one of ``uuid``,
      ``parentUuid``, ``sessionId``, ``leafUuid`` (or ``type`` of
      ``file-history-snapshot``);
    * ``openclaw``: ``type`` ``session`` without ``role``, or ``type`` ``message``
      with a nested ``message`` object;
    * ``openai``: ``tool_calls``, ``tool_call_id``, ``function_call``, ``content:
      null``, role ``developer``/``function``, or parts such as ``image_url``;
    * ``anthropic``: blocks ``tool_use``/``redacted_thinking``/``document``,
      ``tool_result`` with ``tool_use_id``, ``image`` with ``source``, or an API
      response (``type: message`` with ``stop_reason``/``model``);
    * ``native``: blocks ``tool_call``, ``tool_result`` with ``call_id``, or
      ``image`` with ``data``/``url``.

    Without a decisive record (plain ``role`` + text records, which read the same
    in every format), ``native`` if some record has ``id`` or ``timestamp``, else
    ``openai``. An empty transcript is ``native``.
    """
    weak_native = False
    for line, rec in records:
        if not isinstance(rec, dict):
            raise InputFormatError(f"expected a JSON object, got {type(rec).__name__}; {_FORMAT_HINT}",
                                   source=source, line=line)
        kind = rec.get("type")
        if isinstance(kind, str) and (any(k in rec for k in _CLAUDE_CODE_KEYS) or kind == "file-history-snapshot"):
            return "claude-code"
        if "role" not in rec and (kind == "session" or (kind == "message" and isinstance(rec.get("message"), dict))):
            return "openclaw"
        if not isinstance(rec.get("role"), str):
            raise InputFormatError(f"cannot tell the transcript format: expected an object with 'role'; {_FORMAT_HINT}",
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
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind in _OPENAI_PARTS:
            return "openai"
        if kind in _ANTHROPIC_BLOCKS or (kind == "tool_result" and "tool_use_id" in block) or (
                kind == "image" and "source" in block):
            return "anthropic"
        if kind == "tool_call" or (kind == "tool_result" and "call_id" in block) or (
                kind == "image" and ("data" in block or "url" in block)):
            return "native"
    return None


# -- parsing ----------------------------------------------------------------------


def parse(fmt: str, records: list[tuple[int, Any]], *, source: str) -> list[Message]:
    """Turn ``(line, record)`` pairs in format ``fmt`` into messages (see the module docstring)."""
    reader = _READERS.get(fmt)
    if reader is None:
        raise UsageError(f"unknown transcript format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return [reader(rec, _failer(source, line)) for line, rec in records]


def _chat_record(rec: Any, fail: Fail, fmt: str) -> dict[str, Any]:
    if not isinstance(rec, dict) or not isinstance(rec.get("role"), str) or not rec["role"]:
        got = "an object without 'role'" if isinstance(rec, dict) else type(rec).__name__
        raise fail(f"expected a JSON object with 'role' ({fmt} format), got {got}; {_FORMAT_HINT}")
    return rec


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
        if key == "type":
            continue
        if key not in renames and key in renames.values():
            return None
        out[renames.get(key, key)] = value
    return out


def _content_hints(rec: dict[str, Any], hints: dict[str, Any], fail: Fail) -> Any:
    if "content" not in rec:
        hints["content_missing"] = True
        return None
    content = rec["content"]
    if content is None:
        hints["content_null"] = True
    elif isinstance(content, str):
        hints["content_string"] = True
    elif not isinstance(content, list):
        raise fail(f"'content' must be a string or a list of blocks, got {type(content).__name__}")
    return content


def _chat_message(rec: dict[str, Any], hints: dict[str, Any], content: list[dict[str, Any]],
                  consumed: set[str]) -> Message:
    timestamp = None
    if _valid_timestamp(rec.get("timestamp")):
        timestamp, hints["timestamp_field"] = rec["timestamp"], True
        consumed.add("timestamp")
    extra = {k: v for k, v in rec.items() if k not in consumed}
    return Message(role=rec["role"], timestamp=timestamp, content=content, extra=extra, hints=hints)


def _read_native(rec: Any, fail: Fail) -> Message:
    try:
        message = message_from_native(_chat_record(rec, fail, "native"))
    except InputFormatError as exc:
        if exc.source is not None:
            raise
        raise fail(str(exc)) from None  # message_from_native was given no place to name
    message.hints["format"] = "native"
    return message


def _image_from_url(url: str) -> dict[str, Any] | None:
    if not url.startswith("data:"):
        return {"type": "image", "url": url}
    match = _DATA_URL.fullmatch(url)
    return {"type": "image", "media_type": match[1], "data": match[2]} if match else None


def _from_openai_part(part: Any) -> Any:
    if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
        return part
    if isinstance(part, dict) and part.get("type") == "image_url" and part.keys() == {"type", "image_url"}:
        inner = part["image_url"]
        if isinstance(inner, dict) and isinstance(inner.get("url"), str) and inner.keys() <= {"url", "detail"}:
            image = _image_from_url(inner["url"])
            if image is not None:
                return image | ({"detail": inner["detail"]} if "detail" in inner else {})
    return _keep(part, "openai")


def _parse_arguments(text: str) -> tuple[Any, str]:
    """Arguments as a JSON value when they re-serialize to the same string, else the string."""
    try:
        value = json.loads(text, parse_constant=_reject_constant)
        check_json_value(value, where="arguments", fail=ValueError)
    except (ValueError, RecursionError):
        return text, "string"
    for style, options in _ARG_STYLES.items():
        if json.dumps(value, **options) == text:
            return value, style
    return text, "string"


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


def _from_openai_call(call: Any) -> tuple[dict[str, Any], str | None]:
    if isinstance(call, dict) and call.keys() == {"id", "type", "function"} and call["type"] == "function":
        fn = call["function"]
        if (isinstance(call["id"], str) and isinstance(fn, dict) and fn.keys() == {"name", "arguments"}
                and isinstance(fn["name"], str) and isinstance(fn["arguments"], str)):
            args, style = _parse_arguments(fn["arguments"])
            return {"type": "tool_call", "id": call["id"], "name": fn["name"], "arguments": args}, style
    return {"type": "raw", "format": "openai", "field": "tool_calls", "value": call}, None


def _read_openai(rec: Any, fail: Fail) -> Message:
    rec = _chat_record(rec, fail, "OpenAI")
    hints: dict[str, Any] = {"format": "openai"}
    consumed = {"role", "content"}
    raw = _content_hints(rec, hints, fail)
    blocks = [_from_openai_part(p) for p in raw] if isinstance(raw, list) else []
    if rec["role"] == "tool" and isinstance(rec.get("tool_call_id"), str):
        result: dict[str, Any] = {"type": "tool_result", "call_id": rec["tool_call_id"]}
        consumed.add("tool_call_id")
        if isinstance(rec.get("name"), str):
            result["name"] = rec["name"]
            consumed.add("name")
        if isinstance(raw, (str, list)):
            result["content"] = raw if isinstance(raw, str) else blocks
        hints.pop("content_string", None)  # the string lives inside the tool_result
        hints["tool_message"] = True
        blocks = [result]
    elif isinstance(raw, str):
        blocks = [{"type": "text", "text": raw}]
    calls = rec.get("tool_calls")
    if isinstance(calls, list):
        consumed.add("tool_calls")
        if not calls:
            hints["tool_calls_empty"] = True
        styles = []
        for call in calls:
            block, style = _from_openai_call(call)
            blocks.append(block)
            if style is not None:
                styles.append(style)
        if styles:
            hints["arguments"] = styles
    return _chat_message(rec, hints, blocks, consumed)


def _from_anthropic_block(block: Any, fmt: str = "anthropic") -> Any:
    if not isinstance(block, dict):
        return _keep(block, fmt)
    kind = block.get("type")
    if kind in ("text", "thinking") and isinstance(block.get(kind), str):
        return block
    if kind == "tool_use" and isinstance(block.get("id"), str) and isinstance(block.get("name"), str):
        mapped = _renamed(block, "tool_call", {"input": "arguments"})
        if mapped is not None:
            return mapped
    if (kind == "tool_result" and isinstance(block.get("tool_use_id"), str)
            and isinstance(block.get("content", ""), (str, list)) and isinstance(block.get("is_error", False), bool)):
        mapped = _renamed(block, "tool_result", {"tool_use_id": "call_id"})
        if mapped is not None:
            if isinstance(block.get("content"), list):
                mapped["content"] = [_from_anthropic_block(b, fmt) for b in block["content"]]
            return mapped
    source = block.get("source")
    if kind == "image" and isinstance(source, dict) and not block.keys() & {"media_type", "data", "url"}:
        rest = {k: v for k, v in block.items() if k not in ("type", "source")}
        if (source.keys() == {"type", "media_type", "data"} and source["type"] == "base64"
                and isinstance(source["media_type"], str) and isinstance(source["data"], str)):
            return {"type": "image", "media_type": source["media_type"], "data": source["data"]} | rest
        if source.keys() == {"type", "url"} and source["type"] == "url" and isinstance(source["url"], str):
            return {"type": "image", "url": source["url"]} | rest
    return _keep(block, fmt)


def _read_anthropic(rec: Any, fail: Fail) -> Message:
    rec = _chat_record(rec, fail, "Anthropic")
    hints: dict[str, Any] = {"format": "anthropic"}
    raw = _content_hints(rec, hints, fail)
    if isinstance(raw, str):
        blocks = [{"type": "text", "text": raw}]
    else:
        blocks = [_from_anthropic_block(b) for b in raw or ()]
    return _chat_message(rec, hints, blocks, {"role", "content"})


def _line_message(rec: dict[str, Any], fmt: str) -> Message:
    """A line that is not a chat message: kept whole in ``extra``."""
    kind = rec.get("type")
    role = f"{fmt}:{kind if isinstance(kind, str) and kind else 'untyped'}"
    stamp = rec.get("timestamp") if _valid_timestamp(rec.get("timestamp")) else None
    return Message(role=role, timestamp=stamp, extra=dict(rec), hints={"format": fmt})


def _nested_message(rec: dict[str, Any], role: str, content: list[dict[str, Any]], hints: dict[str, Any],
                    inner_consumed: Iterable[str]) -> Message:
    """A chat line: line fields in ``extra``, the inner message's other fields in ``extra['message']``."""
    stamp = rec.get("timestamp") if _valid_timestamp(rec.get("timestamp")) else None
    extra = {k: v for k, v in rec.items() if k != "message" and not (k == "timestamp" and stamp is not None)}
    extra["message"] = {k: v for k, v in rec["message"].items() if k not in inner_consumed}
    return Message(role=role, timestamp=stamp, content=content, extra=extra, hints=hints)


def _read_claude_code(rec: Any, fail: Fail) -> Message:
    if not isinstance(rec, dict):
        raise fail(f"expected a JSON object (a Claude Code transcript line), got {type(rec).__name__}; {_FORMAT_HINT}")
    inner = rec.get("message")
    if rec.get("type") not in ("user", "assistant") or not isinstance(inner, dict):
        return _line_message(rec, "claude-code")
    hints: dict[str, Any] = {"format": "claude-code"}
    content = inner.get("content")
    if isinstance(content, str):
        hints["content_string"] = True
        blocks = [{"type": "text", "text": content}]
    elif isinstance(content, list):
        blocks = [_from_anthropic_block(b) for b in content]
    else:
        return _line_message(rec, "claude-code")
    role = inner["role"] if isinstance(inner.get("role"), str) and inner["role"] else rec["type"]
    return _nested_message(rec, role, blocks, hints, ("role", "content"))


def _from_openclaw_block(block: Any) -> Any:
    if not isinstance(block, dict):
        return _keep(block, "openclaw")
    kind = block.get("type")
    mapped: dict[str, Any] | None = None
    if kind in ("text", "thinking") and isinstance(block.get(kind), str):
        mapped = _renamed(block, kind, {"thinkingSignature": "signature"}) if kind == "thinking" else block
    elif kind == "toolCall" and isinstance(block.get("id"), str) and isinstance(block.get("name"), str):
        mapped = _renamed(block, "tool_call", {})
    elif kind == "image" and isinstance(block.get("data"), str) and isinstance(block.get("mimeType"), str):
        mapped = _renamed(block, "image", {"mimeType": "media_type"})
    return mapped if mapped is not None else _keep(block, "openclaw")


def _read_openclaw(rec: Any, fail: Fail) -> Message:
    if not isinstance(rec, dict):
        raise fail(f"expected a JSON object (an OpenClaw session line), got {type(rec).__name__}; {_FORMAT_HINT}")
    inner = rec.get("message")
    if rec.get("type") != "message" or not isinstance(inner, dict) or not isinstance(inner.get("role"), str):
        return _line_message(rec, "openclaw")
    content = inner.get("content")
    if isinstance(content, str):
        blocks: list[Any] = [{"type": "text", "text": content}]
    elif isinstance(content, list):
        blocks = [_from_openclaw_block(b) for b in content]
    else:
        return _line_message(rec, "openclaw")
    hints: dict[str, Any] = {"format": "openclaw"}
    role, consumed = inner["role"], ["content"]
    if role == "toolResult" and isinstance(inner.get("toolCallId"), str):
        result: dict[str, Any] = {"type": "tool_result", "call_id": inner["toolCallId"],
                                  "content": content if isinstance(content, str) else blocks}
        consumed.append("toolCallId")
        if isinstance(inner.get("toolName"), str):
            result["name"] = inner["toolName"]
            consumed.append("toolName")
        if isinstance(inner.get("isError"), bool):
            result["is_error"] = inner["isError"]
            consumed.append("isError")
        role, blocks = "tool", [result]  # role "toolResult" stays in extra["message"]
    else:
        consumed.append("role")
    return _nested_message(rec, role, blocks, hints, consumed)


_READERS: dict[str, Callable[[Any, Callable[[str], InputFormatError]], Message]] = {
    "native": _read_native, "openai": _read_openai, "anthropic": _read_anthropic,
    "claude-code": _read_claude_code, "openclaw": _read_openclaw,
}


# -- writing ----------------------------------------------------------------------


def to_records(fmt: str, messages: list[Message]) -> list[dict[str, Any]]:
    """Records of ``messages`` in ``fmt`` (``native``, ``openai`` or ``anthropic``).

    Messages that came from ``fmt`` come back exactly as they were read; the
    others are mapped best-effort (see the module docstring), so the number of
    records may differ from the number of messages.
    """
    if fmt == "native":
        return [_to_native(m) for m in messages]
    if fmt == "openai":
        return [rec for m in messages for rec in _to_openai(m)]
    if fmt == "anthropic":
        return _to_anthropic(messages)
    raise UsageError(f"cannot export to {fmt!r}; choose one of {', '.join(EXPORT_FORMATS)}")


def _origin(message: Message) -> str:
    return str(message.hints.get("format", "native"))


def _single_text(blocks: list[Any]) -> bool:
    return len(blocks) == 1 and blocks[0].get("type") == "text" and blocks[0].keys() == {"type", "text"}


def _set_content(rec: dict[str, Any], hints: dict[str, Any], blocks: list[Any]) -> None:
    if not blocks and hints.get("content_null"):
        rec["content"] = None
    elif hints.get("content_string") and _single_text(blocks):
        rec["content"] = blocks[0]["text"]
    elif blocks or not hints.get("content_missing"):
        rec["content"] = blocks


def _to_native(message: Message) -> dict[str, Any]:
    origin = _origin(message)
    if origin == "native":
        rec = message.to_native()
        if message.hints.get("content_missing") and not message.content:
            del rec["content"]
        return rec
    # A foreign record's own "id" or "timestamp" must not overwrite the vault's.
    native = {"id": message.id, "role": message.role, "timestamp": message.timestamp, "content": message.content}
    extra = {(f"{origin}_{k}" if k in native and (v != native[k] or v is None) else k): v
             for k, v in message.extra.items()}
    rec = message.model_copy(update={"extra": extra}).to_export()
    if rec.get("id") is None:
        rec.pop("id", None)
    return rec


def _is_call(block: dict[str, Any]) -> bool:
    return block.get("type") == "tool_call" or (block.get("type") == "raw" and block.get("field") == "tool_calls")


def _openai_part(block: dict[str, Any], same: bool) -> Any:
    kind = block.get("type")
    if kind == "image":
        url = block.get("url")
        if not isinstance(url, str):
            url = f"data:{block.get('media_type', 'application/octet-stream')};base64,{block.get('data', '')}"
        inner = {"url": url} | ({"detail": block["detail"]} if same and "detail" in block else {})
        return {"type": "image_url", "image_url": inner}
    if kind == "raw" and block.get("format") == "openai":
        return block.get("value")
    if kind == "text":
        return block if same else {"type": "text", "text": block.get("text", "")}
    return block if same else None


def _openai_call(block: dict[str, Any], style: str | None) -> Any:
    if block.get("type") == "raw":
        return block.get("value")
    args = block.get("arguments", {})
    if style != "string" or not isinstance(args, str):
        args = json.dumps(args, **_ARG_STYLES.get(style or "json-utf8", {}))
    return {"id": block.get("id"), "type": "function", "function": {"name": block.get("name"), "arguments": args}}


def _openai_result_content(value: Any, same: bool) -> Any:
    if isinstance(value, list):
        return [p for b in value if isinstance(b, dict) and (p := _openai_part(b, same)) is not None]
    return value if isinstance(value, str) or same else ""


def _to_openai(message: Message) -> list[dict[str, Any]]:
    same = _origin(message) == "openai"
    if not same and message.role.startswith(_LINE_ROLES):
        return []
    calls = [b for b in message.content if _is_call(b)]
    body = [b for b in message.content if not _is_call(b)]
    out: list[dict[str, Any]] = []
    rec: dict[str, Any] = {"role": message.role}
    if same:
        hints = message.hints
        if hints.get("timestamp_field") and message.timestamp is not None:
            rec["timestamp"] = message.timestamp
        if hints.get("tool_message") and body and body[0].get("type") == "tool_result":
            result = body[0]
            rec["tool_call_id"] = result.get("call_id")
            if "name" in result:
                rec["name"] = result["name"]
            if "content" in result:
                rec["content"] = _openai_result_content(result["content"], True)
            else:
                _set_content(rec, hints, [])
        else:
            _set_content(rec, hints, [_openai_part(b, True) for b in body])
        styles = iter(hints.get("arguments", []))
        if calls or hints.get("tool_calls_empty"):
            rec["tool_calls"] = [_openai_call(b, next(styles, None) if b["type"] == "tool_call" else None)
                                 for b in calls]
        rec.update(message.extra)
        return [rec]
    for block in body:
        if block.get("type") == "tool_result":
            out.append({"role": "tool", "tool_call_id": block.get("call_id"),
                        "content": _openai_result_content(block.get("content", ""), False)})
    parts = [p for b in body if b.get("type") != "tool_result" and (p := _openai_part(b, False)) is not None]
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
        if same:
            return _renamed(block, "tool_use", {"arguments": "input"})
        return {"type": "tool_use", "id": block.get("id"), "name": block.get("name"),
                "input": block.get("arguments", {})}
    if kind == "tool_result":
        out = _renamed(block, "tool_result", {"call_id": "tool_use_id"}) if same else {
            "type": "tool_result", "tool_use_id": block.get("call_id"), "content": block.get("content", "")}
        if not same and isinstance(block.get("is_error"), bool):
            out["is_error"] = block["is_error"]
        if isinstance(block.get("content"), list):
            out["content"] = [x for b in block["content"] if isinstance(b, dict)
                              and (x := _anthropic_block(b, same)) is not None]
        return out
    if kind == "image":
        rest = {k: v for k, v in block.items() if k not in ("type", "media_type", "data", "url")} if same else {}
        source = {"type": "url", "url": block["url"]} if isinstance(block.get("url"), str) else {
            "type": "base64", "media_type": block.get("media_type", "application/octet-stream"),
            "data": block.get("data", "")}
        return {"type": "image", "source": source} | rest
    if kind == "raw":
        return block.get("value") if block.get("format") == "anthropic" else None
    if same:
        return block
    if kind == "text":
        return {"type": "text", "text": block.get("text", "")}
    if kind == "thinking":
        keep = ("type", "thinking", "signature")
        return {k: block[k] for k in keep if k in block}
    return None


def _to_anthropic(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    merge = False  # consecutive tool messages share one user message, as the API wants
    for message in messages:
        origin = _origin(message)
        if origin == "anthropic":
            rec: dict[str, Any] = {"role": message.role}
            if message.hints.get("timestamp_field") and message.timestamp is not None:
                rec["timestamp"] = message.timestamp
            _set_content(rec, message.hints, [_anthropic_block(b, True) for b in message.content])
            rec.update(message.extra)
            out.append(rec)
            merge = False
            continue
        if message.role.startswith(_LINE_ROLES):
            continue
        family = origin == "claude-code"
        blocks = [x for b in message.content if (x := _anthropic_block(b, family)) is not None]
        if message.role == "tool" and merge:
            out[-1]["content"].extend(blocks)
            continue
        rec = {"role": "user" if message.role == "tool" else message.role,
               "content": blocks[0]["text"] if _single_text(blocks) and message.role != "tool" else blocks}
        inner = message.extra.get("message") if family else None
        if isinstance(inner, dict):
            rec.update({k: v for k, v in inner.items() if k not in ("role", "content")})
        out.append(rec)
        merge = message.role == "tool"
    return out
