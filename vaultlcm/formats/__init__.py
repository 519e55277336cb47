"""Transcript formats: turning external records into :class:`~vaultlcm.messages.Message` and back.

===============  ===========  ====================================================
``native``       read, write  records as :meth:`Message.to_native` writes them
``openai``       read, write  Chat Completions messages (``tool_calls``, ``tool``)
``anthropic``    read, write  Messages API messages or responses (``tool_use``)
``claude-code``  read         Claude Code session JSONL (``~/.claude/projects``)
``openclaw``     read         OpenClaw / pi session JSONL
===============  ===========  ====================================================

:func:`read_document` decodes the bytes (:mod:`.jsondoc`), :func:`detect_format`
guesses the format, :func:`parse` turns the records into :class:`Incoming`
messages and :func:`to_records` writes messages back (:mod:`.api`; agent
transcripts in :mod:`.agents`).

What :func:`parse` settles for every record:

* **time**: a record's own timestamp; a record without one takes the previous
  record's time (the next one's for leading records), never the clock, and keeps
  no timestamp of its own, so export gives back exactly what came in. Only when no
  record has a time at all does the vault use the time of ingest. A timestamp that
  cannot be read is an error naming the file and line, or, with
  ``keep_bad_timestamps``, stays as data and the record is placed by its neighbours;
* **key**: what identifies the record for idempotent re-imports: a hash of the
  record as given plus how many identical records came before it in the same
  input, so re-importing a file, or a longer version of it, stores each record
  once, while deliberate repeats inside one file are kept.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..errors import InputFormatError, UsageError
from ..messages import Message, canonical_json, parse_timestamp
from .agents import (
    Read,
    is_claude_code_record,
    is_openclaw_record,
    link_subagents,
    read_claude_code,
    read_openclaw,
    to_claude_code,
    to_openclaw,
)
from .api import (
    FORMAT_HINT,
    NATIVE_MARK,
    Fail,
    read_anthropic,
    read_native,
    read_openai,
    to_anthropic,
    to_native,
    to_openai,
)
from .jsondoc import Document, failer, read_document, read_lines
from .resume import ParseState

FORMATS = ("native", "openai", "anthropic", "claude-code", "openclaw")
#: ``claude-code`` and ``openclaw`` export gives back the session lines of messages read from such a file.
EXPORT_FORMATS = ("native", "openai", "anthropic", "claude-code", "openclaw")

__all__ = [
    "EXPORT_FORMATS", "FORMATS", "Document", "Incoming", "ParseState", "detect_format", "parse", "read_document",
    "read_lines", "record_keys", "to_records",
]


@dataclass(frozen=True)
class Incoming:
    """A message on its way into the vault, with what the log needs to place it."""

    message: Message
    line: int | None = None
    key: str | None = None
    at: datetime | None = None
    lane: str | None = None
    thread: dict[str, Any] | None = None


# -- detection ----------------------------------------------------------------------

_OPENAI_PARTS = frozenset({"image_url", "input_audio", "file", "refusal"})
_ANTHROPIC_BLOCKS = frozenset({"tool_use", "redacted_thinking", "document", "server_tool_use", "search_result"})


def detect_format(records: list[tuple[int, Any]], *, source: str) -> str:
    """Guess the format of ``records`` (for ``--format auto``); the first decisive record wins.

    * ``native``: a record marked ``"_vaultlcm": "native"`` (native export), or
      blocks ``tool_call``, ``tool_result`` with ``call_id``, ``image`` with
      ``data``/``url``;
    * ``claude-code``: a string ``type`` and one of ``uuid``, ``parentUuid``,
      ``sessionId``, ``leafUuid`` (or ``type`` ``file-history-snapshot``);
    * ``openclaw``: no ``role``, and ``type`` ``session``, or ``type`` ``message``
      with a nested ``message`` object;
    * ``openai``: ``tool_calls``, ``tool_call_id``, ``function_call``, ``content:
      null``, role ``developer``/``function``, or parts such as ``image_url``;
    * ``anthropic``: an API response (``type: message`` with ``model`` or
      ``stop_reason``), blocks ``tool_use``/``redacted_thinking``/``document``,
      ``tool_result`` with ``tool_use_id`` or ``image`` with ``source``.

    Plain ``role`` + text records read the same in every format: then ``native`` if
    some record has ``id`` or ``timestamp``, else ``openai``. Empty input is ``native``.
    """
    weak_native = False
    for line, rec in records:
        if not isinstance(rec, dict):
            raise InputFormatError(f"expected a JSON object, got {type(rec).__name__}; {FORMAT_HINT}",
                                   source=source, line=line)
        if rec.get(NATIVE_MARK) == "native":
            return "native"
        if is_claude_code_record(rec):
            return "claude-code"
        if is_openclaw_record(rec):
            return "openclaw"
        if not isinstance(rec.get("role"), str):
            raise InputFormatError(f"cannot tell the format: expected an object with 'role'; {FORMAT_HINT}",
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


def _api_reader(read: Callable[[Any, Fail], Message]) -> Callable[[Any, Fail], Read]:
    return lambda rec, fail: Read(read(rec, fail))


_READERS: dict[str, Callable[[Any, Fail], Read]] = {
    "native": _api_reader(read_native), "openai": _api_reader(read_openai),
    "anthropic": _api_reader(read_anthropic), "claude-code": read_claude_code, "openclaw": read_openclaw,
}
_IS_KIND = {"claude-code": is_claude_code_record, "openclaw": is_openclaw_record}


def parse(
    fmt: str,
    records: list[tuple[int, Any]],
    *,
    source: str,
    keep_bad_timestamps: bool = False,
    document: Document | None = None,
    resume: ParseState | None = None,
) -> list[Incoming]:
    """Turn ``(line, record)`` pairs in format ``fmt`` into messages (see the module docstring).

    ``document`` (from :func:`read_document`) lets a single-object file keep its
    other fields: they become a leading non-chat record. ``resume`` (see
    :mod:`.resume`) parses ``records`` as the continuation of the records it was
    updated with before (keys, times and subagent links as for the whole), and is
    updated with them.
    """
    reader = _READERS.get(fmt)
    if reader is None:
        raise UsageError(f"unknown transcript format {fmt!r}; choose one of {', '.join(FORMATS)}")
    check = fmt in _IS_KIND and bool(records) and not (resume is not None and resume.has_kind)
    if check and not any(_IS_KIND[fmt](rec) for _, rec in records):
        line = records[0][0]
        raise InputFormatError(
            f"no {fmt} records found: the lines do not look like a {fmt} session file; "
            "use --format auto, or the format the file is really in", source=source, line=line)
    if document is not None and document.wrapped == "trajectory":
        records = _trajectory_records(records)
    reads: list[tuple[int, Read]] = [(line, reader(rec, failer(source, line))) for line, rec in records]
    if fmt == "claude-code":
        link_subagents([read for _, read in reads], resume)
    if document is not None and document.wrapper:
        head = Message(role="document", extra=document.wrapper,
                       hints={"format": "native", "line": True, "wrapped": document.wrapped})
        reads.insert(0, (reads[0][0] if reads else 1, Read(head, "line")))
    out: list[Incoming] = []
    values = [rec for _, rec in records]
    if len(reads) > len(values):  # the leading wrapper record of a single-object file
        values.insert(0, {"document": document.wrapper if document else {}})
    keys = record_keys([(line, value) for (line, _), value in zip(reads, values)], resume)
    for (line, read), key, at in zip(reads, keys, _times(reads, source, keep_bad_timestamps, resume)):
        out.append(Incoming(read.message, line, key, at, read.lane, read.thread))
    if resume is not None:
        resume.records += len(records)
        resume.has_kind = resume.has_kind or bool(records)  # the check above passed
    return out


def record_keys(records: list[tuple[int, Any]], resume: ParseState | None = None) -> list[str]:
    """Import keys of records: a hash of each record plus how many identical ones came before it
    (in ``resume``'s records too, when given; it counts these)."""
    keys: list[str] = []
    if resume is not None:
        for _line, value in records:
            digest = hashlib.sha256(canonical_json(value).encode("utf-8")).digest()[:12]
            keys.append(f"{digest.hex()}.{resume.bump(digest)}")
        return keys
    seen: dict[str, int] = {}
    for _line, value in records:
        hexdigest = hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()[:24]
        n = seen.get(hexdigest, 0)
        seen[hexdigest] = n + 1
        keys.append(f"{hexdigest}.{n}")
    return keys


def _times(reads: list[tuple[int, Read]], source: str, keep_bad: bool,
           resume: ParseState | None = None) -> list[datetime | None]:
    given: list[datetime | None] = []
    for line, read in reads:
        message = read.message
        if message.hints.get("timestamp_unreadable"):
            if not keep_bad:
                bad = message.extra.get("timestamp")
                raise InputFormatError(
                    f"timestamp {bad!r} cannot be read (write ISO-8601 such as 2026-11-29T10:00:00Z); fix the "
                    "record, or pass --keep-bad-timestamps to keep it as data and place the record by its neighbours",
                    source=source, line=line)
        given.append(parse_timestamp(message.timestamp, source=source, line=line) if message.timestamp else None)
    out: list[datetime | None] = []
    last: datetime | None = resume.last if resume is not None else None
    for at in given:
        last = at or last
        out.append(last)
    if resume is not None:
        resume.last = last
    first = next((at for at in given if at is not None), None)
    for i, at in enumerate(out):
        if at is not None:
            break
        out[i] = first
    for (_, read), own, at in zip(reads, given, out):
        if own is None and at is not None:
            read.message.hints["timestamp_inherited"] = True
    return out


def _trajectory_records(records: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
    """SWE-agent trajectory steps as chat records: the step's reasoning and action, then what it observed."""
    out: list[tuple[int, Any]] = []
    for n, (line, step) in enumerate(records):
        if not isinstance(step, dict):
            out.append((line, step))
            continue
        call_id = f"step-{n + 1}"
        said = step.get("response") if isinstance(step.get("response"), str) else step.get("thought")
        assistant: dict[str, Any] = {"role": "assistant", "content": []}
        if isinstance(said, str) and said:
            assistant["content"].append({"type": "text", "text": said})
        if isinstance(step.get("action"), str):
            assistant["content"].append({"type": "tool_call", "id": call_id, "name": "action",
                                         "arguments": {"command": step["action"]}})
        assistant["step"] = {k: v for k, v in step.items() if k not in ("observation",)}
        out.append((line, assistant))
        if "observation" in step:
            observed = step["observation"]
            out.append((line, {"role": "tool", "content": [
                {"type": "tool_result", "call_id": call_id,
                 "content": observed if isinstance(observed, str) else canonical_json(observed)}]}))
    return out


# -- writing ------------------------------------------------------------------------


def to_records(fmt: str, messages: list[Message]) -> list[dict[str, Any]]:
    """Records of ``messages`` in ``fmt`` (``native``, ``openai`` or ``anthropic``).

    Messages that came from ``fmt`` come back exactly as they were read; others are
    mapped best-effort (see :mod:`.api`), so the number of records may differ.
    """
    if fmt == "native":
        out = []
        for m in messages:
            rec = to_native(m)
            if "native_mark" in m.hints:
                rec[NATIVE_MARK] = m.hints["native_mark"]
            elif m.hints.get("format", "native") != "native" and _needs_mark(rec):
                # a converted record that --format auto would take for its original format
                rec[NATIVE_MARK] = "native"
            out.append(rec)
        return out
    if fmt == "openai":
        return [rec for m in messages if not m.is_line for rec in to_openai(m)]
    if fmt == "anthropic":
        return to_anthropic([m for m in messages if not m.is_line])
    if fmt in ("claude-code", "openclaw"):
        write = to_claude_code if fmt == "claude-code" else to_openclaw
        return [write(m) for m in messages if m.hints.get("format") == fmt]
    raise UsageError(f"cannot export to {fmt!r}; choose one of {', '.join(EXPORT_FORMATS)}")


def _needs_mark(record: dict[str, Any]) -> bool:
    """Whether ``--format auto`` would read this native record as something else."""
    try:
        return detect_format([(1, record)], source="") not in ("native", "openai") or (
            _decisive(record) not in (None, "native"))
    except InputFormatError:
        return True
