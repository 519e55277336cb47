"""Readable heads of lines: the leading clause of what a source says, in its own words, ended where a phrase ends.

A timeline entry opens with what that stretch of work was about, and a
decision or an open item says what it is before the facts it holds. Headline
style (articles dropped, "…" where words were cut) compresses but does not
read; these keep the words of the source in their order and form and choose
where to stop instead: at the end of a sentence, of a clause, or before a
conjunction or a preposition ("CI on main went red twice | over the
weekend"). Nothing is marked "…": the link at the end of the line leads to
the rest.
"""

from __future__ import annotations

import re

from .facts import CLAUSE_RE, split_sentences
from .phrases import key_phrases, value_change, without_interjections

_I = re.IGNORECASE

#: Openers that frame a sentence without saying anything ("Heads up:", "Note that", "By the way,").
_FRAMING = re.compile(
    r"^(?:(?:note|remember|keep in mind) that\s+|(?:heads up|fyi|update|note|reminder|btw|ps|for the record|"
    r"by the way|also|and|but|so|then|quick question|question|meanwhile)\b[,:;!.—–-]*\s+)+",
    _I,
)
#: A path or a test id in code quotes: `tests/billing/test_invoice.py::test_due_date` says `test_due_date`.
_CODE_PATH = re.compile(r"`[^`\s]*(?:/|::)([^`\s/:]+)`")
#: Words a phrase can end before and still read whole ("… went red twice | over the weekend").
_CUT_BEFORE = frozenset("and but so because then which where while after before when if or with on in at for from "
                        "over under into since until than that who to by via about".split())
#: Words a phrase does not end on ("… from Tom this" reads cut off; "… from Tom" does not).
_DANGLING = _CUT_BEFORE | frozenset("a an the of is are was were be as rather instead this these those my our your "
                                    "their its not no never very".split())


def _last_part(m: re.Match[str]) -> str:
    return f"`{m.group(1)}`"


def bare(text: str) -> str:
    """``text`` on one line, without the interjections and framing it opens with, code paths shortened."""
    flat = _CODE_PATH.sub(_last_part, " ".join(text.split()))
    stripped = _FRAMING.sub("", without_interjections(flat))
    if not any(ch.isalnum() for ch in stripped):
        return flat  # "And," is all it says: say that
    first = stripped.split(" ", 1)[0]
    if flat[:1].isupper() and first.replace("'", "").replace("’", "").isalpha():  # "tests/x.py started failing" stays as it is written
        return stripped[:1].upper() + stripped[1:]
    return stripped


def lead(text: str, words: int) -> str:
    """At most about ``words`` words of ``text``: its first sentence or clauses, ended where a phrase ends.

    The first sentence that says something (four words or more) stands for
    the line; when it is longer than ``words``, whole leading clauses are
    kept, else it ends before a conjunction or a preposition, else after a
    word that is not an article or a preposition. Never marked "…", never
    an aside left open, never empty for text with a letter or a digit.
    """
    text = _first_run(bare(text))
    sentences = split_sentences(text)
    if len(sentences) > 1:
        # A "sentence" of punctuation alone ("::::::?") says nothing: the first with a word stands in.
        said = [s for s in sentences if any(ch.isalnum() for ch in s)] or sentences
        text = next((s for s in said if len(s.split()) >= 4), said[0]).strip()
    tokens = text.split()
    if len(tokens) <= words + 2:
        return _closed(text.rstrip(",;:—–- ")) or text
    # The leading clauses are kept as the text writes them, up to where the last one ends: joined
    # again, a hyphen the split took between two of them ("0 - 0 0") would be lost.
    end = count = 0
    cuts = list(CLAUSE_RE.finditer(text))
    for start, stop in zip([0, *(m.end() for m in cuts)], [*(m.start() for m in cuts), len(text)]):
        n = len(text[start:stop].split())
        if not n:
            continue
        if end and count + n > words and count >= 4:  # "From the sample:" alone says nothing
            break
        end = stop
        count += n
    if count <= words + 2:
        out = _closed(text[:end].rstrip(",;:—–- "))
        if any(ch.isalnum() for ch in out):
            return out
    return _natural_cut(tokens, words)


def _first_run(text: str) -> str:
    """The words before a "…" that joins kept parts of a source (a leaf's cut sentences), when they say something."""
    head = text.split(" … ", 1)[0].rstrip(" …")
    if len(head.split()) >= 3 and any(ch.isalnum() for ch in head):  # three marks alone say nothing
        return head
    return text.replace(" … ", " ").replace("…", "").strip() or text


def _natural_cut(tokens: list[str], words: int) -> str:
    for i in range(min(words, len(tokens) - 1), 3, -1):
        if tokens[i].lower() in _CUT_BEFORE and tokens[i - 1][-1:] not in "(`\"'":
            end = i
            while end > 3 and tokens[end - 1].lower().strip(",;:.") in _DANGLING:
                end -= 1  # "a partial index rather | than": not "… rather"
            out = _closed(" ".join(tokens[:end]).rstrip(",;:—–- "))
            if any(ch.isalnum() for ch in out):
                return out
    end = min(words, len(tokens))
    while end > 3 and tokens[end - 1].lower().strip(",;:.") in _DANGLING:
        end -= 1
    out = _closed(" ".join(tokens[:end]).rstrip(",;:—–- "))
    if any(ch.isalnum() for ch in out):
        return out
    # Only punctuation within the first words (": 0 0"): up to the first word that says something.
    end = next((k + 1 for k, t in enumerate(tokens) if any(ch.isalnum() for ch in t)), end)
    return _closed(" ".join(tokens[:end])) or " ".join(tokens[:end])


def _closed(text: str) -> str:
    """``text`` without an aside or a code quote it opens and does not close."""
    while "(" in text.rsplit(")", 1)[-1]:
        head = text[: text.rfind("(")].rstrip(" ,;:—–-")
        if not any(ch.isalnum() for ch in head):
            text = text.replace("(", "")
            break
        text = head
    if text.count("`") % 2:
        text = text.replace("`", "")
    return text


def restate(text: str, words: int, extra: int = 3) -> str:
    """What a line says in a few words of its own, then the facts it holds that those words leave out.

    ``Follow-ups: per-key rate limiting with Retry-After (LEDG-497) and a
    dashboard for LEDG-499`` with 8 words gives ``Follow-ups: per-key rate
    limiting with Retry-After (LEDG-497) — LEDG-499``. A stated value change
    reads ``key: new (was old)``.
    """
    flat = bare(text)
    if len(flat.split()) <= words + 2 and " … " not in flat:
        return _closed(flat) or flat
    change = value_change(flat)
    if change is not None:
        rendered = change.render()
        more = [p for p, kind in key_phrases(flat) if kind != "change" and p.lower() not in rendered.lower()]
        return rendered + (" — " + ", ".join(more[:2]) if more else "")
    head = lead(flat, words)
    low = head.lower()
    more = [p for p, _ in key_phrases(flat) if not _mostly_in(p, low)][:extra]
    return head + (" — " + ", ".join(more) if more else "")


def _mostly_in(phrase: str, text: str) -> bool:
    """Whether most words of ``phrase`` already appear in ``text`` (lower case)."""
    words = phrase.lower().split()
    return sum(w in text for w in words) * 2 > len(words)
