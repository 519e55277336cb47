"""The parts of a log entry: how one readable string is written as callout lines and read back.

A *part* is one string (or JSON value) lifted out of a message into the
callout, described in the entry's metadata as ``[path, kind, header_lines,
body_lines]`` plus an optional options object. This module owns the kinds:

========  ==================================================================
``md``    the text's lines as they are
``crlf``  text whose every line break is CRLF: the lines, joined back with CRLF
``code``  the lines inside a fence (tool output; text with a line Obsidian would
          read as a block id)
``esc``   one JSON string literal inside a fence (control characters, lone CR,
          mixed line breaks, U+2028 ...)
``quote`` the lines as a nested, folded callout (thinking)
``h``     one line shown as a heading (``#### `` + the text: a session title)
``json``  a JSON value, pretty-printed in a fence
``diff``  the two strings of an edit (``old``/``new``) as one ``diff`` fence
``file``  an externalized payload: one embed or link line
``hdr``   display only: nothing to read back
========  ==================================================================

Options: ``f``/``e`` name a payload file and its encoding; ``d``/``k`` give a
diff's old-line count and the two keys it fills; ``ansi`` lists terminal escape
sequences (and the carriage returns of text that mixes CR, LF and CRLF) removed
from the visible text, as ``[offset, sequence]`` pairs in the text without them,
so Obsidian shows clean output and the exact string still comes back.

Every decision here is made from the string alone, so the same message always
renders to the same bytes.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any, Protocol

#: Characters a callout line cannot hold as they are (they break lines or are invisible controls).
UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x85\u2028\u2029]")
#: A line Obsidian would take for a block id (``text ^abc`` at the end of a line).
BLOCK_ID_LIKE = re.compile(r"(^|\s)\^[A-Za-z0-9-]+\s*$", re.MULTILINE)
BACKTICKS = re.compile(r"`+")
BASE64ISH = re.compile(r"^[A-Za-z0-9+/=\r\n]+$")
DISPLAY_UNSAFE = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029`]")
# ECMA-48 escape sequences as terminals emit them: CSI (colours, cursor moves), OSC
# (titles, hyperlinks) ended by BEL or ST, and the two-character escapes.
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
ANSI_OR_CR = re.compile(ANSI.pattern + r"|\r")
MIN_BASE64_CHARS = 4096
#: Pairs of argument keys that hold the before and after text of an edit, as the
#: common editing tools name them (Claude Code's Edit, str_replace editors, pi's edit).
EDIT_KEYS = (("old_string", "new_string"), ("old_str", "new_str"), ("oldText", "newText"), ("old_text", "new_text"))


class PayloadStore(Protocol):
    """Where externalized payloads go (``files/`` of the conversation)."""

    def put(self, data: bytes, ext: str) -> str: ...
    def get(self, name: str) -> bytes: ...


def json_text(value: Any, *, indent: int | None = 2) -> str:
    """JSON for the log: UTF-8 kept readable, but never a character that breaks a line or a comment."""
    text = json.dumps(value, ensure_ascii=False, indent=indent, separators=None if indent else (",", ":"))
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").replace("\x85", "\\u0085")


def display(text: Any, limit: int = 120) -> str:
    """One line of display text (headers): no controls, no backticks, at most ``limit`` characters."""
    s = DISPLAY_UNSAFE.sub(" ", str(text))
    return s if len(s) <= limit else s[: limit - 1] + "…"


def fence(lines: list[str]) -> str:
    """Backticks one longer than the longest run in ``lines``, so content can never close the fence."""
    longest = max((len(m.group()) for line in lines for m in BACKTICKS.finditer(line)), default=0)
    return "`" * max(3, longest + 1)


def strip_ansi(text: str) -> tuple[str, list[list[Any]]]:
    """``text`` without terminal escape sequences, and where to put them back.

    Terminal output mixing CR, LF and CRLF (progress bars, pasted Windows text) has
    its carriage returns taken out the same way, so it still reads as lines; text
    whose every line break is CRLF keeps them (the compact ``crlf`` kind).
    """
    mixed_cr = "\r" in text and not _all_crlf(text)
    if "\x1b" not in text and not mixed_cr:
        return text, []
    pattern = ANSI_OR_CR if mixed_cr else ANSI
    out: list[str] = []
    codes: list[list[Any]] = []
    pos = 0
    length = 0
    for m in pattern.finditer(text):
        out.append(text[pos : m.start()])
        length += m.start() - pos
        codes.append([length, m.group()])
        pos = m.end()
    out.append(text[pos:])
    return "".join(out), codes


def restore_ansi(text: str, codes: list[list[Any]]) -> str:
    """Inverse of :func:`strip_ansi`."""
    if not codes:
        return text
    out: list[str] = []
    pos = 0
    for offset, seq in codes:
        out.append(text[pos:offset])
        out.append(seq)
        pos = offset
    out.append(text[pos:])
    return "".join(out)


def _all_crlf(text: str) -> bool:
    """Every line break is CRLF: no bare LF, no lone CR."""
    return "\r\n" in text and text.count("\r") == text.count("\r\n") == text.count("\n")


def text_kind(text: str, *, fenced: bool) -> str:
    """How a string that stays in the log is written: ``md``, ``crlf``, ``code`` or ``esc``."""
    if UNSAFE.search(text):
        if _all_crlf(text) and not UNSAFE.search(text.replace("\r\n", "\n")) and not BLOCK_ID_LIKE.search(text):
            return "crlf"
        return "esc"
    if fenced or BLOCK_ID_LIKE.search(text):
        return "code"
    return "md"


def text_body(text: str, kind: str) -> list[str]:
    """The body lines of a text part of ``kind`` (see :func:`text_kind`)."""
    if kind == "md":
        return text.split("\n")
    if kind == "crlf":
        return text.split("\r\n")
    if kind == "code":
        lines = text.split("\n")
        f = fence(lines)
        return [f + "text", *lines, f]
    literal = json_text(text, indent=None)
    f = fence([literal])
    return [f + "json", literal, f]


def is_base64_payload(text: str) -> bool:
    return len(text) >= MIN_BASE64_CHARS and bool(BASE64ISH.match(text))


def edit_pairs(arguments: Any) -> list[tuple[list[Any], str, str]]:
    """Where an edit tool call's before/after strings sit: ``(path inside arguments, old key, new key)``.

    Only strings that can be written as plain lines qualify; anything else is left
    to the JSON rendering, so the choice never loses a character.
    """

    def pair_of(obj: Any) -> tuple[str, str] | None:
        if not isinstance(obj, dict):
            return None
        for old, new in EDIT_KEYS:
            a, b = obj.get(old), obj.get(new)
            if isinstance(a, str) and isinstance(b, str) and not UNSAFE.search(a + b) and "\x1b" not in a + b:
                return old, new
        return None

    found: list[tuple[list[Any], str, str]] = []
    top = pair_of(arguments)
    if top:
        found.append(([], *top))
    edits = arguments.get("edits") if isinstance(arguments, dict) else None
    if isinstance(edits, list):
        for i, edit in enumerate(edits):
            pair = pair_of(edit)
            if pair:
                found.append((["edits", i], *pair))
    return found


def diff_body(old: str, new: str) -> list[str]:
    lines = ["-" + line for line in old.split("\n")] + ["+" + line for line in new.split("\n")]
    f = fence(lines)
    return [f + "diff", *lines, f]


def strip_quote(line: str, where: str) -> str:
    """A callout line without its ``>`` and one following space."""
    if not line.startswith(">"):
        raise ValueError(f"expected a callout line starting with '>' ({where})")
    rest = line[1:]
    return rest[1:] if rest.startswith(" ") else rest


def decode_part(kind: str, body: list[str], opts: dict[str, Any], store: PayloadStore) -> Any:
    """The value a part's body lines stand for (a diff returns its ``(old, new)`` pair)."""
    if kind == "md":
        value: Any = "\n".join(body)
    elif kind == "crlf":
        value = "\r\n".join(body)
    elif kind == "code":
        value = "\n".join(body[1:-1])
    elif kind == "h":
        value = body[0][5:]
    elif kind == "esc":
        value = json.loads(body[1])
    elif kind == "quote":
        value = "\n".join(strip_quote(line, "thinking") for line in body)
    elif kind == "json":
        return json.loads("\n".join(body[1:-1]))
    elif kind == "diff":
        d = int(opts["d"])
        inner = body[1:-1]
        return "\n".join(x[1:] for x in inner[:d]), "\n".join(x[1:] for x in inner[d:])
    elif kind == "file":
        data = store.get(opts["f"])
        enc = opts.get("e")
        if enc == "base64":
            return base64.b64encode(data).decode("ascii")
        if enc == "json":
            return json.loads(data.decode("utf-8"))
        value = data.decode("utf-8")
    else:
        raise ValueError(f"unknown part kind {kind!r}")
    return restore_ansi(value, opts.get("ansi", []))
