"""`init` in an existing folder, and the optional git auto-commit after ingest and compaction."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from test_lcm import SMALL, conversation
from vaultlcm import Settings, Vault
from vaultlcm.cli import cli
from vaultlcm.layout import GITATTRIBUTES, GITIGNORE

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


@pytest.fixture(autouse=True)
def git_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def run(*args: str, input: str | None = None) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, list(args), input=input)
    return r.exit_code, r.stdout, r.stderr


def rules(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


# -- init ------------------------------------------------------------------------------


def test_init_merges_into_a_persons_git_files(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_bytes(b"node_modules/\r\n/.vaultlcm\r\n*.log")  # CRLF, no final newline
    (tmp_path / ".gitattributes").write_text("*.png binary\n")
    code, out, _ = run("init", str(tmp_path))
    assert code == 0
    ignore = (tmp_path / ".gitignore").read_bytes().decode()
    assert ignore.startswith("node_modules/\r\n/.vaultlcm\r\n*.log\r\n")  # the person's lines, untouched
    assert "\n" not in ignore.replace("\r\n", "")  # their line ends kept
    added = [line for line in rules(GITIGNORE) if line != ".vaultlcm/"]  # /.vaultlcm already said it
    assert rules(ignore) == ["node_modules/", "/.vaultlcm", "*.log", *added]
    assert rules((tmp_path / ".gitattributes").read_text()) == ["*.png binary", *rules(GITATTRIBUTES)]
    assert f"added to .gitignore: {', '.join(added)}" in out
    assert "added to .gitattributes: " in out
    before = {p: (tmp_path / p).read_bytes() for p in (".gitignore", ".gitattributes")}
    code, out, _ = run("init", str(tmp_path))
    assert "nothing changed" in out and "added" not in out  # idempotent
    assert {p: (tmp_path / p).read_bytes() for p in before} == before


def test_init_says_how_to_turn_on_the_css_snippet(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    code, out, _ = run("init", str(fresh))
    assert "CSS snippets" not in out  # init turned it on itself (Obsidian had no settings yet)
    assert json.loads((fresh / ".obsidian/appearance.json").read_text())["enabledCssSnippets"] == ["vaultlcm"]
    mine = tmp_path / "mine"
    (mine / ".obsidian").mkdir(parents=True)
    (mine / ".obsidian/appearance.json").write_text('{"theme": "moonstone"}')
    code, out, _ = run("init", str(mine))
    assert "Settings → Appearance → CSS snippets → vaultlcm" in out
    assert json.loads((mine / ".obsidian/appearance.json").read_text()) == {"theme": "moonstone"}  # left alone
    assert (mine / ".obsidian/snippets/vaultlcm.css").exists()
    (mine / ".obsidian/appearance.json").write_text('{"enabledCssSnippets": ["vaultlcm"]}')
    assert "CSS snippets" not in run("init", str(mine))[1]


def test_a_fresh_vault_commits_what_is_truth_only(tmp_path: Path) -> None:
    with Vault.init(tmp_path, settings=Settings(**SMALL)) as v:
        v.ingest("c", conversation([("u", 20), ("a", 20)] * 8))
        v.compact("c", force=True)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    tracked = git(tmp_path, "ls-files").split()
    assert "conversations/c/c.md" not in tracked and not [f for f in tracked if f.startswith(".vaultlcm")]
    assert [f for f in tracked if "/summaries/" in f] and [f for f in tracked if "/logs/" in f]
    assert (tmp_path / "conversations/c/c.md").exists()  # still there for Obsidian
    attrs = git(tmp_path, "check-attr", "merge", "--", "conversations/c/logs/2026-11-01.md")
    assert attrs.strip().endswith("merge: union")


# -- auto-commit -------------------------------------------------------------------------


def transcript(tmp_path: Path, n: int, start: int = 0) -> Path:
    f = tmp_path / f"t{start}.jsonl"
    f.write_text("\n".join(json.dumps(m) for m in conversation([("u", 20), ("a", 20)] * (n // 2))[start:]) + "\n")
    return f


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    Vault.init(root, settings=Settings(**SMALL)).close()
    (root / "vaultlcm.toml").write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in SMALL.items()))
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    return root


def test_ingest_and_compact_commit_what_they_wrote(repo: Path, tmp_path: Path) -> None:
    note = repo / "my notes.md"
    note.write_text("a person's work in progress\n")
    git(repo, "add", "my notes.md")  # staged by the person, not theirs to commit
    code, out, err = run("--vault", str(repo), "ingest", str(transcript(tmp_path, 24)), "-c", "research", "--git-commit")
    assert code == 0, err
    assert "git: committed" in out and "ingest: research +24 messages" in out
    assert git(repo, "log", "-1", "--format=%s").strip() == "ingest: research +24 messages"
    committed = git(repo, "show", "--name-only", "--format=", "HEAD").split("\n")
    assert committed and all(f.startswith("conversations/research/") for f in committed if f)
    assert "conversations/research/research.md" not in committed  # the derived home note stays out
    assert git(repo, "diff", "--cached", "--name-only").strip() == "my notes.md"  # still staged, uncommitted

    code, out, err = run("--vault", str(repo), "compact", "-c", "research", "--force", "--git-commit", "--json")
    assert code == 0, err
    [report] = json.loads(out)["reports"]
    assert report["commit"].startswith("committed ")
    with Vault(repo) as v:
        kinds = [v.dag.get(i).kind for i in report["created"]]  # type: ignore[union-attr]
    subject = f"compact: research {kinds.count('leaf')} leaf, {kinds.count('condensed')} condensed"
    assert git(repo, "log", "-1", "--format=%s").strip() == subject and kinds.count("condensed") >= 1
    assert git(repo, "status", "--porcelain", "--", "conversations") == ""  # everything it wrote is in
    code, out, _ = run("--vault", str(repo), "compact", "-c", "research", "--git-commit")
    assert "git: not committed (nothing to commit)" in out
    assert git(repo, "log", "-1", "--format=%s").strip() == subject


def test_the_setting_commits_too_and_a_person_can_opt_out(repo: Path, tmp_path: Path) -> None:
    with (repo / "vaultlcm.toml").open("a") as fh:
        fh.write("git_auto_commit = true\n")
    run("--vault", str(repo), "ingest", str(transcript(tmp_path, 4)), "-c", "r")
    assert git(repo, "log", "-1", "--format=%s").strip() == "ingest: r +4 messages"
    run("--vault", str(repo), "ingest", str(transcript(tmp_path, 8)), "-c", "r", "--no-git-commit")
    assert git(repo, "log", "-1", "--format=%s").strip() == "ingest: r +4 messages"
    assert git(repo, "status", "--porcelain", "--", "conversations/r/logs") != ""


def test_outside_git_the_flag_is_an_error_and_the_setting_is_silent(tmp_path: Path) -> None:
    root = tmp_path / "v"
    Vault.init(root).close()
    code, out, err = run("--vault", str(root), "ingest", str(transcript(tmp_path, 4)), "-c", "r", "--git-commit")
    assert code == 1 and err.count("\n") == 1 and "not in a git repository" in err and "git init" in err
    assert not (root / "conversations/r").exists()  # refused before anything was written
    toml = root / "vaultlcm.toml"
    assert "git_auto_commit = false" in toml.read_text()  # init lists the setting, off
    toml.write_text(toml.read_text().replace("git_auto_commit = false", "git_auto_commit = true"))
    code, out, err = run("--vault", str(root), "ingest", str(transcript(tmp_path, 4)), "-c", "r")
    assert code == 0 and "git" not in out + err


def test_without_git_installed(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-git-here"))
    code, _, err = run("--vault", str(repo), "compact", "--git-commit")
    assert code == 1 and "git is not installed" in err


def test_a_hook_that_refuses(repo: Path, tmp_path: Path) -> None:
    hook = repo / ".git/hooks/pre-commit"
    hook.write_text("#!/bin/sh\necho 'vault not clean' >&2\nexit 1\n")
    hook.chmod(hook.stat().st_mode | stat.S_IEXEC)
    code, out, err = run("--vault", str(repo), "ingest", str(transcript(tmp_path, 4)), "-c", "r", "--git-commit")
    assert code == 1 and err.count("\n") == 1
    assert "ingested 4 messages into 'r', but git commit failed" in err and "vault not clean" in err
    with Vault(repo) as v:
        assert len(v.messages("r")) == 4  # the data is safe; only the commit is missing
    with (repo / "vaultlcm.toml").open("a") as fh:
        fh.write("git_auto_commit = true\n")
    code, out, err = run("--vault", str(repo), "ingest", str(transcript(tmp_path, 8)), "-c", "r")
    assert code == 0 and "git: not committed (git commit failed" in err  # the setting only warns


def test_a_vault_inside_a_bigger_repository(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / "code.py").write_text("print('not the vault')\n")
    root = tmp_path / "notes" / "agent memory"
    Vault.init(root).close()
    code, out, err = run("--vault", str(root), "ingest", str(transcript(tmp_path, 4)), "-c", "r", "--git-commit")
    assert code == 0, err
    committed = git(tmp_path, "show", "--name-only", "--format=", "HEAD").split("\n")
    assert [f for f in committed if f] and all(f.startswith("notes/agent memory/conversations/r/") for f in committed if f)
    assert "code.py" in git(tmp_path, "status", "--porcelain")  # the rest of the repository is not touched
