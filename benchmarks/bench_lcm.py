"""Compaction throughput and assemble latency at 10k and 100k stored messages.

    python benchmarks/bench_lcm.py --sizes 10000 100000

For each size: ingest synthetic agent traffic, compact it fully with the
digest summarizer (messages summarized per second, wall and CPU), then time ``assemble``
(already compacted, so this is the per-turn cost). The baseline in the same run
is a SQLite store holding the same active context (root summaries plus
uncovered messages) and answering the same request with one indexed query; the
interesting numbers are the ratio to it and how assemble grows from the
smallest to the largest size (it should not grow with history).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import dump_json, percentile, print_table, synthetic_messages  # noqa: E402

from vaultlcm import Vault  # noqa: E402
from vaultlcm.settings import Settings  # noqa: E402


def sqlite_baseline(path: Path, vault: Vault, conv: str, runs: int) -> list[float]:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE items(conv TEXT, pos INTEGER, active INTEGER, is_msg INTEGER, body TEXT)")
    db.execute("CREATE INDEX items_active ON items(conv, active, pos)")
    rows = []
    for s in vault.dag.all(conv):
        rows.append((conv, s.first_seq or 0, int(s.parent is None), 0, s.body))
    for r in vault.catalog.rows(conv):
        rows.append((conv, r.seq, int(r.covered is None), 1, json.dumps(vault.get_message(r.id).content) if r.covered is None else "{}"))
    db.executemany("INSERT INTO items VALUES(?,?,?,?,?)", rows)
    db.commit()
    lat = []
    for _ in range(runs):
        t0 = time.perf_counter()
        out = [json.loads(b) if m else b for (m, b) in db.execute(
            "SELECT is_msg, body FROM items WHERE conv=? AND active=1 ORDER BY pos", (conv,))]
        assert out
        lat.append(time.perf_counter() - t0)
    db.close()
    return lat


def run_size(n: int, runs: int, budget: int, tmp: Path) -> dict:
    root = tmp / f"v{n}"
    settings = Settings(background_compaction=False)
    v = Vault.init(root, settings=settings)
    msgs = list(synthetic_messages(n))
    t0 = time.perf_counter()
    for i in range(0, n, 2000):
        v.ingest("bench", msgs[i : i + 2000])
    ingest_s = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), time.process_time()
    v.compact("bench", force=True)
    compact_s, compact_cpu = time.perf_counter() - t0, time.process_time() - c0
    v.close()
    # a fresh process-like open, as an agent restarting would do
    v = Vault(root, settings=settings)
    t0 = time.perf_counter()
    v.assemble("bench", budget)
    first = time.perf_counter() - t0
    lat = []
    for _ in range(runs):
        t0 = time.perf_counter()
        ctx = v.assemble("bench", budget)
        lat.append(time.perf_counter() - t0)
    base = sqlite_baseline(tmp / f"b{n}.sqlite", v, "bench", runs)
    summaries = len(v.dag.all("bench"))
    v.close()
    return {
        "messages": n,
        "summaries": summaries,
        "ingest_msgs_per_s": n / ingest_s,
        "compact_msgs_per_s": n / compact_s,
        "compact_msgs_per_cpu_s": n / compact_cpu,  # what issue 14 sets a bar for (the machine may be shared)
        "assemble_first_ms": first * 1000,
        "assemble_p50_ms": percentile(lat, 50) * 1000,
        "assemble_p95_ms": percentile(lat, 95) * 1000,
        "sqlite_p50_ms": percentile(base, 50) * 1000,
        "ratio_p50": percentile(lat, 50) / percentile(base, 50),
        "context_tokens": ctx.estimated_tokens,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--budget", type=int, default=60_000)
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            rows.append(run_size(n, args.runs, args.budget, Path(tmp)))
            print(f"done {n:,}", file=sys.stderr)
    print_table(rows)
    if len(rows) > 1:
        growth = rows[-1]["assemble_p50_ms"] / rows[0]["assemble_p50_ms"]
        print(f"assemble p50 growth {rows[0]['messages']:,} -> {rows[-1]['messages']:,} messages: {growth:.2f}x")
    dump_json(args.json_out, rows)


if __name__ == "__main__":
    main()
