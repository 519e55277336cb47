"""Reading a transcript document: JSON Lines, one JSON array, or one JSON object holding the messages.

The bytes must be UTF-8 (a leading BOM is allowed). What comes back is a list of
``(line, value)`` pairs, each numbered by the line its value starts on, so
every later error can name the file and the line:

* a document that is one JSON **array** gives its elements;
* a document that is one JSON **object** holding a known list (``messages``,
  ``history`` or ``trajectory``: an API request, a mini-swe-agent or SWE-agent
  trajectory) gives that list's elements; the object's other fields are kept as
  ``wrapper``;
* anything else is **JSON Lines**, blank lines skipped.

Values JSON cannot carry back exactly (NaN, infinities, lone surrogates,
duplicate keys, nesting deeper than :data:`~vaultlcm.messages.MAX_JSON_DEPTH`)
are refused. With ``skip_bad_lines`` a JSON Lines line that cannot be read is
reported in ``skipped`` and left out instead (a torn last line from a crashed
writer, say).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputFormatError
from ..messages import check_json_value

Fail = Callable[[str], InputFormatError]
WRAPPED_LISTS = ("messages", "history", "trajectory")
_WS = re.compile(r"[ \t\r\n]*")


@dataclass
class Document:
    """The records of one transcript document."""

    records: list[tuple[int, Any]]
    #: ``(line, reason)`` of each line left out with ``skip_bad_lines``.
    skipped: list[tuple[int, str]] = field(default_factory=list)
    #: For a single-object document: which list held the records, and the other fields.
    wrapped: str | None = None
    wrapper: dict[str, Any] = field(default_factory=dict)
    #: Read line by line as JSON Lines (or one object on one line, which reads the same):
    #: the document can be continued with :func:`read_lines` when more lines are appended.
    lines: bool = False


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        keys = [k for k, _ in pairs]
        raise _DuplicateKey(next(k for i, k in enumerate(keys) if k in keys[:i]))
    return obj


_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates)


def failer(source: str, line: int) -> Fail:
    return lambda msg: InputFormatError(msg, source=source, line=line)


def _decode_error(exc: Exception, source: str, line: int, *, lines_hint: bool = True) -> InputFormatError:
    if isinstance(exc, _DuplicateKey):
        msg = f"key {exc.args[0]!r} appears twice in one object; readers would keep only one, so fix the producer"
    elif isinstance(exc, RecursionError):
        msg = "JSON is nested too deeply to read; flatten it before ingesting"
    else:
        msg = f"not valid JSON ({getattr(exc, 'msg', exc)})"
        if lines_hint:
            msg += ("; each line must hold one JSON value (JSON Lines), or the whole file must be one JSON "
                    "array or object. A torn last line can be left out with --skip-bad-lines")
    return InputFormatError(msg, source=source, line=line)


def read_document(data: bytes, *, source: str, skip_bad_lines: bool = False) -> Document:
    """Decode ``data`` (see the module docstring); raises :class:`InputFormatError` naming file and line."""
    body = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFormatError(f"byte 0x{body[exc.start]:02x} is not valid UTF-8; save the transcript as UTF-8",
                               source=source, line=body[: exc.start].count(b"\n") + 1) from None
    start = _WS.match(text).end()  # type: ignore[union-attr]
    doc: Document | None = None
    if text.startswith("[", start):
        records = _read_array(text, start, source)
        if records is not None:
            doc = Document(records)
    elif text.startswith("{", start):
        doc = _read_object(text, start, source)
    if doc is None:
        doc = _read_lines(text, source, skip_bad_lines)
    return _checked(doc, source, skip_bad_lines)


def read_lines(data: bytes, *, source: str, skip_bad_lines: bool = False, first_line: int = 1) -> Document:
    """Decode ``data`` as JSON Lines only: the lines appended to a document :func:`read_document` read as
    JSON Lines (``Document.lines``), read exactly as they would be as part of the whole.

    Line numbers count from ``first_line`` (the document's line ``data`` starts on); a byte-order
    mark is not skipped (in the middle of a document it is not one).
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFormatError(f"byte 0x{data[exc.start]:02x} is not valid UTF-8; save the transcript as UTF-8",
                               source=source, line=data[: exc.start].count(b"\n") + first_line) from None
    return _checked(_read_lines(text, source, skip_bad_lines, first_line), source, skip_bad_lines)


def _checked(doc: Document, source: str, skip_bad_lines: bool) -> Document:
    """``doc`` without the values JSON cannot carry back exactly (an error, or skipped with ``skip_bad_lines``)."""
    kept = []
    for line, value in doc.records:
        try:
            check_json_value(value, where="record", fail=failer(source, line))
        except InputFormatError as exc:
            if not skip_bad_lines or doc.wrapped is not None:
                raise
            doc.skipped.append((line, str(exc).split(": ", 2)[-1]))
            continue
        kept.append((line, value))
    doc.records = kept
    return doc


def _read_array(text: str, idx: int, source: str) -> list[tuple[int, Any]] | None:
    """Elements of the array starting at ``idx``, or None when the whole text is not that one array."""
    out, end = _array_elements(text, idx, source)
    if text[end:].strip(" \t\r\n"):
        return None  # JSON Lines whose first line is an array
    return out


def _array_elements(text: str, idx: int, source: str) -> tuple[list[tuple[int, Any]], int]:
    """``(line, element)`` of the array at ``idx`` and the offset after its ``]``."""
    out: list[tuple[int, Any]] = []
    idx += 1
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
    return out, idx + 1


def _read_object(text: str, idx: int, source: str) -> Document | None:
    """A document that is one JSON object: its message list, or None when it is one JSON Lines line."""
    try:
        obj, end = _DECODER.raw_decode(text, idx)
    except (ValueError, RecursionError) as exc:
        if "\n" not in text[idx:].strip(" \t\r\n"):
            return None  # one line: let the JSON Lines reader report it
        raise _decode_error(exc, source, text.count("\n", 0, getattr(exc, "pos", idx)) + 1, lines_hint=False) from None
    if text[end:].strip(" \t\r\n"):
        return None  # more values follow: JSON Lines
    wrapped = next((k for k in WRAPPED_LISTS if isinstance(obj.get(k), list)), None)
    if wrapped is None:
        if "role" in obj or "type" in obj:
            # one record (maybe pretty-printed; on one line it is what JSON Lines would read)
            return Document([(text.count("\n", 0, idx) + 1, obj)], lines="\n" not in text[idx:end])
        if "\n" in text[idx:end]:
            raise InputFormatError(
                "the file is one JSON object, not JSON Lines, and holds no 'messages', 'history' or 'trajectory' "
                f"list (keys: {', '.join(list(obj)[:8]) or 'none'}); give one message per line, or a JSON array",
                source=source, line=text.count("\n", 0, idx) + 1)
        return None
    records, _ = _array_elements(text, _list_start(text, idx, wrapped, source), source)
    return Document(records, wrapped=wrapped, wrapper={k: v for k, v in obj.items() if k != wrapped})


def _list_start(text: str, idx: int, key: str, source: str) -> int:
    """Offset of the ``[`` of member ``key`` of the object at ``idx`` (to number its elements' lines)."""
    idx = _WS.match(text, idx + 1).end()  # type: ignore[union-attr]
    while not text.startswith("}", idx):
        name, idx = _DECODER.raw_decode(text, idx)
        idx = _WS.match(text, idx).end()  # type: ignore[union-attr]
        idx = _WS.match(text, idx + 1).end()  # type: ignore[union-attr]  # past ':'
        if name == key:
            return idx
        _, idx = _DECODER.raw_decode(text, idx)
        idx = _WS.match(text, idx).end()  # type: ignore[union-attr]
        if text.startswith(",", idx):
            idx = _WS.match(text, idx + 1).end()  # type: ignore[union-attr]
    raise InputFormatError(f"member {key!r} not found", source=source)  # unreachable: the object was decoded


def _read_lines(text: str, source: str, skip_bad_lines: bool, first_line: int = 1) -> Document:
    doc = Document([], lines=True)
    # Only "\n" ends a line: U+2028 and friends may sit raw inside JSON strings.
    for number, raw in enumerate(text.split("\n"), start=first_line):
        if raw.strip(" \t\r\n"):
            try:
                doc.records.append((number, _DECODER.decode(raw)))
            except (ValueError, RecursionError) as exc:
                err = _decode_error(exc, source, number)
                if not skip_bad_lines:
                    raise err from None
                doc.skipped.append((number, str(err).split(": ", 1)[-1].split("; each line")[0]))
    return doc
