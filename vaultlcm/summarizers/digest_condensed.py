"""A condensed digest: a dated timeline of the children, decisions merged, values marked.

Each child (a leaf or a lower condensed note, in any format: the digest's own,
an LLM's prose, a person's edit) becomes one **Timeline** line:

    - Nov 2, 09:14–11:30 · fix flaky due-date test LEDG-482 · edited invoice.py (+8 −3) ·
      3,612 invoices, Priya [[sum_…|↗]]

its time span, what it was about (a few words of what was asked), what was
done (tallied: files edited, tests, commits, pull requests) and the facts it
holds as short key phrases (people and roles, dates, numbers, identifiers).
**Decided** merges the decisions of all children and marks values that
changed (``deadline: July 19 (was July 4)``); **Open** keeps what is still to
do, the newest first. Wording is re-composed, never long runs copied from the
children, so each level compresses instead of repeating. Correction lines are
kept verbatim.
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
    ParsedBody,
    correction_line,
    parse_body,
    strip_links,
)
from .digest import Draft, Unit
from .facts import CHITCHAT_RE, facts_of, score, split_sentences
from .phrases import (
    PHRASE_WEIGHT,
    first_words,
    key_phrases,
    recompose,
    telegraph,
    time_span,
    value_changes,
    without_interjections,
)

#: Words of a child's own wording a condensed line may repeat in a row (8-grams are the measure of copying).
GIST_WORDS = {1: 9, 2: 7}
DEFAULT_GIST_WORDS = 5
DECISION_WORDS = 7
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


def _gist(child: Child, depth: int) -> list[str]:
    """What a child was about: a few re-worded words per topic."""
    n = GIST_WORDS.get(depth, DEFAULT_GIST_WORDS)
    if child.timeline:
        topics = []
        for line in child.body.section(TIMELINE):
            parts = [p.strip() for p in strip_links(line.text).split(" · ")]
            topic = parts[1] if len(parts) > 1 else parts[0]
            topics.append(first_words(telegraph(topic.split(" … ")[0]), n))
        return [t for t in dict.fromkeys(topics) if t.strip(" …")]
    lines = child.body.section("Asked") or child.body.section(FOUND) or child.body.lines
    sentences = [s for line in lines for s in split_sentences(strip_links(line.text)) if s.strip(" …")]
    # What the person asked for, not the "Nice." or "Back from lunch." around it.
    best = next((s for s in sentences if len(s.split()) >= 4 and not CHITCHAT_RE.match(s)
                 and (s.rstrip().endswith("?") or score(s) >= 3)), sentences[0] if sentences else "")
    text = first_words(telegraph(without_interjections(best)), n)
    return [text] if text.strip(" …") else []


def _facts(child: Child) -> list[tuple[str, int]]:
    """Key phrases of a child with their importance (done lines excluded: they are tallied).

    Code names (``issue_invoice(nz_account, lines)``) count little and a few of them say enough.
    """
    out: list[tuple[str, int]] = []
    seen: list[str] = []
    code = 0
    for line in child.body.lines:
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


@functools.lru_cache(maxsize=1 << 12)
def _words(text: str) -> frozenset[str]:
    """The words of ``text``, lower-cased, remembered: each new line is compared with every line kept."""
    return frozenset(re.findall(r"\w+", text.lower()))


def _similar(a: str, b: str) -> bool:
    wa, wb = _words(a), _words(b)
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
    for child in children:
        _timeline_units(draft, child, depth)
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
    kept: list[str] = []
    for text, child, n in reversed(decisions):  # the newest wording of a decision wins
        short = recompose(text, DECISION_WORDS)
        if change_of(short) or any(_similar(short, k) for k in kept) or not _says_what(text):
            continue
        kept.append(short)
        draft.units.append(Unit(DECIDED, ("decided", child.index, n), (child.index, 1, n), short, child.item.link,
                                6 + min(4, facts_of(text).substance)))
    kept = []
    for text, child, n in reversed(opens):
        if depth > 1 and len(kept) >= MAX_OPEN_ABOVE:
            break
        short = recompose(text, DECISION_WORDS)
        if any(_similar(short, k) for k in kept):
            continue
        kept.append(short)
        newest = 3 if child.index == last else 1 if child.index == last - 1 else 0
        draft.units.append(Unit(OPEN, ("open", child.index, n), (child.index, 2, n), short, child.item.link,
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


def _timeline_units(draft: Draft, child: Child, depth: int) -> None:
    i = child.index
    line = ("timeline", i)
    link = child.item.link
    span = time_span(child.item.at, child.item.latest_at) or f"part {i + 1}"
    draft.units.append(Unit(TIMELINE, line, (i, 0, 0), span, link, 30, part="span", required=True))
    topics = _gist(child, depth)
    for k, topic in enumerate(topics[: 6 if depth == 1 else 3]):
        draft.units.append(Unit(TIMELINE, line, (i, 0, 1 + k), topic, link, 30 if k == 0 else 10 - k,
                                joiner="; ", part="gist", required=k == 0))
    tally = Tally()
    for body_line in child.body.lines:
        if body_line.section in (DONE, TIMELINE):
            tally.absorb(strip_links(body_line.text))
    if depth > 1:
        # Counts of routine work, and which test run came last, say nothing this far up.
        tally.commands = tally.reads = 0
        tally.tests = ""
    for k, (text, weight) in enumerate(tally.parts()):
        draft.units.append(Unit(TIMELINE, line, (i, 0, 10 + k), text, link, weight, joiner="; ", part="done"))
    said = " ".join(text for text, _ in tally.parts()).lower()
    facts = sorted((f for f in _facts(child) if f[0].lower() not in said),
                   key=lambda pw: -pw[1])[: MAX_FACTS.get(depth, DEFAULT_MAX_FACTS)]
    for k, (phrase, weight) in enumerate(facts):
        draft.units.append(Unit(TIMELINE, line, (i, 0, 100 + k), phrase, link, weight, joiner=", ", part="facts"))
