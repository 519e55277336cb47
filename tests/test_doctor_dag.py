"""`doctor` on what people do to summary notes: each finding with its severity, and what `--fix` does about it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from click.testing import CliRunner

from vaultlcm import Vault
from vaultlcm.cli import cli


def doctor(root: Path, *args: str) -> tuple[int, dict, str]:
    r = CliRunner().invoke(cli, ["--vault", str(root), "doctor", "--json", *args])
    text = CliRunner().invoke(cli, ["--vault", str(root), "doctor"]).stdout if not args else ""
    return r.exit_code, json.loads(r.stdout), text


def rows(root: Path, kind: str | None = None) -> list:  # noqa: ANN401
    with Vault(root) as v:
        v.sync("c")
        return [s for s in v.dag.all("c") if kind is None or s.kind == kind]


def finding(report: dict, kind: str) -> tuple[str, dict]:
    for severity in ("problems", "warnings", "notes"):
        for f in report[severity]:
            if f["kind"] == kind:
                return severity, f
    raise AssertionError(f"no {kind} in {report}")


def test_a_note_another_covers_is_superseded_and_fix_removes_it(dag_vault: Path) -> None:
    leaves = rows(dag_vault, "leaf")
    # an overlapping leaf as a merge of another machine's compaction leaves it: same messages and one more
    first, second = leaves[0], leaves[1]
    text = (dag_vault / first.path).read_text()
    extra = (dag_vault / second.path).read_text().split("sources:\n", 1)[1].split("\n", 1)[0]
    overlap = dag_vault / "conversations/c/summaries/sum_00000000000000aa.md"
    overlap.write_text(text.replace(first.id, "sum_00000000000000aa").replace("sources:\n", f"sources:\n{extra}\n", 1))
    code, report, text_out = doctor(dag_vault)
    assert code == 0, report  # routine: the next compaction tidies it up
    severity, f = finding(report, "superseded")
    assert severity == "warnings" and f["fixable"] and "sum_00000000000000aa" in f["path"]
    assert "warning [superseded] [fix]:" in text_out
    code, report, _ = doctor(dag_vault, "--fix")
    assert code == 0 and any("removed conversations/c/summaries/sum_00000000000000aa.md" in x for x in report["fixed"])
    assert not overlap.exists() and doctor(dag_vault, "--strict")[0] == 0


def test_a_persons_overlapping_note_is_theirs_to_resolve(dag_vault: Path) -> None:
    leaves = rows(dag_vault, "leaf")
    a, b = dag_vault / leaves[0].path, dag_vault / leaves[1].path
    link = b.read_text().split("sources:\n", 1)[1].split("\n", 1)[0]
    # two corrected notes claiming the same message
    a.write_text(a.read_text().replace("sources:\n", f"sources:\n{link}\n", 1) + "Corrected by hand.\n")
    b.write_text(b.read_text() + "Also corrected.\n")
    code, report, _ = doctor(dag_vault)
    assert code == 1
    severity, f = finding(report, "claimed_twice")
    assert severity == "problems" and not f["fixable"] and "correction" in f["detail"]
    doctor(dag_vault, "--fix")
    assert a.exists() and b.exists()  # --fix never removes a person's note


def test_every_source_deleted_leaves_an_emptied_node(dag_vault: Path) -> None:
    condensed = next(r for r in rows(dag_vault, "condensed") if r.depth == 1)
    for child in condensed.sources:
        (dag_vault / next(r.path for r in rows(dag_vault) if r.id == child)).unlink()
    code, report, _ = doctor(dag_vault)
    assert code == 0, report
    severity, f = finding(report, "emptied")
    assert severity == "warnings" and f["fixable"] and condensed.id in f["path"]
    with Vault(dag_vault) as v:
        [r] = v.compact("c")
        assert any(condensed.path in line for line in r.tidied)
    assert doctor(dag_vault, "--strict")[0] == 0


def test_a_copied_note_is_a_duplicate(dag_vault: Path) -> None:
    leaf = rows(dag_vault, "leaf")[0]
    shutil.copy(dag_vault / leaf.path, dag_vault / "conversations/c/summaries/copy of it.md")
    code, report, _ = doctor(dag_vault)
    assert code == 1
    severity, f = finding(report, "duplicate_note")
    assert severity == "problems" and "copy of it.md" in f["detail"] and leaf.id in f["detail"]
    (dag_vault / "conversations/c/summaries/copy of it.md").unlink()
    assert doctor(dag_vault, "--strict")[0] == 0
    with Vault(dag_vault) as v:  # the original still counts after its copy went away
        v.sync("c")
        assert v.dag.get(leaf.id) is not None and v.dag.get(leaf.id).parent not in (None, "!invalid")  # type: ignore[union-attr]


def test_a_link_outside_obsidian_is_outdated_until_fixed(dag_vault: Path) -> None:
    leaf = next(r for r in rows(dag_vault, "leaf") if r.parent)
    (dag_vault / leaf.path).rename(dag_vault / "conversations/c/summaries/renamed by mv.md")
    code, report, text_out = doctor(dag_vault)
    assert code == 0
    severity, f = finding(report, "outdated_link")
    assert severity == "warnings" and f["fixable"] and f"[[{leaf.id}]]" in f["detail"]
    assert "renamed by mv.md" in f["detail"]
    code, report, _ = doctor(dag_vault, "--fix")
    assert any("rewrote" in x and "[[renamed by mv]]" in x for x in report["fixed"])
    assert doctor(dag_vault, "--strict")[0] == 0


def test_a_note_that_cannot_be_read_waits_for_a_person(dag_vault: Path) -> None:
    leaf = next(r for r in rows(dag_vault, "leaf") if r.parent)
    path = dag_vault / leaf.path
    good = path.read_text()
    path.write_text(good.replace('kind: "leaf"', "kind: [oops"))
    with Vault(dag_vault) as v:
        v.catalog.reset()  # no last good state to fall back on (a fresh clone)
        v.sync("c")
        parent = v.dag.get(leaf.parent)  # type: ignore[arg-type]
        assert parent is not None and not parent.stale and parent.parent != "!invalid"  # waits, nothing dissolves
        [r] = v.compact("c", force=True)
        assert leaf.id not in r.created and r.error and leaf.path in r.error and "cannot be read" in r.error
    assert path.read_text() == good.replace('kind: "leaf"', "kind: [oops")
    code, report, _ = doctor(dag_vault)
    assert code == 1 and finding(report, "invalid_note")[0] == "problems"
    path.write_text(good)
    assert doctor(dag_vault, "--strict")[0] == 0


def test_conflict_markers_in_a_summary_are_named_not_fixed(dag_vault: Path, tmp_path: Path) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}

    def git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)

    git(dag_vault, "init", "-q", "-b", "main")
    git(dag_vault, "add", "-A")
    git(dag_vault, "commit", "-qm", "base")
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(dag_vault), str(other))
    leaf = rows(dag_vault, "leaf")[2]
    for root, fix in ((dag_vault, "the port is 9443"), (other, "the port is 8080")):
        p = root / leaf.path
        p.write_text(p.read_text() + f"Corrected: {fix}\n")  # two people correct the same summary differently
        git(root, "commit", "-qam", fix)
    assert git(dag_vault, "pull", "-q", "--no-rebase", "--no-edit", str(other), "main").returncode != 0
    text = (dag_vault / leaf.path).read_text()
    assert re.search(r"^<{7} ", text, re.MULTILINE)
    code, report, _ = doctor(dag_vault)
    assert code == 1
    severity, f = finding(report, "conflict_markers")
    assert severity == "problems" and not f["fixable"] and f["path"] == leaf.path and "by hand" in f["detail"]
    doctor(dag_vault, "--fix")
    assert (dag_vault / leaf.path).read_text() == text  # a person's two versions: --fix never picks one
    (dag_vault / leaf.path).write_text(text.split("<<<<<<<")[0] + "Corrected: the port is 9443\n")
    git(dag_vault, "commit", "-qam", "resolved")
    assert doctor(dag_vault)[0] == 0


def test_messages_the_catalog_lagged_on_mend_the_links_that_waited_for_them(dag_vault: Path) -> None:
    """After a kill the catalog may list fewer messages than the logs hold (a rebuild cut short): the
    leaves naming the missing ones are recorded as broken links. The next process reads the logs
    again; the links must be settled again with it, not reported broken by the first `doctor`."""
    with Vault(dag_vault) as v:
        v.sync("c")
        leaf = next(r for r in v.dag.all("c") if r.kind == "leaf")
        mids = [sid for _link, sid, *_ in json.loads(leaf.sources_json)]
        v.catalog.execute(f"DELETE FROM messages WHERE id IN ({','.join('?' * len(mids))})", tuple(mids))
        v.catalog.execute("UPDATE logs SET size=0, parsed=0")  # the logs look unread, as after the cut rebuild
        v.dag.recompute("c")
        assert v.dag.awaits_messages("c", mids[:1])  # the lag as the crash suite saw it: a broken link recorded
        assert not v.dag.awaits_messages("c", ["m-0000000000000000"])  # another message mends nothing
    code, report, _ = doctor(dag_vault)
    assert code == 0, report
    assert [f for f in report["problems"] if f["kind"] == "broken_link"] == [], report
    with Vault(dag_vault) as v:
        v.sync("c")
        assert not v.dag.awaits_messages("c", mids)
        row = v.dag.get(leaf.id)
        assert row is not None and row.first_seq is not None  # the leaf covers its messages again
        covered = v.catalog.execute(f"SELECT COUNT(*) FROM messages WHERE covered=? AND id IN ({','.join('?' * len(mids))})",
                                    (leaf.id, *mids))[0][0]
        assert covered == len(mids)
