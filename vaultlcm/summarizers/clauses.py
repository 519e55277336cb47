"""Readable phrases: whole clauses of what the sources say, in their words, and facts with their context.

A condensed note that copied its children's lines would only repeat them, and
one that dropped words from inside them (headline style: "run whole suite",
"for record") would not read. These keep words in the order and form the
source has and choose where to stop instead: :func:`clause` keeps the leading
clauses of a sentence and ends before a conjunction or a preposition when the
first clause is too long; :func:`fact_window` keeps a fact (a date, a number,
a person's role) with the few words that say what it is about.
"""

from __future__ import annotations

import re

from .facts import CLAUSE_RE, split_sentences
from .phrases import _GLUE_WORDS, first_words, without_interjections

_I = re.IGNORECASE

#: Openers that frame a sentence without saying anything ("Heads up:", "Note that", "By the way,").
_FRAMING = re.compile(
    r"^(?:(?:note|remember|keep in mind) that\s+|(?:heads up|fyi|update|note|reminder|btw|ps|for the record|"
    r"for record|by the way|also|and|but|so|then|quick question|question)\b[,:;!.—–-]*\s+)+",
    _I,
)


def bare(text: str) -> str:
    """``text`` without the interjections and framing it opens with ("Also, I'm writing" → "I'm writing")."""
    stripped = _FRAMING.sub("", without_interjections(text.strip()))
    return stripped if any(ch.isalnum() for ch in stripped) else text


def clause(text: str, words: int) -> str:
    """A readable phrase of at most about ``words`` words: whole clauses of ``text``, articles kept.

    The leading clauses are kept while they fit; a first clause longer than
    that ends before a conjunction or a preposition ("… late last night |
    with comments"), else at a word boundary (never inside "July 19") marked "…".
    Unlike headline style, nothing is dropped from inside what is kept, so
    the phrase reads as the source said it.
    """
    text = _CODE_PATH.sub(_last_part, " ".join(text.split()))
    sentences = split_sentences(text)
    if len(sentences) > 1 and len(sentences[0].split()) >= 4:
        text = sentences[0]  # the first thing a line says is what it is about
    stripped = _FRAMING.sub("", without_interjections(text))
    if not any(ch.isalnum() for ch in stripped):
        stripped = text  # "And," is all it says: say that
    text = stripped[:1].upper() + stripped[1:] if stripped and text[:1].isupper() else stripped or text
    if len(text.split()) <= words + 2:
        return text.rstrip(",;:")
    kept: list[str] = []
    count = 0
    for part in (p for p in CLAUSE_RE.split(text) if p):
        n = len(part.split())
        if kept and count + n > words and count >= 4:  # "From the sample:" alone says nothing
            break
        kept.append(part)
        count += n
        if count >= words:
            break
    if count > words + 2:
        return _natural_cut(" ".join(kept), words)
    # Whole clauses read whole: the link at the end of the line leads to the rest.
    out = _balanced(" ".join(kept).rstrip(",;:—–- "))
    return out if any(ch.isalnum() for ch in out) else _natural_cut(text, words)


def _balanced(text: str) -> str:
    """``text`` without an aside it opens and does not close ("the prototype (recorded as a")."""
    if text.count("(") > text.count(")"):
        head = text[: text.rfind("(")].rstrip(" ,;:—–-")
        if any(ch.isalnum() for ch in head):
            return head
    return text


#: Words a phrase can end before and still read whole ("… late last night | with comments and …").
_CUT_BEFORE = frozenset("and but so because then which where while after before when if or with on in at for from "
                        "over under into since until than that who to".split())


def _natural_cut(text: str, words: int) -> str:
    """The first ``words`` words of ``text`` or fewer, ending before a conjunction or a preposition.

    Where no such place is (a list of names, a path), the cut is marked "…".
    """
    parts = text.split()
    for i in range(min(words, len(parts) - 1), 3, -1):
        if parts[i].lower() in _CUT_BEFORE and parts[i - 1][-1:] not in "(`\"'":
            return _balanced(" ".join(parts[:i]).rstrip(",;:—–-"))
    return first_words(text, words)


#: A path or a test id in code quotes: `tests/billing/test_invoice.py::test_due_date` says `test_due_date`.
_CODE_PATH = re.compile(r"`[^`\s]*(?:/|::)([^`\s/:]+)`")


def _last_part(m: re.Match[str]) -> str:
    return f"`{m.group(1)}`"


def fact_window(text: str, phrase: str, words: int) -> str:
    """About ``words`` words of ``text`` around ``phrase``, from the start of its sentence or clause.

    ``Note that the billing migration is scheduled for October 4, so plan
    around it`` with ``October 4`` gives ``The billing migration is scheduled
    for October 4``: the fact with what it is about, not the fact alone.
    """
    text = clause(text, 10_000)  # framing ("Heads up:") and interjections dropped, nothing else
    tokens = text.split()
    at = text.lower().find(phrase.lower())
    if at < 0 or not tokens:
        return phrase
    before = text[:at]
    first = len(before.split()) - (1 if before and not before[-1].isspace() else 0)  # "(LEDG-488)" is one word
    first = max(0, min(first, len(tokens) - 1))
    last = min(len(tokens), first + max(1, len(phrase.split())))
    if last <= words:
        start = 0
    else:
        # The clause the phrase is in, when that is close enough; else the words just before it.
        bounds = [i for i in range(1, first) if tokens[i - 1][-1:] in ",;:" or tokens[i][:1] in "(—–"]
        start = next((b for b in reversed(bounds) if last - b <= words), max(0, last - words))
        start = min(start, first)  # a fact longer than the window is kept whole
        if 0 < first - start <= 2:
            start = first  # "repo Oscar always wants": a stub of what came before reads worse than nothing
    end = min(len(tokens), max(last, start + words))
    # "costs us ~2 ms and one Redis": a clause that ends within a few words is worth finishing.
    end = next((j for j in range(end, min(len(tokens), end + 3) + 1)
                if j == len(tokens) or tokens[j - 1][-1:] in ",;:.!?"), end)
    while end > last and tokens[end - 1].lower().strip(",;:.") in _DANGLING:
        end -= 1  # "… from Tom this" reads cut off; "… from Tom" does not
    while start < first and _FRAMING.match(tokens[start] + " "):
        start += 1  # "and the limit …": the window starts with what it is about
    out = " ".join(tokens[start:end]).strip(" ,;:")
    if out.count("(") != out.count(")"):
        out = out.replace("(", "").replace(")", "")
    elif out.startswith("(") and out.endswith(")") and out.count("(") == 1:
        out = out[1:-1]  # an aside on its own is a statement
    return out.rstrip(".,;:") if end < len(tokens) else out


_DANGLING = _GLUE_WORDS | {"this", "that", "these", "those", "so", "but", "which", "who", "never", "not", "no",
                           "instead", "rather"}
