"""A relevance page mixes raw messages and summaries: each kind ranked on its own, summaries by their best line.

The session below is the shape that defeated whole-note BM25: a word pair that
every re-read test file repeats (``route``, ``stops``) and, once, a person's
statement of a limit that later changed. Summaries hold the fact in one line
with the old value marked; before, they ranked under every tool result.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vaultlcm import Vault
from vaultlcm.index.query import ParsedQuery, iter_tokens, parse_query
from vaultlcm.ranking import SUMMARY_EVERY, LineScorer, best_line, line_weight, plan_page


def _busy_session() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def add(day: int, minute: int, role: str, content: Any) -> None:
        out.append({"role": role, "timestamp": f"2026-10-{day:02d}T{9 + minute // 60:02d}:{minute % 60:02d}:00Z",
                    "content": content})

    for day in (1, 2, 3):
        for k in range(16):
            call = f"call_{day}{k:02d}"
            add(day, 4 * k, "assistant", [{"type": "tool_call", "id": call, "name": "read_file",
                                           "arguments": {"path": f"tests/test_route_{k}.py"}}])
            code = "\n".join(f"{n} route = make_route(stops={n % 9}, carrier='gull')  # stops per route"
                             for n in range(1, 6))
            add(day, 4 * k + 1, "tool", [{"type": "tool_result", "call_id": call, "content": code}])
            add(day, 4 * k + 2, "assistant", f"Test file {k} for day {day} reads fine; nothing to change there.")
        if day == 1:
            add(day, 70, "user", "While you are in there: the planner caps a route at 120 stops.")
        if day == 2:
            add(day, 70, "user", "Heads up, the route cap went from 120 stops to 140 stops.")
    return out


@pytest.fixture(scope="module")
def busy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("busy")
    with Vault.init(root) as v:
        v.ingest("ops", _busy_session())
        v.compact("ops", force=True)
    return root


def test_a_summary_line_with_the_fact_reaches_the_first_page(busy: Path) -> None:
    with Vault(busy, environ={}) as v:
        messages_only = v.grep("stops route", conversation="ops", limit=10, scope="messages")
        mixed = v.grep("stops route", conversation="ops", limit=10)
    # the problem: ten tool results outrank the person's statements
    assert not any("120 stops" in h["snippet"] for h in messages_only["hits"])
    kinds = [h["kind"] for h in mixed["hits"]]
    n_sum = mixed["by_kind"]["summaries"]
    assert n_sum >= 1 and kinds[1] == "summary"
    assert kinds.count("summary") == min(n_sum, len(range(1, 10, SUMMARY_EVERY)))
    first_summary = next(h for h in mixed["hits"] if h["kind"] == "summary")
    snippet = first_summary["snippet"]
    assert "caps" in snippet and "120 stops" in snippet, first_summary  # its best line, not its first
    assert mixed["total"] == messages_only["total"] + mixed["by_kind"]["summaries"]


def test_pages_of_the_mixed_order_join_into_the_whole_order(busy: Path) -> None:
    with Vault(busy, environ={}) as v:
        whole = v.grep("stops route", conversation="ops", limit=200)
        pages = [v.grep("stops route", conversation="ops", limit=7, offset=o)["hits"]
                 for o in range(0, whole["total"], 7)]
    assert [h["id"] for page in pages for h in page] == [h["id"] for h in whole["hits"]]
    assert len({h["id"] for h in whole["hits"]}) == whole["total"]


@given(st.integers(0, 60), st.integers(0, 60), st.integers(1, 25))
def test_page_plans_partition_the_order(n_msg: int, n_sum: int, limit: int) -> None:
    whole = plan_page(0, n_msg + n_sum + 5, n_msg, n_sum)
    assert whole.count("message") == n_msg and whole.count("summary") == n_sum
    joined: list[str] = []
    for offset in range(0, n_msg + n_sum, limit):
        page = plan_page(offset, limit, n_msg, n_sum)
        assert page.message_start == whole.kinds[:offset].count("message")
        assert page.summary_start == whole.kinds[:offset].count("summary")
        joined += page.kinds
    assert tuple(joined) == whole.kinds
    # while both kinds last, every SUMMARY_EVERY-th place from the second is a summary
    for place, kind in enumerate(whole.kinds):
        before = whole.kinds[:place]
        if before.count("message") < n_msg and before.count("summary") < n_sum:
            assert (kind == "summary") == (place % SUMMARY_EVERY == 1)


@given(st.text(), st.text(min_size=1))
def test_line_scores_take_any_text(text: str, query: str) -> None:
    pq = parse_query(query)
    (clauses, weight), line = best_line(text, pq)
    assert 0 <= clauses <= len(pq.parts) and weight >= 0
    assert line == "" or line in text.splitlines()
    assert line_weight(line, pq, 10.0)[0] == clauses or line == ""


def test_a_short_line_with_every_word_beats_a_long_one() -> None:
    pq = parse_query("stops route")
    text = ("- with 197 stops per route that adds up, says the long note about slow requests and queries\n"
            "- route cap: 140 stops (was 120 stops)\n- route only\n")
    assert best_line(text, pq)[1] == "- route cap: 140 stops (was 120 stops)"


def _reference_weight(line: str, pq: ParsedQuery, avg_tokens: float) -> tuple[int, float]:
    """The line weight token by token, as the module docstring defines it (what LineScorer must equal)."""
    tf: dict[int, int] = {}
    n_tokens = 0
    for tok, _pos, _start, _end in iter_tokens(line):
        n_tokens += 1
        for k, part in enumerate(pq.parts):
            if part.holds(tok):
                tf[k] = tf.get(k, 0) + 1
    norm = 1.2 * (1 - 0.75 + 0.75 * n_tokens / max(avg_tokens, 1.0))
    return len(tf), sum(f * 2.2 / (f + norm) for f in tf.values())


@given(st.lists(st.text(), max_size=6), st.text(min_size=1), st.floats(0.0, 50.0))
def test_the_chunk_memo_scores_every_line_as_token_by_token(lines: list[str], query: str, avg: float) -> None:
    pq = parse_query(query)
    scorer = LineScorer(pq)  # one scorer for every line: what a chunk holds is remembered across them
    for line in lines + lines:
        clauses, weight = scorer.weight(line, avg)
        ref_clauses, ref_weight = _reference_weight(line, pq, avg)
        assert clauses == ref_clauses
        assert weight == pytest.approx(ref_weight, rel=1e-12, abs=1e-12)


def test_the_chunk_memo_on_identifiers_and_stems() -> None:
    pq = parse_query("retry src/app.py")
    line = "Retries of src/app.py: retrying src/app.pyc and app.py, RETRY"
    assert LineScorer(pq).weight(line, 8.0) == pytest.approx(_reference_weight(line, pq, 8.0))
    assert LineScorer(pq).weight(line, 8.0)[0] == 2
