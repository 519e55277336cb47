"""What a sentence says: splitting prose into units and scoring the facts in them.

The digest summarizer keeps sentences by what a person (or the agent) would
miss if they were dropped. This module finds those things with plain regular
expressions, no model and no dictionary download:

* **decisions** and their **reasons** ("we'll use zoneinfo because ...");
* **people and roles** ("Greta took over on-call", "Jonas will run it");
* **dates**: month-and-day ("October 4", "Nov 2"), ISO dates, weekdays, times;
* **numbers with units**, money, counts;
* **identifiers**: tickets (``LEDG-482``), commit hashes, paths, versions, code names;
* **preferences** ("prefers tabs") and **values that changed** ("from July 4 to July 19");
* errors, constraints and open items.

Everything here is deterministic and bounded: sentences are clipped to
:data:`MAX_UNIT_CHARS` before any pattern runs, so a pathological input (a
megabyte on one line) costs linear time.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from itertools import chain
from dataclasses import dataclass, field
from typing import Any

from ..memo import Generations

#: Longest unit (sentence, list item, table row) examined, in characters.
MAX_UNIT_CHARS = 1200
_I = re.IGNORECASE

MONTHS = (
    "January|February|March|April|May|June|July|August|September|October|November|December|"
    "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec"
)
DATE_RE = re.compile(
    rf"\b(?:{MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b(?:,?\s+\d{{4}}\b)?"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{MONTHS})\b(?:\s+\d{{4}}\b)?"
    r"|\b\d{4}-\d{2}-\d{2}\b"
    r"|\b(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day\b(?:\s+\d{1,2}:\d{2}(?:\s?UTC)?)?"
    r"|\b(?:tomorrow|yesterday|tonight|next week|end of (?:the )?(?:day|week|month|quarter))\b"
    r"|\b\d{1,2}:\d{2}\s?(?:UTC|am|pm|AM|PM)\b"
)
ROLE_RE = re.compile(
    r"\b(?:took over|takes over|taking over|take over|handed over|hands over|handing over|on-?call|owner|owns|owned by|"
    r"lead|leads|leading|reviewer|reviews|reviewed by|approver|approved by|manager|maintainer|assignee|assigned to|"
    r"responsible for|in charge of|will run|will own|will pick|picks? (?:it|this|that) up|point of contact|"
    r"joins|joined|left the team|is out|is away|out of office|OOO|on leave|on vacation|replaces|replaced by|"
    r"covers? for|standing in|backup|escalat\w+|signed off|sign-off|stakeholder|customer|client|team)\b",
    _I,
)
_PREFERENCE = re.compile(
    r"\b(?:prefers?|preferred|preference|I(?:'d| would) rather|would rather|likes|dislikes?|hates?|loves|"
    r"I (?:really )?(?:like|love|hate|want)|we (?:always|never)|"
    r"favou?rite|always use|never use|always wants?|never wants?|insists? on|please (?:always|never)|don'?t want|"
    r"do not want|style guide|convention)\b",
    _I,
)
_CHANGE = re.compile(
    r"\b(?:changed|changes|moved|moving|postponed|rescheduled|pushed (?:back|out)|pulled in|bumped|raised|lowered|"
    r"increased|decreased|dropped|went|renamed|replaced|supersed\w+|updated|switch(?:ed|ing)? to|instead of|"
    r"no longer|now|was|used to|revised|corrected|from \S+(?: \S+){0,4} to)\b|→|->|\(was ",
    _I,
)
_DECISION = re.compile(
    r"\b(?:decided|decide to|decision|agreed|chose|choose|chosen|going with|go with|opted|settled on|"
    r"approved (?:the|it|this|that|#)|rejected (?:the|this|that|as)|rejecting (?:the|this|that)|"
    r"let'?s (?:go|do|use|keep|switch|stick|ship|drop)|plan is|sticking with|recorded as|"
    r"we(?:'ll| will) (?:use|go|keep|switch|ship)|will use|switch to)\b",
    _I,
)
_FINDING = re.compile(
    r"\b(?:found it|root cause|turns out|the cause|caused by|the (?:problem|issue|bug) is|the culprit|explains|"
    r"because|reproduced|confirmed|so that's why|that's why)\b",
    _I,
)
#: The writer says the fact is worth keeping.
_NOTEWORTHY = re.compile(
    r"\b(?:for the record|side note|note that|quick note|please note|worth knowing|worth noting|good to know|"
    r"keep in mind|remember(?: that)?|don'?t forget|before I forget|FYI|heads up|for reference|for future reference|"
    r"note to self|also note|by the way|btw)\b",
    _I,
)
_REASON = re.compile(r"\b(?:because|since|so that|due to|reason|which means|otherwise|as it|as they|to avoid)\b", _I)
_CONSTRAINT = re.compile(
    r"\b(?:must|never|always|don'?t|do not|cannot|can'?t|required?|requires|only|at most|at least|no more than|"
    r"forbidden|not allowed|important|make sure|without)\b",
    _I,
)
#: Only ever asked whether it matches (:attr:`Facts.error`). Its last branch finds a word ending in
#: "Error" or "Exception" after at least one more letter (``ValueError``): written as that ending
#: where it is not a word's start (``\B``), not as ``\b\w+(?:Error|Exception)\b``, which backtracked
#: through every word letter by letter; it matches the same texts (``tests/test_digest_forms.py``).
_ERROR = re.compile(
    r"\b(?:error|errors|exception|traceback|failed|failure|fails|failing|crash(?:ed|es)?|panic\w*|broken|bug|"
    r"regression|timed? ?out|refused|denied|flaky|red)\b|\B(?:error|exception)\b",
    _I,
)
OPEN_RE = re.compile(
    r"\bTODO\b|\bFIXME\b|^\s*[-*]?\s*\[ \]|\bfollow[- ]?ups?\b|\bnext week\b|\bnext steps?\b|\bopen questions?\b|"
    r"\bnot (?:yet|done)\b|\bstill (?:need|to|open|pending|missing|waiting|failing|broken)\b|\bpending\b|"
    r"\bblocked\b|(?<!nothing )\bleft open\b|\bto-?do list\b|\bunresolved\b|\bwaiting (?:on|for)\b|"
    r"\bfile (?:it|a ticket)\b|"
    r"\bfor (?:next|another) (?:week|time|sprint|PR)\b|\bparked\b|\bdeferred\b",
    _I,
)
#: Written to open with the class of its first character (a currency sign or a digit) and check which
#: branch it is in a look-behind, where ``[$€£¥]\s?\d[\d,.]*[kKmM]?|\b\d+(?:[.,]\d+)*\s?(?:…)`` would do:
#: the same matches (``tests/test_digest_forms.py``), but the engine skips to the next digit or sign
#: instead of trying both branches at every position (``\b\d`` is a digit after no word character).
NUMBER_UNIT_RE = re.compile(
    r"[$€£¥\d](?:(?<=[$€£¥])\s?\d[\d,.]*[kKmM]?"
    r"|(?<=\d)(?<!\w\d)\d*(?:[.,]\d+)*\s?(?:%|ms|µs|us|ns|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?|days?|weeks?|months?|"
    r"years?|[kKMGT]i?B|bytes?|tokens?|lines?|rows?|files?|items?|messages?|requests?|req/s|rps|qps|px|x|k|"
    r"cores?|threads?|USD|EUR|GBP|dollars?|euros?|users?|accounts?|invoices?|customers?|tests?|points?|GB|MB|TB)"
    r"(?:\s?(?:/|per)\s?(?:s|sec|second|min|minute|h|hour|day|week|month|request|user|page|account)\b)?(?!\w))"
)
_BIG_NUMBER = re.compile(r"\b\d[\d,.]*\d\b")
#: A number with the word that says what it is: "port 8443", "build 5207".
#: (The word is taken whole, ``{2,}+``: a space follows it, which no shorter part of it is followed by.)
_COUNTED = re.compile(r"\b[a-z][\w-]{2,}+ #?\d{3,}\b(?![.,]\d)")
#: Identifier forms, each with what it cannot match without (a look-ahead that :data:`_IDENT_SCAN` puts
#: before it; IDENT_RE itself is the plain alternation).
_IDENT_FORMS = (
    (r"\b[A-Z][A-Z0-9]{1,9}-\d{1,6}\b", ""),  # tickets
    (r"(?<![\w/])#\d{2,6}\b", ""),  # PRs and issues
    (r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b", ""),  # commit hashes
    (r"\bv?\d+\.\d+(?:\.\d+)+(?:[-+][\w.]+)?\b|\bv\d+(?:\.\d+)*\b", ""),  # versions
    (r"(?<![\w/])(?:~|\.{1,2})?/?[\w.-]+(?:/[\w.-]+)+/?", r"(?=[\w.~-]*/)"),  # paths
    (r"\b[\w-]+\.(?:py|pyi|js|mjs|ts|tsx|jsx|md|toml|yaml|yml|json|jsonl|cfg|ini|txt|rs|go|java|kt|c|h|cc|cpp|"
     r"rb|php|sh|sql|html|css|lock|log|csv|xml|env)\b", r"(?=[\w-]*\.)"),  # file names
    (r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b", r"(?=[A-Za-z0-9]*_)"),  # snake_case
    (r"\b[a-z]+[A-Z][A-Za-z0-9]*\b|\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b", ""),  # camelCase, CamelCase
    (r"(?<![\w/])#[a-z][a-z0-9]*(?:-[a-z0-9]+)+\b", ""),  # chat channels: #routing-alerts
    (r"\b[a-z][\w.-]*:\d[\w.-]*\b", r"(?=[\w.-]*:)"),  # image tags: python:3.12-slim
    (r"`[^`\n]{1,60}`", ""),  # anything the writer put in code quotes
)
IDENT_RE = re.compile("|".join(form for form, _ in _IDENT_FORMS))
#: :data:`IDENT_RE` with the same matches, found in a fraction of the time. Python tries every form at
#: every position; but a form can only start after a character that is not a letter or digit (``\b``
#: before a letter, ``(?<![\w/])``), except a ``-`` (``\b[\w-]+``) or a code quote, so one test skips
#: the inside of every word, and each form's look-ahead skips a word without its ``/``, ``.``, ``_`` or
#: ``:`` before scanning and backtracking through it. The guards only reject positions where no form
#: can match, so ``findall`` gives the same list (``tests/test_digest_speed.py``).
_IDENT_SCAN = re.compile(
    r"(?:(?<!\w)(?=[\w#~./`-])|(?=[-`]))(?:" + "|".join(need + form for form, need in _IDENT_FORMS) + ")")


class Gated:
    """A case-insensitive pattern behind a cheap test: the lower-case words it cannot match without.

    Python's regular expressions try an alternation of ``\\b``-anchored words at
    every position of a sentence; most sentences hold none of those words, and a
    substring test says so at a fraction of the cost. The test is only used on
    ASCII text (and caseless punctuation such as "…" and "→", which a pattern
    spells out in its needs when it looks for one), where ``lower()`` is exactly
    what ``IGNORECASE`` compares (other
    scripts have letters like ``ſ`` and ``K`` that match ``s`` and ``k``): there the
    pattern runs as it is. Same answers, always (``tests/test_digest_speed.py``).
    """

    def __init__(self, pattern: re.Pattern[str], needs: tuple[str, ...]) -> None:
        self.pattern = pattern
        self.needs = needs
        #: The pattern in lower case, without ``IGNORECASE``, for the lower-cased text :meth:`found` has:
        #: on that text it matches where the pattern matches the text, and the engine compares plain
        #: characters (a case-insensitive one checks every branch of an alternation at every position).
        self.lowered = (re.compile(_lowered(pattern.pattern), pattern.flags & ~re.IGNORECASE)
                        if pattern.flags & re.IGNORECASE else None)

    def found(self, text: str, low: str | None = "") -> bool:
        """``bool(self.search(text, low))``, for a caller that only asks whether the pattern matches."""
        if low == "":
            low = ascii_lower(text)
        if low is None or self.lowered is None:
            return self.search(text, low) is not None
        return self.may_match(text, low) and self.lowered.search(low) is not None

    def search(self, text: str, low: str | None = "") -> re.Match[str] | None:
        """``pattern.search(text)``; ``low`` is :func:`ascii_lower` of ``text`` when the caller has it."""
        return self.pattern.search(text) if self.may_match(text, low) else None

    def findall(self, text: str, low: str | None = "") -> list[Any]:
        return self.pattern.findall(text) if self.may_match(text, low) else []

    def finditer(self, text: str, low: str | None = "") -> Iterator[re.Match[str]]:
        return self.pattern.finditer(text) if self.may_match(text, low) else iter(())

    def may_match(self, text: str, low: str | None = "") -> bool:
        """False only when the pattern cannot match ``text``."""
        if low == "":
            low = ascii_lower(text)
        if low is None:
            return True
        for word in self.needs:
            if word in low:
                return True
        return False


def _lowered(source: str) -> str:
    """A pattern's source with its letters in lower case, escapes (``\\B``, ``\\S``, ``\\W``) left as written."""
    out: list[str] = []
    escaped = False
    for ch in source:
        out.append(ch if escaped else ch.lower())
        escaped = not escaped and ch == "\\"
    return "".join(out)


#: Characters beyond ASCII that have no case and match no letter case-insensitively: the punctuation
#: digests write themselves (a condensed line is full of "…", "→" and "·"), so those lines keep their gates.
_NOT_CASELESS = re.compile(r"[^\x00-\x7f…→←·—–‘’“”•]")


def ascii_lower(text: str) -> str | None:
    """``text`` in lower case when it is ASCII, or ASCII and caseless punctuation (what :class:`Gated`
    compares), else None."""
    return text.lower() if text.isascii() or not _NOT_CASELESS.search(text) else None


DIGITS = tuple("0123456789")
#: The needs are whole phrases where a short word would admit most text ("own" is in "down" and
#: "known", "call" in every tool call id): a regex that runs and finds nothing costs the most.
ROLE_GATE = Gated(ROLE_RE, (
    "took over", "takes over", "taking over", "take over", "handed over", "hands over", "handing over", "on-call",
    "oncall", "owner", "owns", "owned by", "lead", "reviewe", "reviews", "approver", "approved by", "manager",
    "maintainer", "assignee", "assigned to", "responsible for", "in charge of", "will run", "will own", "will pick",
    "pick it up", "picks it up", "pick this up", "picks this up", "pick that up", "picks that up", "point of contact",
    "joins", "joined", "is out", "is away", "out of office", "ooo", "on leave", "on vacation", "replaces",
    "replaced by", "cover for", "covers for", "standing in", "backup", "escalat", "signed off", "sign-off",
    "stakeholder", "customer", "client", "team"))
_CHANGE_GATE = Gated(_CHANGE, (
    "change", "mov", "postponed", "rescheduled", "pushed ", "pulled in", "bumped", "raised", "lowered", "increased",
    "decreased", "dropped", "went", "renamed", "replaced", "supersed", "updated", "switch", "instead of",
    "no longer", "now", "was", "used to", "revised", "corrected", "from ", "->", "→"))
_DECISION_GATE = Gated(_DECISION, (
    "decide", "decision", "agreed", "chose", "choose", "going with", "go with", "opted", "settled on", "approved ",
    "rejected ", "rejecting ", "let", "plan is", "sticking with", "recorded as", "we'll ", "we will ", "will use",
    "switch to"))
OPEN_GATE = Gated(OPEN_RE, (
    "todo", "fixme", "[ ]", "follow-up", "follow up", "followup", "next week", "next step", "open question", "not yet",
    "not done", "still need", "still to", "still open", "still missing", "still waiting", "still failing",
    "still broken", "pending", "blocked", "left open", "do list", "unresolved", "waiting on", "waiting for", "file it",
    "file a ticket", "for next ", "for another ", "parked", "deferred"))

_PREFERENCE_GATE = Gated(_PREFERENCE, (
    "prefer", "rather", "like", "hate", "love", "want", "we always", "we never", "favorite", "favourite", "always use",
    "never use", "insist", "please always", "please never", "style guide", "convention"))
_FINDING_GATE = Gated(_FINDING, (
    "found it", "root cause", "turns out", "cause", "problem is", "issue is", "bug is", "culprit", "explains",
    "reproduced", "confirmed", "that's why"))
_NOTEWORTHY_GATE = Gated(_NOTEWORTHY, (
    "record", "note", "worth", "good to know", "keep in mind", "remember", "forget", "fyi", "heads up", "reference",
    "by the way", "btw"))
_REASON_GATE = Gated(_REASON, (
    "because", "since", "so that", "due to", "reason", "which means", "otherwise", "as it", "as they", "to avoid"))
_CONSTRAINT_GATE = Gated(_CONSTRAINT, (
    "must", "never", "always", "don", "do not", "can", "require", "only", "at most", "at least", "no more than",
    "forbidden", "not allowed", "important", "make sure", "without"))
_ERROR_GATE = Gated(_ERROR, (
    "error", "exception", "traceback", "fail", "crash", "panic", "broken", "bug", "regression", "out", "refused",
    "denied", "flaky", "red"))
#: Every branch of these holds a digit, or (dates) a day's name or a relative day.
DATE_GATE = Gated(DATE_RE, (*DIGITS, "day", "tomorrow", "tonight", "next week", "end of"))
NUMBER_GATE = Gated(NUMBER_UNIT_RE, DIGITS)
_COUNTED_GATE = Gated(_COUNTED, DIGITS)
_BIGNUMBER_GATE = Gated(_BIG_NUMBER, DIGITS)

#: A word or two of letters (any script); :func:`_capitalized` keeps the ones written like names.
_NAME_CANDIDATE = re.compile(r"(?<![\w/.`-])[^\W\d_]{3,}(?:-[^\W\d_]{3,})?(?![\w`])")
#: On ASCII text, exactly the candidates :func:`_capitalized` keeps, found by the regex alone: each part
#: an upper-case letter and lower-case ones. Where the candidate pattern would take a second part that is
#: not capitalized (and so drop the whole), the negative lookahead drops the first part too.
#: (It opens with the capital, its look-behind checking the character before it, so that the engine
#: skips to the next capital instead of trying every position: the same matches as opening with
#: ``(?<![\w/.`-])``, ``tests/test_digest_forms.py``.)
_ASCII_NAME = re.compile(
    r"[A-Z](?<![\w/.`-][A-Z])[a-z]{2,}(?:-[A-Z][a-z]{2,}(?![\w`])|(?!-[A-Za-z]{3,}(?![\w`])))(?![\w`])")


def _capitalized(word: str) -> bool:
    """"Tomás", "Maya Okafor", "Lord-Howe": each part an upper-case letter, then lower-case ones."""
    if "-" not in word and " " not in word:
        return word[:1].isupper() and word[1:].islower()
    return all(part[:1].isupper() and part[1:].islower() for part in re.split(r"[- ]", word))
#: Capitalized words that start sentences or name things everybody knows: not people.
_NOT_NAMES = frozenset(
    """
    The This That These Those There Then Than They Them Their Theirs Here Hence However Have Has Had Having Also
    And But For From Into With Without Within After Before Because Since While When Where Which Who Whom Whose Why
    What How Yes Yeah Yep Nope Not None Now Next Last First Second Third Each Every Both Either Neither Any All Some
    Most Many Much More Less Few Other Another Such Same Only Just Even Still Already Again Once Twice Maybe Perhaps
    Please Thanks Thank Sure Okay Good Great Nice Cool Fine Perfect Done Agreed Right Wait Well Hmm Morning Evening
    Hello Hey Afternoon Night Today Tomorrow Yesterday Tonight Let Lets Can Could Will Would Should Shall May Might
    Must Does Did Doing Was Were Are Being Been Its Our Ours Your Yours His Her Hers You We She Him Mine Note Notes
    See Look Looks Looking Check Checking Run Running Ran Read Reading Edit Edited Add Added Adding Fix Fixed Fixing
    Use Using Used Make Made Keep Kept Move Moved Show Shows Shown Give Given Take Taken Find Found Try Tried Stop
    Start Started Open Opened Close Closed Update Updated Create Created Remove Removed Delete Deleted Write Wrote
    Test Tests Testing Step Steps Option Options Plan Plans Answer Answers Question Questions Result Results Error
    Errors Summary Decision Decisions Reason Reasons Subject Hello Hi Dear Regards Cheers Best Ugh Oops Wow Also
    Important Warning Todo Fixme Done Draft Revised Added Changes Change Total Both Until Unless Whether About Above
    Below Between Under Over Again Actually Basically Otherwise Instead Though Although Meanwhile Finally Overall
    Correct Correction Corrected Nothing Something Anything Everything Nobody Somebody Anyone Someone Everyone
    Batching Line Lines Support Side Quick Repo Customer Amount Issued Timezone Status Total Name Value Type Also
    Nope Sorry Oops Okay Hmm Yesterday Heads Regarding Monday Tuesday Wednesday Thursday Friday Saturday Sunday
    January February March April June July August September October November December Sept True False Null Python
    Linux Windows
    Markdown Obsidian README Local Remote Production Staging Main Master Branch Commit Merge Push Pull Issue Ticket
    """.split()
)
_FILLER = re.compile(
    r"^(?:let me|let's see|now[, ]|sure|ok(?:ay)?\b|thanks|thank you|great|good|nice|perfect|morning|hi\b|hello|"
    r"got it|understood|alright|here'?s|here is|i'?ll|i will|i'm going to|next[, ]|first[, ]|then[, ]|"
    r"looking|checking|running|reading)",
    _I,
)
CHITCHAT_RE = re.compile(
    r"^(?:thanks|thank you|ok(?:ay)?|sounds (?:good|right)|makes sense|nice|great|good (?:catch|call|job)|perfect|cool|"
    r"sure|got it|go ahead|keep going|continue|lgtm|yes|yep|yeah|no worries|agreed|fine|right|wow|ugh|hmm)\b",
    _I,
)
_FENCE = re.compile(r"^\s*(?:```|~~~)")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
_LIST_MARK = re.compile(r"^(?:[-*+•]|\d{1,3}[.)])\s+")
#: What a :data:`_LIST_MARK` can open with, but a digit.
_LIST_FIRST = frozenset("-*+•")
_QUOTE_MARK = re.compile(r"^(?:>\s?)+")
_HEADING_MARK = re.compile(r"^#{1,6}\s+")
_EMPHASIS = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
#: What ends a sentence for :data:`_SENTENCE_END` (its look-behind).
_ENDS = (".", "!", "?", "…")
#: White space after a sentence end, before what starts a sentence. Written to open with ``\s`` (the
#: look-behind checks the end and that first space) where ``(?<=[.!?…])\s+`` would do: the same matches,
#: but a pattern that opens with a character class lets the engine skip to the next space instead of
#: trying every position (``tests/test_digest_forms.py``).
_SENTENCE_END = re.compile(r"\s(?<=[.!?…]\s)\s*(?=[\"'(\[`*_]?[A-Z0-9])")
_ABBREVIATION = re.compile(r"\b(?:e\.g|i\.e|etc|vs|approx|Dr|Mr|Mrs|Ms|St|No|cf|incl|min|max|avg)\.$", _I)
#: An :data:`_ABBREVIATION` match is at most 8 characters ("approx." and the newline ``$`` may stand
#: before) and ends the text: it lies in the last 8, and one more shows its ``\b`` what comes before.
ABBREVIATION_TAIL = 9
#: Where a sentence parts into clauses: white space after ``,;:``, before a dash or an aside, around
#: a hyphen. ``(?<=[,;:])\s+|\s+(?=—|–|\()|\s+-\s+`` written to open with ``\s``, as :data:`_SENTENCE_END`
#: (the same splits, ``tests/test_digest_forms.py``).
CLAUSE_RE = re.compile(r"\s(?:(?<=[,;:]\s)\s*|\s*(?=—|–|\()|\s*-\s+)")


def clean(text: str) -> str:
    """One line of plain text: white space collapsed, emphasis markers and link brackets defused.

    ``[[`` and ``]]`` are escaped so that quoted content can never create a
    wikilink the engine would then be responsible for resolving.
    """
    if "**" in text or "__" in text:  # what emphasis needs: most lines have none, and the scan costs
        text = _EMPHASIS.sub(r"\2", text)
    text = " ".join(text.split())
    return text.replace("[[", "\\[\\[").replace("]]", "\\]\\]")


def prose_units(text: str) -> Iterator[str]:
    """Sentences, list items and table rows of Markdown ``text``, in order.

    Fenced code is skipped (a digest says what was done, it does not quote
    code); headings and quote markers are stripped; long lines are split into
    sentences. Every unit is one line of clean text, at most
    :data:`MAX_UNIT_CHARS` characters.
    """
    in_fence = False
    # Each pattern runs only where what it cannot match without is there (a fence's three marks, a
    # line's first character, a rule's "--"): most lines are plain prose, and the tests cost less.
    for raw in text.splitlines():
        if ("```" in raw or "~~~" in raw) and _FENCE.match(raw):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        line = raw.strip()
        if line.startswith(">"):
            line = _QUOTE_MARK.sub("", line).strip()
        if line.startswith("#"):
            line = _HEADING_MARK.sub("", line)
        if not line or ("--" in line and _TABLE_RULE.match(line)):
            continue
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|") if c.strip()]
            line = " · ".join(cells)
        if line[:1] in _LIST_FIRST or line[:1].isdigit():  # isdigit: every \d and more
            line = _LIST_MARK.sub("", line)
        for sentence in split_sentences(line):
            unit = clean(sentence)
            if unit and any(ch.isalnum() for ch in unit):
                yield unit[:MAX_UNIT_CHARS]


def split_sentences(line: str) -> list[str]:
    """``line`` split at sentence ends (abbreviations like "e.g." do not end one)."""
    if len(line) < 24:
        return [line]
    if not any(mark in line for mark in _ENDS):
        return [line] if line.strip() else []  # no sentence end: the scan would find nothing
    parts: list[str] = []
    start = 0
    for m in _SENTENCE_END.finditer(line):
        # Only the tail of the sentence can end in an abbreviation (see ABBREVIATION_TAIL): searching
        # the whole of it again at each candidate end made splitting a long line quadratic.
        if _ABBREVIATION.search(line[max(start, m.start() - ABBREVIATION_TAIL) : m.start()]):
            continue
        parts.append(line[start : m.start()])
        start = m.end()
    parts.append(line[start:])
    return [p for p in parts if p.strip()]


@dataclass(frozen=True)
class Facts:
    """What a unit of text holds, as counts and flags.

    ``role``, ``change`` and ``reason`` only count with something else (a name, a value,
    a decision: see :func:`score`), so they are looked for when first asked, once; the
    rest is found at once.
    """

    names: int
    dates: int
    numbers: int
    idents: int
    preference: bool
    decision: bool
    constraint: bool
    finding: bool
    noteworthy: bool
    error: bool
    open: bool
    question: bool
    filler: bool
    text: str = field(repr=False)
    """The clipped unit the lazy flags look at."""

    @functools.cached_property
    def role(self) -> bool:
        """A word for what someone does or is ("took over", "on-call", "reviewer")."""
        return ROLE_GATE.found(self.text)

    @functools.cached_property
    def change(self) -> bool:
        """A word for a value that changed ("moved", "went from", "→")."""
        return _CHANGE_GATE.found(self.text)

    @functools.cached_property
    def reason(self) -> bool:
        """A word that gives a reason ("because", "so that")."""
        return _REASON_GATE.found(self.text)

    @property
    def substance(self) -> int:
        """How many concrete things the unit names (people, dates, numbers, identifiers)."""
        return self.names + self.dates + self.numbers + self.idents


_SUBJECT_VERB = re.compile(
    r"\s+(?:took|takes|will|is|was|has|had|prefers?|said|says|asked|asks|owns|leads|runs|joined|joins|left|wants?|"
    r"thinks|agreed|approved|needs|can|could|would|should|replied|wrote|reviewed|confirmed|and [A-Z])\b|'s\b"
)


def names_in(text: str) -> list[str]:
    """Capitalized words that are probably people, teams or products.

    Any sentence, list item or quoted phrase starts with a capital, so a
    capitalized word counts only in the middle of a sentence (after a
    lower-case word, a digit or a comma), or when a verb follows it ("Greta
    took over").
    """
    return list(_names_in(text[:MAX_UNIT_CHARS]))


#: Units remembered by :func:`names_in` and :func:`facts_of`: a digest looks at the same
#: sentence several times (scoring, key phrases, clipping, the condensed note above it).
#: Units are at most :data:`MAX_UNIT_CHARS` long, so the caches stay a few megabytes.
_UNIT_CACHE = 1 << 12


@functools.lru_cache(maxsize=_UNIT_CACHE)
def _names_in(t: str) -> tuple[str, ...]:
    out = []
    if t.isascii():  # most text: no Python call per word
        words = [(m.start(), m.group()) for m in _ASCII_NAME.finditer(t)]
    else:
        words = [(m.start(), m.group()) for m in _NAME_CANDIDATE.finditer(t) if _capitalized(m.group())]
    k = 0
    while k < len(words):
        start, word = words[k]
        # "Maya Okafor": capitalized words one space apart are one name.
        while k + 1 < len(words) and words[k + 1][0] == start + len(word) + 1 and t[start + len(word)] == " ":
            k += 1
            word += " " + words[k][1]
        k += 1
        if word.split()[0].split("-")[0] in _NOT_NAMES:
            continue
        before = t[:start]
        # After a word, or after ", " in running text ("Priya, Jonas and Tomás"); not in a CSV header.
        mid_sentence = bool(before.strip()) and (before.rstrip()[-1].isalnum() or before.endswith((", ", "& ")))
        if not mid_sentence and not _SUBJECT_VERB.match(t, start + len(word)):
            continue
        out.append(word)
    return tuple(out)


#: Words whose identifiers :func:`idents_in` remembers, per generation (the newest, and the generation
#: before: bounded in a process that runs for months, a few megabytes at most), and the longest word kept.
WORD_IDENTS_SIZE = 1 << 14
WORD_IDENTS_MAX_CHARS = 64
_WORD_IDENTS: Generations[str, tuple[str, ...]] = Generations(WORD_IDENTS_SIZE)


def _word_idents(word: str) -> tuple[str, ...]:
    """The identifiers in one white-space-free ``word``, remembered in two generations (as
    ``linecount.count_piece``): the words of a conversation come back again and again."""
    found = _WORD_IDENTS.old.get(word)
    if found is None:
        found = tuple(_IDENT_SCAN.findall(word))
        if len(word) > WORD_IDENTS_MAX_CHARS:
            return found  # a path, a hash, a blob: seldom seen again
    _WORD_IDENTS.keep(word, found)
    return found


@functools.lru_cache(maxsize=_UNIT_CACHE)
def idents_in(t: str) -> tuple[str, ...]:
    """Every :data:`IDENT_RE` match in a clipped unit, remembered: scoring and key phrases both need them.

    Found word by word, each word's identifiers remembered (:func:`_word_idents`): the same
    matches. No form matches white space (but a code quote, so a unit holding one is scanned
    whole), so every match lies inside one word (what ``str.split`` cuts at is what ``\\s`` is);
    and the forms' look-behinds and word boundaries see white space or the end of the text at a
    word's edges, the same either way, as their look-aheads stop at white space
    (``tests/test_digest_speed.py``). A word is most often one seen before: a dictionary lookup
    where the scan tried every form at its every boundary (it was a third of a unit's facts).
    """
    if "`" in t:
        return tuple(_IDENT_SCAN.findall(t))
    words = t.split()
    found = list(map(_WORD_IDENTS.young.get, words))
    if None in found:
        found = [_word_idents(w) if f is None else f for f, w in zip(found, words)]
    return tuple(chain.from_iterable(found))  # type: ignore[arg-type]  # no None left


@functools.lru_cache(maxsize=_UNIT_CACHE)
def dates_in(t: str) -> tuple[str, ...]:
    """Every :data:`DATE_RE` match of a clipped unit, remembered: scoring counts them, key phrases keep them."""
    return tuple(DATE_GATE.findall(t))


@functools.lru_cache(maxsize=_UNIT_CACHE)
def numbers_in(t: str) -> tuple[str, ...]:
    """Every :data:`NUMBER_UNIT_RE` match of a clipped unit, remembered (as :func:`dates_in`)."""
    return tuple(NUMBER_GATE.findall(t))


def facts_of(text: str) -> Facts:
    """The facts in one unit (see the module docstring)."""
    return _facts_of(text[:MAX_UNIT_CHARS])


@functools.lru_cache(maxsize=_UNIT_CACHE)
def _facts_of(t: str) -> Facts:
    low = ascii_lower(t)
    dates = len(dates_in(t))
    numbers = (len(numbers_in(t)) + len(_COUNTED_GATE.findall(t, low))
               or (1 if _BIGNUMBER_GATE.search(t, low) else 0))
    return Facts(
        names=min(3, len(_names_in(t))),
        dates=min(3, dates),
        numbers=min(3, numbers),
        idents=min(4, len(idents_in(t))),
        preference=_PREFERENCE_GATE.found(t, low),
        decision=_DECISION_GATE.found(t, low),
        constraint=_CONSTRAINT_GATE.found(t, low),
        finding=_FINDING_GATE.found(t, low),
        noteworthy=_NOTEWORTHY_GATE.found(t, low),
        error=_ERROR_GATE.found(t, low),
        open=OPEN_GATE.found(t, low),
        question=t.rstrip().endswith("?"),
        filler=bool(_FILLER.match(t)),
        text=t,
    )


def score(text: str) -> int:
    """How much would be lost if ``text`` were dropped (0 = chit-chat)."""
    f = facts_of(text)
    s = 3 * f.names + 3 * f.dates + 3 * f.numbers + 2 * f.idents
    if f.names and f.role:
        s += 5  # "Greta took over on-call": who does what
    if f.preference:
        s += 4
    if (f.dates or f.numbers or f.idents or f.names) and f.change:
        s += 4  # a value that changed
    if f.decision:
        s += 5 + (3 if f.reason else 0)
    if f.constraint:
        s += 2
    if f.finding:
        s += 3
    if f.noteworthy:
        s += 5
    if f.error:
        s += 2
    if f.open:
        s += 3
    if f.question:
        s += 1
    if f.filler and f.substance == 0:
        s = max(0, s - 4)
    if len(text) < 12 and f.substance == 0:
        s = 0  # "Nice.", "Ugh."
    return s
