"""Planted facts and the questions a person would ask about them.

A :class:`Fact` is one thing worth remembering; it is planted as one or more
:class:`Plant` fragments (a sentence in a user or assistant message, or a tool
call whose result holds it) at chosen points of the history, and asked about by
one or more :class:`QA`. The session generator (``sessions.py``) decides where
each plant lands and records the message index.

Kinds of question (``QA.kind``): ``single`` (a name and role, an identifier, a
number with unit, a month-and-day date), ``preference``, ``updated`` (the
answer is the latest value; the stale one is kept for "newest first"),
``before_after``, ``two_hop`` (ticket -> identifier -> commit) and ``counting``
(N events, each with its own detail).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from .data import BEFORE_AFTER, COUNTING, DATES, IDENTIFIERS, NAME_ROLES, NUMBERS, PREFERENCES, TWO_HOP, UPDATED

KINDS = ("single", "preference", "updated", "before_after", "two_hop", "counting")
#: Share of the questions of each kind (before/after questions come in pairs).
SHARES = {"single": 0.30, "preference": 0.12, "updated": 0.16, "before_after": 0.16, "two_hop": 0.14, "counting": 0.12}
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]


@dataclass
class Plant:
    """One fragment of a fact, placed in one message."""

    key: str
    at: float
    """Where it goes, as a fraction of the history's tokens."""
    carrier: str
    """``user`` or ``assistant`` (a sentence in their text) or ``tool`` (a tool call and its result)."""
    text: str
    """The sentence (user/assistant) or the tool result (tool)."""
    needle: str
    """The string that must survive for this fragment to count as remembered."""
    tool: tuple[str, dict[str, Any]] | None = None
    index: int = -1
    """Message index where it landed (set by the generator)."""


@dataclass
class QA:
    id: str
    kind: str
    subkind: str
    question: str
    answers: list[str]
    """Alternative spellings of the answer; any one present counts."""
    plants: list[str]
    stale: str | None = None
    count_details: list[str] = field(default_factory=list)
    count_subject: list[str] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "subkind": self.subkind, "question": self.question,
                "answers": self.answers, "stale": self.stale, "count_details": self.count_details,
                "count_subject": self.count_subject, "positions": self.positions}


@dataclass
class Fact:
    key: str
    plants: list[Plant]
    qas: list[QA]


def quotas(total: int) -> dict[str, int]:
    """Questions per kind for about ``total`` questions (every kind at least once, pairs even)."""
    out = {k: max(1, round(total * s)) for k, s in SHARES.items()}
    out["before_after"] = max(2, out["before_after"] - out["before_after"] % 2)
    out["counting"] = min(out["counting"], len(COUNTING))
    out["single"] += total - sum(out.values())
    return out


def date_answers(d: str) -> list[str]:
    month, day = d.split()
    return [d, f"{month[:3]} {day}"]


def _spread(rng: random.Random, n: int, lo: float = 0.03, hi: float = 0.97) -> list[float]:
    """``n`` points stratified over ``[lo, hi]``, shuffled: early, middle and late all get some."""
    pts = [lo + (hi - lo) * (k + rng.random()) / n for k in range(n)]
    rng.shuffle(pts)
    return pts


def build_facts(rng: random.Random, total_questions: int, events_per_count: tuple[int, int]) -> list[Fact]:
    """The facts of one session; their plants' ``at`` spread over the whole history."""
    q = quotas(total_questions)
    facts: list[Fact] = []
    n_single = q["single"]
    pools = [("name", NAME_ROLES), ("identifier", IDENTIFIERS), ("number", NUMBERS), ("date", DATES)]
    singles: list[tuple[str, tuple[str, ...]]] = []
    for k in range(n_single):
        sub, pool = pools[k % len(pools)]
        singles.append((sub, pool[k // len(pools) % len(pool)]))
    for (sub, (answer, sentence, question)), at in zip(singles, _spread(rng, n_single)):
        key = f"single-{len(facts)}"
        carrier = rng.choice(["user", "assistant", "tool"])
        answers = date_answers(answer) if sub == "date" else [answer]
        facts.append(Fact(key, [Plant(f"{key}/0", at, carrier, sentence, answer)],
                          [QA(key, "single", sub, question, answers, [f"{key}/0"])]))
    for (answer, sentence, question), at in zip(rng.sample(PREFERENCES, q["preference"]), _spread(rng, q["preference"])):
        key = f"pref-{len(facts)}"
        facts.append(Fact(key, [Plant(f"{key}/0", at, "user", sentence, answer)],
                          [QA(key, "preference", "preference", question, [answer], [f"{key}/0"])]))
    for k, (old, new, first, moved, now, question) in enumerate(rng.sample(UPDATED, q["updated"])):
        key = f"updated-{len(facts)}"
        t1 = rng.uniform(0.03, 0.55)
        t2 = rng.uniform(t1 + 0.12, 0.97)
        second = moved if k % 2 == 0 else now
        answers = date_answers(new) if new.split()[0] in MONTHS else [new]
        facts.append(Fact(key, [Plant(f"{key}/0", t1, rng.choice(["user", "assistant"]), first, old),
                                Plant(f"{key}/1", t2, rng.choice(["user", "assistant"]), second, new)],
                          [QA(key, "updated", "from-to" if k % 2 == 0 else "now", question, answers,
                              [f"{key}/0", f"{key}/1"], stale=old)]))
    for (old, new, sentence, tool, q_before, q_after), at in zip(
            rng.sample(BEFORE_AFTER, q["before_after"] // 2), _spread(rng, q["before_after"] // 2)):
        key = f"ba-{len(facts)}"
        facts.append(Fact(key, [Plant(f"{key}/0", at, "assistant-edit", sentence, new, tool=tool)],
                          [QA(f"{key}-before", "before_after", "before", q_before, [old], [f"{key}/0"]),
                           QA(f"{key}-after", "before_after", "after", q_after, [new], [f"{key}/0"])]))
    for (prefix, symptom, ident, cause, fix), t1 in zip(rng.sample(TWO_HOP, q["two_hop"]), _spread(rng, q["two_hop"], 0.03, 0.6)):
        key = f"twohop-{len(facts)}"
        ticket = f"{prefix}-{rng.randint(120, 989)}"
        commit = "".join(rng.choice("0123456789abcdef") for _ in range(7))
        while commit.isdigit() or commit.isalpha():
            commit = "".join(rng.choice("0123456789abcdef") for _ in range(7))
        report = f"{ticket} came in from support: {symptom}. I traced it to `{ident}`: {cause}"
        branch = "fix/" + ident.lower().replace("_", "-")[:24]
        result = f"[{branch} {commit}] {fix}\n {rng.randint(1, 4)} files changed, {rng.randint(5, 60)} insertions(+), {rng.randint(1, 20)} deletions(-)"
        question = rng.choice(["Which commit fixed the bug from {t}?", "What's the commit that fixed {t}?",
                               "Which commit has the fix for the problem in {t}?"]).format(t=ticket)
        t2 = rng.uniform(t1 + 0.04, min(0.97, t1 + 0.3))
        facts.append(Fact(key, [Plant(f"{key}/0", t1, "assistant", report, ident),
                                Plant(f"{key}/1", t2, "tool", result, commit,
                                      tool=("run_command", {"command": f'git commit -am "{fix}"'}))],
                          [QA(key, "two_hop", "ticket-commit", question, [commit], [f"{key}/0", f"{key}/1"])]))
    lo, hi = events_per_count
    for subject in rng.sample(COUNTING, q["counting"]):
        key = f"count-{len(facts)}"
        n = rng.randint(lo, hi)
        while re.search(rf"(?<!\w){n}(?!\w)", subject.question):  # the count must not be in the question
            n += 1
        details = subject.details(rng, n)
        plants = []
        for i, (detail, at) in enumerate(zip(details, sorted(_spread(rng, n)))):
            carrier, text, call = subject.render(rng, detail, i)
            plants.append(Plant(f"{key}/{i}", at, carrier, text, detail, tool=call))
        facts.append(Fact(key, plants, [QA(key, "counting", subject.name, subject.question, [str(n)],
                                           [p.key for p in plants], count_details=details,
                                           count_subject=list(subject.keywords))]))
    return facts
