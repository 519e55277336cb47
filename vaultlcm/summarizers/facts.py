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

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from ..tokens import count_tokens, truncate_to_tokens

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
_ROLE = re.compile(
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
_ERROR = re.compile(
    r"\b(?:error|errors|exception|traceback|failed|failure|fails|failing|crash(?:ed|es)?|panic\w*|broken|bug|"
    r"regression|timed? ?out|refused|denied|flaky|red)\b|\b\w+(?:Error|Exception)\b",
    _I,
)
OPEN_RE = re.compile(
    r"\bTODO\b|\bFIXME\b|^\s*[-*]?\s*\[ \]|\bfollow[- ]?ups?\b|\bnext week\b|\bnext steps?\b|\bopen questions?\b|"
    r"\bnot (?:yet|done)\b|\bstill (?:need|to|open|pending|missing|waiting|failing|broken)\b|\bpending\b|"
    r"\bblocked\b|(?<!nothing )\bleft open\b|\bto-?do list\b|\bunresolved\b|\bwaiting (?:on|for)\b|\bfile (?:it|a ticket)\b|"
    r"\bfor (?:next|another) (?:week|time|sprint|PR)\b|\bparked\b|\bdeferred\b",
    _I,
)
_NUMBER_UNIT = re.compile(
    r"[$€£¥]\s?\d[\d,.]*[kKmM]?"
    r"|\b\d+(?:[.,]\d+)*\s?(?:%|ms|µs|us|ns|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?|days?|weeks?|months?|"
    r"years?|[kKMGT]i?B|bytes?|tokens?|lines?|rows?|files?|items?|messages?|requests?|req/s|rps|qps|px|x|k|"
    r"cores?|threads?|USD|EUR|GBP|dollars?|euros?|users?|accounts?|invoices?|customers?|tests?|points?|GB|MB|TB)"
    r"(?:\s?(?:/|per)\s?(?:s|sec|second|min|minute|h|hour|day|week|month|request|user|page|account)\b)?(?!\w)"
)
_BIG_NUMBER = re.compile(r"\b\d[\d,.]*\d\b")
IDENT_RE = re.compile(
    r"\b[A-Z][A-Z0-9]{1,9}-\d{1,6}\b"  # tickets
    r"|(?<![\w/])#\d{2,6}\b"  # PRs and issues
    r"|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b"  # commit hashes
    r"|\bv?\d+\.\d+(?:\.\d+)+(?:[-+][\w.]+)?\b|\bv\d+(?:\.\d+)*\b"  # versions
    r"|(?<![\w/])(?:~|\.{1,2})?/?[\w.-]+(?:/[\w.-]+)+/?"  # paths
    r"|\b[\w-]+\.(?:py|pyi|js|mjs|ts|tsx|jsx|md|toml|yaml|yml|json|jsonl|cfg|ini|txt|rs|go|java|kt|c|h|cc|cpp|"
    r"rb|php|sh|sql|html|css|lock|log|csv|xml|env)\b"
    r"|\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b"  # snake_case
    r"|\b[a-z]+[A-Z][A-Za-z0-9]*\b|\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b"  # camelCase, CamelCase
    r"|(?<![\w/])#[a-z][a-z0-9]*(?:-[a-z0-9]+)+\b"  # chat channels: #routing-alerts
    r"|\b[a-z][\w.-]*:\d[\w.-]*\b"  # image tags: python:3.12-slim
    r"|`[^`\n]{1,60}`"  # anything the writer put in code quotes
)
#: A word or two of letters (any script); :func:`_capitalized` keeps the ones written like names.
_NAME_CANDIDATE = re.compile(r"(?<![\w/.`-])[^\W\d_]{3,}(?:-[^\W\d_]{3,})?(?![\w`])")


def _capitalized(word: str) -> bool:
    """"Tomás", "Maya Okafor", "Lord-Howe": each part an upper-case letter, then lower-case ones."""
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
    Batching Line Lines Support Side Quick Repo Customer Amount Issued Timezone Status Total Name Value Type Also Nope Sorry Oops Okay Hmm Yesterday Heads Regarding Meanwhile Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March
    April June July August September October November December Sept True False Null Python Linux Windows
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
_QUOTE_MARK = re.compile(r"^(?:>\s?)+")
_HEADING_MARK = re.compile(r"^#{1,6}\s+")
_EMPHASIS = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+(?=[\"'(\[`*_]?[A-Z0-9])")
_ABBREVIATION = re.compile(r"\b(?:e\.g|i\.e|etc|vs|approx|Dr|Mr|Mrs|Ms|St|No|cf|incl|min|max|avg)\.$", _I)
_CLAUSE = re.compile(r"(?<=[,;:])\s+|\s+(?=—|–|\()|\s+-\s+")


def clean(text: str) -> str:
    """One line of plain text: white space collapsed, emphasis markers and link brackets defused.

    ``[[`` and ``]]`` are escaped so that quoted content can never create a
    wikilink the engine would then be responsible for resolving.
    """
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
    for raw in text.splitlines():
        if _FENCE.match(raw):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        line = _QUOTE_MARK.sub("", raw.strip()).strip()
        line = _HEADING_MARK.sub("", line)
        if not line or _TABLE_RULE.match(line):
            continue
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|") if c.strip()]
            line = " · ".join(cells)
        line = _LIST_MARK.sub("", line)
        for sentence in split_sentences(line):
            unit = clean(sentence)
            if unit and any(ch.isalnum() for ch in unit):
                yield unit[:MAX_UNIT_CHARS]


def split_sentences(line: str) -> list[str]:
    """``line`` split at sentence ends (abbreviations like "e.g." do not end one)."""
    if len(line) < 24:
        return [line]
    parts: list[str] = []
    start = 0
    for m in _SENTENCE_END.finditer(line):
        if _ABBREVIATION.search(line[start : m.start()]):
            continue
        parts.append(line[start : m.start()])
        start = m.end()
    parts.append(line[start:])
    return [p for p in parts if p.strip()]


@dataclass(frozen=True)
class Facts:
    """What a unit of text holds, as counts and flags."""

    names: int
    role: bool
    dates: int
    numbers: int
    idents: int
    preference: bool
    change: bool
    decision: bool
    reason: bool
    constraint: bool
    finding: bool
    noteworthy: bool
    error: bool
    open: bool
    question: bool
    filler: bool

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
    out = []
    t = text[:MAX_UNIT_CHARS]
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
    return out


def facts_of(text: str) -> Facts:
    """The facts in one unit (see the module docstring)."""
    t = text[:MAX_UNIT_CHARS]
    dates = len(DATE_RE.findall(t))
    numbers = len(_NUMBER_UNIT.findall(t)) or (1 if _BIG_NUMBER.search(t) else 0)
    return Facts(
        names=min(3, len(names_in(t))),
        role=bool(_ROLE.search(t)),
        dates=min(3, dates),
        numbers=min(3, numbers),
        idents=min(4, len(IDENT_RE.findall(t))),
        preference=bool(_PREFERENCE.search(t)),
        change=bool(_CHANGE.search(t)),
        decision=bool(_DECISION.search(t)),
        reason=bool(_REASON.search(t)),
        constraint=bool(_CONSTRAINT.search(t)),
        finding=bool(_FINDING.search(t)),
        noteworthy=bool(_NOTEWORTHY.search(t)),
        error=bool(_ERROR.search(t)),
        open=bool(OPEN_RE.search(t)),
        question=t.rstrip().endswith("?"),
        filler=bool(_FILLER.match(t)),
    )


def score(text: str) -> int:
    """How much would be lost if ``text`` were dropped (0 = chit-chat)."""
    f = facts_of(text)
    s = 3 * f.names + 3 * f.dates + 3 * f.numbers + 2 * f.idents
    if f.names and f.role:
        s += 5  # "Greta took over on-call": who does what
    if f.preference:
        s += 4
    if f.change and (f.dates or f.numbers or f.idents or f.names):
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


# -- shortening ----------------------------------------------------------------------


def shorten(text: str, max_tokens: int) -> str:
    """``text`` within ``max_tokens``: whole clauses kept in order, the rest marked with "…".

    Clauses that name things (dates, numbers, identifiers, people) are kept
    before those that do not, but the order of what is kept never changes and
    a kept clause is never cut inside a word.
    """
    if max_tokens <= 0:
        return ""
    if count_tokens(text) <= max_tokens:
        return text
    clauses = [c for c in _CLAUSE.split(text) if c]
    if len(clauses) > 1:
        costs = [count_tokens(c) + 1 for c in clauses]
        ranked = sorted(range(len(clauses)), key=lambda i: (-(score(clauses[i]) + (2 if i == 0 else 0)), i))
        keep: set[int] = set()
        room = max_tokens - 1  # the "…"
        for i in ranked:
            if costs[i] <= room:
                keep.add(i)
                room -= costs[i]
        if keep:
            out: list[str] = []
            prev = -1
            for i in sorted(keep):
                if out and i != prev + 1:
                    out.append("…")
                out.append(clauses[i])
                prev = i
            joined = " ".join(out)
            if prev != len(clauses) - 1:
                joined = joined.rstrip(" ,;:") + " …"
            if count_tokens(joined) <= max_tokens:
                return joined
    return clip_words(text, max_tokens)


def clip_words(text: str, max_tokens: int) -> str:
    """The longest run of whole words of ``text`` within ``max_tokens``, then "…"."""
    if count_tokens(text) <= max_tokens:
        return text
    if max_tokens <= 1:
        return ""
    head = truncate_to_tokens(text, max_tokens - 1)
    if " " in head and not text.startswith(head + " "):
        head = head.rsplit(" ", 1)[0]  # do not cut inside a word
    head = head.rstrip(" ,;:")
    out = head + " …" if head else ""
    while out and count_tokens(out) > max_tokens:
        head = head.rsplit(" ", 1)[0] if " " in head else ""
        out = head + " …" if head else ""
    return out


def first_words(text: str, n: int) -> str:
    """The first ``n`` words of ``text`` (with "…" when more follow), never splitting "July | 19"."""
    words = text.split()
    if len(words) <= n + 1:
        return text
    n = _safe_cut(words, n)
    if n >= len(words):
        return text
    return " ".join(words[:n]).rstrip(",;:") + " …"


def _safe_cut(words: list[str], n: int) -> int:
    """A cut at or after ``n`` that does not split a date, an amount or an arrow from what it joins."""
    while n < len(words) and (_MONTH_WORD.match(words[n - 1]) or words[n][:1] in "(→-" or words[n - 1] in ("→", "->")
                              or (words[n][:1].isdigit() and words[n - 1][-1:].isalpha() and len(words[n]) <= 4)):
        n += 1
    return n


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
    for pattern in _CHANGE_FORMS:
        m = pattern.search(t)
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
_LABELLED = re.compile(
    r"\b(?:[a-z][\w-]{1,24}\s){1,2}(?:\d{4,}(?![\w]|[.,:/-]\w)|\d+\.\d+\.\d+\b|[a-z][a-z]+(?:-[a-z]+)*-\d+\b)"
)
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
_TIME_ONLY = re.compile(r"^\d{1,2}:\d{2}")
_TICKET = re.compile(r"^(?:[A-Z][A-Z0-9]{1,9}-\d{1,6}|#\d{2,6})$")
_VERSIONISH = re.compile(r"^(?:v?\d+\.\d+(?:\.\d+)+\S*|v\d+(?:\.\d+)*|(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40})$")


def _ident_kind(ident: str) -> str:
    if _TICKET.match(ident):
        return "ticket"
    if ident.startswith("#") or re.match(r"^[a-z][\w.-]*:\d", ident):
        return "version"  # a channel or an image tag: as specific as a version
    if _VERSIONISH.match(ident):
        return "version"
    return "ident"


def value_changes(text: str) -> list[ValueChange]:
    """Every value change ``text`` states: all rendered ``key: new (was old)`` forms, else the first other form."""
    t = text[:MAX_UNIT_CHARS]
    found = []
    for segment in re.split(r" · |; |, (?=[^()]*(?:\(|$))", t):
        m = _CHANGE_FORMS[2].search(segment)
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
    t = text[:MAX_UNIT_CHARS]
    found: list[tuple[str, str]] = []
    found.extend((change.render(), "change") for change in value_changes(t))
    role = _ROLE.search(t)
    for name in names_in(t):
        if role:
            # "Greta took over on-call": the name with the few words that say what they do.
            m = re.search(re.escape(name) + r"(?:\s+[^\s,;.]+){1,4}", t)
            ends = [r.end() for r in _ROLE.finditer(m.group())] if m else []
            if m and ends:
                found.append((m.group()[: ends[-1]], "role"))
                continue
        found.append((name, "name"))
    pref = _PREF_PHRASE.search(t)
    if pref:
        found.append((pref.group().rstrip(",.;:"), "preference"))
    choice = _CHOICE.search(t)
    if choice:
        found.append((choice.group().rstrip(",.;:"), "choice"))
    found.extend((m.group(), _date_kind(m.group())) for m in DATE_RE.finditer(t))
    for m in _NUMBER_UNIT.finditer(t):
        digits = re.sub(r"\D", "", m.group())
        year = re.fullmatch(r"(?:19|20)\d\d", digits)  # "2025 request(s)": a year, not a count
        found.append((m.group(), "number" if len(digits) >= 2 and not year else "small"))
    # "build 5207", "export job 2048", "payouts 3.4.19", "pod search-indexer-266": a number is only
    # findable again with the word that says what it counts.
    for m in _LABELLED.finditer(t):
        *label, value = m.group().split()
        while label and label[0] in _GLUE_WORDS:
            label.pop(0)
        if label and label[-1] not in _NOT_LABELS and not re.fullmatch(r"(?:19|20)\d\d", value):
            found.append((" ".join([*label, value]), "labelled"))
    for m in IDENT_RE.finditer(t):
        ident = m.group().strip("`")
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
    return out


_PREF_PHRASE = re.compile(
    r"(?:\b[A-Z][a-z]+\s+)?\b(?:prefers?|preferred|likes|hates|dislikes|loves|would rather|'d rather|"
    r"(?:always|never) wants?|insists? on|(?<=I )(?:really )?(?:like|love|hate|want))\s+"
    r"(?:(?!(?:over|instead|never|not|no|rather|to|in|for|on|at|when|because|so|and|but)\b)[^\s,;.]+\s?){1,4}"
    r"(?:\s*(?:over|instead of|rather than)\s+[^\s,;.]+)?"
)
#: Words a headline can do without: dropping them compresses and re-words at once.
_SLACK_WORDS = frozenset(
    """a an the which is are were be being there here very really just also so then actually basically quite some
    please recorded already currently simply""".split()
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


def telegraph(text: str) -> str:
    """``text`` in headline style: articles and fillers dropped, the rest kept in order.

    A word that ends a sentence or a clause stays, so the text keeps its breaks.
    """
    words = [w for w in text.split() if w[-1:] in ".!?:;" or w.lower().strip(",") not in _SLACK_WORDS]
    return " ".join(words) if words else text


def recompose(text: str, words: int) -> str:
    """At most ``words`` words of ``text`` in a row, then its key phrases: new wording, same facts.

    A summary that copies long runs of its sources does not compress; this
    keeps the head of a line (what it is about) and carries the rest as the
    names, dates, numbers and identifiers it holds.
    """
    short = telegraph(text)
    parts = short.split()
    if len(parts) <= words + 2:
        return short
    change = value_change(short)
    if change is not None:
        rendered = change.render()
        extra = [p for p, kind in key_phrases(short) if kind != "change" and p.lower() not in rendered.lower()][:2]
        return rendered + (" · " + ", ".join(extra) if extra else "")
    cut = _safe_cut(parts, words)  # never split "July | 19" or "840 ms | → 210 ms"
    head = " ".join(parts[:cut]).rstrip(",;:")
    low = head.lower()
    extra = [p for p, _ in key_phrases(short) if not _mostly_in(p, low)][:3]
    return head + (" … " + ", ".join(extra) if extra else " …")


def _mostly_in(phrase: str, text: str) -> bool:
    """Whether most words of ``phrase`` already appear in ``text`` (lower case)."""
    words = phrase.lower().split()
    return sum(w in text for w in words) * 2 > len(words)


_MONTH_WORD = re.compile(rf"^(?:{MONTHS})\.?$|^(?:from|to|at|on|by|was|is|=)$", re.I)


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
