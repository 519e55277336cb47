"""The message model: everything an agent transcript holds, nothing dropped.

A :class:`Message` is the *native* form of one transcript record. Its ``content``
is a list of blocks, each a JSON object with a ``type``:

=============  ==============================================================
``text``       ``text`` (str)
``thinking``   ``thinking`` (str), optional ``signature``
``tool_call``  ``id``, ``name`` (str), ``arguments`` (any JSON value)
``tool_result`` ``call_id`` (str), optional ``name``, ``content`` (str or list
               of blocks), optional ``is_error`` (bool)
``image``      ``media_type`` and ``data`` (base64), or ``url``
anything else  kept as given (provider-specific blocks)
=============  ==============================================================

Blocks are kept as the JSON objects they arrived as, so fields vaultlcm does not
know survive untouched. Top-level fields of a record that are not part of the
native shape live in ``extra``; format adapters keep what they need to give a
record back exactly in ``hints``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .errors import InputFormatError

JsonValue = Any

ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,127}$")
VAULT_ID_RE = re.compile(r"^m-[0-9a-f]{16}$")
KNOWN_ROLES = ("system", "user", "assistant", "tool")
#: Deeper JSON than this is refused on input: nothing real nests so deep, and deeper
#: values would hit Python's recursion limit in the JSON and YAML libraries later.
MAX_JSON_DEPTH = 200
#: Roles of transcript lines that are no chat message (``claude-code:summary``).
LINE_ROLE_PREFIXES = ("claude-code:", "openclaw:")
#: String fields of a non-chat record shown (and searched) as text.
LINE_TEXT_KEYS = ("summary", "customTitle", "title", "content", "text", "label", "operation", "subtype")


class Message(BaseModel):
    """One stored message (see the module docstring for the block shapes)."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(None, description="The vault id (m- + 16 hex), assigned when stored; never a record's own id.")
    role: str
    timestamp: str | None = Field(None, description="ISO-8601 timestamp as given (kept verbatim).")
    content: list[dict[str, JsonValue]] = Field(default_factory=list)
    extra: dict[str, JsonValue] = Field(default_factory=dict)
    hints: dict[str, JsonValue] = Field(default_factory=dict)

    @classmethod
    def from_native(cls, record: Any, *, source: str | None = None, line: int | None = None) -> "Message":
        """Validate one native record (a JSON object: ``role``, ``content``, ...) into a message.

        Raises :class:`~vaultlcm.errors.InputFormatError` naming ``source`` and ``line``.
        """
        return message_from_native(record, source=source, line=line)

    # -- derived views -----------------------------------------------------------
    def blocks(self, kind: str) -> list[dict[str, JsonValue]]:
        return [b for b in self.content if b.get("type") == kind]

    @property
    def text(self) -> str:
        """The concatenated ``text`` blocks (what a person would call the message)."""
        return "\n\n".join(b["text"] for b in self.blocks("text") if isinstance(b.get("text"), str))

    @property
    def tool_call_ids(self) -> list[str]:
        return [str(b.get("id")) for b in self.blocks("tool_call")]

    @property
    def tool_result_ids(self) -> list[str]:
        return [str(b.get("call_id")) for b in self.blocks("tool_result")]

    @property
    def is_line(self) -> bool:
        """A transcript line that is no chat message (a session title, a snapshot, a compaction record)."""
        if self.hints.get("format") in ("openai", "anthropic"):
            # An API record's role is its own, whatever it says: only an agent reader makes lines.
            return bool(self.hints.get("line"))
        return bool(self.hints.get("line")) or self.role.startswith(LINE_ROLE_PREFIXES)

    def searchable_text(self) -> str:
        """Text a person would search for: text, thinking, tool names, arguments, results (and a line's texts)."""
        parts = _searchable(self.content)
        if self.is_line:
            parts.extend(v for k in LINE_TEXT_KEYS if isinstance(v := self.extra.get(k), str) and v)
        return "\n".join(parts)

    def to_native(self) -> dict[str, JsonValue]:
        """The native JSON record as it came in (``role``, ``timestamp``, ``content``, its own fields).

        The vault id is not part of the record: a record's own ``id`` is kept as data.
        """
        record: dict[str, JsonValue] = {}
        if "id" in self.extra:
            record["id"] = self.extra["id"]
        record["role"] = self.role
        if self.timestamp is not None and not self.hints.get("timestamp_assigned"):
            record["timestamp"] = self.timestamp
        if self.hints.get("content_string") and _single_text(self.content):
            record["content"] = self.content[0]["text"]
        elif self.content or not self.hints.get("content_missing"):
            record["content"] = self.content
        record.update((k, v) for k, v in self.extra.items() if k != "id")
        order = self.hints.get("key_order")
        if isinstance(order, list) and set(order) == set(record):
            record = {k: record[k] for k in order}
        return record

    def to_export(self) -> dict[str, JsonValue]:
        """Native record for export in a format other than the one it came in: ids always shown."""
        record = self.to_native()
        if self.id is not None:
            record.setdefault("id", self.id)
        if self.timestamp is not None:
            record.setdefault("timestamp", self.timestamp)
        # keep the natural key order: id, role, timestamp first
        ordered: dict[str, JsonValue] = {k: record[k] for k in ("id", "role", "timestamp", "content") if k in record}
        ordered.update({k: v for k, v in record.items() if k not in ordered})
        return ordered


def _single_text(content: list[dict[str, JsonValue]]) -> bool:
    return len(content) == 1 and content[0].get("type") == "text" and set(content[0]) == {"type", "text"}


def _searchable(blocks: list[Any]) -> list[str]:
    out: list[str] = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            out.append(block["text"])
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            out.append(block["thinking"])
        elif kind == "tool_call":
            out.append(f"{block.get('name', '')} {canonical_json(block.get('arguments'))}")
        elif kind == "tool_result":
            inner = block.get("content")
            if isinstance(inner, str):
                out.append(inner)
            elif isinstance(inner, list):
                out.extend(_searchable(inner))
    return out


def canonical_json(value: JsonValue) -> str:
    """Compact JSON with keys in their given order (for hashing and display)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def message_from_native(record: Any, *, source: str | None = None, line: int | None = None) -> Message:
    """Validate one native record (a JSON object) into a :class:`Message`."""

    def fail(msg: str) -> InputFormatError:
        return InputFormatError(msg, source=source, line=line)

    if not isinstance(record, dict):
        raise fail(f"expected a JSON object for a message, got {type(record).__name__}")
    role = record.get("role")
    if not isinstance(role, str) or not role:
        raise fail("message has no 'role' (a non-empty string such as user, assistant, tool, system)")
    hints: dict[str, Any] = {}
    timestamp = record.get("timestamp")
    if "timestamp" in record:
        if not isinstance(timestamp, str):
            raise fail(f"'timestamp' must be an ISO-8601 string, got {timestamp!r}")
        try:
            parse_timestamp(timestamp)
        except InputFormatError as exc:
            raise fail(str(exc)) from None
    content = record.get("content", [])
    if isinstance(content, str):
        hints["content_string"] = True
        content = [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise fail("'content' must be a string or a list of blocks")
    for i, block in enumerate(content):
        validate_block(block, where=f"content[{i}]", fail=fail)
    # A record's own "id" is data (kept in extra): the vault assigns its own ids.
    extra = {k: v for k, v in record.items() if k not in ("role", "timestamp", "content")}
    if "content" not in record:
        hints["content_missing"] = True
    message = Message(role=role, timestamp=timestamp, content=content, extra=extra, hints=hints)
    if list(message.to_native()) != list(record):
        message.hints["key_order"] = list(record)  # export gives the keys back in the order they came
    return message


_REQUIRED: dict[str, dict[str, type | tuple[type, ...]]] = {
    "text": {"text": str},
    "thinking": {"thinking": str},
    "tool_call": {"id": str, "name": str},
    "tool_result": {"call_id": str},
    "image": {},
}


def validate_block(block: Any, *, where: str, fail: Any) -> None:
    if not isinstance(block, dict):
        raise fail(f"{where}: a content block must be a JSON object, got {type(block).__name__}")
    kind = block.get("type")
    if not isinstance(kind, str):
        raise fail(f"{where}: a content block needs a string 'type' (text, thinking, tool_call, tool_result, image)")
    for field, typ in _REQUIRED.get(kind, {}).items():
        if not isinstance(block.get(field), typ):
            raise fail(f"{where}: a {kind} block needs a string {field!r}")
    if kind == "tool_result":
        inner = block.get("content", "")
        if isinstance(inner, list):
            for j, sub in enumerate(inner):
                validate_block(sub, where=f"{where}.content[{j}]", fail=fail)
        elif not isinstance(inner, str):
            raise fail(f"{where}: a tool_result's 'content' must be a string or a list of blocks")
        if "is_error" in block and not isinstance(block["is_error"], bool):
            raise fail(f"{where}: 'is_error' must be true or false")
    if kind == "image" and not (isinstance(block.get("data"), str) or isinstance(block.get("url"), str)):
        raise fail(f"{where}: an image block needs base64 'data' or a 'url'")


def epoch_seconds(value: str) -> float:
    """An ISO-8601 timestamp (as the catalog and the notes store them) in seconds since the epoch."""
    return parse_timestamp(value).timestamp()


def parse_timestamp(value: str, *, source: str | None = None, line: int | None = None) -> datetime:
    """Parse an ISO-8601 timestamp to an aware UTC datetime (naive means UTC)."""
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(text)
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        return dt.astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        why = "is out of range once converted to UTC" if isinstance(exc, OverflowError) else "is not ISO-8601"
        raise InputFormatError(
            f"timestamp {value!r} {why} (write e.g. 2026-11-29T10:00:00Z)", source=source, line=line
        ) from None


def format_timestamp(dt: datetime) -> str:
    """Canonical timestamp text: UTC, microseconds only when present, ``Z`` suffix.

    A naive ``dt`` is UTC, as :func:`parse_timestamp` reads one (never the machine's local time,
    which also fails for the first and last days Python can represent)."""
    dt = dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)
    if dt.microsecond:
        return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def make_message_id(conversation: str, seq: int, message: Message, salt: int = 0, at: str | None = None) -> str:
    """Deterministic id: same conversation, position, time and content give the same id."""
    h = hashlib.sha256()
    h.update(conversation.encode("utf-8"))
    h.update(b"\0%d\0%d\0" % (seq, salt))
    h.update((at or message.timestamp or "").encode("utf-8"))
    h.update(b"\0")
    h.update(message.role.encode("utf-8"))
    h.update(b"\0")
    h.update(canonical_json(message.content).encode("utf-8"))
    return "m-" + h.hexdigest()[:16]


def check_json_value(value: Any, *, where: str, fail: Any) -> None:
    """Reject values JSON cannot carry back exactly: lone surrogates, NaN, infinities."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise fail(f"{where}: JSON is nested more than {MAX_JSON_DEPTH} levels deep; flatten it before ingesting")
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise fail(
                    f"{where}: text holds a lone surrogate ({v[exc.start:exc.end]!r}); "
                    "it cannot be stored as UTF-8. Fix the producer or escape it"
                ) from None
        elif isinstance(v, float):
            if not math.isfinite(v):
                raise fail(f"{where}: number {v!r} is not finite; JSON cannot carry it")
        elif isinstance(v, dict):
            for k, sub in v.items():
                stack.append((k, depth + 1))
                stack.append((sub, depth + 1))
        elif isinstance(v, list):
            stack.extend((sub, depth + 1) for sub in v)
