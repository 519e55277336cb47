"""Counting a conversation's summaries reads an index, not every summary row with its body (flat at 1M)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from vaultlcm import Vault

QUERIES = [
    "SELECT conv, COUNT(*), MAX(depth) FROM summaries WHERE conv=? GROUP BY conv",  # bases.conversation_stats
    "SELECT COUNT(*), MAX(depth) FROM summaries WHERE conv=?",  # Dag.counts
    "SELECT COUNT(*) FROM summaries WHERE conv=? AND depth>=1 AND parent IS NOT '!invalid'",  # Dag.top_condensed
]


def test_counts_read_the_covering_index_and_an_older_catalog_gets_it(tmp_path: Path) -> None:
    root = tmp_path / "v"
    with Vault.init(root) as v:
        v.ingest("c", [{"role": "user" if i % 2 == 0 else "assistant", "content": f"step {i} " + "word " * 80}
                       for i in range(120)])
        v.compact("c", force=True)
        n, depth = v.dag.counts("c")
    assert n > 0 and depth is not None
    db = sqlite3.connect(root / ".vaultlcm" / "catalog.sqlite")
    db.execute("DROP INDEX summaries_depth")  # a catalog made before the index
    db.commit()
    db.close()
    with Vault(root) as v:
        assert v.dag.counts("c") == (n, depth)
        for q in QUERIES:
            plan = " ".join(str(r[-1]) for r in v.catalog.execute("EXPLAIN QUERY PLAN " + q, ("c",)))
            assert "COVERING INDEX summaries_depth" in plan, (q, plan)
        rows, total = v.dag.top_condensed("c", 3)
        assert total == sum(1 for r in v.dag.all("c", bodies=False) if r.depth >= 1 and r.parent != "!invalid")
