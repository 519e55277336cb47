"""People in the loop: watched edits, hand-corrected summaries, validation, doctor."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from vaultlcm import Settings, Vault
from vaultlcm.cli import cli
from test_lcm import SMALL, conversation


def build(root: Path, n: int = 24, **overrides: object) -> tuple[Vault, list[str]]:
    v = Vault.init(root, settings=Settings(**{**SMALL, **overrides}))
    spec = [("u", 30), ("t", 20), ("a", 40)] * (n // 4) + [("u", 10)] * (n % 4)
    ids = v.ingest("c", conversation(spec))
    v.compact("c", force=True)
    return v, ids


def leaf_of(v: Vault, mid: str):  # noqa: ANN201
    return v.dag.get(v.catalog.get(mid).covered)  # type: ignore[union-attr]


def edit_body(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


# -- watching -----------------------------------------------------------------


@pytest.fixture
def watched(tmp_path: Path):  # noqa: ANN201
    v, ids = build(tmp_path)
    watcher = v.watch(debounce_ms=50)
    yield v, ids, watcher
    watcher.stop()
    v.close()


def _leaf_path(v: Vault, ids: list[str]) -> Path:
    return v.root / leaf_of(v, ids[0]).path


def test_watch_atomic_replace(watched) -> None:  # noqa: ANN001
    v, ids, w = watched
    path = _leaf_path(v, ids)
    tmp = path.with_name(".sum.md.tmp")
    tmp.write_text(path.read_text().rstrip("\n") + "\nCorrected: the port is 9443 not 8443\n")
    os.replace(tmp, path)  # only a moved event names the target
    assert w.wait_idle(10)
    assert leaf_of(v, ids[0]).human_owned
    assert any(h["id"] == leaf_of(v, ids[0]).id for h in v.grep("9443")["hits"])


def test_watch_in_place_write_and_vim_style(watched) -> None:  # noqa: ANN001
    v, ids, w = watched
    path = _leaf_path(v, ids)
    with path.open("a") as fh:  # in-place write
        fh.write("In-place note ZEBRA-1\n")
    assert w.wait_idle(10)
    assert v.grep("ZEBRA-1")["hits"]
    backup = path.with_name(path.name + "~")  # vim: rename to backup, write new, delete backup
    os.rename(path, backup)
    path.write_text(backup.read_text() + "Vim note ZEBRA-2\n")
    (path.parent / "4913").write_text("")
    (path.parent / "4913").unlink()
    backup.unlink()
    assert w.wait_idle(10)
    assert v.grep("ZEBRA-2")["hits"] and not v.dag.problems("c")


def test_watch_rename_and_delete(watched) -> None:  # noqa: ANN001
    v, ids, w = watched
    leaf = leaf_of(v, ids[0])
    path = v.root / leaf.path
    renamed = path.with_name("My favourite summary.md")
    os.rename(path, renamed)
    assert w.wait_idle(10)
    assert v.dag.get(leaf.id).path.endswith("My favourite summary.md")  # identity follows the id
    assert v.catalog.get(ids[0]).covered == leaf.id
    renamed.unlink()
    assert w.wait_idle(10)
    assert v.dag.get(leaf.id) is None
    active = {i.id for i in v.dag.active("c")}
    assert set(leaf.sources) <= active  # its messages are back in the active context
    v.compact("c", force=True)
    assert v.catalog.get(ids[0]).covered is not None  # and summarized again


def test_watch_burst_of_saves(watched) -> None:  # noqa: ANN001
    v, ids, w = watched
    path = _leaf_path(v, ids)
    base = path.read_text()
    for i in range(2000):
        path.write_text(base + f"burst {i} BURST-{i}\n")
    assert w.wait_idle(30)
    assert v.grep("BURST-1999")["hits"] and not v.grep("BURST-1998")["hits"]
    assert v.dag.get(leaf_of(v, ids[0]).id).body.endswith("BURST-1999\n")


def test_watch_overflow_falls_back_to_rescan(tmp_path: Path) -> None:
    v, ids = build(tmp_path)
    w = v.watch(debounce_ms=50, rescan_threshold=5)
    try:
        paths = [v.root / s.path for s in v.dag.all("c")][:8]
        for i, p in enumerate(paths):
            p.write_text(p.read_text() + f"overflow OVF-{i}\n")
        assert w.wait_idle(20)
        assert w.rescans >= 1
        assert all(v.grep(f"OVF-{i}")["hits"] for i in range(len(paths)))
    finally:
        w.stop()
        v.close()


# -- corrections ----------------------------------------------------------------


def test_correction_reaches_the_top_and_note_is_untouched(tmp_path: Path) -> None:
    v, ids = build(tmp_path, 40, leaf_target_tokens=150, condensed_target_tokens=300)
    leaf = leaf_of(v, ids[0])
    path = v.root / leaf.path
    path.write_text(path.read_text().rstrip("\n") + "\nCORRECTION: the config lives in conf/real.toml\n")
    corrected = path.read_bytes()
    v.refresh("c")
    assert v.dag.get(leaf.id).human_owned
    stale = [s for s in v.dag.all("c") if s.stale]
    assert stale, "nodes above the corrected leaf become stale"
    v.compact("c")
    assert path.read_bytes() == corrected
    top = v.dag.ancestors_top(leaf.id)
    assert top is not None and "conf/real.toml" in v.dag.get(top).body
    # a budget too small for the raw history shows the top node, carrying the correction
    ctx = next(c for b in range(300, 3000, 50) if top in (c := v.assemble("c", b)).summary_ids)
    assert "conf/real.toml" in json.dumps(ctx.messages)
    assert not any(s.stale for s in v.dag.all("c"))
    # resummarize refuses the person's note without --force
    with pytest.raises(Exception, match="--force"):
        v.resummarize([leaf.id])
    v.close()


def test_frontmatter_problems_keep_last_good_state(tmp_path: Path) -> None:
    v, ids = build(tmp_path)
    leaf = leaf_of(v, ids[0])
    path = v.root / leaf.path
    good = path.read_text()
    path.write_text(good.replace(f'"[[conversations/c/logs/2026-11-01#^{ids[0]}]]"', f"[[conversations/c/logs/2026-11-01#^{ids[0]}]]"))
    r = v.refresh("c")
    assert any("unquoted wikilink" in p and "sources" in p and leaf.path in p for p in r["problems"])
    assert v.catalog.get(ids[0]).covered == leaf.id  # last good state in force
    path.write_text(good.replace("kind: \"leaf\"", "kind: [oops"))
    r = v.refresh("c")
    assert any("YAML" in p for p in r["problems"])
    path.write_text(good)
    assert v.refresh("c")["problems"] == []
    v.close()


def test_edited_raw_log_marks_leaf_stale(tmp_path: Path) -> None:
    v, ids = build(tmp_path)
    log = v.root / v.catalog.get(ids[0]).path
    text = log.read_text()
    old = v.get_message(ids[0]).text
    log.write_text(text.replace(old, old + " EDITED-IN-LOG"))
    r = v.refresh("c")
    assert ids[0] in r["messages_changed"]
    assert "EDITED-IN-LOG" in v.get_message(ids[0]).text
    assert leaf_of(v, ids[0]).stale
    d = v.doctor()
    assert any(p["kind"] == "log_edit" for p in d["warnings"])
    v.close()


# -- doctor -------------------------------------------------------------------


def test_doctor_names_every_damage_and_fix_cleans(tmp_path: Path) -> None:
    v, ids = build(tmp_path, 40)
    v.grep("alpha")  # create the index
    conv_dir = v.root / "conversations/c"
    leaves = [s for s in v.dag.all("c") if s.kind == "leaf"]
    # 1 broken link: a leaf pointing at a message that does not exist
    p = v.root / leaves[0].path
    p.write_text(p.read_text().replace(f"#^{leaves[0].sources[0]}]]", "#^m-doesnotexist]]"))
    # 2 invalid YAML in another note
    p2 = v.root / leaves[1].path
    p2.write_text(p2.read_text().replace('level: "normal"', "level: [broken"))
    # 3 orphan payload file (whose bytes do not match its name either), 4 temp file, 5 a person's symlink
    (conv_dir / "files").mkdir(exist_ok=True)
    (conv_dir / "files/file_0123456789abcdef.txt").write_text("nobody points here")
    (conv_dir / "summaries/.vaultlcm-tmp-abc").write_text("half")
    (conv_dir / "summaries/elsewhere.md").symlink_to(tmp_path.parent / "outside.md")
    # 6 torn log tail
    log = v.root / v.catalog.get(ids[-1]).path
    with log.open("ab") as fh:
        fh.write(b'<!-- lcm:{"id":"m-torn","seq":999,"parts":[')
    # 7 raw log edit
    text = log.read_text()
    first = v.get_message(ids[1]).text
    log.write_text(text.replace(first, first + " tampered"))
    # 8 a fallback (truncated) summary
    p3 = v.root / leaves[2].path
    p3.write_text(p3.read_text().replace('level: "normal"', 'level: "truncated"'))
    # 9 index drift
    shutil.rmtree(v.layout.index_dir)
    v.indexer.close()
    v.close()

    r = CliRunner().invoke(cli, ["--vault", str(tmp_path), "doctor", "--json"])
    assert r.exit_code == 1
    report = json.loads(r.stdout)
    kinds = {p["kind"] for p in report["problems"]}
    for expected in ("broken_link", "invalid_note", "payload_mismatch", "unsafe_entry"):
        assert expected in kinds, f"{expected} not reported: {sorted(kinds)}"
    warnings = {w["kind"] for w in report["warnings"]}
    for expected in ("orphan_file", "log_edit", "fallback", "stale", "torn_log", "temp_file"):
        assert expected in warnings, f"{expected} not reported: {sorted(warnings)}"
    assert "index_caught_up" in {n["kind"] for n in report["notes"]}  # derived lag: information only
    invalid = [p["detail"] for p in report["problems"] if p["kind"] == "invalid_note"]
    assert invalid and leaves[1].path in invalid[0] and "'level'" in invalid[0], invalid
    text = CliRunner().invoke(cli, ["--vault", str(tmp_path), "doctor"]).stdout
    assert "warning [torn_log] [fix]:" in text and "problem [invalid_note]:" in text

    r = CliRunner().invoke(cli, ["--vault", str(tmp_path), "doctor", "--fix", "--json"])
    report = json.loads(r.stdout)
    left = {p["kind"] for p in report["problems"]}
    assert not report["warnings"], report["warnings"]
    # What --fix must not touch: the person's broken notes and their symlink (named, left for them).
    assert left <= {"broken_link", "invalid_note", "unsafe_entry"}, report["problems"]
    assert not (conv_dir / "files/file_0123456789abcdef.txt").exists()  # the crash leftover is gone
    # repair the person's notes by hand: then doctor is clean
    p.write_text(p.read_text().replace("#^m-doesnotexist]]", f"#^{leaves[0].sources[0]}]]"))
    p2.write_text(p2.read_text().replace("level: [broken", 'level: "normal"'))
    (conv_dir / "summaries/elsewhere.md").unlink()
    r = CliRunner().invoke(cli, ["--vault", str(tmp_path), "doctor"])
    assert r.exit_code == 0, r.stdout  # only routine work is left (the notes above the repaired ones are stale)
    r = CliRunner().invoke(cli, ["--vault", str(tmp_path), "doctor", "--fix"])
    r = CliRunner().invoke(cli, ["--vault", str(tmp_path), "doctor", "--strict"])
    assert r.exit_code == 0, r.stdout
    with Vault(tmp_path, settings=Settings(**SMALL)) as v2:
        assert [m.id for m in v2.messages("c")] == ids


def test_cycle_and_double_claim_are_reported_and_ignored(tmp_path: Path) -> None:
    v, ids = build(tmp_path, 40)
    condensed = sorted((s for s in v.dag.all("c") if s.kind == "condensed"), key=lambda s: s.depth)
    low, top = condensed[0], condensed[-1]
    # a cycle: the lower node now claims the top node as its source
    lp = v.root / low.path
    good_low = lp.read_text()
    lp.write_text(good_low.replace(f'  - "[[{low.sources[0]}]]"', f'  - "[[{top.id}]]"'))
    r = v.refresh("c")
    assert any(low.path in p and "sources" in p and ("cycle" in p or "not below" in p) for p in r["problems"]), r["problems"]
    lp.write_text(good_low)
    assert v.refresh("c")["problems"] == []
    # a source claimed twice: another leaf lists a message the first leaf covers
    leaves = [s for s in v.dag.all("c") if s.kind == "leaf"]
    p2 = v.root / leaves[1].path
    good = p2.read_text()
    p2.write_text(good.replace("sources:\n", f'sources:\n  - "[[conversations/c/logs/2026-11-01#^{leaves[0].sources[0]}]]"\n', 1))
    r = v.refresh("c")
    assert any("already covered" in p for p in r["problems"]), r["problems"]
    # nothing is lost while the damage stands
    active = v.dag.active("c")
    assert all(v.get_message(i) for i in ids)
    assert active
    v.close()


def test_note_moved_into_a_subfolder_keeps_its_identity(tmp_path: Path) -> None:
    v, ids = build(tmp_path)
    leaf = leaf_of(v, ids[0])
    src = v.root / leaf.path
    dest = src.parent / "archive" / "renamed note.md"
    dest.parent.mkdir()
    src.rename(dest)
    v.refresh("c")
    assert v.catalog.get(ids[0]).covered == leaf.id
    assert v.dag.get(leaf.id).path.endswith("archive/renamed note.md")
    v.close()


def test_engine_with_watch_sees_a_correction(tmp_path: Path) -> None:
    from vaultlcm import Engine

    v, ids = build(tmp_path)
    v.close()
    eng = Engine(tmp_path, "c", settings=Settings(**SMALL), watch=True)
    eng.bootstrap()
    try:
        leaf = leaf_of(eng.vault, ids[0])
        path = tmp_path / leaf.path
        path.write_text(path.read_text() + "Corrected by hand: WATCHED-FIX\n")
        import time

        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not eng.vault.dag.get(leaf.id).human_owned:
            time.sleep(0.05)
        assert eng.vault.dag.get(leaf.id).human_owned
        assert "WATCHED-FIX" in eng.call_tool("lcm_grep", {"pattern": "WATCHED-FIX"})
    finally:
        eng.dispose()
