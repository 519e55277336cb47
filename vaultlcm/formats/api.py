"""The API formats: native, OpenAI Chat Completions and Anthropic Messages, read and written.

For each of them, ``to_records(fmt, parse(fmt, R)) == R`` for every valid ``R``.
What the native model cannot say is kept in ``Message.hints``: ``format`` (the
origin), ``content_string`` / ``content_null`` / ``content_missing`` (how
``content`` was written), ``timestamp_field`` (``timestamp`` came from the
record), ``tool_message`` (an OpenAI ``tool`` message became a ``tool_result``
block), ``tool_calls_empty`` and ``arguments`` (how each OpenAI ``arguments``
string was serialized). A part that cannot be mapped exactly becomes ``{"type":
"raw", "format": ..., "value": ...}`` (with ``"field": "tool_calls"`` for OpenAI
tool calls); unknown types that do not clash with native ones are kept as given.

Export to a message's own format restores it exactly. Export to another format
is a best-effort mapping into that API's shape: extras and hints are dropped,
blocks the target cannot hold (thinking in OpenAI, other providers' blocks) are
left out, ``tool_result`` blocks become OpenAI ``tool`` messages or Anthropic
``user`` messages, and non-chat lines are skipped. ``native`` export keeps
everything; a native record that would read as another format (a Claude Code
line, say) carries ``"_vaultlcm": "native"`` so that ``--format auto`` reads it
back as native.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from ..errors import InputFormatError
from ..messages import Message, check_json_value, message_from_native, parse_timestamp

Fail = Callable[[str], InputFormatError]
#: The key that marks a native export record (see the module docstring).
NATIVE_MARK = "_vaultlcm"
# Types an unmapped part may not keep, or it would be read back as a native block.
_NATIVE_TYPES = frozenset({"text", "thinking", "tool_call", "tool_result", "image", "raw"})
_DATA_URL = re.compile(r"data:([^;,]*);base64,(.*)", re.S)
_ARG_STYLES: dict[str, dict[str, Any]] = {
    "json": {},
    "json-compact": {"separators": (",", ":")},
    "json-utf8": {"ensure_ascii": False},
    "json-compact-utf8": {"separators": (",", ":"), "ensure_ascii": False},
}
_DROP: Any = object()  # what a block exporter returns for "leave it out" (None is a value)
FORMAT_HINT = "pass --format native|openai|anthropic|claude-code|openclaw to choose the format"


# -- reading ---------------------------------------------------------------

def chat_record(rec: Any, fail: Fail, fmt: str, hints: dict[str, Any]) -> Any:
    """Check the record's shape, note how ``content`` was written, and return the raw content."""
    if not isinstance(rec, dict) or not isinstance(rec.get("role"), str) or not rec["role"]:
        got = "an object without 'role'" if isinstance(rec, dict) else type(rec).__name__
        raise fail(f"expected a JSON object with 'role' ({fmt} format), got {got}; {FORMAT_HINT}")
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
    timestamp = take_timestamp(rec, hints)
    if timestamp is not None:
        hints["timestamp_field"] = True
        consumed.add("timestamp")
    extra = {k: v for k, v in rec.items() if k not in consumed}
    return Message(role=rec["role"], timestamp=timestamp, content=content, extra=extra, hints=hints)


def take_timestamp(rec: dict[str, Any], hints: dict[str, Any]) -> str | None:
    """The record's ``timestamp`` when it can be read; an unreadable one stays data, flagged in ``hints``.

    The caller (``formats.parse``) refuses a flagged record unless asked to keep
    unreadable timestamps.
    """
    value = rec.get("timestamp")
    if value is None and "timestamp" not in rec:
        return None
    if isinstance(value, str):
        try:
            parse_timestamp(value)
            return value
        except InputFormatError:
            pass
    hints["timestamp_unreadable"] = True
    return None


def keep_part(value: Any, fmt: str, **where: str) -> Any:
    """An unmapped part as given, or wrapped when it would pass for a native block."""
    if isinstance(value, dict) and isinstance(value.get("type"), str) and value["type"] not in _NATIVE_TYPES:
        return value
    return {"type": "raw", "format": fmt, "value": value, **where}


def renamed(block: dict[str, Any], kind: str, renames: dict[str, str]) -> dict[str, Any] | None:
    """``block`` as type ``kind`` with keys renamed, or None when a new name is already taken."""
    out: dict[str, Any] = {"type": kind}
    for key, value in block.items():
        if key not in renames and key in renames.values():
            return None
        if key != "type":
            out[renames.get(key, key)] = value
    return out


def read_native(rec: Any, fail: Fail) -> Message:
    chat_record(rec, fail, "native", {})
    hints: dict[str, Any] = {}
    if NATIVE_MARK in rec:  # remembered, so a re-export carries it again
        hints["native_mark"] = rec[NATIVE_MARK]
        rec = {k: v for k, v in rec.items() if k != NATIVE_MARK}
    bad_time = "timestamp" in rec and take_timestamp(rec, hints) is None
    try:
        message = message_from_native({k: v for k, v in rec.items() if not (bad_time and k == "timestamp")})
    except InputFormatError as exc:
        raise fail(str(exc)) from None  # message_from_native was given no place to name
    if bad_time:  # kept as data where it was, so export gives the record back as it came
        message.extra = {k: v for k, v in rec.items() if k not in ("role", "content")}
    message.hints.update(hints)
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
    return keep_part(part, "openai")


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


def read_openai(rec: Any, fail: Fail) -> Message:
    hints: dict[str, Any] = {"format": "openai"}
    raw = chat_record(rec, fail, "openai", hints)
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


def from_anthropic_block(block: Any) -> Any:
    kind = block.get("type") if isinstance(block, dict) else None
    if kind in ("text", "thinking") and isinstance(block.get(kind), str):
        return block
    if kind == "tool_use" and isinstance(block.get("id"), str) and isinstance(block.get("name"), str):
        if (mapped := renamed(block, "tool_call", {"input": "arguments"})) is not None:
            return mapped
    if kind == "tool_result" and isinstance(block.get("tool_use_id"), str) and (
            isinstance(block.get("content", ""), (str, list)) and isinstance(block.get("is_error", False), bool)):
        if (mapped := renamed(block, "tool_result", {"tool_use_id": "call_id"})) is not None:
            if isinstance(block.get("content"), list):
                mapped["content"] = [from_anthropic_block(b) for b in block["content"]]
            return mapped
    source = block.get("source") if kind == "image" and not block.keys() & {"media_type", "data", "url"} else None
    if isinstance(source, dict):
        rest = {k: v for k, v in block.items() if k not in ("type", "source")}
        if source.keys() == {"type", "media_type", "data"} and source["type"] == "base64" and (
                isinstance(source["media_type"], str) and isinstance(source["data"], str)):
            return {"type": "image", "media_type": source["media_type"], "data": source["data"]} | rest
        if source.keys() == {"type", "url"} and source["type"] == "url" and isinstance(source["url"], str):
            return {"type": "image", "url": source["url"]} | rest
    return keep_part(block, "anthropic")


def read_anthropic(rec: Any, fail: Fail) -> Message:
    hints: dict[str, Any] = {"format": "anthropic"}
    raw = chat_record(rec, fail, "anthropic", hints)
    blocks = [{"type": "text", "text": raw}] if isinstance(raw, str) else [from_anthropic_block(b) for b in raw or ()]
    return _chat_message(rec, hints, blocks, {"role", "content"})


# -- writing ------------------------------------------------------------------------


def origin(message: Message) -> str:
    return str(message.hints.get("format", "native"))


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


def to_native(message: Message) -> dict[str, Any]:
    """The native record of a message: as it came for native input, the converted message otherwise."""
    source = origin(message)
    if source == "native":
        return message.to_native()
    record: dict[str, Any] = {"role": message.role}
    if message.timestamp is not None:
        record["timestamp"] = message.timestamp
    text_only = message.hints.get("content_string") and _single_text(message.content)
    record["content"] = message.content[0]["text"] if text_only else message.content
    # A foreign record's own fields keep their names unless they clash with the native ones.
    for key, value in message.extra.items():
        record[f"{source}_{key}" if key in ("role", "timestamp", "content") else key] = value
    return record


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


def to_openai(message: Message) -> list[dict[str, Any]]:
    calls = [b for b in message.content if _is_call(b)]
    body = [b for b in message.content if not _is_call(b)]
    rec: dict[str, Any] = {"role": message.role}
    if origin(message) == "openai":
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


def anthropic_block_back(block: dict[str, Any]) -> Any:
    """A native block as the Anthropic block it was read from."""
    out = _anthropic_block(block, True)
    return block if out is _DROP else out


def _anthropic_block(block: dict[str, Any], same: bool) -> Any:
    kind = block.get("type")
    if kind == "tool_call":
        return (renamed(block, "tool_use", {"arguments": "input"}) if same else None) or {
            "type": "tool_use", "id": block.get("id"), "name": block.get("name"), "input": block.get("arguments", {})}
    if kind == "tool_result":
        out = (renamed(block, "tool_result", {"call_id": "tool_use_id"}) if same else None) or {
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


def to_anthropic(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    merge = False  # consecutive tool messages share one user message, as the API wants
    for message in messages:
        source = origin(message)
        family = source in ("anthropic", "claude-code")  # blocks are Anthropic's own
        blocks = [x for b in message.content if (x := _anthropic_block(b, family)) is not _DROP]
        rec: dict[str, Any] = {"role": message.role}
        if source == "anthropic":
            _set_content(rec, message, blocks)
        elif message.role == "tool" and merge:
            out[-1]["content"].extend(blocks)
            continue
        else:
            rec["role"] = "user" if message.role == "tool" else message.role
            rec["content"] = blocks[0]["text"] if _single_text(blocks) and message.role != "tool" else blocks
            inner = message.extra.get("message") if source == "claude-code" else None
            rec.update({k: v for k, v in inner.items() if k not in ("role", "content")} if isinstance(
                inner, dict) else {})
        out.append(rec)
        merge = source != "anthropic" and message.role == "tool"
    return out
