"""A condensed digest: a dated account of the children, decisions merged, facts kept, values marked.

Each child (a leaf or a lower condensed note, in any format: the digest's own,
an LLM's prose, a person's edit) becomes one **Timeline** entry per day it
covers (see :mod:`.digest_days`), so an entry never spans two days:

    - Nov 2, 09:14–11:30 · CI on main went red twice over the weekend → commit 3f9c2ab;
      edited invoice.py (+8 −3) · LEDG-482 [[sum_…|↗]]

its span, what was asked that day (the person's request as a whole clause,
articles and all), what was done after ``→`` (tallied: a choice made, commits,
pull requests, files edited, tests) and the tickets it was about: a handful,
never every identifier of the child. **Decided** merges the decisions of all
children and marks values that changed (``deadline: July 19 (was July 4)``);
**Found** keeps people and roles, preferences, dates, numbers and tickets,
each as a short phrase with what it is about (shorter the higher the note);
**Open** keeps what is still to do, the newest first. Phrases are cut at
clause boundaries, never long runs copied from the children, so each level
compresses instead of repeating. Correction lines are kept verbatim.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

from .base import SourceItem
from .body import (
    CONDENSED_SECTIONS,
    DECIDED,
    DONE,
    FOUND,
    FOUND_ABOVE,
    OPEN,
    TIMELINE,
    BodyLine,
    ParsedBody,
    correction_line,
    parse_body,
    strip_links,
)
from .clauses import bare, clause, fact_window
from .digest import Draft, Unit
from .digest_days import Day, child_days
from .facts import CHITCHAT_RE, facts_of, score, split_sentences
from .phrases import PHRASE_WEIGHT, key_phrases, time_span, value_changes

#: Words of what was asked a timeline entry keeps (whole clauses, articles and all), by depth.
GOAL_WORDS = {1: 11}
DEFAULT_GOAL_WORDS = 9
#: Topics one day of one child may list: the first things asked are what the day was about.
GOALS_PER_DAY: dict[int, int] = {}
DEFAULT_GOALS_PER_DAY = 2
#: A day's second topic comes when there is room left after what was done and the facts; in the
#: notes at the top, which a person reads for the overview, it comes before the facts.
SECOND_GOAL_WEIGHT = {1: 5, 2: 5}
DEFAULT_SECOND_GOAL_WEIGHT = 8
DECISION_WORDS = 8
#: What was done (commits, pull requests, files) is half of an account: it outranks most facts, and
#: at the top, where facts are a click away in the notes below, all of them.
DONE_BONUS = {1: 2, 2: 2}
DEFAULT_DONE_BONUS = 4
#: Tickets one timeline entry may carry: a handful; people, dates and numbers are said in Found.
MAX_LINE_FACTS = {1: 4}
DEFAULT_MAX_LINE_FACTS = 3
LINE_FACT_KINDS = frozenset({"ticket"})
#: Words around a fact a Found phrase keeps: shorter the higher the note, so it never copies a child's line.
FOUND_WORDS = {1: 7, 2: 6}
DEFAULT_FOUND_WORDS = 5
FOUND_FACT_KINDS = frozenset({"role", "preference", "ticket", "date", "number", "labelled", "name"})
FACTS_PER_FOUND_LINE = {1: 3}
DEFAULT_FACTS_PER_FOUND_LINE = 4
#: A fact a person may ask about again outranks an open item's or a decision's wording.
FOUND_BONUS = 1
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
            out.append(("commit" + ("s " if len(self.commits) > 1 else " ") + ", ".join(self.commits[:2])
                        + (f" +{len(self.commits) - 2}" if len(self.commits) > 2 else ""), 5))
        if self.prs:
            out.append(("PR " + ", ".join(self.prs[:3]), 6))
        if self.issues:
            out.append(("issue " + ", ".join(self.issues[:2]), 5))
        if self.tests:
            tests = self.tests if self.tests.count(", ") <= 2 else ", ".join(self.tests.split(", ")[:3]) + " …"
            out.append((f"last tests: {tests}", 5 if "fail" in self.tests or "error" in self.tests else 3))
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


@dataclass
class Entry:
    """A condensed child's timeline entry read back: ``span · goal → done · facts``."""

    goals: list[str]
    done: str
    facts: str


def parse_entry(text: str) -> Entry:
    """Read a timeline entry of the digest's own format (older ``span · gist · done · facts`` too)."""
    parts = text.split(" · ")
    rest = parts[1:]
    facts = rest.pop() if len(rest) >= 2 else ""
    middle = " · ".join(rest)
    goal, done = middle, ""
    if " → " in middle:
        head, tail = middle.rsplit(" → ", 1)
        probe = Tally()
        probe.absorb(tail)
        if probe.parts() or _choices(tail):
            goal, done = head, tail
    if " · " in goal:  # the older form: the gist, then what was done
        goal, older = goal.split(" · ", 1)
        done = "; ".join(x for x in (older, done) if x)
    goals = [g.strip() for g in goal.split("; ") if g.strip(" …")]
    return Entry(goals, done, facts)


def _choices(text: str) -> list[str]:
    return [p for p, kind in key_phrases(text) if kind == "choice"]


def _asks(lines: list[BodyLine]) -> tuple[list[str], list[str]]:
    """What the person asked for that day: their requests, and the other things they said.

    A short request ("Can you dig in?") stands for the sentence before it,
    which says what it is about. "Nice." or "Back from lunch." is neither.
    """
    asked = [ln for ln in lines if ln.section == "Asked"] or [ln for ln in lines if ln.section in (FOUND, "")]
    requests: list[str] = []
    rest: list[str] = []
    for line in asked:
        # A leaf joins the sentences it kept of one message with " … ": those marks are not the person's.
        sentences = [s.strip(" …") for s in split_sentences(strip_links(line.text))
                     if s.strip(" …") and not _CODE_LIKE.search(s)]
        for i, sentence in enumerate(sentences):
            if len(sentence.split()) < 3 or CHITCHAT_RE.match(sentence):
                continue
            if _REQUEST.search(bare(sentence)):
                context = next((s for s in reversed(sentences[:i]) if len(s.split()) >= 6), None)
                requests.append(context if context and len(sentence.split()) < 6 else sentence)
            elif score(sentence) >= 3 or len(sentence.split()) >= 4:
                rest.append(sentence)
    return list(dict.fromkeys(requests)), rest


def _goals(child: Child, day: Day, depth: int) -> list[str]:
    """A few readable words of what the child was about that day, one phrase per topic.

    From a condensed child, the first topic of each of its entries that day
    comes before any second one; from a leaf, the person's requests, and
    something else they said only when they asked nothing.
    """
    n = GOAL_WORDS.get(depth, DEFAULT_GOAL_WORDS)
    if child.timeline:
        entries = [parse_entry(strip_links(line.text)).goals for line in day.lines]
        found = [goals[k] for k in range(2) for goals in entries if len(goals) > k and not _CODE_LIKE.search(goals[k])]
    else:
        requests, rest = _asks(day.lines)
        # Told, not asked: what says the most ("I'm writing the postmortem", not "Whoa, no").
        found = requests or sorted(rest, key=lambda s: -min(score(s), 4))[:1]
    out: list[str] = []
    for text in found:
        short = clause(text, n)
        if short.strip(" …") and not any(_similar(short, o) for o in out):
            out.append(short)
    return out[: GOALS_PER_DAY.get(depth, DEFAULT_GOALS_PER_DAY)]


def _day_work(child: Child, day: Day) -> tuple[Tally, list[str], str]:
    """What was done that day (tallied), the choices made, and the text its facts come from."""
    tally = Tally()
    choices: list[str] = []
    texts: list[str] = []
    for line in day.lines:
        text = strip_links(line.text)
        if child.timeline:
            entry = parse_entry(text)
            tally.absorb(entry.done)
            choices.extend(_choices(entry.done))
            texts.append(entry.facts)
        elif line.section == DONE:
            tally.absorb(text)
            if "→" in text:  # what it showed (a failed build, a tag) is a fact; the action is tallied
                texts.append(text.split("→", 1)[1])
        else:
            if line.section in (DECIDED, FOUND, "Asked"):
                choices.extend(_choices(text))
            texts.append(text)
    return tally, list(dict.fromkeys(choices)), " · ".join(texts)


def _line_facts(text: str, said: str, depth: int) -> list[tuple[str, int]]:
    """The handful of names, tickets and dates a timeline entry carries (the rest is in Found)."""
    out: list[tuple[str, int]] = []
    seen = said.lower()
    for phrase, kind in key_phrases(text):
        if kind not in LINE_FACT_KINDS or _WEEKDAY.match(phrase):
            continue
        low = phrase.lower()
        if low in seen:
            continue
        seen += " " + low
        out.append((phrase, PHRASE_WEIGHT[kind]))
    out.sort(key=lambda pw: -pw[1])
    return out[: MAX_LINE_FACTS.get(depth, DEFAULT_MAX_LINE_FACTS)]


#: A sentence that asks for something: a question, or an order ("Fix the bug first", "Can you dig in?").
_REQUEST = re.compile(
    r"\?\s*$|^(?:(?:can|could|would|will) you|please|let'?s|we (?:need|should)|i (?:need|want|'d like)|"
    r"(?:i'?m|i am|we'?re|we are) (?:writing|working on|preparing|trying to|planning|drafting)|"
    r"(?:check|fix|refactor|add|look|run|write|make|bump|draft|tail|show|profile|dig|find|investigate|update|"
    r"remove|review|merge|commit|push|deploy|wire|include|pull|keep|move|switch|leave|file|open|try|plan)\b)",
    re.I,
)
_WEEKDAY = re.compile(r"^(?:mon|tues|wednes|thurs|fri|satur|sun)day$", re.I)
#: What makes a sentence code or a log line rather than something a person would say.
_CODE_LIKE = re.compile(r"==|!=|\)\)|=>|->|\bassert\b|\bdef |\breturn\b|\braise \w|\bimport \w|\w\(['\"]|\.where\(|[{}<>]|^\W")


def _fact_sentence(sentence: str) -> bool:
    """Whether ``sentence`` can state a fact worth repeating up the DAG (not a question, not code)."""
    s = sentence.strip()
    return len(s.split()) >= 4 and not s.endswith("?") and not _CODE_LIKE.search(s)


def _similar(a: str, b: str) -> bool:
    wa, wb = set(re.findall(r"\w+", a.lower())), set(re.findall(r"\w+", b.lower()))
    if not wa or not wb:
        return False
    return len(wa & wb) / min(len(wa), len(wb)) >= 0.7


def _key_words(key: str) -> frozenset[str]:
    return frozenset(w for w in re.findall(r"\w+", key.lower()) if w not in ("the", "a", "an", "of", "for", "our"))


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
    seen_facts: set[str] = set()
    said: list[str] = []
    for child in children:
        goals = _timeline_units(draft, child, depth)
        said.extend(goals)
        _found_units(draft, child, depth, seen_facts, goals)
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
    kept: list[str] = list(said)  # a decision the timeline says already is not said twice
    for text, child, n in reversed(decisions):  # the newest wording of a decision wins
        short = clause(text, DECISION_WORDS)
        if not _says_what(short):  # "Let's do it" says that, not what: read on to what was decided
            short = clause(text, 2 * DECISION_WORDS)
        if change_of(short) or any(_similar(short, k) for k in kept) or not _says_what(short):
            continue
        kept.append(short)
        draft.units.append(Unit(DECIDED, ("decided", child.index, n), (child.index, 1, n), short, child.item.link,
                                6 + min(4, facts_of(text).substance)))
    kept = []
    for text, child, n in reversed(opens):
        if depth > 1 and len(kept) >= MAX_OPEN_ABOVE:
            break
        short = clause(text, DECISION_WORDS)
        if any(_similar(short, k) for k in kept):
            continue
        kept.append(short)
        newest = 3 if child.index == last else 1 if child.index == last - 1 else 0
        draft.units.append(Unit(OPEN, ("open", child.index, n), (child.index, 3, n), short, child.item.link,
                                5 + newest))
    if not draft.units and items:
        draft.fallback = f"{len(items)} summaries"
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
    return bool(re.search(r"\(was [^)]+\)", text))


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


def _timeline_units(draft: Draft, child: Child, depth: int) -> list[str]:
    """One entry per day the child covers: ``span · what it was about → what was done · which ticket``.

    Returns the goals said, so that Found does not say them again.
    """
    said_goals: list[str] = []
    i = child.index
    link = child.item.link
    for d, day in enumerate(child_days(child.body, child.item.at, child.item.latest_at)):
        line = ("timeline", i, d)
        pos = (i, 0, d)
        span = day.span() or time_span(child.item.at, child.item.latest_at) or f"part {i + 1}"
        draft.units.append(Unit(TIMELINE, line, (*pos, 0), span, link, 30, part="span", required=True))
        goals = _goals(child, day, depth)
        said_goals.extend(goals)
        for k, goal in enumerate(goals):
            weight = 30 if k == 0 else SECOND_GOAL_WEIGHT.get(depth, DEFAULT_SECOND_GOAL_WEIGHT)
            draft.units.append(Unit(TIMELINE, line, (*pos, 1 + k), goal, link, weight,
                                    joiner="; ", part="goal", required=k == 0))
        tally, choices, text = _day_work(child, day)
        tally.commands = tally.reads = 0  # counts of routine work tell a person nothing
        if depth > 1:
            tally.tests = ""  # which test run came last says nothing this far up
        done = [(c, PHRASE_WEIGHT["choice"]) for c in choices[:1]] + tally.parts()
        bonus = DONE_BONUS.get(depth, DEFAULT_DONE_BONUS)
        for k, (part, weight) in enumerate(done):
            draft.units.append(Unit(TIMELINE, line, (*pos, 10 + k), part, link, weight + bonus, joiner="; ",
                                    part="done", lead=" → "))
        said = " ".join([*goals, *(p for p, _ in done)])
        for k, (phrase, weight) in enumerate(_line_facts(text, said, depth)):
            draft.units.append(Unit(TIMELINE, line, (*pos, 100 + k), phrase, link, weight, joiner=", ",
                                    part="facts"))
    return said_goals


def _found_units(draft: Draft, child: Child, depth: int, seen: set[str], goals: list[str]) -> None:
    """What the child found that a person would ask about again, each fact with what it is about.

    ``Greta took over as on-call lead``, ``the migration is scheduled for
    October 4``, ``payments-api at 42 ms``: one phrase per fact, shorter the
    higher the note, so facts reach the top without copying whole sentences.
    """
    words = FOUND_WORDS.get(depth, DEFAULT_FOUND_WORDS)
    sources: list[tuple[int, str]] = []
    for n, line in enumerate(child.body.lines):
        text = strip_links(line.text)
        if child.timeline:
            if line.section == FOUND_ABOVE:
                sources.extend((n, part) for part in text.split("; ") if part.strip(" …"))
        elif line.section in (FOUND, "Asked"):
            sources.extend((n, s) for s in split_sentences(text) if _fact_sentence(s) and not facts_of(s).decision)
    k = 0
    for n, sentence in sources:
        phrases = [(p, kind) for p, kind in key_phrases(sentence) if kind in FOUND_FACT_KINDS
                   and not _WEEKDAY.match(p)]
        if not phrases:
            continue
        phrase, kind = phrases[0]
        if phrase.lower() in seen or any(_similar(clause(sentence, GOAL_WORDS[1]), g) for g in goals):
            continue  # said already, here or in the timeline
        seen.add(phrase.lower())
        # A child's own Found phrase is already short: cut again, it would start mid-sentence.
        short = child.timeline and len(sentence.split()) <= FOUND_WORDS[1]
        text = (sentence if short else fact_window(sentence, phrase, words)).rstrip(".")
        # A few phrases to a line: short lines, and one link for several facts.
        per_line = FACTS_PER_FOUND_LINE.get(depth, DEFAULT_FACTS_PER_FOUND_LINE)
        draft.units.append(Unit(FOUND_ABOVE, ("found", child.index, k // per_line), (child.index, 2, k),
                                text, child.item.link, PHRASE_WEIGHT[kind] + FOUND_BONUS, joiner="; ", part="found"))
        k += 1
