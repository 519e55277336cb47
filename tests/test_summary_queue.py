"""The index follows summaries through a queue SQLite fills itself: a follow-up costs what changed.

Triggers on ``summaries`` queue every id whose indexed part (body, membership of the DAG) changed,
whoever changed it: compaction, another process, a sync after a person edited a note in Obsidian.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_traffic import numbered_steps
from people_vaults import BACKENDS, make_indexed_vault as make_vault
from vaultlcm import Vault

def queued(v: Vault) -> set[str]:
    return {r[0] for r in v.catalog.execute("SELECT id FROM index_summary_queue")}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_summary_a_person_edited_is_reindexed_from_the_queue(tmp_path: Path, backend: str,
                                                               full_compares: list[int]) -> None:
    make_vault(tmp_path, backend)
    full_compares.clear()
    with Vault(tmp_path) as v:
        v.indexer.ready()
        assert queued(v) == set()
        leaf = next(r for r in v.dag.all("c") if r.kind == "leaf")
        path = v.root / leaf.path
        path.write_text(path.read_text().rstrip("\n") + "\nCorrected by hand: QUOKKA-77 owns the rollout\n")
        v.sync("c", full=True)  # what the watcher and the next writer do: the catalog learns the new body
        assert queued(v) == {leaf.id}
        assert v.indexer.follow("c") == 1
        assert queued(v) == set()
        assert [h["id"] for h in v.grep("QUOKKA-77")["hits"]] == [leaf.id]
        assert full_compares == []  # from the queue, not by comparing every document
        indexed = dict(v.catalog.execute("SELECT id, hash FROM index_summaries"))
        assert indexed == {r.id: r.body_hash for r in v.dag.all("c")}


@pytest.mark.parametrize("backend", BACKENDS)
def test_changes_made_by_another_process_wait_in_the_queue(tmp_path: Path, backend: str,
                                                           full_compares: list[int]) -> None:
    make_vault(tmp_path, backend)
    with Vault(tmp_path) as other:  # compacts without opening the index
        other.ingest("c", numbered_steps(60, offset=90))
        other.compact("c", force=True)
        made = {r.id for r in other.dag.all("c")}
    full_compares.clear()
    with Vault(tmp_path) as v:
        assert queued(v)  # what the other process changed, kept for whoever indexes next
        assert v.grep("step 140")["hits"]
        assert queued(v) == set() and full_compares == []
        assert {r[0] for r in v.catalog.execute("SELECT id FROM index_summaries")} == made
        assert v.indexer.drift() == {"missing": [], "extra": []}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_catalog_without_the_queue_is_compared_in_full_once(tmp_path: Path, backend: str,
                                                              full_compares: list[int]) -> None:
    make_vault(tmp_path, backend)
    full_compares.clear()
    with Vault(tmp_path) as v:
        v.indexer.ready()
        # As a catalog replaced under the process would be: no queue, no triggers.
        for name in ("index_summary_queue_ins", "index_summary_queue_del", "index_summary_queue_upd"):
            v.catalog.execute(f"DROP TRIGGER {name}")
        v.catalog.execute("DROP TABLE index_summary_queue")
        v.ingest("c", numbered_steps(40, offset=90))
        v.compact("c", force=True)
        v.indexer.follow("c")
        assert len(full_compares) == 1
        v.ingest("c", numbered_steps(40, offset=130))
        v.compact("c", force=True)
        v.indexer.follow("c")
        assert len(full_compares) == 1  # the compare installed the queue again
        assert v.indexer.drift() == {"missing": [], "extra": []}


# -- the queue against the join it replaces, over any sequence of changes ----------------------

_OPS = st.lists(st.tuples(st.sampled_from(["body", "invalid", "valid", "delete", "copy", "stale", "move"]),
                          st.integers(0, 10_000)), max_size=12)


def _join(v: Vault, conv: str) -> tuple[set[str], set[str]]:
    """What the full join over every summary says differs (the follow-up's answer before the queue)."""
    changed = {r[0] for r in v.catalog.execute(
        "SELECT s.id FROM summaries s LEFT JOIN index_summaries k ON k.id = s.id "
        "WHERE s.conv = ? AND s.parent IS NOT '!invalid' AND (k.hash IS NULL OR k.hash <> s.body_hash "
        "OR k.conv <> s.conv)", (conv,))}
    gone = {r[0] for r in v.catalog.execute(
        "SELECT k.id FROM index_summaries k LEFT JOIN summaries s ON s.id = k.id "
        "WHERE k.conv = ? AND (s.id IS NULL OR s.parent IS '!invalid' OR s.conv <> k.conv)", (conv,))}
    return changed, gone


_SERIAL = itertools.count(1)


def _apply(v: Vault, op: str, pick: int) -> None:
    ids = [r[0] for r in v.catalog.execute("SELECT id FROM summaries ORDER BY id")]
    if not ids:
        return
    sid = ids[pick % len(ids)]
    n = next(_SERIAL)
    with v.catalog.transaction() as db:
        if op == "body":
            db.execute("UPDATE summaries SET body_hash = ? WHERE id = ?", (f"h{n}", sid))
        elif op == "invalid":
            db.execute("UPDATE summaries SET parent = '!invalid' WHERE id = ?", (sid,))
        elif op == "valid":
            db.execute("UPDATE summaries SET parent = NULL WHERE id = ? AND parent IS '!invalid'", (sid,))
        elif op == "delete":
            db.execute("DELETE FROM summaries WHERE id = ?", (sid,))
        elif op == "copy":
            db.execute("INSERT INTO summaries SELECT printf('sum_q%08d', ?), conv, path || ?, size, mtime_ns, kind, "
                       "depth, earliest_at, latest_at, first_seq, last_seq, descendant_count, source_tokens, "
                       "token_count, summarizer, prompt, level, gen_hash, body_hash, sources_hash, sources, body, "
                       "parent, stale FROM summaries WHERE id = ?", (n, str(n), sid))
        elif op == "stale":  # not what the index holds: nothing to follow
            db.execute("UPDATE summaries SET stale = 1 - stale WHERE id = ?", (sid,))
        else:
            db.execute("UPDATE summaries SET conv = CASE conv WHEN 'c' THEN 'd' ELSE 'c' END WHERE id = ?", (sid,))


@pytest.fixture(scope="module")
def keeper_vault(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("queue")
    make_vault(root, "whoosh")
    with Vault(root) as v:
        v.indexer.ready()
        yield v


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
def test_the_queue_finds_what_the_join_over_every_summary_finds(keeper_vault: Vault,
                                                                ops: list[tuple[str, int]]) -> None:
    v = keeper_vault
    for op, pick in ops:
        _apply(v, op, pick)
    for conv in ("c", "d"):
        want = _join(v, conv)
        took = v.indexer._take_summary_changes(conv)
        assert took is not None
        changed, gone, taken = took
        assert (set(changed), set(gone)) == want
        assert set(changed) | set(gone) <= set(taken)
        # What a follow-up then records: the index holds these bodies, and not those.
        with v.catalog.transaction() as db:
            db.executemany("INSERT OR REPLACE INTO index_summaries(id, conv, hash) "
                           "SELECT id, conv, body_hash FROM summaries WHERE id = ?", [(i,) for i in changed])
            db.executemany("DELETE FROM index_summaries WHERE id = ?", [(i,) for i in gone])
        assert _join(v, conv) == (set(), set())
