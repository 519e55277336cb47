"""Ingest: from records (a transcript file, or an agent's messages) to stored messages.

:func:`incoming_from_document` turns a transcript's bytes into
:class:`~vaultlcm.formats.Incoming` messages (format detection, timestamps,
import keys); :func:`incoming_from_api` does the same for messages an agent
hands over in code. The message log stores them (:mod:`vaultlcm.msglog`) and
:class:`IngestReport` says what happened, for people (``12 new, 1,007 already
stored``) and for scripts (``ids`` in input order).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from . import formats
from .errors import InputFormatError, UsageError
from .formats import Incoming
from .messages import Message, check_json_value, message_from_native

if TYPE_CHECKING:
    from .secrets import Redactor


@dataclass
class IngestReport:
    """The outcome of one ingest call."""

    conversation: str
    format: str
    #: The vault id of every input record, in input order (new or already stored).
    ids: list[str] = field(default_factory=list)
    new: int = 0
    already_stored: int = 0
    #: ``(line, reason)`` of lines left out with ``skip_bad_lines``.
    skipped_lines: list[tuple[int, str]] = field(default_factory=list)
    #: Secrets replaced by ``[redacted: kind]`` in the messages this call stored, by kind.
    redacted: dict[str, int] = field(default_factory=dict)
    #: What the git auto-commit did (``git_auto_commit`` / ``--git-commit``), when asked for.
    commit: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "ids": self.ids,
            "conversation": self.conversation,
            "format": self.format,
            "new": self.new,
            "already_stored": self.already_stored,
            "skipped_lines": [{"line": line, "reason": reason} for line, reason in self.skipped_lines],
            "redacted": self.redacted,
            **({"commit": self.commit} if self.commit is not None else {}),
        }

    def describe(self) -> str:
        """One line for people: ``research: 12 new, 1,007 already stored (claude-code)``."""
        parts = [f"{self.new:,} new"]
        if self.already_stored:
            parts.append(f"{self.already_stored:,} already stored")
        if self.skipped_lines:
            lines = ", ".join(str(line) for line, _ in self.skipped_lines[:5])
            more = "…" if len(self.skipped_lines) > 5 else ""
            parts.append(f"{len(self.skipped_lines)} bad line(s) skipped ({lines}{more})")
        from .secrets import describe_counts

        if self.redacted:
            parts.append(describe_counts(self.redacted))
        return f"{self.conversation}: {', '.join(parts)} ({self.format})"


def incoming_from_document(
    data: bytes,
    *,
    source: str,
    format: str = "auto",
    skip_bad_lines: bool = False,
    keep_bad_timestamps: bool = False,
    resume: formats.ParseState | None = None,
) -> tuple[str, list[Incoming], list[tuple[int, str]]]:
    """Parse a transcript: ``(format, incoming messages, skipped lines)``.

    With ``resume`` (:class:`~vaultlcm.formats.ParseState`) holding records already,
    ``data`` is the JSON Lines appended to the document it was updated with, and may
    hold none; ``format`` must then be given.
    """
    if format != "auto" and format not in formats.FORMATS:
        raise UsageError(f"unknown format {format!r}; choose one of auto, {', '.join(formats.FORMATS)}")
    if resume is not None and resume.records:
        if format == "auto" or not resume.lines:
            raise UsageError("only a JSON Lines document of a known format can be continued")
        doc = formats.read_lines(data, source=source, skip_bad_lines=skip_bad_lines, first_line=resume.line + 1)
        incoming = formats.parse(format, doc.records, source=source, keep_bad_timestamps=keep_bad_timestamps,
                                 resume=resume)
        return format, incoming, doc.skipped
    doc = formats.read_document(data, source=source, skip_bad_lines=skip_bad_lines)
    if resume is not None:
        resume.lines = doc.lines
    if not doc.records:
        if doc.skipped:
            line, why = doc.skipped[0]
            raise InputFormatError(f"no readable records: every line was skipped (first: {why})", source=source, line=line)
        raise InputFormatError("no messages found (the input is empty)", source=source)
    fmt = formats.detect_format(doc.records, source=source) if format == "auto" else format
    incoming = formats.parse(fmt, doc.records, source=source, keep_bad_timestamps=keep_bad_timestamps, document=doc,
                             resume=resume)
    return fmt, incoming, doc.skipped


def incoming_from_api(
    messages: Iterable[Message | Mapping[str, Any]], conv: str, *, keyed: bool, format: str = "native"
) -> list[Incoming]:
    """Messages handed over in code as incoming messages.

    They are ``Message`` objects or records in ``format`` (native dicts by default;
    ``"anthropic"`` or ``"openai"`` for a provider's own message shapes, e.g. a
    model reply). ``keyed`` gives each one an import key (the same rule as files),
    so handing the same list over again stores nothing new.
    """
    if format != "native":
        if format not in formats.FORMATS:
            raise UsageError(f"unknown format {format!r}; choose one of {', '.join(formats.FORMATS)}")
        records = [(i + 1, m.to_native() if isinstance(m, Message) else dict(m)) for i, m in enumerate(messages)]
        parsed = formats.parse(format, records, source=f"messages for {conv!r}")
        return parsed if keyed else [Incoming(message=i.message, at=i.at, lane=i.lane, thread=i.thread) for i in parsed]
    prepared: list[Message] = []
    raw: list[tuple[int, Any]] = []
    for i, m in enumerate(messages):
        if isinstance(m, Message):
            message = m.model_copy(update={"id": None})
        else:
            try:
                message = message_from_native(dict(m))
            except InputFormatError as exc:
                raise InputFormatError(f"message {i + 1} of the batch for {conv!r}: {exc}") from None
        prepared.append(message)
        if keyed:  # the key hashes the record as given (the agent's every-turn call is not keyed)
            raw.append((i + 1, message.to_native()))
    keys = formats.record_keys(raw) if keyed else [None] * len(prepared)
    return [Incoming(message=m, key=k) for m, k in zip(prepared, keys)]


def unencodable(conv: str, incoming: Sequence[Incoming]) -> InputFormatError:
    """The error for a batch handed over in code that cannot be written as UTF-8, naming the message.

    Files are checked as they are read (:func:`~vaultlcm.messages.check_json_value`); messages handed
    over in code are not walked on the agent's every-turn path, so one holding a lone surrogate (half
    of a UTF-16 pair, as a producer that cut a string in the middle of an emoji leaves) is found when
    it is encoded, before any byte is written, and this says which one it was.
    """
    for i, inc in enumerate(incoming, 1):
        m = inc.message
        where = f"message {i} of the batch for {conv!r}" + (f" (line {inc.line})" if inc.line else "")
        try:
            for value in (m.role, m.content, m.extra, m.hints, m.timestamp, inc.thread):
                check_json_value(value, where=where, fail=InputFormatError)
        except InputFormatError as exc:
            return exc
    return InputFormatError(f"a message of the batch for {conv!r} holds text that cannot be written as UTF-8; "
                            "fix the producer or escape it")


def redact_incoming(incoming: list[Incoming], redactor: "Redactor", *, stored: Collection[str] = ()
                    ) -> tuple[list[Incoming], list[Counter[str]]]:
    """Every string of every message (and its thread links) with secrets replaced; counts per message.

    Import keys were computed from the records as given, so re-importing the same
    file still finds them: the key identifies the source record, not the stored text.
    Messages whose key is in ``stored`` are already in the vault (they will not be
    written again) and are passed through as they are.
    """
    out: list[Incoming] = []
    counts: list[Counter[str]] = []
    todo = [not (inc.key and inc.key in stored) for inc in incoming]
    among = redactor.batch_keywords(
        [inc.message.role, inc.message.content, inc.message.extra, inc.thread] for inc, do in zip(incoming, todo)
        if do)
    for inc, do in zip(incoming, todo):
        found: Counter[str] = Counter()
        if not do or among is not None and not among:
            out.append(inc)
            counts.append(found)
            continue
        m = inc.message
        role = redactor.redact_text(m.role, found, among)
        content = redactor.redact_value(m.content, found, among)
        extra = redactor.redact_value(m.extra, found, among)
        # hints repeat field names (key order): redacted alike, counted once (in extra)
        hints = redactor.redact_value(m.hints, None, among)
        thread = redactor.redact_value(inc.thread, found, among) if inc.thread else inc.thread
        if found or hints is not m.hints:
            message = m.model_copy(update={"role": role, "content": content, "extra": extra, "hints": hints})
            inc = replace(inc, message=message, thread=thread)
        out.append(inc)
        counts.append(found)
    return out, counts
