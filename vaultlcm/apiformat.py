"""Provider-valid messages: what the Anthropic Messages and OpenAI chat APIs accept, and their size.

Stored messages keep everything a transcript held (timestamps, ids, ``model``,
``usage``, ``caller``, unknown fields); a model call takes much less. This module
turns native :class:`~vaultlcm.messages.Message` objects into *turns* (role and
native-shaped blocks), repairs what the APIs reject, and writes the records of
one API:

* only the fields the API takes: Anthropic ``role`` + ``content`` (blocks
  ``text``, ``image``, ``document``, ``tool_use``, ``tool_result``, ``thinking``
  with its ``signature``, ``redacted_thinking``); OpenAI ``role``, ``content``,
  ``tool_calls``, ``tool_call_id``;
* every tool call followed by its result (a synthetic "not kept in context"
  result when the result is missing), a result without its call shown as a
  marked user text (:data:`UNPAIRED_RESULT`: its call lies in a summary, or the
  transcript never held it; dropping it would lose what it says),
  duplicate call ids made unique, ids reduced to ``[A-Za-z0-9_-]``;
* no empty message or empty text block; consecutive same-role messages merged
  for Anthropic, whose turns alternate; system text moved to the system
  parameter for Anthropic (kept in place for OpenAI).

Token estimate (:func:`record_tokens`), the one rule used everywhere a context
is measured, the same as the catalog's count of a stored message: each message
costs ``MESSAGE_OVERHEAD`` (4) plus the ``cl100k`` tokens of what it says, its
texts, thinking, ``tool-name arguments`` (compact JSON) and results joined by
newlines; an image costs what Anthropic charges, ``width × height / 750`` after
its resize to a long edge of at most 1568 px, at most 1600 tokens
(``IMAGE_TOKENS_UNKNOWN`` = 1600, the most an image can cost, when the size
cannot be read from a PNG, JPEG, GIF or WebP header, e.g. for a URL).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from .messages import Message
from .tokens import count_tokens

MESSAGE_OVERHEAD = 4
IMAGE_TOKENS_UNKNOWN = 1600
IMAGE_MAX_EDGE = 1568
IMAGE_MAX_TOKENS = 1600
ANTHROPIC_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
#: Opens an Anthropic context whose first shown message is the assistant's (Bedrock and older API versions require a user turn first).
CONTINUED = "[Earlier conversation not shown.]"
MISSING_RESULT = "[result not in this context; lcm_grep {id} to find it]"
#: The header of a result whose call is not in the context, shown as user text.
UNPAIRED_RESULT = "[result of tool call {id}, whose call is not in this context{error}]"
STUB_RESULT = (
    "[vaultlcm: tool result of {tokens:,} tokens left out to fit the budget; "
    "read it with lcm_expand {message} (message {message}, call {id})]"
)
_ID_BAD = re.compile(r"[^A-Za-z0-9_-]")
_CHAT_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}
_OPENAI_USER_PARTS = frozenset({"input_audio", "file"})


@dataclass
class Turn:
    """One message on its way to an API: a role and native-shaped blocks."""

    role: str  # "system" | "user" | "assistant" | "tool"
    blocks: list[dict[str, Any]]
    sources: list[str] = field(default_factory=list)


# -- images ---------------------------------------------------------------------------


def image_size(data: bytes) -> tuple[int, int] | None:
    """Width and height from a PNG, GIF, WebP or JPEG header, or None."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        return int.from_bytes(data[6:8], "little"), int.from_bytes(data[8:10], "little")
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP" and len(data) >= 30:
        chunk = data[12:16]
        if chunk == b"VP8 ":
            return int.from_bytes(data[26:28], "little") & 0x3FFF, int.from_bytes(data[28:30], "little") & 0x3FFF
        if chunk == b"VP8L":
            b = data[21:25]
            return 1 + (((b[1] & 0x3F) << 8) | b[0]), 1 + (((b[3] & 0x0F) << 10) | (b[2] << 2) | ((b[1] & 0xC0) >> 6))
        if chunk == b"VP8X":
            return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
        return None
    if data[:2] == b"\xff\xd8":
        i = 2
        while i + 9 < len(data):
            if data[i] != 0xFF:
                i += 1
                continue
            marker = data[i + 1]
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7 or marker == 0xFF:
                i += 1 if marker == 0xFF else 2
                continue
            length = int.from_bytes(data[i + 2 : i + 4], "big")
            if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF):
                return int.from_bytes(data[i + 7 : i + 9], "big"), int.from_bytes(data[i + 5 : i + 7], "big")
            i += 2 + length
    return None


def _image_head(data: str, limit: int) -> bytes:
    text = "".join(data[: limit + 8].split())
    text = text[: len(text) - len(text) % 4]
    try:
        return base64.b64decode(text)
    except (binascii.Error, ValueError):
        return b""


def image_tokens(block: dict[str, Any]) -> int:
    """What an image costs the model (Anthropic's rule; see the module docstring)."""
    data = block.get("data")
    size = None
    if isinstance(data, str):
        # A JPEG's size sits after its metadata: look further only when needed.
        for limit in (4096, 262_144, len(data)):
            size = image_size(_image_head(data, limit))
            if size is not None or limit >= len(data):
                break
    if not size or size[0] <= 0 or size[1] <= 0:
        return IMAGE_TOKENS_UNKNOWN
    w, h = size
    scale = min(1.0, IMAGE_MAX_EDGE / max(w, h))
    return max(1, min(IMAGE_MAX_TOKENS, math.ceil((w * scale) * (h * scale) / 750)))


def sniff_media_type(data: str) -> str | None:
    head = _image_head(data, 64)
    for prefix, media in ((b"\x89PNG", "image/png"), (b"\xff\xd8", "image/jpeg"), (b"GIF8", "image/gif")):
        if head.startswith(prefix):
            return media
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


# -- native messages to turns --------------------------------------------------------------


def _text(text: Any) -> dict[str, Any] | None:
    return {"type": "text", "text": text} if isinstance(text, str) and text.strip() else None


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return Message(role="tool", content=[b for b in content if isinstance(b, dict)]).searchable_text()
    return ""


def result_tokens(block: dict[str, Any]) -> int:
    """Tokens of a tool result's content (what a stub saves)."""
    return count_tokens(_result_text(block.get("content")))


def _result_inner(content: Any) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    out: list[dict[str, Any]] = []
    for b in content if isinstance(content, list) else ():
        if not isinstance(b, dict):
            continue
        if b.get("type") == "text" and (t := _text(b.get("text"))):
            out.append(t)
        elif b.get("type") == "image" and (isinstance(b.get("data"), str) or isinstance(b.get("url"), str)):
            out.append(b)
    return out


def _passthrough(block: dict[str, Any]) -> dict[str, Any] | None:
    """A provider block vaultlcm keeps as given (a ``raw`` wrapper or an unmapped type)."""
    value = block.get("value") if block.get("type") == "raw" else block
    if not isinstance(value, dict):
        return None
    kind = value.get("type")
    if kind == "redacted_thinking" and isinstance(value.get("data"), str):
        return {"type": "redacted_thinking", "data": value["data"]}
    if kind == "document" and isinstance(value.get("source"), dict):
        return {k: value[k] for k in ("type", "source", "title", "context") if k in value}
    if kind in _OPENAI_USER_PARTS and kind in value:
        return {"type": "openai_part", "value": {"type": kind, kind: value[kind]}}
    return None


def message_turns(message: Message, msg_id: str, stubs: dict[str, int] | None = None) -> list[Turn]:
    """The turns of one stored message (empty for lines that are no chat message).

    ``stubs`` maps call ids whose result is left out to their size in tokens.
    """
    role = _CHAT_ROLES.get(message.role)
    if role is None:
        return []
    results: list[dict[str, Any]] = []
    body: list[dict[str, Any]] = []
    for block in message.content:
        kind = block.get("type")
        if kind == "text":
            if t := _text(block.get("text")):
                body.append(t)
        elif kind == "thinking":
            sig = block.get("signature")
            if role == "assistant" and isinstance(sig, str) and sig and isinstance(block.get("thinking"), str):
                body.append({"type": "thinking", "thinking": block["thinking"], "signature": sig})
        elif kind == "tool_call":
            if role == "assistant":
                body.append({"type": "tool_call", "id": str(block.get("id")), "name": str(block.get("name") or "tool"),
                             "arguments": block.get("arguments", {})})
            elif t := _text(f"[tool call {block.get('name')}: {json.dumps(block.get('arguments'), ensure_ascii=False)}]"):
                body.append(t)
        elif kind == "tool_result":
            call = str(block.get("call_id"))
            res: dict[str, Any] = {"type": "tool_result", "call_id": call}
            if stubs is not None and call in stubs:
                res["content"] = STUB_RESULT.format(tokens=stubs[call], message=msg_id, id=call)
            else:
                res["content"] = _result_inner(block.get("content", ""))
            if block.get("is_error") is True:
                res["is_error"] = True
            results.append(res)
        elif kind == "image":
            if role == "user" and (isinstance(block.get("data"), str) or isinstance(block.get("url"), str)):
                body.append({k: block[k] for k in ("type", "media_type", "data", "url") if k in block})
            else:
                body.append({"type": "text", "text": "[image]"})
        elif (kept := _passthrough(block)) is not None:
            if kept["type"] == "redacted_thinking" and role != "assistant":
                continue
            if kept["type"] in ("document", "openai_part") and role != "user":
                continue
            body.append(kept)
    if role == "system":
        body = [b for b in body if b["type"] == "text"]
    turns = []
    if results:
        turns.append(Turn("tool", results, [msg_id]))
    if body:
        turns.append(Turn("user" if role == "tool" else role, body, [msg_id]))
    return turns


def text_turn(role: str, text: str, source: str) -> Turn:
    return Turn(role, [{"type": "text", "text": text}], [source])


# -- repairs ------------------------------------------------------------------------------


def _merge_same(turns: list[Turn], roles: set[str]) -> list[Turn]:
    out: list[Turn] = []
    for t in turns:
        if out and out[-1].role == t.role and t.role in roles:
            out[-1] = Turn(t.role, out[-1].blocks + t.blocks, out[-1].sources + t.sources)
        else:
            out.append(Turn(t.role, list(t.blocks), list(t.sources)))
    return out


def _unique_ids(turns: list[Turn]) -> None:
    """Reduce call ids to what both APIs accept and make them unique; results follow their call."""
    used: set[str] = set()
    latest: dict[str, str] = {}
    for t in turns:
        for i, b in enumerate(t.blocks):
            if b["type"] == "tool_call":
                base = _ID_BAD.sub("_", b["id"])[:60] or "call"
                new, n = base, 1
                while new in used:
                    n += 1
                    new = f"{base}_{n}"
                used.add(new)
                latest[b["id"]] = new
                t.blocks[i] = {**b, "id": new}
            elif b["type"] == "tool_result":
                t.blocks[i] = {**b, "call_id": latest.get(b["call_id"], _ID_BAD.sub("_", b["call_id"]) or "call")}


def _unpaired(block: dict[str, Any]) -> list[dict[str, Any]]:
    """A result whose call is not in the context, as user blocks: a marked header, then what it said."""
    head = UNPAIRED_RESULT.format(id=block["call_id"], error="; it reported an error" if block.get("is_error") else "")
    inner = block.get("content")
    if isinstance(inner, list):
        return [{"type": "text", "text": head}, *inner]
    text = str(inner or "")
    return [{"type": "text", "text": f"{head}\n{text}" if text.strip() else head}]


def _pair(turns: list[Turn]) -> list[Turn]:
    """Put each call's result right after it (synthetic when missing); results with no call become text."""
    out: list[Turn] = []
    taken: set[tuple[int, int]] = set()
    for i, t in enumerate(turns):
        if t.role == "tool":
            # Results were placed with their call (an earlier turn); what is left has no call before it.
            # Its call may lie in a summary (a leaf can open with a result) or was never stored: as text
            # the model still reads what the tool said, where dropping it would leave a hole in the history.
            left = [b for k, b in enumerate(t.blocks) if (i, k) not in taken]
            if left:
                out.append(Turn("user", [part for b in left for part in _unpaired(b)], list(t.sources)))
            continue
        out.append(t)
        calls = [b["id"] for b in t.blocks if b["type"] == "tool_call"] if t.role == "assistant" else []
        if not calls:
            continue
        found: dict[str, dict[str, Any]] = {}
        sources: list[str] = []
        for j in range(i + 1, len(turns)):
            if turns[j].role == "assistant":
                break
            if turns[j].role != "tool":
                continue
            for k, b in enumerate(turns[j].blocks):
                if b["call_id"] in calls and b["call_id"] not in found and (j, k) not in taken:
                    found[b["call_id"]] = b
                    taken.add((j, k))
                    sources.extend(s for s in turns[j].sources if s not in sources)
        blocks = [found.get(c) or {"type": "tool_result", "call_id": c, "content": MISSING_RESULT.format(id=c)}
                  for c in calls]
        out.append(Turn("tool", blocks, sources))
    return out


def repair(turns: list[Turn]) -> list[Turn]:
    """Turns both APIs accept (see the module docstring)."""
    turns = [t for t in turns if t.blocks]
    turns = _merge_same(turns, {"assistant"})
    _unique_ids(turns)
    return _pair(turns)


# -- writing one API's records ---------------------------------------------------------------


def _anthropic_image(block: dict[str, Any]) -> dict[str, Any]:
    if isinstance(block.get("url"), str):
        return {"type": "image", "source": {"type": "url", "url": block["url"]}}
    data = block.get("data", "")
    media = block.get("media_type")
    if media not in ANTHROPIC_IMAGE_TYPES:
        media = sniff_media_type(data)
    if media is None:
        return {"type": "text", "text": f"[image of an unsupported type: {block.get('media_type')}]"}
    return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}


def _anthropic_block(b: dict[str, Any]) -> dict[str, Any]:
    kind = b["type"]
    if kind == "tool_call":
        args = b.get("arguments")
        return {"type": "tool_use", "id": b["id"], "name": b["name"],
                "input": args if isinstance(args, dict) else {"arguments": args}}
    if kind == "tool_result":
        inner = b.get("content", "")
        content = inner if isinstance(inner, str) else [
            _anthropic_image(x) if x["type"] == "image" else x for x in inner]
        return {"type": "tool_result", "tool_use_id": b["call_id"], "content": content} | (
            {"is_error": True} if b.get("is_error") else {})
    if kind == "image":
        return _anthropic_image(b)
    if kind == "openai_part":
        return {"type": "text", "text": f"[{b['value'].get('type')} attachment]"}
    return b


def anthropic_records(turns: list[Turn]) -> list[dict[str, Any]]:
    """Messages-API records of chat turns as they are (no merging or repairs)."""
    out = []
    for t in turns:
        blocks = [_anthropic_block(b) for b in t.blocks]
        role = "user" if t.role == "tool" else t.role
        if len(blocks) == 1 and blocks[0]["type"] == "text":
            out.append({"role": role, "content": blocks[0]["text"]})
        else:
            out.append({"role": role, "content": blocks})
    return out


def to_anthropic(turns: list[Turn]) -> tuple[list[str], list[dict[str, Any]]]:
    """System texts and Messages-API messages (roles alternate, results first in their user turn)."""
    system = ["\n\n".join(b["text"] for b in t.blocks) for t in turns if t.role == "system"]
    chat = [Turn("user" if t.role == "tool" else t.role, t.blocks, t.sources) for t in turns if t.role != "system"]
    chat = _merge_same(chat, {"user", "assistant"})
    if chat and chat[-1].role == "assistant":
        # A final assistant turn is a prefill, which may not end in whitespace.
        blocks = chat[-1].blocks
        while blocks and blocks[-1]["type"] == "text" and not blocks[-1]["text"].rstrip():
            blocks.pop()
        if blocks and blocks[-1]["type"] == "text":
            blocks[-1] = {**blocks[-1], "text": blocks[-1]["text"].rstrip()}
        if not blocks:
            chat.pop()
    if chat and chat[0].role == "assistant":
        chat.insert(0, text_turn("user", CONTINUED, "continued"))
    return system, anthropic_records(chat)


def _openai_text(inner: str | list[dict[str, Any]]) -> str:
    if isinstance(inner, str):
        return inner
    return "\n".join(x["text"] if x["type"] == "text" else "[image]" for x in inner)


def _openai_part(b: dict[str, Any]) -> dict[str, Any]:
    if b["type"] == "image":
        url = b.get("url")
        if not isinstance(url, str):
            media = b.get("media_type") or sniff_media_type(b.get("data", "")) or "application/octet-stream"
            url = f"data:{media};base64,{b.get('data', '')}"
        return {"type": "image_url", "image_url": {"url": url}}
    if b["type"] == "openai_part":
        return b["value"]
    if b["type"] == "text":
        return {"type": "text", "text": b["text"]}
    return {"type": "text", "text": f"[{b['type']}]"}


def to_openai(turns: list[Turn]) -> list[dict[str, Any]]:
    """Chat Completions messages (each tool call answered by a ``tool`` message right after it)."""
    out: list[dict[str, Any]] = []
    for t in turns:
        if t.role == "tool":
            out.extend({"role": "tool", "tool_call_id": b["call_id"], "content": _openai_text(b.get("content", ""))}
                       for b in t.blocks)
            continue
        texts = [b for b in t.blocks if b["type"] == "text"]
        if t.role == "assistant":
            calls = [{"id": b["id"], "type": "function", "function": {
                "name": b["name"], "arguments": _json(b["arguments"])}} for b in t.blocks if b["type"] == "tool_call"]
            text = "\n\n".join(b["text"] for b in texts)
            if not text and not calls:
                continue
            rec: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                rec["tool_calls"] = calls
            out.append(rec)
        elif t.role == "system" or all(b["type"] == "text" for b in t.blocks):
            out.append({"role": t.role, "content": "\n\n".join(b["text"] for b in texts)})
        else:
            out.append({"role": t.role, "content": [_openai_part(b) for b in t.blocks if b["type"] != "thinking"]})
    return [m for m in out if m.get("content") or m.get("tool_calls") or m["role"] == "tool"]


# -- size -------------------------------------------------------------------------------


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _parts(block: Any, texts: list[str]) -> int:
    """Collect what a block says into ``texts``; returns what its images and documents cost."""
    if not isinstance(block, dict):
        texts.append(_json(block))
        return 0
    kind = block.get("type")
    if kind == "text":
        texts.append(str(block.get("text", "")))
    elif kind == "thinking":
        texts.append(str(block.get("thinking", "")))
    elif kind == "redacted_thinking":
        texts.append(str(block.get("data", "")))
    elif kind == "tool_use":
        texts.append(f"{block.get('name', '')} {_json(block.get('input', {}))}")
    elif kind == "tool_result":
        inner = block.get("content", "")
        if isinstance(inner, str):
            texts.append(inner)
        else:
            return sum(_parts(x, texts) for x in inner)
    elif kind == "image":
        source = block.get("source") or {}
        return image_tokens({"data": source.get("data")} if source.get("type") == "base64" else {})
    elif kind == "image_url":
        url = (block.get("image_url") or {}).get("url", "")
        match = re.match(r"data:[^;,]*;base64,", url)
        return image_tokens({"data": url[match.end():]} if match else {})
    elif kind == "document":
        source = block.get("source") or {}
        if source.get("type") == "text":
            texts.append(str(source.get("data", "")))
            return 0
        # A PDF costs about its text plus an image per page; its size in bytes bounds that from above.
        return len(str(source.get("data", ""))) * 3 // 4 // 3 if source.get("type") == "base64" else IMAGE_TOKENS_UNKNOWN
    else:
        texts.append(_json(block))
    return 0


def record_tokens(record: dict[str, Any]) -> int:
    """Tokens of one API message (see the module docstring for the rule)."""
    texts: list[str] = []
    extra = 0
    content = record.get("content")
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        extra = sum(_parts(b, texts) for b in content)
    for call in record.get("tool_calls") or ():
        fn = call.get("function") or {}
        texts.append(f"{fn.get('name', '')} {fn.get('arguments', '')}")
    return MESSAGE_OVERHEAD + count_tokens("\n".join(texts)) + extra


def context_tokens(messages: list[dict[str, Any]], system: str) -> int:
    """Tokens of a whole context: its messages and its system text."""
    return count_tokens(system) + sum(record_tokens(m) for m in messages)


def render(fmt: str, turns: list[Turn]) -> tuple[list[str], list[dict[str, Any]], set[str]]:
    """System texts (Anthropic only), the API records of ``turns``, repaired, and the sources still in them."""
    fixed = repair(turns)
    kept = {s for t in fixed for s in t.sources}
    if fmt == "anthropic":
        system, records = to_anthropic(fixed)
        return system, records, kept
    return [], to_openai(fixed), kept
