"""Optional git commits after ``ingest`` and ``compact``: the vault versions itself.

Turned on by ``git_auto_commit = true`` in ``vaultlcm.toml`` or by ``--git-commit``
on the command. A commit holds only what the operation wrote: the
conversation's logs and payload files for ``ingest``, the summary notes written,
refreshed, relinked or removed for ``compact`` (plus the logs, which agents append
to between compactions). A person's other work in progress, staged or not, is
left alone (``git commit --only``), and ignored files (``.vaultlcm/``, home notes)
stay out. Messages say what changed: ``ingest: research +12 messages``,
``compact: research 2 leaf, 1 condensed``.

git never waits for a person: the message is given with ``-m``, no editor is
started, standard input is closed and a stuck hook or signing prompt is cut off
after ``timeout`` seconds. Hooks run (a ``vaultlcm doctor`` pre-commit hook
guards auto-commits too). Where the vault is not in a git work tree, or git is
not installed, nothing is committed: with the setting that is silent, with the
flag it is an error before anything is written.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .errors import GitError


@dataclass
class CommitResult:
    """What an auto-commit did: ``sha`` of the new commit, or why there is none."""

    message: str
    sha: str | None = None
    skipped: str | None = None  # "nothing to commit", "not a git repository", ...

    def describe(self) -> str:
        return f"committed {self.sha}: {self.message}" if self.sha else f"not committed ({self.skipped})"


def _run(root: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_EDITOR": "true", "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true"}
    try:
        return subprocess.run(["git", *args], cwd=root, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} in {root} did not finish within {timeout:.0f} s (a hook or a signing prompt "
                       "waiting?); commit by hand") from None
    except OSError as exc:
        raise GitError(f"cannot run git in {root}: {exc.strerror or exc}") from None


def repo_problem(root: Path, *, timeout: float = 30.0) -> str | None:
    """Why ``root`` cannot be auto-committed (None when it can)."""
    if shutil.which("git") is None:
        return "git is not installed (or not on PATH)"
    r = _run(root, "rev-parse", "--is-inside-work-tree", timeout=timeout)
    if r.returncode != 0 or r.stdout.strip() != "true":
        return f"{root} is not in a git repository"
    return None


def require_repo(root: Path) -> None:
    """Raise :class:`GitError` unless ``--git-commit`` can work in ``root`` (checked before the operation)."""
    problem = repo_problem(root)
    if problem:
        raise GitError(f"--git-commit: {problem}; run `git init` in the vault (or leave out --git-commit)")


def commit(root: Path, paths: list[str], message: str, *, timeout: float = 60.0) -> CommitResult:
    """Commit the changes under ``paths`` (vault-relative files or folders) with ``message``."""
    problem = repo_problem(root, timeout=timeout)
    if problem:
        return CommitResult(message, skipped=problem)
    wanted = sorted({p for p in paths if p})
    # Add new and changed files, record removed ones; ignored files (.vaultlcm/, home notes) stay out.
    existing = [f":(literal){p}" for p in wanted if (root / p).exists() or _tracked(root, p, timeout)]
    if existing:
        added = _run(root, "add", "-A", "--", *existing, timeout=timeout)
        if added.returncode != 0:
            raise GitError(f"git add failed in {root}: {_first_line(added)}")
    staged = _run(root, "diff", "--cached", "--name-only", "--", *existing, timeout=timeout) if existing else None
    if staged is None or not staged.stdout.strip():
        return CommitResult(message, skipped="nothing to commit")
    done = _run(root, "commit", "--quiet", "--only", "-m", message, "--", *existing, timeout=timeout)
    if done.returncode != 0:
        raise GitError(f"git commit failed in {root}: {_first_line(done)}")
    head = _run(root, "rev-parse", "--short", "HEAD", timeout=timeout)
    return CommitResult(message, sha=head.stdout.strip() or None)


def _tracked(root: Path, path: str, timeout: float) -> bool:
    r = _run(root, "ls-files", "--", f":(literal){path}", timeout=timeout)
    return bool(r.stdout.strip())


def _first_line(r: subprocess.CompletedProcess[str]) -> str:
    text = (r.stderr or r.stdout).strip()
    return text.splitlines()[0] if text else f"exit status {r.returncode}"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
