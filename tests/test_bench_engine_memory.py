"""The engine-memory benchmark runs end to end (a smoke test: it checks that it runs, not how fast)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import bench_engine_memory as bench  # noqa: E402


def test_slope_of_points() -> None:
    assert bench.slope([(0, 100.0), (1000, 101.0), (2000, 102.0)]) == pytest.approx(1.0)
    assert bench.slope([(0, 50.0), (5000, 50.0), (10_000, 50.0)]) == pytest.approx(0.0)
    assert bench.slope([(0, 1.0)]) != bench.slope([(0, 1.0)])  # nan: one point says nothing


def test_traffic_spreads_over_days() -> None:
    stamps = [m["timestamp"] for m in bench.traffic(bench.PER_DAY + 2)]
    assert stamps == sorted(stamps)
    assert stamps[0][:10] != stamps[-1][:10]


def test_a_small_run_samples_rss_and_leaves_a_working_vault(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    result = bench.run(root, 60, sample_every=20, assemble_every=3, grep_every=10, budget=2000)
    assert [n for n, _ in result["samples"]] == [0, 20, 40, 60]
    assert all(mib > 0 for _, mib in result["samples"]) and result["rss_peak_mib"] > 0
    assert result["slope_mib_per_1k"] == result["slope_mib_per_1k"]  # a number, not nan
    # What the bounded caches hold is sampled with the RSS, and stays within their bounds.
    from vaultlcm import assembly
    from vaultlcm.index import query

    assert [n for n, _ in result["caches"]] == [0, 20, 40, 60]
    last = result["caches"][-1][1]
    assert 0 < last["chunk_tokens"] <= query.CHUNK_CACHE and 0 < last["decoded_messages"] <= assembly.MESSAGE_CACHE_SIZE
    from vaultlcm import Vault

    with Vault(root) as v:
        assert v.catalog.count("agent") == 60
        assert v.status()["conversations"]


@pytest.mark.slow
def test_the_command_line_writes_its_json(tmp_path: Path) -> None:
    out = tmp_path / "mem.json"
    subprocess.run([sys.executable, str(BENCH / "bench_engine_memory.py"), "--messages", "300", "--sample-every", "100",
                    "--workdir", str(tmp_path), "--out", str(out)], check=True, capture_output=True, timeout=600)
    data = json.loads(out.read_text())
    assert data["messages"] == 300 and len(data["samples"]) == 4
