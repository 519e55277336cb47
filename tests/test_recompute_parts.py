"""``Dag.recompute`` settles the leaves a page at a time: the catalog it leaves does not depend on the page size."""

from __future__ import annotations

from pathlib import Path

import pytest

from vaultlcm import Vault, dag as dag_module


def derived_tables(root: Path) -> dict[str, list[tuple[object, ...]]]:
    """Everything recompute derives, in key order (what must not depend on how it was settled)."""
    with Vault(root) as v:
        v.sync("c")
        v.dag.recompute("c")
        q = v.catalog.execute
        return {
            "summaries": q("SELECT id, parent, first_seq, last_seq, stale, sources FROM summaries ORDER BY id"),
            "coverage": q("SELECT msg_id, summary_id FROM coverage ORDER BY msg_id"),
            "covered": q("SELECT id, covered FROM messages ORDER BY id"),
            "problems": q("SELECT path, kind, detail FROM problems ORDER BY path, kind, detail"),
            "gaps": q("SELECT value FROM meta WHERE key='gaps:c'"),
        }


def test_pages_of_any_size_settle_what_people_did_as_one_page_does(dag_vault: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    with Vault(dag_vault) as v:
        v.sync("c")
        leaves = [s for s in v.dag.all("c") if s.kind == "leaf"]
    assert len(leaves) >= 6
    summaries = dag_vault / "conversations/c/summaries"
    # another machine's leaf over the messages of the last leaf and one of the first (a merge keeps both):
    # it shares messages with leaves that fall in other pages
    first, last = (dag_vault / leaves[0].path).read_text(), (dag_vault / leaves[-1].path).read_text()
    extra = first.split("sources:\n", 1)[1].split("\n", 1)[0]
    (summaries / "sum_00000000000000aa.md").write_text(
        last.replace(leaves[-1].id, "sum_00000000000000aa").replace("sources:\n", f"sources:\n{extra}\n", 1))
    # a person's correction claiming a message of the leaf before it, a deleted leaf, a broken link
    a = dag_vault / leaves[2].path
    link = (dag_vault / leaves[1].path).read_text().split("sources:\n", 1)[1].split("\n", 1)[0]
    a.write_text(a.read_text().replace("sources:\n", f"sources:\n{link}\n", 1) + "Corrected by hand.\n")
    (dag_vault / leaves[3].path).unlink()
    b = dag_vault / leaves[4].path
    b.write_text(b.read_text().replace("#^m-", "#^m-0", 1))
    whole = derived_tables(dag_vault)
    assert {k for _p, k, _d in whole["problems"]} >= {"superseded", "dag"}  # the cases above are in play
    for size in (1, 2, 3, 5):
        monkeypatch.setattr(dag_module, "_LEAF_PAGE", size)
        assert derived_tables(dag_vault) == whole, f"pages of {size} leaves"
