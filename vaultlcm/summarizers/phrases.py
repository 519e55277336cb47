"""Short forms of what the sources say: clipped sentences, headlines, key phrases, time spans.

A digest that copied its sources' sentences would not compress, and a
condensed note that copied its children's lines would only repeat them. These
functions re-word instead: a sentence cut at clause boundaries
(:func:`shorten`), the short spans worth carrying up the DAG by kind
(:func:`key_phrases`: changed values as ``key: new (was old)``, people and
roles, preferences, choices, dates, numbers with what they count,
identifiers), and ``Nov 2, 09:14–11:30`` for a time range.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import datetime

from ..tokens import truncate_to_tokens
from .facts import (CLAUSE_RE, DIGITS, MAX_UNIT_CHARS, ROLE_GATE, ROLE_RE, Gated, ascii_lower, dates_in, idents_in,
                    names_in, numbers_in, score)
from .linecount import count_piece

_I = re.IGNORECASE


# -- shortening ----------------------------------------------------------------------


def shorten(text: str, max_tokens: int) -> str:
    """``text`` within ``max_tokens``: whole clauses kept in order, the rest marked with "…".

    Clauses that name things (dates, numbers, identifiers, people) are kept
    before those that do not, but the order of what is kept never changes and
    a kept clause is never cut inside a word.
    """
    if max_tokens <= 0:
        return ""
    if count_piece(text) <= max_tokens:
        return text
    clauses = [c for c in CLAUSE_RE.split(text) if c]
    if len(clauses) > 1:
        costs = [count_piece(c) + 1 for c in clauses]
        room = max_tokens - 1  # the "…"
        # A clause that alone exceeds the room is never kept, wherever it ranks: not worth scoring
        # (the others keep their order, so the same clauses are kept).
        ranked = sorted((i for i in range(len(clauses)) if costs[i] <= room),
                        key=lambda i: (-(score(clauses[i]) + (2 if i == 0 else 0)), i))
        keep: set[int] = set()
        for i in ranked:
            if costs[i] <= room:
                keep.add(i)
                room -= costs[i]
        if keep:
            joined = join_kept(clauses, keep)
            if count_piece(joined) <= max_tokens:
                return joined
    return clip_words(text, max_tokens)


def join_kept(clauses: list[str], keep: set[int]) -> str:
    """The clauses numbered in ``keep``, in order, "…" where some were left out between or after them."""
    out: list[str] = []
    prev = -1
    for i in sorted(keep):
        if out and i != prev + 1:
            out.append("…")
        out.append(clauses[i])
        prev = i
    joined = " ".join(out)
    return joined if prev == len(clauses) - 1 else joined.rstrip(" ,;:") + " …"


def clip_words(text: str, max_tokens: int) -> str:
    """The longest run of whole words of ``text`` within ``max_tokens``, then "…"."""
    if count_piece(text) <= max_tokens:
        return text
    if max_tokens <= 1:
        return ""
    head = truncate_to_tokens(text, max_tokens - 1)
    if " " in head and not text.startswith(head + " "):
        head = head.rsplit(" ", 1)[0]  # do not cut inside a word
    head = head.rstrip(" ,;:")
    out = head + " …" if head else ""
    while out and count_piece(out) > max_tokens:
        head = head.rsplit(" ", 1)[0] if " " in head else ""
        out = head + " …" if head else ""
    return out


# -- key phrases -----------------------------------------------------------------------

_VALUE = r"[^,;.()]{1,40}?"
_CHANGE_FORMS = (
    # "p95 went from 840 ms to 210 ms", "the deadline moved from July 4 to July 19"
    re.compile(
        rf"(?P<key>[A-Za-z][\w '/-]{{0,40}}?)\s+(?:went|changed|moved|dropped|rose|increased|decreased|grew|fell|"
        rf"jumped|shifted|slipped|was pushed|got pushed|was moved|was changed|is moving|has moved)\s+"
        rf"(?:back\s+|out\s+|up\s+|down\s+)?from\s+(?P<old>{_VALUE})\s+to\s+(?P<new>{_VALUE})(?=$|[,;.()]|\s+(?:after|because|since|so|and|but|for|on|in)\b)",
        _I,
    ),
    # "moved the deadline from July 4 to July 19"
    re.compile(
        rf"\b(?:moved|changed|pushed|postponed|rescheduled|bumped|raised|lowered|updated|set|switched|renamed)\s+"
        rf"(?:the\s+|our\s+)?(?P<key>[A-Za-z][\w '/-]{{0,30}}?)\s+(?:back\s+|out\s+)?from\s+(?P<old>{_VALUE})\s+"
        rf"to\s+(?P<new>{_VALUE})(?=$|[,;.()]|\s)",
        _I,
    ),
    # "deadline: July 19 (was July 4)", "the limit is now 100 (was 50)"
    re.compile(
        rf"(?P<key>[A-Za-z][\w '/-]{{0,40}}?)\s*(?::|\bis now\b|\bare now\b|\bnow\b)\s*(?P<new>{_VALUE})\s*"
        rf"\(was:?\s+(?P<old>[^)]{{1,40}})\)",
        _I,
    ),
)
#: What each of :data:`_CHANGE_FORMS` cannot match without (a cheap literal search first):
#: the patterns open with a lazy key of up to 40 characters, which costs a scan at every
#: position of every sentence, while most sentences hold none of these words.
_FROM_NEED = re.compile(r"\sfrom\s", _I)
_CHANGE_NEEDS = (
    _FROM_NEED,
    _FROM_NEED,
    re.compile(r"\(was:?\s", _I),
)
_KEY_DROP = re.compile(r"^(?:the|our|a|an|so|and|but|then|now|also|ok|okay)\s+", _I)


@dataclass(frozen=True)
class ValueChange:
    """A value that changed: ``key: new (was old)``."""

    key: str
    old: str
    new: str

    def render(self) -> str:
        return f"{self.key}: {self.new} (was {self.old})"


def value_change(text: str) -> ValueChange | None:
    """The value change ``text`` states, if it states one in a recognizable form."""
    t = text[:MAX_UNIT_CHARS]
    found: dict[re.Pattern[str], bool] = {}  # the first two forms need the same word: looked for once
    for pattern, needs in zip(_CHANGE_FORMS, _CHANGE_NEEDS):
        present = found.get(needs)
        if present is None:
            present = found[needs] = needs.search(t) is not None
        m = pattern.search(t) if present else None
        if not m:
            continue
        key = m.group("key").strip(" .,:;'\"`")
        while True:
            shorter = _KEY_DROP.sub("", key)
            if shorter == key:
                break
            key = shorter
        words = key.split()
        if len(words) > 5:
            key = " ".join(words[-5:])
        old, new = m.group("old").strip(" .`'\""), m.group("new").strip(" .`'\"")
        if key and old and new and old.lower() != new.lower():
            return ValueChange(key, old, new)
    return None


#: Importance of a key phrase by kind, when carrying phrases up the DAG.
PHRASE_WEIGHT = {"change": 9, "role": 8, "preference": 8, "choice": 8, "ticket": 7, "date": 6, "number": 6,
                 "labelled": 6,
                 "name": 5, "version": 4, "iso": 4, "time": 3, "small": 3, "ident": 2, "relative": 1}
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_GLUE_WORDS = frozenset("in on at of for to and or is was were are we had has have with from by the a an than about "
                        "after before since until over under into per".split())
#: Words before a number that do not say what it counts ("create mode 100644", "should be 0042").
_NOT_LABELS = frozenset("be been is was are were should would could will can mode widen than about around".split())
#: (A label word is taken whole, ``{1,24}+``: what follows it is white space, which no shorter part of the
#: word can be followed by, so giving letters back could never match and only cost a step per letter.)
_LABELLED = re.compile(
    r"\b(?:[a-z][\w-]{1,24}+\s){1,2}(?:\d{4,}(?![\w]|[.,:/-]\w)|\d+\.\d+\.\d+\b|[a-z][a-z]+(?:-[a-z]+)*-\d+\b)"
)
_LABELLED_GATE = Gated(_LABELLED, DIGITS)  # every branch ends in digits
#: What every :data:`_LABELLED` match holds: four digits or a version after white space, or a
#: letter, a hyphen and a digit (``indexer-266``). Looked for (after the gate's digits) before the
#: pattern tries every word; each branch reads a few characters, nothing backtracks far.
_LABELLED_NEED = re.compile(r"\s\d{4}|\s\d+\.\d+\.\d|[a-z]-\d")
_RELATIVE = re.compile(r"^(?:tomorrow|yesterday|tonight|next week|end of)", re.I)


def _date_kind(text: str) -> str:
    """``date`` (a day a person names), ``iso``, ``time`` of day, or ``relative`` (meaningless out of context)."""
    if _TIME_ONLY.match(text):
        return "time"
    if _ISO.match(text):
        return "iso"
    return "relative" if _RELATIVE.match(text) else "date"


_CHOICE = re.compile(
    r"\b(?:decided to (?:use|go with|adopt|keep|switch to|move to)|go(?:ing)? with|switch(?:ed|ing)? to|chose|"
    r"opted for|settled on|sticking with|will use|we'?ll use)\s+(?:the\s+)?"
    r"(?!(?:a|an|the|it|this|that|them|one|some|old|new|same|current|existing|other)\b)(?=[\w.+/-]*[A-Za-z])[\w.+/-]{2,}"
    r"(?:\s+(?:instead of|over|not)\s+[\w.+/-]+)?"
    r"|\b(?=\S*[\d_.+/-])[\w.+/-]{2,} instead of (?=\S*[\d_.+/-])[\w.+/-]{2,}",
    _I,
)
#: What :data:`_PREF_PHRASE` (case-sensitive) cannot match without, looked for before it runs.
_PREF_NEEDS = ("prefer", "like", "hate", "love", "rather", "want", "insist", "always ", "never ")
_CHOICE_GATE = Gated(_CHOICE, ("decided to", "go with", "going with", "switch", "chose", "opted for", "settled on",
                               "sticking with", "will use", "ll use", "instead of"))
_TIME_ONLY = re.compile(r"^\d{1,2}:\d{2}")
_IMAGE_TAG = re.compile(r"^[a-z][\w.-]*:\d")
_TICKET = re.compile(r"^(?:[A-Z][A-Z0-9]{1,9}-\d{1,6}|#\d{2,6})$")
_VERSIONISH = re.compile(
    r"^(?:v?\d+\.\d+(?:\.\d+)+\S*|v\d+(?:\.\d+)*|(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40})$"
)


def _ident_kind(ident: str) -> str:
    if _TICKET.match(ident):
        return "ticket"
    if ident.startswith("#") or _IMAGE_TAG.match(ident):
        return "version"  # a channel or an image tag: as specific as a version
    if _VERSIONISH.match(ident):
        return "version"
    return "ident"


#: Where a unit lists several things ("a · b", "a; b", "a, b (c)"): each may state its own change.
_SEGMENT_SPLIT = re.compile(r" · |; |, (?=[^()]*(?:\(|$))")
_NOT_DIGIT = re.compile(r"\D")
#: A number that is a year, not a count.
_YEAR = re.compile(r"(?:19|20)\d\d")


def value_changes(text: str) -> list[ValueChange]:
    """Every value change ``text`` states: all rendered ``key: new (was old)`` forms, else the first other form."""
    t = text[:MAX_UNIT_CHARS]
    found = []
    # A segment holds "(was " only where the unit does: without it, no segment is worth splitting out.
    for segment in _SEGMENT_SPLIT.split(t) if _CHANGE_NEEDS[2].search(t) else ():
        m = _CHANGE_FORMS[2].search(segment) if _CHANGE_NEEDS[2].search(segment) else None
        if m:
            change = value_change(segment)
            if change is not None:
                found.append(change)
    if not found:
        change = value_change(t)
        if change is not None:
            found.append(change)
    return found


def key_phrases(text: str) -> list[tuple[str, str]]:
    """Short spans worth carrying up the DAG, with their kind, most important kinds first.

    Kinds: ``change`` (``deadline: July 19 (was July 4)``), ``role`` (``Greta
    took over on-call``), ``preference`` (``prefers tabs``), ``date``,
    ``name``, ``number`` (with its unit) and ``ident``. Each span is a few
    words of the text, so a list of them compresses instead of copying. No
    duplicates (case-insensitive, a span inside a longer one counts as one).
    """
    return list(_key_phrases(text[:MAX_UNIT_CHARS]))


@functools.lru_cache(maxsize=1 << 12)
def _key_phrases(t: str) -> tuple[tuple[str, str], ...]:
    """:func:`key_phrases` of a clipped unit, remembered: a leaf's lines are read again by the nodes above it."""
    found: list[tuple[str, str]] = []
    low = ascii_lower(t)
    found.extend((change.render(), "change") for change in value_changes(t))
    names = names_in(t)
    role = names and ROLE_GATE.found(t, low)  # what someone does: only said of a name
    for name in names:
        if role:
            # "Greta took over on-call": the name with the few words that say what they do.
            m = re.search(re.escape(name) + r"(?:\s+[^\s,;.]+){1,4}", t)
            ends = [r.end() for r in ROLE_RE.finditer(m.group())] if m else []
            if m and ends:
                found.append((m.group()[: ends[-1]], "role"))
                continue
        found.append((name, "name"))
    pref = _PREF_PHRASE.search(t) if any(w in t for w in _PREF_NEEDS) else None
    if pref:
        found.append((pref.group().rstrip(",.;:"), "preference"))
    choice = _CHOICE_GATE.search(t, low)
    if choice:
        found.append((choice.group().rstrip(",.;:"), "choice"))
    found.extend((date, _date_kind(date)) for date in dates_in(t))
    for number in numbers_in(t):
        digits = _NOT_DIGIT.sub("", number)
        year = _YEAR.fullmatch(digits)  # "2025 request(s)": a year, not a count
        found.append((number, "number" if len(digits) >= 2 and not year else "small"))
    # "build 5207", "export job 2048", "payouts 3.4.19", "pod search-indexer-266": a number is only
    # findable again with the word that says what it counts.
    for m in _LABELLED.finditer(t) if _LABELLED_GATE.may_match(t, low) and _LABELLED_NEED.search(t) else ():
        *label, value = m.group().split()
        while label and label[0] in _GLUE_WORDS:
            label.pop(0)
        if label and label[-1] not in _NOT_LABELS and not _YEAR.fullmatch(value):
            found.append((" ".join([*label, value]), "labelled"))
    for found_ident in idents_in(t):
        ident = found_ident.strip("`")
        found.append((ident, _ident_kind(ident)))
    found.sort(key=lambda pk: -PHRASE_WEIGHT[pk[1]])
    out: list[tuple[str, str]] = []
    seen: list[str] = []
    for phrase, kind in found:
        p = phrase.strip()
        low = p.lower()
        if not p or any(low in s for s in seen) or (kind == "labelled" and any(s in low for s in seen)):
            continue
        seen.append(low)
        out.append((p, kind))
    return tuple(out)


_PREF_PHRASE = re.compile(
    r"(?:\b[A-Z][a-z]+\s+)?\b(?:prefers?|preferred|likes|hates|dislikes|loves|would rather|'d rather|"
    r"(?:always|never) (?:wants?|use)|insists? on|(?<=I )(?:really )?(?:like|love|hate|want))\s+"
    r"(?:(?!(?:over|instead|never|not|no|rather|to|in|for|on|at|when|because|so|and|but)\b)[^\s,;.]+\s?){1,4}"
    r"(?:\s*(?:over|instead of|rather than)\s+[^\s,;.]+)?"
)
_INTERJECTION = re.compile(
    r"^(?:(?:wait|wow|ok|okay|yes|yeah|yep|no|nope|nice|great|good|perfect|thanks|thank you|sure|right|hmm|ugh|"
    r"back|morning|hi|hello|hey|cool|lunch done|looks good|looks great|agreed|got it|understood|alright|phew|"
    r"oh|ah|so|well|fine)\b[,.!:;—–-]+\s*)+",
    _I,
)


def without_interjections(text: str) -> str:
    """``text`` without the "Wait," / "Nice." / "Morning!" it opens with (unless that is all it says)."""
    stripped = _INTERJECTION.sub("", text)
    return stripped if stripped.strip() else text


# -- time ranges --------------------------------------------------------------------------


def parse_time(value: str | None) -> datetime | None:
    """An ISO timestamp as a datetime (None when absent or unreadable)."""
    if not value:
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def time_span(start: str | None, end: str | None) -> str:
    """``Nov 2, 09:14–11:30``; ``Nov 2 09:14 – Nov 4 16:13`` across days; empty when unknown."""
    a, b = parse_time(start), parse_time(end)
    if a is None:
        return ""
    day_a = f"{a.strftime('%b')} {a.day}"
    if b is None or b == a:
        return f"{day_a}, {a.strftime('%H:%M')}"
    if b.date() == a.date():
        return f"{day_a}, {a.strftime('%H:%M')}–{b.strftime('%H:%M')}"
    return f"{day_a} {a.strftime('%H:%M')} – {b.strftime('%b')} {b.day} {b.strftime('%H:%M')}"
