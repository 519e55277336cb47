"""The compaction phase benchmark runs on a small build, leaves the build as it was, and its replay agrees.

It checks that the script works, not how fast anything is (numbers live in docs/PERFORMANCE.md).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "bench_compact_phases.py"
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_scale import traffic  # noqa: E402

from vaultlcm import Vault  # noqa: E402


def _fingerprint(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("build") / "vault"
    with Vault.init(root) as v:
        v.ingest("agent", traffic(160))
        v.compact("agent", force=True)
    return root


def _run(*args: str) -> dict[str, object]:
    out = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=240, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_phases_are_measured_on_a_copy_and_the_replay_gives_the_same_texts(build: Path, tmp_path: Path) -> None:
    before = _fingerprint(build)
    reqs = tmp_path / "reqs.pkl"
    prof = tmp_path / "compact.prof"
    result = _run(str(build), "--messages", "120", "--primed", "--record", str(reqs), "--workdir", str(tmp_path / "work"),
                  "--profile", str(prof))
    assert _fingerprint(build) == before  # only the copy was written
    assert list((tmp_path / "work").iterdir()) == []  # and the copy is gone
    assert result["messages"] == 120 and result["notes"] > 0 and result["cpu_s"] > 0
    primed = result["primed"]
    assert isinstance(primed, dict) and primed["summaries"] > 0
    phases = result["phases_cpu_s"]
    assert isinstance(phases, dict)
    for phase in ("summarize", "write notes", "choose chunks (reads messages)", "size requests", "prime",
                  "  its catalog rows", "  the note's file", "first sync (checks every note)"):
        assert phase in phases, phases
    # the profile covers the compaction (Vault.compact and the summarizer are in it)
    import pstats
    names = {func[2] for func in pstats.Stats(str(prof)).stats}  # type: ignore[attr-defined]
    assert "compact" in names and "_summarize" in names
    again = _run("--replay", str(reqs))
    assert again["requests"] == result["notes"] and again["different"] == 0
