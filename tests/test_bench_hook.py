"""The hook benchmark runs end to end on a tiny session (numbers live in docs/PERFORMANCE.md, not here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_bench_hook_runs_both_modes_on_a_tiny_session(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_hook.py"), "--mb", "0.2", "--events", "3", "--subagents",
         "--workdir", str(tmp_path / "work"), "--out", str(tmp_path / "hook.json")],
        capture_output=True, text=True, timeout=280, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads((tmp_path / "hook.json").read_text(encoding="utf-8"))
    assert set(result["summary"]) == {"full", "new"}
    assert result["summary"]["full"]["whole_reads"] == 3  # the state is deleted before every event
    assert result["summary"]["new"]["whole_reads"] == 1  # only the first event reads the whole session
    assert result["summary"]["new"]["state_bytes"] > 0
    assert "| new | 3 |" in out.stdout
