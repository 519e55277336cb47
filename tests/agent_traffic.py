"""Realistic agent traffic for summarizer tests: a user, an agent, tool calls and results.

``items_from(records)`` turns native records into the :class:`SourceItem` s
compaction would hand a summarizer (structured message, rendered text and the
wikilink target of each message's block).
"""

from __future__ import annotations

from typing import Any

from vaultlcm.compaction import message_for_summary
from vaultlcm.messages import message_from_native
from vaultlcm.summarizers import SourceItem


def items_from(records: list[dict[str, Any]], conv: str = "c", day: str | None = "2026-11-02",
               start: int = 0) -> tuple[SourceItem, ...]:
    """Source items linking to ``day``'s log (``None``: the day of each record's timestamp, as the vault writes)."""
    out = []
    for n, rec in enumerate(records, start):
        msg = message_from_native(rec)
        mid = f"m-{n:016x}"
        log = day or rec["timestamp"][:10]
        out.append(SourceItem(id=mid, kind="message", text=message_for_summary(msg), role=msg.role, at=msg.timestamp,
                              message=msg, link=f"conversations/{conv}/logs/{log}#^{mid}"))
    return tuple(out)


def call(cid: str, name: str, args: Any, text: str | None = None, ts: str = "2026-11-02T09:15:00Z") -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    return {"role": "assistant", "timestamp": ts,
            "content": blocks + [{"type": "tool_call", "id": cid, "name": name, "arguments": args}]}


def result(cid: str, content: Any, error: bool = False, ts: str = "2026-11-02T09:15:01Z") -> dict[str, Any]:
    return {"role": "tool", "timestamp": ts,
            "content": [{"type": "tool_result", "call_id": cid, "content": content, "is_error": error}]}


def user(text: str, ts: str = "2026-11-02T09:14:00Z") -> dict[str, Any]:
    return {"role": "user", "timestamp": ts, "content": text}


def assistant(text: str, ts: str = "2026-11-02T09:20:00Z") -> dict[str, Any]:
    return {"role": "assistant", "timestamp": ts, "content": text}


PYTEST_FAIL = """============================= test session starts ==============================
platform linux -- Python 3.11.9, pytest-8.3.3, pluggy-1.5.0
collected 7 items

tests/billing/test_invoice.py ..F....                                    [100%]

=================================== FAILURES ===================================
________________________________ test_due_date _________________________________
E   AssertionError: assert datetime.date(2026, 11, 30) == datetime.date(2026, 12, 1)
=========================== short test summary info ============================
FAILED tests/billing/test_invoice.py::test_due_date - AssertionError: assert d...
========================= 1 failed, 6 passed in 0.31s =========================="""

#: A leaf's worth of a coding session with generic tool names.
BILLING_FIX: list[dict[str, Any]] = [
    user("Morning! CI went red on test_due_date again. Ticket is LEDG-482. Can you fix compute_due_date? "
         "Don't touch invoice numbering."),
    call("c1", "read_file", {"path": "src/ledgerly/billing/invoice.py"}, "Let me look at the billing code first."),
    result("c1", "     1\timport pytz\n     2\tdef compute_due_date(issued_at, days, tz):\n"
                 "     3\t    return issued_at.replace(tzinfo=tz)"),
    call("c2", "read_file", {"path": "src/ledgerly/billing/dunning.py"}),
    result("c2", "     1\tLATE_FEE_GRACE_DAYS = 7"),
    call("c3", "read_file", {"path": "src/ledgerly/billing/schedule.py"}),
    result("c3", "     1\tdef billing_window(day): ..."),
    call("c4", "grep", {"pattern": "compute_due_date", "path": "src"}),
    result("c4", "src/ledgerly/billing/invoice.py:48:def compute_due_date(\n"
                 "src/ledgerly/billing/jobs.py:57:    compute_due_date(now, 30, tz)\n"
                 "src/ledgerly/api/v1/invoices.py:12:from ..billing import compute_due_date"),
    call("c5", "run_command", {"command": "pytest tests/billing -q"}),
    result("c5", PYTEST_FAIL),
    {"role": "assistant", "timestamp": "2026-11-02T09:17:00Z", "content": [
        {"type": "thinking", "thinking": "SECRET-THOUGHT: maybe I should rewrite the whole billing module"},
        {"type": "text", "text": "Found it: compute_due_date relabels the UTC timestamp instead of converting it, so "
                                 "invoices issued after local midnight get a due date one day early. It came in with "
                                 "commit a91e3d7 on 2025-03-18."}]},
    call("c6", "edit_file", {"path": "src/ledgerly/billing/invoice.py", "old_str": "    return issued_at.replace(tzinfo=tz)",
                             "new_str": "    if issued_at.tzinfo is None:\n        raise ValueError('naive')\n"
                                        "    return issued_at.astimezone(tz)"}),
    result("c6", "The file src/ledgerly/billing/invoice.py has been edited."),
    call("c7", "run_command", {"command": "pytest tests/billing -q"}),
    result("c7", ".......\n7 passed in 0.29s"),
    user("Nice. Greta took over on-call from Tom today, so ping her about the deploy. The release deadline moved "
         "from October 3 to October 4. I prefer tabs in the new module.", ts="2026-11-02T09:30:00Z"),
    call("c8", "run_command", {"command": "git commit -am 'fix tz'"}, ts="2026-11-02T09:30:30Z"),
    result("c8", "[fix/LEDG-482 a1b2c3d] fix tz\n 1 file changed, 3 insertions(+), 1 deletion(-)", ts="2026-11-02T09:30:31Z"),
    assistant("Committed a1b2c3d. TODO: the report export has the same bug; file a follow-up next week.",
              ts="2026-11-02T09:31:00Z"),
]

#: The same kind of work through Claude Code's tools.
CLAUDE_CODE: list[dict[str, Any]] = [
    user("Add a retry to the webhook sender in src/hooks/send.py, max 3 attempts."),
    call("t1", "Read", {"file_path": "/repo/src/hooks/send.py"}),
    result("t1", "     1\timport httpx\n     2\tdef send(url, body):\n     3\t    return httpx.post(url, json=body)"),
    call("t2", "Glob", {"pattern": "tests/hooks/**/*.py"}),
    result("t2", "/repo/tests/hooks/test_send.py\n/repo/tests/hooks/conftest.py"),
    call("t3", "Grep", {"pattern": "def send", "path": "/repo/src", "output_mode": "content"}),
    result("t3", "Found 2 files\n/repo/src/hooks/send.py\n/repo/src/mail/send.py"),
    call("t4", "Edit", {"file_path": "/repo/src/hooks/send.py", "old_string": "    return httpx.post(url, json=body)",
                        "new_string": "    for attempt in range(3):\n        try:\n            return httpx.post(url, json=body)\n"
                                      "        except httpx.TransportError:\n            if attempt == 2:\n                raise"}),
    result("t4", "The file /repo/src/hooks/send.py has been updated."),
    call("t5", "Write", {"file_path": "/repo/tests/hooks/test_retry.py", "content": "def test_retry():\n    assert True\n"}),
    result("t5", "File created successfully at: /repo/tests/hooks/test_retry.py"),
    call("t6", "Bash", {"command": "python -m pytest tests/hooks -q", "description": "Run the hook tests"}),
    result("t6", "...\n3 passed in 0.12s"),
    call("t7", "Bash", {"command": "npm run lint"}),
    result("t7", "Error: Cannot find module 'eslint'\nexit code 1", error=True),
    call("t8", "TodoWrite", {"todos": [{"content": "Add jitter to the retry backoff", "status": "pending"},
                                       {"content": "Retry the webhook sender", "status": "completed"}]}),
    result("t8", "Todos have been modified successfully."),
    call("t9", "WebFetch", {"url": "https://www.python-httpx.org/exceptions/", "prompt": "which errors are transient"}),
    result("t9", "TransportError covers connection and timeout errors."),
]

#: OpenAI-style function calls: arguments arrive as a JSON string, results as JSON.
OPENAI_STYLE: list[dict[str, Any]] = [
    user("What's the weather in Paris for the offsite on May 14?"),
    call("call_abc", "get_weather", '{"city": "Paris", "units": "metric", "date": "2026-05-14"}'),
    result("call_abc", '{"temp": 18, "conditions": "light rain", "wind_kph": 12}'),
    call("call_def", "functions.lookup_booking", {"booking_id": "BK-2291"}),
    result("call_def", '{"error": "booking BK-2291 not found"}', error=True),
    assistant("It will be 18 °C with light rain in Paris on May 14; booking BK-2291 was not found, so Aiko should "
              "rebook it."),
]


def numbered_steps(n: int, offset: int = 0) -> list[dict[str, Any]]:
    """``n`` short alternating turns from step ``offset`` ("step 42: deploy of service-2 …"), 30 a day."""
    return [{"role": "user" if i % 2 == 0 else "assistant", "timestamp": f"2026-10-{1 + i // 30:02d}T10:{i % 30:02d}:00Z",
             "content": f"step {i}: deploy of service-{i % 5} finished with code {(i * 7) % 97}"}
            for i in range(offset, offset + n)]
