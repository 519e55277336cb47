"""The package type-checks (mypy, settings in pyproject.toml) and lints clean (ruff): a regression fails here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=280)


@pytest.mark.skipif(not (ROOT / "pyproject.toml").is_file(), reason="needs the source tree")
def test_mypy_finds_no_error(tmp_path: Path) -> None:
    done = _run("mypy", "--cache-dir", str(tmp_path / "cache"), "vaultlcm")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


@pytest.mark.skipif(not (ROOT / "pyproject.toml").is_file(), reason="needs the source tree")
def test_ruff_finds_no_error() -> None:
    done = _run("ruff", "check", "--no-cache", "vaultlcm", "tests", "benchmarks")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
