"""Folder stamps carried forward by the writer: a reader after a compaction looks at no note, unless
someone else changed the folder meanwhile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_traffic import numbered_steps
from vaultlcm import Vault
from vaultlcm.dag import Dag


session = numbered_steps


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records every look at all of a conversation's notes (still made)."""
    seen: list[str] = []
    real = Dag._scan

    def spy(self: Dag, conv: str) -> Any:
        seen.append(conv)
        return real(self, conv)

    monkeypatch.setattr(Dag, "_scan", spy)
    return seen


def built(root: Path) -> None:
    with Vault.init(root) as v:
        v.ingest("c", session(160))
        v.compact("c", force=True)
    with Vault(root) as v:
        v.assemble("c", 1500)  # a reader takes the stamps once


def test_a_reader_after_another_process_compacted_looks_at_no_note(tmp_path: Path, scans: list[str]) -> None:
    built(tmp_path)
    with Vault(tmp_path) as v:
        v.ingest("c", session(120, offset=160))
        before = len(v.dag.all("c"))
        v.compact("c", force=True)
        assert len(v.dag.all("c")) > before  # notes were written into the stamped folder
    scans.clear()
    with Vault(tmp_path) as v:
        ctx = v.assemble("c", 1500)
        assert scans == []  # the writer's own notes did not make the reader look at every note
        assert ctx.summary_ids
        assert v.status()["conversations"][0]["summaries"] == len(v.dag.all("c"))


@pytest.mark.parametrize("change", ["added", "removed", "folder"])
def test_a_change_someone_else_made_during_the_writes_is_still_seen(tmp_path: Path, scans: list[str],
                                                                    change: str) -> None:
    built(tmp_path)
    with Vault(tmp_path) as v:
        v.ingest("c", session(120, offset=160))
        folder = v.layout.summaries_dir("c")
        with v.dag.batched_dir_syncs():  # the compaction's own batch nests in this one: the stamps move at its end
            v.compact("c", force=True)
            victim = sorted(folder.glob("*.md"))[0]
            if change == "added":
                (folder / "my own note.md").write_text("# a person's note, filed among the summaries\n")
            elif change == "removed":
                victim.unlink()
            else:
                (folder / "archive").mkdir()
                (folder / "archive" / "old.md").write_text("# moved here by hand\n")
    scans.clear()
    with Vault(tmp_path) as v:
        v.assemble("c", 1500)
        assert scans == ["c"]  # the stamp stayed stale: the reader looked
        paths = {p for (p,) in v.catalog.execute("SELECT path FROM note_files WHERE conv='c'")}
        rel = v.layout.relative(folder)
        if change == "added":
            assert f"{rel}/my own note.md" in paths
        elif change == "removed":
            assert v.layout.relative(victim) not in paths
        else:
            assert f"{rel}/archive/old.md" in paths
