"""What a compaction run costs beyond summarizing: work that must follow the new messages, not the history.

* a compaction pass fsyncs each note it writes, and the summaries folder once
  for the whole pass (not once per note);
* ``Vault.compact`` checks the daily logs once (its own sync), not again inside
  the compactor, and checks every note at most once per interval;
* stale nodes are found by a query: the DAG's other rows are never read;
* the home note's diagram takes the highest nodes from the catalog, as it did from the whole list.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vaultlcm import Vault, dag_writes, fsutil
from vaultlcm.catalog import Catalog


def _messages(n: int) -> list[dict[str, object]]:
    return [{"role": "user" if i % 2 == 0 else "assistant",
             "content": f"message {i}: we moved the deploy of build {5000 + i} to Friday because the cache was cold"}
            for i in range(n)]


def test_a_pass_syncs_the_summaries_folder_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Vault.init(tmp_path / "v") as v:
        v.ingest("c", _messages(400))
        synced: list[Path] = []
        real = fsutil.fsync_dir
        monkeypatch.setattr(fsutil, "fsync_dir", lambda p: (synced.append(Path(p)), real(p))[1])
        monkeypatch.setattr(dag_writes, "fsync_dir", lambda p: (synced.append(Path(p)), real(p))[1])
        report = v.compact("c", force=True)[0]
        assert len(report.created) > 10
        folder = v.layout.summaries_dir("c")
        # Each pass (leaves, then each level of condensed nodes) syncs the folder once, whatever it wrote.
        assert 1 <= synced.count(folder) < len(report.created) / 3
        assert all((folder / f"{sid}.md").exists() for sid in report.created)
        assert v.dag._pending_dirs is None  # the batch ended with the pass


def test_compact_checks_the_logs_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Vault.init(tmp_path / "v") as v:
        v.ingest("c", _messages(200))
        calls: list[str] = []
        real = Catalog.sync_logs
        monkeypatch.setattr(Catalog, "sync_logs", lambda self, *a, **k: (calls.append("sync"), real(self, *a, **k))[1])
        v.compact("c", force=True)
        assert len(calls) == 1


def test_stale_nodes_are_found_without_reading_the_dag(tmp_path: Path) -> None:
    with Vault.init(tmp_path / "v") as v:
        v.ingest("c", _messages(300))
        v.compact("c", force=True)
        assert v.dag.stale("c") == []
        leaves = [r for r in v.dag.all("c") if r.kind == "leaf"]
        v.catalog.execute("UPDATE summaries SET stale=1 WHERE id IN (?, ?)", (leaves[1].id, leaves[0].id))
        found = v.dag.stale("c")
        assert [r.id for r in found] == [r.id for r in v.dag.all("c") if r.stale and r.parent != "!invalid"]
        assert {r.id for r in found} == {leaves[0].id, leaves[1].id}


def test_home_diagram_shows_the_highest_nodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from vaultlcm import home

    monkeypatch.setattr(home, "MAX_DIAGRAM_NODES", 3)
    with Vault.init(tmp_path / "v") as v:
        v.ingest("c", _messages(900))
        v.compact("c", force=True)
        upper = [s for s in v.dag.all("c") if s.depth >= 1 and s.parent != "!invalid"]
        assert len(upper) > 3
        expected = sorted(upper, key=lambda s: (-s.depth, s.first_seq or 0, s.id))[:3]
        text = home.render_home(v.layout, v.catalog, v.dag, "c")
        assert f"_Diagram shows the 3 highest of {len(upper)} condensed nodes._" in text
        classes = next(line for line in text.splitlines() if line.strip().startswith("class "))
        assert classes.split()[1].split(",") == sorted(s.id for s in expected)
