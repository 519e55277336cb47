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
    # The pace of each window between two samples, and where it went, part by part.
    assert [w["messages"] for w in result["pace"]] == [20, 40, 60]
    for window in result["pace"]:
        assert window["ms_per_message"] > 0 and window["ms_per_turn"] >= window["ms_per_message"]
        parts = window["parts"]
        assert parts["ingest"]["calls_per_1k"] > 0 and parts["after_turn"]["ms_per_message"] > 0
        assert parts["index_follow"]["calls_per_1k"] >= parts["after_turn"]["calls_per_1k"]
    from vaultlcm import Vault

    with Vault(root) as v:
        assert v.catalog.count("agent") == 60
        assert v.status()["conversations"]


def test_splits_sum_each_part_by_window() -> None:
    splits = bench.Splits()
    splits.add("a", 0.5, 0.25)
    splits.add("a", 0.5)
    assert splits.window(100) == {"a": {"ms_per_message": 10.0, "cpu_ms_per_message": 2.5, "calls_per_1k": 20.0}}
    splits.add("b", 0.2, 0.1)
    assert splits.window(10) == {"a": {"ms_per_message": 0.0, "cpu_ms_per_message": 0.0, "calls_per_1k": 0.0},
                                 "b": {"ms_per_message": 20.0, "cpu_ms_per_message": 10.0, "calls_per_1k": 100.0}}
    timed = splits.timed("c", lambda x: x * 2)
    assert timed(21) == 42 and splits.window(1)["c"]["calls_per_1k"] == 1000.0


def test_splits_tell_waiting_from_work() -> None:
    import threading
    import time

    splits = bench.Splits()
    lock, held = threading.Lock(), threading.Event()

    def hold() -> None:
        with lock:
            held.set()
            time.sleep(0.3)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait()
    splits.timed("blocked", lambda: lock.acquire() and lock.release())()  # waits for the holder: wall, no CPU
    splits.timed("busy", lambda: sum(i * i for i in range(300_000)))()
    holder.join()
    parts = splits.window(1)
    assert parts["blocked"]["ms_per_message"] > 100 > parts["blocked"]["cpu_ms_per_message"] * 5
    assert parts["busy"]["cpu_ms_per_message"] > 0


@pytest.mark.slow
def test_the_command_line_writes_its_json(tmp_path: Path) -> None:
    out = tmp_path / "mem.json"
    subprocess.run([sys.executable, str(BENCH / "bench_engine_memory.py"), "--messages", "300", "--sample-every", "100",
                    "--workdir", str(tmp_path), "--out", str(out)], check=True, capture_output=True, timeout=600)
    data = json.loads(out.read_text())
    assert data["messages"] == 300 and len(data["samples"]) == 4


@pytest.mark.skipif(bench.malloc_mib() is None, reason="the C allocator is not glibc's")
def test_the_allocator_probe_sees_native_and_python_memory() -> None:
    before = bench.malloc_mib()
    assert before is not None and before["used"] > 0 and before["free"] >= 0
    held = [bytearray(64 << 10) for _ in range(64)]  # 4 MiB through malloc (blocks above Python's 512-byte cut)
    small = [str(i) * 3 for i in range(200_000)]  # many small objects: Python's own arenas
    during = bench.malloc_mib(trim=True)
    assert during is not None
    assert during["used"] - before["used"] >= 3.5
    assert during["py_kblocks"] - before["py_kblocks"] >= 150
    if "py_arenas" in before:
        # After a long test session the arenas may hold room for these blocks already: more small
        # objects until a new arena is needed (what was free is bounded, so this ends).
        more: list[list[str]] = []
        while during["py_arenas"] <= before["py_arenas"] and len(more) < 40:
            more.append([str(i) * 3 for i in range(200_000)])
            during = bench.malloc_mib(trim=True)
            assert during is not None
        assert during["py_arenas"] > before["py_arenas"]
        del more
    assert 0 < during["anon_trimmed"]
    del held, small


def test_native_owner_names_the_library_from_its_frames() -> None:
    rust = ("_RNvMNtNtCskrKLAw2XkKT_7tantivy7indexer12index_writerNtB2_11IndexWriter6commit", "<unknown>", 0)
    assert bench.native_owner([("malloc", "<unknown>", 0), rust]) == "tantivy"
    assert bench.native_owner([("sqlite3Malloc", "<unknown>", 0), ("stmt_step", "Modules/_sqlite/cursor.c", 5)]) \
        == "sqlite"
    assert bench.native_owner([("PyUnicode_New", "Objects/unicodeobject.c", 1425)]) == "python"
    assert bench.native_owner([("start_thread", "./nptl/pthread_create.c", 442)]) == "python"  # a C file
    assert bench.native_owner([("??", "<unknown>", 0)]) == "other"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_info and /proc")
def test_allocator_samples_give_each_arena_and_the_threads() -> None:
    import threading

    heap = bench.malloc_mib()
    if heap is None:
        pytest.skip("not glibc")
    assert heap["threads"] >= 1 and heap["arenas"] >= 1
    assert 0 <= heap["arena0_used_mib"] <= heap["arena0_mib"]
    done = threading.Event()
    t = threading.Thread(target=lambda: (bytearray(1 << 20), done.wait(10)))
    t.start()
    try:
        assert bench.malloc_mib()["threads"] == heap["threads"] + 1  # type: ignore[index]
    finally:
        done.set()
        t.join()
