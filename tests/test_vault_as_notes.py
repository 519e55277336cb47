"""People treat the vault as their own notes: rename, move, delete, edit; then compact and doctor.

Every scenario runs on a real vault with a DAG three levels deep, then checks
what a person would: the context the agent gets grows only by what was deleted
(and shrinks back after compaction), Obsidian resolves every link vaultlcm
wrote, and ``doctor`` exits 0 (only routine warnings before compaction, nothing
at all after it).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from obsidian_links import broken_links, obsidian_rename
from people_vaults import SETTINGS
from vaultlcm import Settings, Vault
from vaultlcm.cli import cli
from vaultlcm.dag_rows import item_tokens


def open_vault(root: Path) -> Vault:
    """The vault as a new process sees it (derived state brought up to date with the files)."""
    v = Vault(root, settings=Settings(**SETTINGS))
    v.sync("c")
    return v


def coarsest(root: Path) -> tuple[set[str], int]:
    """The active context (the coarsest cut of the DAG): its item ids and tokens."""
    with open_vault(root) as v:
        items = v.dag.active("c")
        return {i.id for i in items}, sum(item_tokens(i) for i in items)


def doctor(root: Path, *args: str) -> tuple[int, dict]:
    r = CliRunner().invoke(cli, ["--vault", str(root), "doctor", "--json", *args])
    return r.exit_code, json.loads(r.stdout)


def compact(root: Path) -> None:
    with open_vault(root) as v:
        [report] = v.compact("c")
        assert report.error is None


def written_by_vaultlcm(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in (root / "conversations").rglob("*.md"))


def settle_and_check(root: Path, before: set[str]) -> None:
    """After an edit and one `compact`: the same context, every link resolves, doctor clean even with --strict."""
    compact(root)
    assert coarsest(root)[0] == before
    assert broken_links(root, written_by_vaultlcm(root)) == []
    code, report = doctor(root, "--strict")
    assert code == 0, report
    assert not report["problems"] and not report["warnings"], report


def pick(root: Path, kind: str) -> tuple[str, Path, str]:
    """A note of ``kind`` that has a parent: ``(id, path, parent path)``."""
    with open_vault(root) as v:
        rows = [s for s in v.dag.all("c") if s.kind == kind and s.parent and s.parent != "!invalid"]
        row = rows[len(rows) // 2]
        return row.id, root / row.path, v.dag.get(row.parent).path  # type: ignore[union-attr]


# -- rename and move ----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["leaf", "condensed"])
def test_rename_in_obsidian(dag_vault: Path, kind: str) -> None:
    before, tokens = coarsest(dag_vault)
    sid, path, parent = pick(dag_vault, kind)
    obsidian_rename(dag_vault, path, path.with_name("Timezone decision.md"))
    assert "[[Timezone decision]]" in (dag_vault / parent).read_text()
    assert coarsest(dag_vault) == (before, tokens)  # nothing dissolved, nothing came back
    code, report = doctor(dag_vault, "--strict")
    assert code == 0 and not report["warnings"], report  # not stale, not broken
    parent_text = (dag_vault / parent).read_text()
    settle_and_check(dag_vault, before)
    assert (dag_vault / parent).read_text() == parent_text  # the person's link is kept, the note untouched
    with open_vault(dag_vault) as v:
        assert v.dag.get(sid).path.endswith("Timezone decision.md")  # type: ignore[union-attr]


@pytest.mark.parametrize("where", ["summaries/archive/2026", "."])
def test_move_in_obsidian(dag_vault: Path, where: str) -> None:
    before, _ = coarsest(dag_vault)
    sid, path, parent = pick(dag_vault, "leaf")
    dest = dag_vault / "conversations/c" / where / path.name
    obsidian_rename(dag_vault, path, dest)  # a unique name: Obsidian keeps [[sum_…]] as it is
    assert f"[[{sid}]]" in (dag_vault / parent).read_text()
    assert coarsest(dag_vault)[0] == before
    settle_and_check(dag_vault, before)
    with open_vault(dag_vault) as v:
        assert v.dag.get(sid).path == dest.relative_to(dag_vault).as_posix()  # type: ignore[union-attr]


def test_plain_mv_is_relinked_by_the_next_compaction(dag_vault: Path) -> None:
    before, _ = coarsest(dag_vault)
    sid, path, parent = pick(dag_vault, "leaf")
    path.rename(path.with_name("Timezone decision.md"))  # no link update: Obsidian now shows [[sum_…]] as broken
    assert broken_links(dag_vault, [parent])
    assert coarsest(dag_vault)[0] == before  # vaultlcm still knows the note by its id
    code, report = doctor(dag_vault)
    assert code == 0, report
    assert [w["kind"] for w in report["warnings"]] == ["outdated_link"] and report["warnings"][0]["fixable"]
    settle_and_check(dag_vault, before)
    assert "[[Timezone decision]]" in (dag_vault / parent).read_text()


def test_links_to_an_ambiguous_name_use_the_path(dag_vault: Path) -> None:
    before, _ = coarsest(dag_vault)
    (dag_vault / "Notes.md").write_text("a person's own note\n")
    sid, path, parent = pick(dag_vault, "leaf")
    path.rename(path.with_name("Notes.md"))
    settle_and_check(dag_vault, before)
    assert "[[conversations/c/summaries/Notes]]" in (dag_vault / parent).read_text()


def test_a_rename_survives_a_refresh_of_the_parent(dag_vault: Path) -> None:
    """Obsidian rewrote the parent's sources; a correction below makes the parent stale; its refresh keeps the link."""
    sid, path, parent = pick(dag_vault, "leaf")
    obsidian_rename(dag_vault, path, path.with_name("Timezone decision.md"))
    with open_vault(dag_vault) as v:
        siblings = [s for s in v.dag.children(v.dag.get(sid).parent) if s.id != sid]  # type: ignore[arg-type]
        sibling = dag_vault / siblings[0].path
    sibling.write_text(sibling.read_text() + "Corrected by hand: the port is 9443.\n")
    with open_vault(dag_vault) as v:
        parent_id = v.dag.get(sid).parent  # type: ignore[union-attr]
        [report] = v.compact("c")
        assert parent_id in report.refreshed  # the parent was written again ...
        assert not any(s.stale for s in v.dag.all("c"))
    text = (dag_vault / parent).read_text()
    assert "[[Timezone decision]]" in text and f"[[{sid}]]" not in text  # ... keeping the person's link
    assert broken_links(dag_vault, written_by_vaultlcm(dag_vault)) == []
    assert doctor(dag_vault, "--strict")[0] == 0


# -- delete -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["leaf", "condensed"])
def test_delete_returns_the_sources_and_compaction_rebuilds(dag_vault: Path, kind: str) -> None:
    before, tokens = coarsest(dag_vault)
    with open_vault(dag_vault) as v:
        sid, path, parent = pick(dag_vault, kind)
        sources = v.dag.get(sid).sources  # type: ignore[union-attr]
        source_tokens = sum(m.tokens + 4 for m in v.catalog.rows_by_ids(sources).values()) if kind == "leaf" else \
            sum(v.dag.get(s).token_count + 60 for s in sources)  # type: ignore[union-attr]
        node_tokens = v.dag.get(sid).token_count  # type: ignore[union-attr]
    path.unlink()
    after, after_tokens = coarsest(dag_vault)
    assert after == before | set(sources)  # exactly its sources came back; nothing above dissolved
    assert after_tokens == tokens + source_tokens
    code, report = doctor(dag_vault)
    assert code == 0, report  # a supported action: routine work only
    assert {w["kind"] for w in report["warnings"]} == {"stale"}
    assert any(parent == w["path"] and "a source was deleted" in w["detail"] for w in report["warnings"])
    settle_and_check(dag_vault, before)
    assert path.exists()  # the same sources give the same note back
    assert node_tokens > 0


def test_delete_of_a_renamed_note(dag_vault: Path) -> None:
    before, _ = coarsest(dag_vault)
    sid, path, parent = pick(dag_vault, "leaf")
    renamed = path.with_name("Timezone decision.md")
    obsidian_rename(dag_vault, path, renamed)
    renamed.unlink()
    assert coarsest(dag_vault)[0] > before
    assert doctor(dag_vault)[0] == 0
    settle_and_check(dag_vault, before)
    assert f"[[{sid}]]" in (dag_vault / parent).read_text()  # the gap was filled with the rebuilt note


def test_doctor_forgets_a_problem_compaction_solved(dag_vault: Path) -> None:
    sid, path, _ = pick(dag_vault, "leaf")
    saved = path.read_bytes()
    path.unlink()
    assert doctor(dag_vault)[1]["warnings"]
    with open_vault(dag_vault) as v:
        v.compact("c", force=True)
    assert path.read_bytes() == saved  # compact --force recreated the note, byte for byte
    code, report = doctor(dag_vault, "--strict")
    assert code == 0 and not report["warnings"], report


def test_a_person_body_edit_is_routine(dag_vault: Path) -> None:
    sid, path, _ = pick(dag_vault, "leaf")
    path.write_text(path.read_text() + "Corrected by hand.\n")
    code, report = doctor(dag_vault)
    assert code == 0, report
    assert {w["kind"] for w in report["warnings"]} == {"stale"}
    assert "human_owned" in {n["kind"] for n in report["notes"]}
    compact(dag_vault)
    assert doctor(dag_vault, "--strict")[0] == 0


def test_every_link_in_a_fresh_vault_resolves(dag_vault: Path) -> None:
    assert broken_links(dag_vault) == []


def test_links_in_a_body_follow_a_rename(dag_vault: Path) -> None:
    """Summaries may link their sources in the body too (`[[sum_…|↗]]`); Obsidian rewrites those on a rename."""
    from vaultlcm.summary_notes import body_hash

    sid, path, parent = pick(dag_vault, "leaf")
    note = dag_vault / parent
    head, _, body = note.read_text().partition("\n---\n")
    old_hash = re.search(r'body_sha256: "([0-9a-f]+)"', head).group(1)  # type: ignore[union-attr]
    body += f"- the first step [[{sid}|↗]]\n"  # as if the summarizer wrote it: the hash covers it
    note.write_text(head.replace(old_hash, body_hash(body)) + "\n---\n" + body)
    compact(dag_vault)  # the nodes above take the new body in
    before = coarsest(dag_vault)[0]
    obsidian_rename(dag_vault, path, path.with_name("Timezone decision.md"))
    assert "[[Timezone decision|↗]]" in note.read_text()
    with open_vault(dag_vault) as v:
        row = v.dag.get(v.dag.get(sid).parent)  # type: ignore[arg-type, union-attr]
        assert row is not None and not row.human_owned and not row.stale  # a rename is no edit
    settle_and_check(dag_vault, before)


def test_a_renamed_log_keeps_its_messages_and_is_relinked(dag_vault: Path) -> None:
    """Logs are not for renaming, but a message link names the message by its block id, and gets rewritten."""
    before, _ = coarsest(dag_vault)
    log = dag_vault / "conversations/c/logs/2026-11-01.md"
    log.rename(log.with_name("2026-11-01 first day.md"))
    assert coarsest(dag_vault)[0] == before
    code, report = doctor(dag_vault)
    assert code == 0 and {w["kind"] for w in report["warnings"]} == {"outdated_link"}
    settle_and_check(dag_vault, before)
