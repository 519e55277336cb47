"""What `pip install vaultlcm` gets: every package, the data files, a working console script."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from vaultlcm.cli import cli

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_of_the_source_tree_is_shipped() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    shipped = set(config["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "vaultlcm").rglob("__init__.py")
             if "__pycache__" not in p.parts}
    assert found <= shipped, f"not listed in [tool.setuptools] packages: {sorted(found - shipped)}"
    data = config["tool"]["setuptools"]["package-data"]
    assert {"*.jsonl", "*.css"} <= set(data["vaultlcm.data"]) and "*.md" in data["vaultlcm.templates"]
    assert "urls" not in config["project"] or all(
        u.startswith("https://") for u in config["project"]["urls"].values())


def test_version() -> None:
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0 and result.stdout.startswith("vaultlcm, version ")


@pytest.mark.slow
def test_the_wheel_installs_into_a_fresh_environment_and_runs_the_demo(tmp_path: Path) -> None:
    dist, venv, work = tmp_path / "dist", tmp_path / "venv", tmp_path / "work"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--wheel-dir", str(dist), str(ROOT)],
                   check=True, capture_output=True, timeout=600)
    wheel = next(dist.glob("vaultlcm-*.whl"))
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)], check=True, capture_output=True,
                   timeout=900)
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VAULTLCM_VAULT")}
    p = subprocess.run([str(venv / "bin" / "vaultlcm"), "--version"], cwd=work, env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0 and "version" in p.stdout, p.stderr
    p = subprocess.run([str(python), "-m", "vaultlcm", "demo", "demo"], cwd=work, env=env, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert "messages in daily logs" in p.stdout and (work / "demo" / "Conversations.md").is_file()
    p = subprocess.run([str(python), "-c", "import vaultlcm; print(vaultlcm.__file__)"], cwd=work, env=env,
                       capture_output=True, text=True, timeout=120)
    assert str(venv) in p.stdout  # the installed copy, not the source tree
