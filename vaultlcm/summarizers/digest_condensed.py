"""A condensed digest: a dated account of the children, decisions merged, facts kept, values marked.

Each child (a leaf or a lower condensed note, in any format: the digest's own,
an LLM's prose, a person's edit) gives one **Timeline** entry per day it
covers (see :mod:`.digest_days`), so an entry never spans two days and the
entries roll up level by level:

    - Nov 2, 09:14–11:30 · CI on main went red twice over the weekend · commit 3f9c2ab;
      edited invoice.py (+8 −3) · LEDG-482, 3,612 invoices, Greta took over on-call [[sum_…|↗]]

its span, what that day was about (the person's request as a phrase in their
words, see :mod:`.leads`), what was done (tallied: commits, pull requests,
files edited, tests) and the facts that came up that day as short key phrases
(people and roles, dates, numbers, identifiers), each said once per note. The
facts are the core of the budget (the model reads these notes when the raw
messages no longer fit); the framing (span, topic, tally) is a small share
of it, so the account costs the reader few facts. **Decided** merges the
decisions of all children and marks values that changed (``deadline: July 19
(was July 4)``); **Open** keeps what is still to do, the newest first.
Wording is re-composed, never long runs copied from the children, so each
level compresses instead of repeating. Correction lines are kept verbatim.
"""

from __future__ import annotations

import functools
import posixpath
import re
from dataclasses import dataclass, field

from .base import SourceItem
from .body import (
    CONDENSED_SECTIONS,
    DECIDED,
    DONE,
    FOUND,
    OPEN,
    TIMELINE,
    BodyLine,
    ParsedBody,
    correction_line,
    parse_body,
    strip_links,
)
from .digest import Draft, Unit
from .digest_days import Day, child_days
from .facts import CHITCHAT_RE, facts_of, score, split_sentences
from .leads import lead, restate
from .phrases import PHRASE_WEIGHT, key_phrases, time_span, value_changes

#: Words of what a stretch of work was about a timeline entry opens with (whole phrases, articles and all).
LEAD_WORDS = {1: 10, 2: 9}
DEFAULT_LEAD_WORDS = 8
DECISION_WORDS = 7
#: Weight of a day's second topic (less for a third): below dates, numbers and tickets, which a reader
#: comes back for; a topic is what a day was about, the link leads to the rest of it.
SECOND_TOPIC = {1: 6}
DEFAULT_SECOND_TOPIC = 4
#: High up (above depth 2), what was done each day (commits, pull requests) outranks most facts: it is the account.
FIRST_DONE_BONUS = 2
#: A note with at most this many entries (or at depth 1 or 2) says every day in full: an account to read.
FULL_ACCOUNT_ENTRIES = 6
FULL_ACCOUNT_DEPTH = 2
#: Weight of the entry for a child's second and later days in a note with more entries than that.
LATER_DAY_WEIGHT = 7
#: Weight of what a later day was about, there: the date and the facts say enough when room is short.
LATER_DAY_TOPIC = 4
#: Key phrases one timeline entry may carry (the weightiest: changes, people, dates, numbers).
MAX_FACTS = {1: 14}
DEFAULT_MAX_FACTS = 24
MAX_CODE_NAMES = 4
#: Open items a note above depth 1 keeps: the newest state, not every to-do ever written.
MAX_OPEN_ABOVE = 6

_EDITED = re.compile(r"\bedited (?:\(\d+×\) )?(.+?) \(\+(\d+) −(\d+)\)")
_EDITED_COUNT = re.compile(r"\bedited (\d+) files? \(\+(\d+) −(\d+)\)")
_CREATED = re.compile(r"\bcreated ([^\s;,]+)")
_COMMITS = re.compile(r"\b(?:git commit|commits?) ((?:[0-9a-f]{7,40})(?:, [0-9a-f]{7,40})*)")
_PRS = re.compile(r"\b(?:opened )?PRs? ((?:#\d+)(?:, #\d+)*)")
_ISSUES = re.compile(r"\b(?:filed )?issues? ((?:#\d+)(?:, #\d+)*)")
_TESTS = re.compile(r"(?:\bran `[^`]*\b(?:pytest|test)[^`]*`[^→]*→|\btests:) ([^·;\[]+?)(?=\s*(?:·|;|\[\[|$))")
_COMMANDS = re.compile(r"^ran `|\b(\d+) commands?\b")
_READS = re.compile(r"^read (\d+) files|^read (.+)$|\bread (\d+) files\b")


@dataclass
class Tally:
    """What was done in a stretch of history, counted."""

    edited: list[str] = field(default_factory=list)
    added: int = 0
    removed: int = 0
    created: list[str] = field(default_factory=list)
    commits: list[str] = field(default_factory=list)
    prs: list[str] = field(default_factory=list)
    issues: list[str] = field(default_factory=list)
    tests: str = ""
    commands: int = 0
    reads: int = 0

    def absorb(self, text: str) -> None:
        """Count one action line (a leaf's Done line) or one tally part of a condensed line."""
        counted = _EDITED_COUNT.search(text)
        if counted:
            self.edited.extend(f"file {i}" for i in range(int(counted.group(1))) if f"file {i}" not in self.edited)
            self.added, self.removed = self.added + int(counted.group(2)), self.removed + int(counted.group(3))
        else:
            edited = _EDITED.search(text)
            if edited:
                for path in edited.group(1).split(", "):
                    name = posixpath.basename(path.strip()) or path.strip()
                    if name and name not in self.edited:
                        self.edited.append(name)
                self.added, self.removed = self.added + int(edited.group(2)), self.removed + int(edited.group(3))
        for pattern, into in ((_COMMITS, self.commits), (_PRS, self.prs), (_ISSUES, self.issues)):
            m = pattern.search(text)
            if m:
                into.extend(x for x in m.group(1).split(", ") if x not in into)
        created = _CREATED.search(text)
        if created:
            name = posixpath.basename(created.group(1)) or created.group(1)
            if name not in self.created:
                self.created.append(name)
        tests = _TESTS.search(text)
        if tests:
            self.tests = tests.group(1).strip(" ;,")
        commands = _COMMANDS.search(text)
        if commands and not tests and not _COMMITS.search(text):
            self.commands += int(commands.group(1)) if commands.group(1) else 1
        reads = _READS.search(text)
        if reads:
            n = reads.group(1) or reads.group(3)
            self.reads += int(n) if n else len(reads.group(2).split(", "))

    def parts(self) -> list[tuple[str, int]]:
        """``(text, importance)`` of each thing worth saying, most telling first."""
        out: list[tuple[str, int]] = []
        if self.commits:
            out.append(("commit" + ("s " if len(self.commits) > 1 else " ") + ", ".join(self.commits[:3])
                        + (f" +{len(self.commits) - 3}" if len(self.commits) > 3 else ""), 5))
        if self.prs:
            out.append(("PR " + ", ".join(self.prs[:3]), 6))
        if self.issues:
            out.append(("issue " + ", ".join(self.issues[:3]), 5))
        if self.tests:
            out.append((f"last tests: {self.tests}", 5 if "fail" in self.tests or "error" in self.tests else 3))
        if self.edited:
            named = [e for e in self.edited if not e.startswith("file ")]
            if named and len(named) == len(self.edited) and len(named) <= 3:
                out.append((f"edited {', '.join(named)} (+{self.added} −{self.removed})", 4))
            else:
                out.append((f"edited {len(self.edited)} files (+{self.added} −{self.removed})", 4))
        if self.created:
            out.append(("created " + ", ".join(self.created[:3]) + ("…" if len(self.created) > 3 else ""), 5))
        if self.commands:
            out.append((f"{self.commands} command{'s' if self.commands != 1 else ''}", 2))
        if self.reads:
            out.append((f"read {self.reads} file{'s' if self.reads != 1 else ''}", 1))
        return out


@dataclass
class Child:
    """A child note as the condensed digest sees it."""

    index: int
    item: SourceItem
    body: ParsedBody
    timeline: bool
    """Whether the child is itself a condensed digest (has a Timeline)."""


def _topics(child: Child, day: Day, depth: int) -> list[str]:
    """What a child was about that day: a readable phrase per topic, the first thing asked first.

    From a condensed child, the headline of each of its entries that day (first
    topics before second ones); from a leaf or any other note, the person's
    request that day, else what says the most.
    """
    n = LEAD_WORDS.get(depth, DEFAULT_LEAD_WORDS)
    if child.timeline:
        heads = []
        for line in day.lines:
            parts = [p.strip() for p in strip_links(line.text).split(" · ")]
            heads.append([t for t in (parts[1] if len(parts) > 1 else parts[0]).split("; ") if t.strip(" …")])
        found = [h[k] for k in range(3) for h in heads if len(h) > k]
    else:
        lines = ([ln for ln in day.lines if ln.section == "Asked"] or [ln for ln in day.lines if ln.section == FOUND]
                 or day.lines)
        said = [[s.strip(" …") for s in split_sentences(strip_links(line.text)) if s.strip(" …")] for line in lines]
        sentences = [(s, k, i) for i, line_sentences in enumerate(said) for k, s in enumerate(line_sentences)]
        # What the person asked for, not the "Nice." or "Back from lunch." around it.
        best = next(((s, k, i) for s, k, i in sentences if len(s.split()) >= 4 and not CHITCHAT_RE.match(s)
                     and (s.rstrip().endswith("?") or score(s) >= 3)), sentences[0] if sentences else None)
        found = []
        if best is not None:
            text, k, i = best
            # "Can you dig in?" stands for the sentence before it, which says what it is about.
            before = next((s for s in reversed(said[i][:k]) if len(s.split()) >= 6 and not CHITCHAT_RE.match(s)), None)
            found = [before if before and len(text.split()) < 6 else text]
    out: list[str] = []
    for text in found:
        short = lead(text, n)
        if short.strip(" …") and not _similar_to_any(short, out):
            out.append(short)
    return out


def _facts(child: Child, lines: list[BodyLine]) -> list[tuple[str, int]]:
    """Key phrases of a child's ``lines`` with their importance (done lines excluded: they are tallied).

    Code names (``issue_invoice(nz_account, lines)``) count little and a few of them say enough.
    """
    out: list[tuple[str, int]] = []
    seen: list[str] = []
    code = 0
    for line in lines:
        text = strip_links(line.text)
        if line.section == DONE:
            # What was done is tallied; what it showed (a failed build, a crashed job, a tag) is a fact.
            if "→" not in text:
                continue
            text = text.split("→", 1)[1]
        if child.timeline and line.section == TIMELINE:
            text = " · ".join(text.split(" · ")[2:])  # the facts part; span and topic are said already
        for phrase, kind in key_phrases(text):
            if kind == "change":
                continue  # said once, in Decided, with what it replaced
            low = phrase.lower()
            if any(low in s for s in seen) or (kind == "ident" and code >= MAX_CODE_NAMES):
                continue
            code += kind == "ident"
            seen.append(low)
            out.append((phrase, PHRASE_WEIGHT[kind]))
    return out


_WORD = re.compile(r"\w+")
#: How a rendered value change marks the value it replaced.
_WAS = re.compile(r"\(was [^)]+\)")


@functools.lru_cache(maxsize=1 << 12)
def _words(text: str) -> frozenset[str]:
    """The words of ``text``, lower-cased, remembered: each new line is compared with every line kept."""
    return frozenset(_WORD.findall(text.lower()))


def _similar(a: str, b: str) -> bool:
    wa, wb = _words(a), _words(b)
    if not wa or not wb:
        return False
    return len(wa & wb) / min(len(wa), len(wb)) >= 0.7


def _similar_to_any(text: str, others: list[str]) -> bool:
    """``any(_similar(text, o) for o in others)``, the words of ``text`` looked up once, not once a line."""
    wa = _words(text)
    if not wa:
        return False
    na = len(wa)
    for other in others:
        wb = _words(other)
        if wb and len(wa & wb) / min(na, len(wb)) >= 0.7:
            return True
    return False


def _key_words(key: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(key.lower()) if w not in ("the", "a", "an", "of", "for", "our"))


def condensed_draft(items: tuple[SourceItem, ...], depth: int) -> Draft:
    """Scored units of a condensed note at ``depth`` over ``items`` (lower summaries)."""
    draft = Draft(order=CONDENSED_SECTIONS)
    children = []
    for index, item in enumerate(items):
        body = parse_body(item.text)
        children.append(Child(index, item, body, bool(body.section(TIMELINE))))
        for line in body.corrections:
            if line not in draft.corrections:
                draft.corrections.append(line)
        for text in item.corrections:
            line = correction_line(text, item.link)
            if line not in draft.corrections:
                draft.corrections.append(line)
    last = len(children) - 1
    decisions: list[tuple[str, Child, int]] = []
    opens: list[tuple[str, Child, int]] = []
    changes: dict[frozenset[str], list[tuple[str, str, str, Child]]] = {}
    said: set[str] = set()
    days_of = [child_days(c.body, c.item.at, c.item.latest_at) for c in children]
    # High up, one child covers weeks: a line per day in full would spend the note on dates.
    economy = depth > FULL_ACCOUNT_DEPTH and sum(map(len, days_of)) > FULL_ACCOUNT_ENTRIES
    heads: list[str] = []
    for child in children:
        heads.extend(_timeline_units(draft, child, depth, said, days_of[child.index], economy))
        for n, body_line in enumerate(child.body.lines):
            text = strip_links(body_line.text)
            for change in value_changes(text):
                key = _key_words(change.key)
                match = next((k for k in changes if k and key and (k <= key or key <= k)), key)
                changes.setdefault(match, []).append((change.key, change.old, change.new, child))
            if body_line.section == DECIDED:
                decisions.append((text, child, n))
            elif body_line.section in (FOUND, "Asked"):
                # A line holds several sentences of one message: only the deciding one is a decision.
                decisions.extend((sentence, child, n) for sentence in split_sentences(text)
                                 if facts_of(sentence).decision)
            elif body_line.section == OPEN:
                opens.append((text, child, n))
    _change_units(draft, changes)
    kept: list[str] = list(heads)  # a decision the timeline says already is not said twice
    for text, child, n in reversed(decisions):  # the newest wording of a decision wins
        short = restate(text, DECISION_WORDS)
        if change_of(short) or _similar_to_any(short, kept) or not _says_what(text):
            continue
        kept.append(short)
        draft.units.append(Unit(DECIDED, ("decided", child.index, n), (child.index, 1, n), short, child.item.link,
                                6 + min(4, facts_of(text).substance)))
    kept = []
    for text, child, n in reversed(opens):
        if depth > 1 and len(kept) >= MAX_OPEN_ABOVE:
            break
        short = restate(text, DECISION_WORDS)
        if _similar_to_any(short, kept):
            continue
        kept.append(short)
        newest = 3 if child.index == last else 1 if child.index == last - 1 else 0
        draft.units.append(Unit(OPEN, ("open", child.index, n), (child.index, 2, n), short, child.item.link,
                                5 + newest))
    if not draft.units and items:
        draft.fallback = f"{len(items)} summaries"
        draft.fallback_link = items[0].link
    return draft


_MARKER_WORDS = frozenset(
    "i i'd i'll we we'll let's lets go with going decided decide decision agreed agree chose choose opted settled "
    "approved rejected rejecting reject plan is sticking recorded as will use switch to the a an and it that "
    "this".split()
)


def _says_what(decision: str) -> bool:
    """Whether a decision names what was decided ("I'd go with 1." alone does not)."""
    words = [w.strip(".,;:!?()`'\"").lower() for w in decision.split()]
    return sum(1 for w in words if len(w) >= 3 and w.isalpha() and w not in _MARKER_WORDS) >= 2


def change_of(text: str) -> bool:
    """Whether ``text`` is a rendered value change (those are merged apart)."""
    return bool(_WAS.search(text))


def _change_units(draft: Draft, changes: dict[frozenset[str], list[tuple[str, str, str, Child]]]) -> None:
    """One line per value that changed: the newest value, then what it was before."""
    for entries in changes.values():
        key, _, new, child = entries[-1]
        before: list[str] = []
        for _, old, value, _ in reversed(entries):
            for v in (value, old):
                if v and v.lower() != new.lower() and v not in before:
                    before.append(v)
        if not before:
            continue
        text = f"{key}: {new} (was {', '.join(before[:5])})"
        draft.units.append(Unit(DECIDED, ("change", key), (child.index, 0, len(draft.units)), text, child.item.link,
                                10))


def _timeline_units(draft: Draft, child: Child, depth: int, said: set[str], days: list[Day],
                    economy: bool) -> list[str]:
    """One timeline entry per day the child covers: ``span · topics · what was done · facts``.

    ``said`` holds the facts (lower case) an earlier entry of this note carries
    already: a fact is said once per note, where it first came up. Returns the
    topics every kept entry opens with.
    """
    heads: list[str] = []
    i = child.index
    link = child.item.link
    for k, day in enumerate(days):
        line = ("timeline", i, k)
        # Every child opens with its first day; high up, where one child covers weeks, a later day's
        # entry (its date alone, no clock) comes with the facts that earn it, never on its own, so the
        # dates do not crowd out what happened on them.
        extra_day = k > 0 and economy
        span = day.span(clock=not extra_day) or (time_span(child.item.at, child.item.latest_at)
                                                 if len(days) == 1 else "")
        draft.units.append(Unit(TIMELINE, line, (i, k, 0, 0), span or f"part {i + 1}", link,
                                LATER_DAY_WEIGHT if extra_day else 30, part="span", required=True,
                                alone=not extra_day))
        topics = _topics(child, day, depth)
        second = SECOND_TOPIC.get(depth, DEFAULT_SECOND_TOPIC)
        for t, topic in enumerate(topics[: 6 if depth == 1 else 3]):
            weight = (LATER_DAY_TOPIC if extra_day else 30) if t == 0 else second - t
            if t == 0 and not extra_day:
                heads.append(topic)
            draft.units.append(Unit(TIMELINE, line, (i, k, 1, t), topic, link, weight, joiner="; ", part="gist",
                                    required=t == 0 and not extra_day))
        tally = Tally()
        for body_line in day.lines:
            if body_line.section in (DONE, TIMELINE):
                tally.absorb(strip_links(body_line.text))
        if depth > 1:
            # Counts of routine work, and which test run came last, say nothing this far up.
            tally.commands = tally.reads = 0
            tally.tests = ""
        parts = tally.parts()
        for t, (text, weight) in enumerate(parts):
            # An account says what was done each day: the most telling of it outranks most facts up high.
            weight += FIRST_DONE_BONUS if t == 0 and depth > FULL_ACCOUNT_DEPTH and not extra_day else 0
            draft.units.append(Unit(TIMELINE, line, (i, k, 2, t), text, link, weight, joiner="; ", part="done"))
        done = " ".join(text for text, _ in parts).lower()
        facts = [f for f in _facts(child, day.lines) if f[0].lower() not in done and f[0].lower() not in said]
        facts = sorted(facts, key=lambda pw: -pw[1])[: MAX_FACTS.get(depth, DEFAULT_MAX_FACTS)]
        said.update(f[0].lower() for f in facts)
        for t, (phrase, weight) in enumerate(facts):
            draft.units.append(Unit(TIMELINE, line, (i, k, 3, t), phrase, link, weight, joiner=", ",
                                    part="facts"))
    return heads
