"""What a person changed in a summary, as lines every summary above carries.

A person corrects a summary by editing its note. The note is theirs from then
on; the nodes above it are re-condensed with a line per change,

    Correction (by a person): the config lives in conf/real.toml [[sum_…|↗]]

which every summarizer keeps verbatim at every depth (the digest by
construction; compaction checks the others' output and appends what they
dropped). The changes are found by comparing the note with the body the
engine wrote (kept by the catalog when it first sees the edit, or written
again by the deterministic digest). When neither is available the lines
without a source link are taken as the person's, since every line the digest
writes ends with one.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from .body import CORRECTION_PREFIX, correction_line, is_correction, parse_body

#: A correction longer than this many words is carried shortened (it is kept whole in the note itself).
MAX_CORRECTION_WORDS = 80
EDITED_ONLY = "the summary was edited by a person; read the note"


def _content_lines(body: str) -> list[str]:
    """Lines of a body that say something (no headings, no correction lines carried from below)."""
    parsed = parse_body(body)
    return [ln.text for ln in parsed.lines]


def _clip(text: str) -> str:
    words = text.split()
    if len(words) <= MAX_CORRECTION_WORDS:
        return " ".join(words)
    return " ".join(words[:MAX_CORRECTION_WORDS]) + " …"


def diff_corrections(original: str | None, edited: str) -> list[str]:
    """The changes from ``original`` (the body as generated) to ``edited``, one text per change.

    Added lines are carried as they are; a changed line as ``new (replacing:
    old)``; a removed line as ``removed: old``. Without ``original``, lines
    without a source link are taken as the person's (see the module docstring).
    """
    new_lines = _content_lines(edited)
    if original is None:
        parsed = parse_body(edited)
        mine = [ln.text for ln in parsed.lines if ln.link is None]
        return [_clip(t) for t in mine] or ([EDITED_ONLY] if new_lines else [])
    old_lines = _content_lines(original)
    out: list[str] = []
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        olds, news = old_lines[i1:i2], new_lines[j1:j2]
        if op == "replace" and len(olds) == len(news):
            for old, new in zip(olds, news):
                if difflib.SequenceMatcher(None, old, new, autojunk=False).ratio() >= 0.4:
                    out.append(_clip(f"{new} (replacing: {_head(old)})"))  # the same line, changed
                else:
                    out.extend([_clip(f"removed: {old}"), _clip(new)])
            continue
        out.extend(_clip(f"removed: {old}") for old in olds)
        out.extend(_clip(new) for new in news)
    return out


def _head(text: str, words: int = 16) -> str:
    parts = text.split()
    return " ".join(parts[:words]) + (" …" if len(parts) > words else "")


def required_lines(texts: Iterable[str], corrections: Iterable[tuple[str, str | None]]) -> list[str]:
    """Every correction line a summary of these sources must keep, in order, once each.

    ``texts`` are the sources' bodies (their correction lines come from
    below); ``corrections`` are ``(text, link)`` pairs found in the sources
    themselves.
    """
    out: list[str] = []
    for text in texts:
        for line in parse_body(text).corrections:
            if line not in out:
                out.append(line)
    for text, target in corrections:
        line = correction_line(text, target)
        if line not in out:
            out.append(line)
    return out


def enforce(summary: str, required: list[str]) -> str:
    """``summary`` holding every ``required`` correction line, and no other.

    A line that looks like a correction but is not one of the sources' (a model
    echoing quoted content, say) is demoted to a quoted bullet, so only a
    person can make a correction.
    """
    lines = summary.split("\n")
    kept: list[str] = []
    for line in lines:
        stripped = line.strip()
        if is_correction(stripped) and stripped not in required:
            kept.append("- (quoted) " + stripped[len(CORRECTION_PREFIX):])
        else:
            kept.append(line)
    present = {ln.strip() for ln in kept}
    missing = [ln for ln in required if ln not in present]
    return "\n".join(kept + missing).strip("\n")
