"""Read paths whose cost must not grow with history: the regex page bound, persisted summary costs, status."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from vaultlcm import Vault
from vaultlcm.assembly import render_summary, summary_item_cost

WORDS = ["deploy", "failure", "retry", "cache", "budget", "deadline", "schema"]


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Vault:
    """Several days of traffic, compacted: summaries hold some matches, messages others."""
    root = tmp_path_factory.mktemp("v")
    v = Vault.init(root)
    records = []
    for i in range(240):
        day, minute = divmod(i, 24)
        text = " ".join(WORDS[(i * k + day) % len(WORDS)] for k in range(1, 7))
        records.append({"role": ["user", "assistant"][i % 2], "timestamp": f"2026-10-{day + 1:02d}T10:{minute:02d}:00Z",
                        "content": f"step {i}: {text}"})
    v.ingest("c", records)
    v.compact("c", force=True)
    assert v.dag.all("c")
    yield v
    v.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pattern=st.sampled_from([r"deploy \w+ failure", r"step 1\d", r"cache", r"retry.*deadline", r"schema$", r"nothing-here"]),
       limit=st.integers(1, 60), sort=st.sampled_from(["newest", "oldest", "relevance"]),
       scope=st.sampled_from(["both", "messages", "summaries"]))
def test_a_regex_page_is_the_head_of_the_full_scan(vault: Vault, pattern: str, limit: int, sort: str, scope: str) -> None:
    """Stopping early (files, then summaries once a full page is newer) never changes the page."""
    full = vault.grep(pattern, regex=True, limit=10_000, sort=sort, scope=scope)
    page = vault.grep(pattern, regex=True, limit=limit, sort=sort, scope=scope)
    assert not full.get("partial") and not page.get("partial")
    assert [h["id"] for h in page["hits"]] == [h["id"] for h in full["hits"][:limit]]
    if len(full["hits"]) > limit:
        assert page["next_offset"] == limit  # more may follow, and the caller is told so


def test_summary_costs_are_shared_with_later_processes_and_keyed_by_what_is_rendered(vault: Vault) -> None:
    vault.assemble("c", 3000)
    rows = dict((i, (k, n)) for i, k, n in vault.catalog.execute("SELECT id, key, tokens FROM summary_costs"))
    assert rows
    for sid, (key, tokens) in rows.items():
        summary = vault.dag.get(sid)
        assert summary is not None
        text = render_summary(summary)
        assert key == hashlib.blake2b(text.encode("utf-8"), digest_size=12).hexdigest()
        assert tokens == summary_item_cost(summary)
    # A stored cost whose key no longer matches the rendered block is counted again, and replaced.
    sid = next(iter(rows))
    vault.catalog.execute("UPDATE summary_costs SET key='stale', tokens=1 WHERE id=?", (sid,))
    with Vault(vault.root) as other:
        from vaultlcm import assembly

        assembly._cost_cache.clear()  # what a new process starts with
        other.assemble("c", 3000)
        assert other.catalog.summary_cost(sid, rows[sid][0]) == rows[sid][1]


def test_status_reads_no_note_and_matches_the_dag(vault: Vault) -> None:
    before = {p: p.stat().st_mtime_ns for p in Path(vault.root).rglob("*.md")}
    conv = vault.status()["conversations"][0]
    summaries = vault.dag.all("c")
    assert conv["summaries"] == len(summaries) and conv["max_depth"] == max(s.depth for s in summaries)
    assert {p: p.stat().st_mtime_ns for p in Path(vault.root).rglob("*.md")} == before
