"""Realistic multi-day agent sessions with planted facts, for summary-quality measurements.

``agent_session(seed, episodes)`` returns native transcript records (a user
asking for work, an assistant reading, grepping, editing, running tests and
committing, with tool results shaped like real ones) and the planted facts:
``(message index, kind, answer)``. Facts come in the kinds a person would ask
about later: who took over a role, a month-and-day date, a preference, a value
that changed (the answer is the new value), a number with its unit, a ticket,
a decision. Same seed, same session.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

NAMES = ["Greta", "Tomás", "Priya", "Jonas", "Aiko", "Ravi", "Lena", "Mateo", "Noor", "Kwame", "Sofia", "Dmitri",
         "Hana", "Oscar", "Ines", "Yusuf", "Maren", "Colin", "Amara", "Felix"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
ROLES = ["on-call", "release captain", "incident commander", "code owner for billing", "reviewer for the API"]
THINGS = ["the billing migration", "the security review", "the load test", "the partner demo", "the schema freeze",
          "the pricing launch", "the data export", "the SDK release"]
LIBS = [("zoneinfo", "pytz"), ("httpx", "requests"), ("orjson", "ujson"), ("pydantic", "marshmallow"),
        ("structlog", "loguru"), ("ruff", "flake8"), ("uv", "pip-tools"), ("tenacity", "backoff")]
PREFS = [("tabs", "spaces"), ("squash merges", "merge commits"), ("small PRs", "big PRs"),
         ("snake_case keys", "camelCase keys"), ("early returns", "nested ifs"), ("pytest fixtures", "setUp methods")]
SERVICES = ["ledger-api", "invoice-worker", "payments-gateway", "report-builder", "auth-proxy", "notifier"]
UNITS = [("ms", 50, 2000), ("MB", 64, 4096), ("requests per minute", 50, 900), ("seconds", 5, 600), ("GB", 2, 64)]
FILES = ["src/app/billing/invoice.py", "src/app/billing/dunning.py", "src/app/api/v1/payments.py",
         "src/app/ratelimit/bucket.py", "src/app/db/session.py", "src/app/reports/export.py",
         "src/app/auth/tokens.py", "tests/billing/test_invoice.py", "tests/api/test_payments.py",
         "src/app/jobs/nightly.py", "src/app/settings.py", "migrations/versions/0042_keys.py"]
FUNCS = ["compute_due_date", "issue_invoice", "list_payments", "take_token", "refresh_session", "export_rows",
         "mask_pan", "schedule_reminders", "apply_late_fee", "load_settings"]
ASKS = [
    "The nightly job failed again on {func}; can you find out why and fix it?",
    "Please add a test for {func} that covers the month rollover.",
    "Can you look at why {file} is slow under load? Customers are complaining.",
    "We need {func} to handle naive datetimes properly. Can you take it?",
    "Refactor {file} so the retry logic lives in one place, no behaviour change.",
    "Check whether anything else calls {func} with a string instead of a date.",
    "Could you profile {func}? The dashboard shows p95 creeping up since Monday.",
    "Bump the client library and make sure the integration tests still pass.",
]
FILLER_USER = ["Thanks, that helps.", "Ok, go ahead.", "Nice, keep going.", "Sounds right to me.",
               "Good catch.", "Makes sense, continue."]
FILLER_ASSISTANT = [
    "Let me look at the code first.",
    "I'll start by reading the module and its tests.",
    "Now the tests, to see what is covered today.",
    "Running the relevant tests to confirm the behaviour.",
    "Let me check the callers before changing anything.",
]


def _fact(rng: random.Random) -> tuple[str, str, str]:
    """(sentence, kind, answer)."""
    kind = rng.choice(["role", "date", "preference", "change", "number", "ticket", "decision"])
    name, other = rng.sample(NAMES, 2)
    if kind == "role":
        role = rng.choice(ROLES)
        return rng.choice([
            f"Heads up: {name} took over as {role} from {other} this week.",
            f"{name} is the {role} now, {other} handed it over yesterday.",
        ]), kind, name
    if kind == "date":
        date = f"{rng.choice(MONTHS)} {rng.randint(1, 28)}"
        thing = rng.choice(THINGS)
        return rng.choice([
            f"Note that {thing} is scheduled for {date}, so plan around it.",
            f"{other} confirmed {thing} happens on {date}.",
        ]), kind, date
    if kind == "preference":
        good, bad = rng.choice(PREFS)
        return rng.choice([
            f"By the way, {name} prefers {good} over {bad}, please stick to that.",
            f"For this repo {name} always wants {good}, never {bad}.",
        ]), kind, good
    if kind == "change":
        month = rng.choice(MONTHS)
        d1 = rng.randint(1, 14)
        d2 = d1 + rng.randint(3, 14)
        thing = rng.choice(THINGS)
        return rng.choice([
            f"The deadline for {thing} moved from {month} {d1} to {month} {d2} after the vendor slipped.",
            f"Update: {thing} was pushed from {month} {d1} to {month} {d2}.",
        ]), kind, f"{month} {d2}"
    if kind == "number":
        unit, lo, hi = rng.choice(UNITS)
        value = f"{rng.randint(lo, hi)} {unit}"
        service = rng.choice(SERVICES)
        return rng.choice([
            f"The limit for {service} is {value} in production, keep it that way.",
            f"We measured {service} at {value} after the change.",
        ]), kind, value
    if kind == "ticket":
        ticket = f"{rng.choice(['LEDG', 'PAY', 'OPS', 'SEC'])}-{rng.randint(100, 9999)}"
        return rng.choice([
            f"That regression is tracked as {ticket}, link it in the PR.",
            f"File the follow-up under {ticket} so {name} sees it.",
        ]), kind, ticket
    good, bad = rng.choice(LIBS)
    return rng.choice([
        f"We decided to use {good} instead of {bad} because it ships with fewer surprises.",
        f"Decision: go with {good}, not {bad}; {name} agreed in the review.",
    ]), kind, good


def _numbered(lines: list[str]) -> str:
    return "\n".join(f"{i + 1:6d}\t{line}" for i, line in enumerate(lines))


def _code(rng: random.Random, func: str) -> list[str]:
    body = [f"def {func}(issued_at, days, tz_name):", '    """Compute the value for an account."""']
    for k in range(rng.randint(12, 40)):
        body.append(rng.choice([
            f"    value_{k} = helper_{k % 5}(issued_at, days)",
            f"    if value_{k} is None:",
            f"        raise ValueError('missing value {k}')",
            f"    logger.debug('step {k}: %s', value_{k})",
            "    local = issued_at.astimezone(ZoneInfo(tz_name))",
            "    return (local + timedelta(days=days)).date()",
        ]))
    return body


def _pytest_output(rng: random.Random, test_file: str, failed: bool, func: str) -> str:
    n = rng.randint(5, 40)
    lines = ["============================= test session starts ==============================",
             "platform linux -- Python 3.11.9, pytest-8.3.3, pluggy-1.5.0", f"collected {n} items", "",
             f"{test_file} " + "." * (n - 1) + ("F" if failed else ".") + "   [100%]"]
    if failed:
        lines += ["", "=================================== FAILURES ===================================",
                  f"_________________________ test_{func}_rollover _________________________",
                  f"    assert {func}(datetime(2026, 1, 31, 23, 30, tzinfo=UTC), 30, 'Pacific/Auckland') == date(2026, 3, 3)",
                  "E   AssertionError: assert datetime.date(2026, 3, 2) == datetime.date(2026, 3, 3)",
                  "=========================== short test summary info ============================",
                  f"FAILED {test_file}::test_{func}_rollover - AssertionError",
                  f"========================= 1 failed, {n - 1} passed in 0.{rng.randint(10, 99)}s ========================="]
    else:
        lines.append(f"============================== {n} passed in 0.{rng.randint(10, 99)}s ===============================")
    return "\n".join(lines)


def agent_session(seed: int, episodes: int, *, fact_rate: float = 0.5) -> tuple[list[dict[str, Any]], list[tuple[int, str, str]]]:
    """A session of ``episodes`` units of work over several days, and its planted facts."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    facts: list[tuple[int, str, str]] = []
    t = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
    call = 0

    def add(role: str, content: Any) -> int:
        nonlocal t
        t += timedelta(seconds=rng.randint(5, 90))
        out.append({"role": role, "timestamp": t.strftime("%Y-%m-%dT%H:%M:%SZ"), "content": content})
        return len(out) - 1

    def tool(name: str, args: dict[str, Any], result: str, text: str | None = None, error: bool = False) -> None:
        nonlocal call
        call += 1
        cid = f"toolu_{seed:02d}{call:05d}"
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        blocks.append({"type": "tool_call", "id": cid, "name": name, "arguments": args})
        add("assistant", blocks)
        add("tool", [{"type": "tool_result", "call_id": cid, "content": result, "is_error": error}])

    def maybe_fact(role: str, prefix: str = "") -> None:
        if rng.random() < fact_rate:
            sentence, kind, answer = _fact(rng)
            idx = add(role, f"{prefix}{sentence}")
            facts.append((idx, kind, answer))

    for ep in range(episodes):
        if ep and ep % 6 == 0:
            t += timedelta(hours=rng.choice([3, 16, 18]))
        func, file = rng.choice(FUNCS), rng.choice(FILES)
        test_file = rng.choice([f for f in FILES if f.startswith("tests/")])
        ask = rng.choice(ASKS).format(func=func, file=file)
        if rng.random() < 0.5:
            sentence, kind, answer = _fact(rng)
            idx = add("user", f"{ask} {sentence}")
            facts.append((idx, kind, answer))
        else:
            add("user", ask)
        tool("read_file", {"path": file}, _numbered(_code(rng, func)), rng.choice(FILLER_ASSISTANT))
        tool("grep", {"pattern": func, "path": "src tests"},
             "\n".join(f"{rng.choice(FILES)}:{rng.randint(1, 300)}:    {func}(now, 30, tz)" for _ in range(rng.randint(1, 6))))
        failed = rng.random() < 0.5
        tool("run_command", {"command": f"pytest {test_file} -q"}, _pytest_output(rng, test_file, failed, func))
        if failed:
            add("assistant", f"The failure comes from {func}: it relabels the UTC timestamp instead of converting it, "
                             f"so invoices issued late in the day get a due date one day early.")
            maybe_fact("assistant")
            old = "    local = issued_at.replace(tzinfo=tz)"
            new = "    local = issued_at.astimezone(ZoneInfo(tz_name))\n    if issued_at.tzinfo is None:\n        raise ValueError('naive')"
            tool("edit_file", {"path": file, "old_str": old, "new_str": new},
                 f"The file {file} has been edited. Here's the result of running `cat -n` on a snippet:\n" + _numbered(new.splitlines()))
            tool("run_command", {"command": f"pytest {test_file} -q"}, _pytest_output(rng, test_file, False, func))
        add("user", rng.choice(FILLER_USER))
        maybe_fact("user")
        if rng.random() < 0.6:
            sha = "".join(rng.choice("0123456789abcdef") for _ in range(7))
            tool("run_command", {"command": f"git commit -am 'Fix {func} for accounts ahead of UTC'"},
                 f"[fix/{func} {sha}] Fix {func} for accounts ahead of UTC\n 2 files changed, 14 insertions(+), 3 deletions(-)")
        add("assistant", rng.choice([
            f"Done: {func} now converts with astimezone and the pinned test covers the rollover. "
            f"Remaining: the report export still relabels timestamps; I'd file that as a follow-up.",
            f"Summary: fixed {func} in {file}, tests green. Next step: check the callers in the nightly job.",
            f"All green. I left {file} otherwise untouched; the retry logic still needs a follow-up next week.",
        ]))
        maybe_fact("assistant", "One more thing from the notes: ")
    return out, facts
