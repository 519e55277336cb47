"""A vault in git on two machines: interleaved appends and compactions on both sides, merged both ways."""

from __future__ import annotations

import json
import os
import re
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from obsidian_links import broken_links
from test_lcm import SMALL
from vaultlcm import Settings, Vault
from vaultlcm.cli import cli
from vaultlcm.summary_notes import body_hash, note_body, parse_note, render_note

SETTINGS = {**SMALL, "condensed_min_fanin": 3, "condensed_max_fanin": 3}
T0 = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)


def git(cwd: Path, *args: str, check: bool = True) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    r = subprocess.run(["git", *args], cwd=cwd, env=env, check=False, capture_output=True, text=True)
    if check and r.returncode:
        raise AssertionError(f"git {' '.join(args)}: {r.stdout}{r.stderr}")
    return r.stdout


def turn(side: str, n: int, at: datetime) -> list[dict]:
    """One exchange: a question, a tool call with its result, an answer."""
    ts = [(at + timedelta(seconds=s)).strftime("%Y-%m-%dT%H:%M:%SZ") for s in range(4)]
    return [
        {"role": "user", "timestamp": ts[0], "content": f"{side} question {n}: what is the status of job {side}{n}?"},
        {"role": "assistant", "timestamp": ts[1], "content": [
            {"type": "text", "text": f"checking job {side}{n}"},
            {"type": "tool_call", "id": f"call-{side}{n}", "name": "status", "arguments": {"job": f"{side}{n}"}}]},
        {"role": "tool", "timestamp": ts[2], "content": [
            {"type": "tool_result", "call_id": f"call-{side}{n}", "content": f"job {side}{n} finished with code {n}"}]},
        {"role": "assistant", "timestamp": ts[3], "content": f"job {side}{n} is done (code {n})"},
    ]


def open_vault(root: Path) -> Vault:
    return Vault(root, settings=Settings(**SETTINGS))


def doctor(root: Path, *args: str) -> tuple[int, dict]:
    r = CliRunner().invoke(cli, ["--vault", str(root), "doctor", "--json", *args])
    return r.exit_code, json.loads(r.stdout)


def texts(root: Path) -> list[str]:
    with open_vault(root) as v:
        return [m.text or m.searchable_text() for m in v.messages("shared")]


def no_conflicts(root: Path) -> None:
    assert git(root, "diff", "--name-only", "--diff-filter=U") == ""
    for p in root.rglob("*.md"):
        if ".git" not in p.parts:
            assert not re.search(r"^(<{7}|>{7}) ", p.read_text(), re.MULTILINE), p


@pytest.fixture
def clones(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "a", tmp_path / "b"
    with Vault.init(a, settings=Settings(**SETTINGS)) as v:
        for n in range(6):
            v.ingest("shared", turn("base", n, T0 + timedelta(minutes=n)))
        v.compact("shared", force=True)
    git(a, "init", "-q", "-b", "main")
    git(a, "add", "-A")
    git(a, "commit", "-qm", "base")
    git(tmp_path, "clone", "-q", str(a), str(b))
    assert not (b / "conversations/shared/shared.md").exists()  # derived: not in git
    code, report = doctor(b)
    assert code == 0 and [n["fixable"] for n in report["notes"] if n["kind"] == "home_missing"] == [True]
    return a, b


def test_interleaved_appends_and_compactions_on_two_machines_merge_clean(clones: tuple[Path, Path]) -> None:
    a, b = clones
    assert not [f for f in git(a, "ls-files").split("\n") if f.endswith("/shared.md") or ".vaultlcm" in f]
    start = T0 + timedelta(hours=1)
    # Two machines take turns (in time) appending to the same conversation; each compacts now and then.
    for n in range(6):
        for side, root, offset in (("A", a, 0), ("B", b, 30)):
            with open_vault(root) as v:
                v.ingest("shared", turn(side, n, start + timedelta(minutes=n, seconds=offset)))
                if n % 2 == 1:
                    v.compact("shared", force=True)
    for root, side in ((a, "A"), (b, "B")):
        git(root, "add", "-A")
        git(root, "commit", "-qm", side)
    git(b, "pull", "-q", "--no-rebase", "--no-edit", str(a), "main")
    git(a, "pull", "-q", "--no-rebase", "--no-edit", str(b), "main")
    for root in (a, b):
        no_conflicts(root)

    # No message lost; each side's turns kept together; the same order on both machines.
    order_a, order_b = texts(a), texts(b)
    assert order_a == order_b
    assert len(order_a) == 4 * 6 + 2 * 4 * 6 and len(set(order_a)) == len(order_a)
    sides = [re.search(r"job (A|B|base)\d", t).group(1) for t in order_a]  # type: ignore[union-attr]
    first_a = sides.index("A")
    assert sides[first_a:first_a + 24] == ["A"] * 24 and sides[first_a + 24:] == ["B"] * 24  # A started first
    for n in range(6):  # and within a side, each turn in its own order
        for side in "AB":
            i = order_a.index(f"{side} question {n}: what is the status of job {side}{n}?")
            assert order_a[i + 3] == f"job {side}{n} is done (code {n})"

    for root in (a, b):
        code, report = doctor(root)
        assert code == 0, report["problems"]
        assert "merge" in {n["kind"] for n in report["notes"]}
    assert "home_missing" not in {n["kind"] for n in doctor(a)[1]["notes"]}
    assert (b / "conversations/shared/shared.md").exists()  # B wrote its own when it ingested
    # Both machines compacted the same messages: one side's notes are set aside, never broken.
    with open_vault(b) as v:
        problems = v.dag.problems("shared")
        assert "superseded" in {p.kind for p in problems} and {p.kind for p in problems} <= {"superseded", "emptied", "merge"}
        every = {m.id for m in v.catalog.rows("shared")}
        covered = [mid for s in v.dag.all("shared") if s.kind == "leaf" and s.parent != "!invalid" for mid in s.sources]
        assert len(covered) == len(set(covered)) and set(covered) <= every  # exactly once

    # One compaction tidies it up; the result merges back without conflict and is clean on both sides.
    with open_vault(b) as v:
        [report] = v.compact("shared")
        assert any(line.startswith("removed ") for line in report.tidied)
    code, report = doctor(b, "--strict")
    assert code == 0, report
    git(b, "add", "-A")
    git(b, "commit", "-qm", "B compacted after the merge")
    git(a, "pull", "-q", "--no-rebase", "--no-edit", str(b), "main")
    no_conflicts(a)
    for root in (a, b):
        assert texts(root) == order_a
        with open_vault(root) as v:
            v.compact("shared")  # writes the (git-ignored) home note on A too
        code, report = doctor(root, "--strict")
        assert code == 0, report
        assert broken_links(root, [p.relative_to(root).as_posix() for p in (root / "conversations").rglob("*.md")]) == []
    assert git(a, "status", "--porcelain") == ""  # nothing but derived files changed: nothing to commit


def test_a_home_note_conflict_from_an_older_vault_is_regenerated(clones: tuple[Path, Path]) -> None:
    """Vaults made before home notes were git-ignored have them committed: a conflict there is fixed by doctor."""
    a, b = clones
    git(a, "rm", "-q", "conversations/shared/.gitignore")
    git(a, "add", "-f", "conversations/shared/shared.md")
    git(a, "commit", "-qm", "track the home note, as vaults made by older versions do")
    git(b, "pull", "-q", "--no-rebase", "--no-edit", str(a), "main")
    for side, root in (("A", a), ("B", b)):
        with open_vault(root) as v:
            for n in range(4):
                v.ingest("shared", turn(side, n, T0 + timedelta(days=1, minutes=n)))
            v.compact("shared", force=True)
        git(root, "add", "-A")
        git(root, "commit", "-qm", side)
    r = subprocess.run(["git", "pull", "-q", "--no-rebase", "--no-edit", str(a), "main"], cwd=b, capture_output=True,
                       text=True, env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x",
                                       "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"})
    assert r.returncode != 0 and "shared.md" in r.stdout + r.stderr  # git stops at the home note
    home = b / "conversations/shared/shared.md"
    assert "<<<<<<<" in home.read_text()
    code, report = doctor(b)
    assert code == 1
    [finding] = [p for p in report["problems"] if p["kind"] == "conflict_markers"]
    assert finding["path"].endswith("shared.md") and finding["fixable"]
    code, report = doctor(b, "--fix")
    assert code == 0, report  # the only conflict was in a derived note; the logs merged by union
    assert "<<<<<<<" not in home.read_text()
    git(b, "add", "-A")
    git(b, "commit", "-qm", "merge")  # the person concludes the merge
    assert doctor(b, "--strict")[0] == 0
    assert len(texts(b)) == 6 * 4 + 2 * 4 * 4


def reword(path: Path, prefix: str) -> None:
    """Rewrite a note as another summarizer would have worded it: the engine's note still (its hash matches)."""
    fm, body = parse_note(path.read_text(encoding="utf-8"), path)
    body = note_body(prefix + body)
    fm = fm.model_copy(update={"body_sha256": body_hash(body)})
    path.write_text(render_note(fm, body), encoding="utf-8")


def test_two_machines_summarizing_the_same_messages_differently(tmp_path: Path) -> None:
    """Same sources, different words (as an LLM summarizer writes): git conflicts, `doctor --fix` keeps one."""
    a, b = tmp_path / "a", tmp_path / "b"
    with Vault.init(a, settings=Settings(**SETTINGS)) as v:
        for n in range(6):
            v.ingest("shared", turn("base", n, T0 + timedelta(minutes=n)))
    git(a, "init", "-q", "-b", "main")
    git(a, "add", "-A")
    git(a, "commit", "-qm", "base")
    git(tmp_path, "clone", "-q", str(a), str(b))
    for root, words in ((a, None), (b, "In other words: ")):  # the same chunks, summarized in other words
        with Vault(root, settings=Settings(**SETTINGS)) as v:
            v.compact("shared", force=True)
            if words:
                for row in v.dag.all("shared"):
                    reword(v.root / row.path, words)
        git(root, "add", "-A")
        git(root, "commit", "-qm", f"compacted on {root.name}")
    assert "CONFLICT (add/add)" in git(b, "pull", "-q", "--no-rebase", "--no-edit", str(a), "main", check=False)
    conflicted = git(b, "diff", "--name-only", "--diff-filter=U").split()
    assert conflicted and all("/summaries/" in f for f in conflicted)
    code, report = doctor(b)
    assert code == 1
    found = [p for p in report["problems"] if p["kind"] == "conflict_markers"]
    assert len(found) == len(conflicted) and all(p["fixable"] and "keeps one" in p["detail"] for p in found)
    code, report = doctor(b, "--fix")
    assert code == 0, report
    assert sum("resolved the git conflict" in x for x in report["fixed"]) == len(conflicted)
    git(b, "add", "-A")  # the person concludes the merge
    no_conflicts(b)
    git(b, "commit", "-qm", "merged")
    assert len(texts(b)) == 24 and doctor(b, "--strict")[0] == 0
