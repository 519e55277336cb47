"""A seeded generator of multi-day coding-agent sessions with planted facts.

``generate(size, seed)`` returns a :class:`Session`: native vaultlcm records
(``{"role", "content", "timestamp"}`` with ``text``, ``tool_call`` and
``tool_result`` blocks) and the questions about the facts planted in them.

A session is a run of *episodes* (fix a bug, add a feature, read logs, review
a PR, check a deploy, chat), each a user request, the agent's tool calls with
their results, its analysis and a closing reply. Facts are woven into the
episode that runs when the history reaches the fact's point (a fraction of the
target tokens), as a sentence in the middle of a user or assistant message or
as a tool result. Days follow the tokens (day ``k`` holds the ``k``-th slice of
the target), timestamps fall in working hours on weekdays.

Same size and seed, same bytes: every random choice comes from one
``random.Random`` seeded with both. :func:`check` verifies the invariants the
benchmark relies on (sizes, answers planted where recorded and nowhere else,
questions that do not contain their answers).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from vaultlcm.tokens import count_tokens

from . import talk
from .facts import QA, Fact, Plant, build_facts
from .scoring import answer_regex
from .world import World

#: size name -> (target tokens, days, questions, events per counting question)
SIZES: dict[str, tuple[int, int, int, tuple[int, int]]] = {
    "tiny": (7_000, 2, 8, (2, 3)),
    "32k": (32_000, 3, 30, (3, 4)),
    "128k": (128_000, 8, 60, (4, 6)),
    "512k": (512_000, 22, 100, (5, 9)),
}
TOLERANCE = 0.05
START = datetime(2026, 9, 14, 9, 0, 0)  # a Monday
SYSTEM = ("You are Forge, a coding agent working in Priya Raman's checkout of `tidewater` (a logistics platform: "
          "routing, billing, notifications, payouts; Python 3.11, PostgreSQL, Redis) at /home/priya/src/tidewater.\n\n"
          "Tools: read_file(path), grep(pattern, path), edit_file(path, old_str, new_str), run_command(command).\n"
          "Work in small verified steps, run the relevant tests, and say what is left open when you finish.")


class GenerationError(Exception):
    """The generator broke one of its own invariants (a bug in the generator, not in vaultlcm)."""


def message_text(record: dict[str, Any]) -> str:
    """What vaultlcm counts and searches in a message: text, tool names and arguments, results.

    Mirrors ``vaultlcm.Message.searchable_text`` for the blocks this generator writes
    (the smoke test checks they agree), so the benchmark needs no private API.
    """
    out: list[str] = []
    for b in record["content"]:
        if b["type"] == "text":
            out.append(b["text"])
        elif b["type"] == "tool_call":
            out.append(f"{b['name']} {json.dumps(b['arguments'], ensure_ascii=False, separators=(',', ':'))}")
        elif b["type"] == "tool_result":
            out.append(b["content"])
    return "\n".join(out)


def message_tokens(record: dict[str, Any]) -> int:
    """Tokens of a raw message as vaultlcm counts it in a context (text + 4 for the envelope)."""
    return count_tokens(message_text(record)) + 4


@dataclass
class Session:
    size: str
    seed: int
    messages: list[dict[str, Any]]
    qas: list[QA]
    plants: list[Plant]
    days: list[int]
    """Day number (0-based) of each message."""

    @property
    def tokens(self) -> int:
        return sum(count_tokens(message_text(m)) for m in self.messages)

    def to_jsonl(self) -> bytes:
        return "".join(json.dumps(m, ensure_ascii=False, sort_keys=True) + "\n" for m in self.messages).encode()

    def by_day(self) -> list[list[dict[str, Any]]]:
        out: list[list[dict[str, Any]]] = [[] for _ in range(max(self.days) + 1)]
        for m, d in zip(self.messages, self.days):
            out[d].append(m)
        return [d for d in out if d]


# -- episodes -------------------------------------------------------------------------


class Episode:
    """Builds one episode's messages as *steps* (a lone message, or a call with its result)."""

    def __init__(self, world: World, rng: random.Random) -> None:
        self.w = world
        self.rng = rng
        self.steps: list[list[tuple[dict[str, Any], Plant | None]]] = []
        _, self.path, self.test = world.file()
        self.svc = world.service()
        self.fn = world.func()
        self.ctx = {"path": self.path, "test": self.test, "fn": self.fn, "svc": self.svc, "mate": world.teammate(),
                    "n": world.num(3, 400), "pr": world.num(900, 1999), "other": world.func()}

    def fill(self, template: str) -> str:
        return template.format(**self.ctx)

    def say(self, role: str, text: str, plant: Plant | None = None) -> None:
        self.steps.append([({"role": role, "content": [{"type": "text", "text": text}]}, plant)])

    def call(self, intro: str | None, name: str, args: dict[str, Any], result: str, *,
             plant_call: Plant | None = None, plant_result: Plant | None = None, error: bool = False) -> None:
        cid = self.w.call_id()
        blocks: list[dict[str, Any]] = [{"type": "text", "text": intro}] if intro else []
        blocks.append({"type": "tool_call", "id": cid, "name": name, "arguments": args})
        res: dict[str, Any] = {"type": "tool_result", "call_id": cid, "name": name, "content": result}
        if error:
            res["is_error"] = True
        self.steps.append([({"role": "assistant", "content": blocks}, plant_call),
                           ({"role": "tool", "content": [res]}, plant_result)])

    def step_text(self, key: str) -> str | None:
        return self.fill(self.rng.choice(talk.STEP[key])) if self.rng.random() < 0.7 else None

    def framed(self, who: str, plant: Plant) -> str:
        f = self.rng.choice(talk.FRAME[who]).format(f=plant.text)
        return f[0].upper() + f[1:]

    def analysis(self, plant: Plant | None = None) -> None:
        parts = [self.fill(self.rng.choice(talk.ANALYSIS))]
        if plant is not None:
            parts.append(self.framed("assistant", plant))
            if self.rng.random() < 0.6:
                parts.append(self.fill(self.rng.choice(talk.ANALYSIS)))
        self.say("assistant", " ".join(parts), plant)

    def plant_tool(self, plant: Plant) -> None:
        if plant.carrier == "assistant-edit":
            assert plant.tool is not None
            name, args = plant.tool
            text = self.framed("assistant", plant) if self.rng.random() < 0.3 else plant.text[0].upper() + plant.text[1:] + "."
            self.call(text, name, args, f"The file {args['path']} has been edited.", plant_call=plant)
        elif plant.tool is not None:
            name, args = plant.tool
            self.call(self.step_text("check"), name, args, plant.text, plant_result=plant)
            self.say("assistant", self.rng.choice(talk.EVENT_REMARK))
        else:  # a fact that lives in a runbook the agent reads
            lines = [f"# {self.svc} runbook", ""] + self.rng.sample(talk.RUNBOOK, 3)
            lines.insert(self.rng.randint(3, len(lines)), f"- {plant.text[0].upper() + plant.text[1:]}.")
            self.call(self.step_text("docs"), "read_file", {"path": f"docs/runbooks/{self.svc}.md"},
                      self.fill("\n".join(lines)), plant_result=plant)

    def build(self, kind: str, plants: list[Plant]) -> list[list[tuple[dict[str, Any], Plant | None]]]:
        rng = self.rng
        user_plants = sorted((p for p in plants if p.carrier in ("user", "report")), key=lambda p: p.carrier != "report")
        said = [p for p in plants if p.carrier == "assistant"]
        tooled = [p for p in plants if p.carrier not in ("user", "report", "assistant")]
        # The request, with at most one fact in it (a second one gets its own chat turn).
        request = self.fill(rng.choice(talk.REQUEST[kind]))
        first = user_plants[0] if user_plants else None
        if first is not None and first.carrier == "report":
            request = first.text  # a person's own report opens the episode
        elif first is not None:  # at a sentence boundary of the request, often in the middle
            sentences = re.split(r"(?<=[.?!])\s+", request)
            at = rng.randint(0, len(sentences))
            request = " ".join(sentences[:at] + [self.framed("user", first)] + sentences[at:])
        self.say("user", request, first)
        if kind == "chat":
            self.say("assistant", self.fill(rng.choice(talk.CHAT_REPLY)))
        else:
            self._work(kind, said, tooled)
        for p in user_plants[1:]:
            self.say("user", self.framed("user", p) + " " + self.fill(rng.choice(talk.REQUEST["chat"])), p)
            self.say("assistant", self.fill(rng.choice(talk.CHAT_REPLY)))
        if kind == "chat":
            for p in said:
                self.analysis(p)
            for p in tooled:
                self.plant_tool(p)
        return self.steps

    def _work(self, kind: str, said: list[Plant], tooled: list[Plant]) -> None:
        w, rng = self.w, self.rng
        said, tooled = list(said), list(tooled)

        def maybe_tool() -> None:
            if tooled:
                self.plant_tool(tooled.pop(0))

        if kind == "bugfix":
            test_name = f"test_{self.fn}_{rng.choice(['empty', 'single_leg', 'retry', 'rollover', 'inactive'])}"
            self.call(self.step_text("pytest_fail"), "run_command", {"command": f"pytest {self.test} -q"},
                      w.pytest(self.test, fail=test_name))
            self.call(self.step_text("read_test"), "read_file", {"path": self.test}, w.listing(self.test))
            self.call(self.step_text("read_src"), "read_file", {"path": self.path}, w.listing(self.path))
            maybe_tool()
            self.analysis(said.pop(0) if said else None)
            if rng.random() < 0.5:
                self.call(self.step_text("grep"), "grep", {"pattern": self.fn, "path": "src"}, w.grep_out(self.fn))
            args, res = w.edit(self.path)
            self.call(self.step_text("edit"), "edit_file", args, res)
            self.call(self.step_text("pytest_pass"), "run_command", {"command": f"pytest {self.test} -q"}, w.pytest(self.test))
            if rng.random() < 0.4:
                self.call(self.step_text("lint"), "run_command", {"command": "ruff check src tests"}, w.lint())
            if rng.random() < 0.3:
                self.call(None, "run_command", {"command": "git status"}, w.git_status([self.path, self.test]))
            self.call(self.step_text("commit"), "run_command", {"command": f'git commit -am "Fix {self.fn}"'},
                      w.commit(f"fix/{self.fn.replace('_', '-')}", f"Fix {self.fn} for {test_name[5:]}"))
        elif kind == "feature":
            self.call(self.step_text("read_src"), "read_file", {"path": self.path}, w.listing(self.path))
            maybe_tool()
            self.analysis(said.pop(0) if said else None)
            for _ in range(rng.randint(1, 2)):
                args, res = w.edit(self.path)
                self.call(self.step_text("edit"), "edit_file", args, res)
            self.call(self.step_text("pytest_pass"), "run_command", {"command": f"pytest {self.test} -q"}, w.pytest(self.test))
            if rng.random() < 0.5:
                self.call(self.step_text("diff"), "run_command", {"command": "git diff"}, w.diff(self.path))
        elif kind == "investigate":
            self.call(self.step_text("logs"), "run_command", {"command": f"kubectl logs deploy/{self.svc} --since 2h | tail -n 12"},
                      w.log_lines(self.svc, rng.randint(6, 14)))
            maybe_tool()
            if rng.random() < 0.4:
                self.call(self.step_text("history"), "run_command", {"command": f"git log --oneline -6 -- src/tidewater/{self.path.split('/')[2]}"},
                          w.git_log(rng.randint(3, 6)))
            self.call(self.step_text("grep"), "grep", {"pattern": self.fn, "path": "src"}, w.grep_out(self.fn))
            self.analysis(said.pop(0) if said else None)
            if rng.random() < 0.5:
                self.call(self.step_text("read_src"), "read_file", {"path": self.path}, w.listing(self.path))
        elif kind == "review":
            self.call(self.step_text("pr"), "run_command", {"command": f"gh pr diff {self.ctx['pr']}"},
                      "\n\n".join(w.diff(w.file()[1]) for _ in range(rng.randint(1, 3))))
            maybe_tool()
            self.call(self.step_text("read_src"), "read_file", {"path": self.path}, w.listing(self.path))
            if said:
                self.analysis(said.pop(0))
            self.say("assistant", self.fill(rng.choice(talk.REVIEW_NOTE)))
        else:  # ops
            self.call(self.step_text("deploy"), "run_command", {"command": f"deployctl status {self.svc}"},
                      w.deploy_ok(self.svc, w.num(5100, 5999)))
            maybe_tool()
            self.call(self.step_text("logs"), "run_command", {"command": f"kubectl logs deploy/{self.svc} --since 1h | tail"},
                      w.log_lines(self.svc, rng.randint(4, 10)))
        for p in said:
            self.analysis(p)
        for p in tooled:
            self.plant_tool(p)
        self.say("assistant", self.fill(rng.choice(talk.FINAL["change" if kind in ("bugfix", "feature") else "look"])))


EPISODE_KINDS = ["bugfix", "bugfix", "feature", "feature", "investigate", "review", "ops", "chat"]


# -- the session ------------------------------------------------------------------------


def _reserved_numbers(facts: list[Fact]) -> set[int]:
    nums: set[int] = set()
    for f in facts:
        for p in f.plants:
            nums.update(int(x) for x in re.findall(r"\d+", p.needle + " " + p.text))
        for q in f.qas:
            for a in q.answers + ([q.stale] if q.stale else []) + q.count_details:
                nums.update(int(x) for x in re.findall(r"\d+", a))
    return {n for n in nums if n >= 10}  # small numbers only ever count with their unit


def generate(size: str, seed: int = 7) -> Session:
    """The session of ``size`` (a key of :data:`SIZES`) for ``seed``."""
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; choose one of {', '.join(SIZES)}")
    target, n_days, n_questions, events = SIZES[size]
    rng = random.Random(f"vaultlcm-recall:{size}:{seed}")
    facts = build_facts(rng, n_questions, events)
    world = World(rng, _reserved_numbers(facts))
    plants = sorted((p for f in facts for p in f.plants), key=lambda p: p.at)
    fact_of = {p.key: f.key for f in facts for p in f.plants}

    steps: list[tuple[int, list[tuple[dict[str, Any], Plant | None]]]] = []  # (day, the step's messages)
    total = count_tokens(SYSTEM)
    pending = list(plants)
    while total < target or pending:
        due: list[Plant] = []
        seen_facts: set[str] = set()
        for p in pending:
            if p.at * target > total and total < target:
                break
            if fact_of[p.key] not in seen_facts and len(due) < 3:  # two parts of one fact never share an episode
                due.append(p)
                seen_facts.add(fact_of[p.key])
        for p in due:
            pending.remove(p)
        # Past the target only facts are left to place: short chat turns carry them.
        kind = rng.choice(EPISODE_KINDS) if total < target else "chat"
        if any(p.carrier == "report" for p in due):
            kind = "investigate"  # a person reporting an event opens an investigation
        day = min(n_days - 1, total * n_days // target)
        for step in Episode(world, rng).build(kind, due):
            steps.append((day, step))
            total += sum(count_tokens(message_text(m)) for m, _ in step)
    _trim(steps, total, target)
    messages: list[dict[str, Any]] = [{"role": "system", "content": [{"type": "text", "text": SYSTEM}]}]
    owners: list[Plant | None] = [None]
    days = [0]
    for day, step in steps:
        for msg, plant in step:
            messages.append(msg)
            owners.append(plant)
            days.append(day)
    for i, owner in enumerate(owners):
        if owner is not None:
            owner.index = i
    _timestamps(messages, days, rng)
    qas = [q for f in facts for q in f.qas]
    by_key = {p.key: p for p in plants}
    for q in qas:
        q.positions = sorted({by_key[k].index for k in q.plants})
    session = Session(size, seed, messages, qas, plants, days)
    check(session)
    return session


def _trim(steps: list[tuple[int, list[tuple[dict[str, Any], Plant | None]]]], total: int, target: int) -> None:
    """Bring an overshoot back near the target by dropping the newest steps that carry no fact.

    A step is a lone message or a tool call with its result, so no call loses its result;
    requests (user messages) stay, so every episode still starts with what was asked.
    """
    i = len(steps) - 1
    while total > target * (1 + TOLERANCE / 2) and i > 0:
        step = steps[i][1]
        cost = sum(count_tokens(message_text(m)) for m, _ in step)
        if all(p is None for _, p in step) and step[0][0]["role"] != "user" and total - cost >= target * (1 - TOLERANCE / 2):
            del steps[i]
            total -= cost
        i -= 1


def _timestamps(messages: list[dict[str, Any]], days: list[int], rng: random.Random) -> None:
    """Working hours on weekdays: 09:00-09:25 start, about 8.5 hours spread by message weight, lunch at midday."""
    date = START
    i = 0
    while i < len(messages):
        j = i
        while j < len(messages) and days[j] == days[i]:
            j += 1
        weights = [{"user": 6.0, "assistant": 2.0, "tool": 0.25}.get(m["role"], 1.0) * rng.uniform(0.5, 1.5) for m in messages[i:j]]
        span = rng.uniform(7.5, 8.5) * 3600
        scale = span / sum(weights)
        t = date + timedelta(minutes=rng.randint(0, 25))
        lunch = i + (j - i) // 2
        prev = None
        for k in range(i, j):
            t += timedelta(seconds=max(1.0, weights[k - i] * scale))
            if k == lunch:
                t += timedelta(minutes=rng.randint(35, 60))
            if prev is not None and t <= prev:
                t = prev + timedelta(seconds=1)
            messages[k]["timestamp"] = t.strftime("%Y-%m-%dT%H:%M:%SZ")
            prev = t
        date += timedelta(days=3 if date.weekday() == 4 else 1)
        i = j


def check(session: Session) -> None:
    """Raise :class:`GenerationError` unless the session keeps the benchmark's invariants."""
    target = SIZES[session.size][0]
    problems: list[str] = []
    tokens = session.tokens
    if abs(tokens - target) > target * TOLERANCE:
        problems.append(f"{tokens} tokens, target {target} ± {TOLERANCE:.0%}")
    texts = [message_text(m) for m in session.messages]
    lowered = [t.lower() for t in texts]

    def where(s: str) -> set[int]:
        head, rx = s.split()[0].lower(), answer_regex(s)
        return {i for i, low in enumerate(lowered) if head in low and rx.search(texts[i])}

    plants = {p.key: p for p in session.plants}
    for q in session.qas:
        for a in q.answers + ([q.stale] if q.stale else []):
            if answer_regex(a).search(q.question):
                problems.append(f"{q.id}: the question contains {a!r}")
        allowed = {plants[k].index for k in q.plants}
        if q.kind == "counting":
            for d in q.count_details:
                if where(d) != {plants[k].index for k in q.plants if plants[k].needle == d}:
                    problems.append(f"{q.id}: detail {d!r} at {sorted(where(d))}")
            continue
        found = set().union(*(where(a) for a in q.answers))
        if not found or not found <= allowed:
            problems.append(f"{q.id}: answer {q.answers[0]!r} at {sorted(found)}, planted at {sorted(allowed)}")
        if q.stale and not where(q.stale) <= allowed:
            problems.append(f"{q.id}: stale value {q.stale!r} outside its plants: {sorted(where(q.stale) - allowed)}")
    for p in session.plants:
        if not answer_regex(p.needle).search(texts[p.index]):
            problems.append(f"{p.key}: needle {p.needle!r} not in message {p.index}")
    if problems:
        raise GenerationError(f"session {session.size}/{session.seed}: " + "; ".join(problems[:10]))
