"""Ingest throughput and per-message latency, against a SQLite FTS5 store in the same run.

    python benchmarks/bench_ingest.py --messages 100000

Agent path: one message per ``Vault.ingest`` call, durable (fsync) before it
returns, as an agent loop would call it. Bulk path: batches of 1,000. The
baseline does the same work in SQLite (a row plus an FTS5 row per message, one
transaction per message with ``synchronous=FULL``, or per batch for bulk), so
the ratios are robust to a noisy shared machine.
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
from common import dump_json, print_table, summary, synthetic_messages  # noqa: E402

from vaultlcm.vault import Vault  # noqa: E402


def bench_vault(root: Path, msgs: list[dict], agent_n: int, batch: int) -> tuple[list[float], float]:
    v = Vault.init(root)
    lat = []
    for m in msgs[:agent_n]:
        t0 = time.perf_counter()
        v.ingest("bench", [m])
        lat.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    rest = msgs[agent_n:]
    for i in range(0, len(rest), batch):
        v.ingest("bench", rest[i : i + batch])
    bulk = time.perf_counter() - t0
    v.close()
    return lat, (len(rest) / bulk if rest else float("nan"))


def bench_sqlite(path: Path, msgs: list[dict], agent_n: int, batch: int) -> tuple[list[float], float]:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE m(id INTEGER PRIMARY KEY, conv TEXT, role TEXT, ts TEXT, body TEXT)")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(body)")

    def put(m: dict) -> None:
        body = json.dumps(m["content"], ensure_ascii=False)
        cur = db.execute("INSERT INTO m(conv, role, ts, body) VALUES('bench', ?, ?, ?)", (m["role"], m["timestamp"], body))
        db.execute("INSERT INTO f(rowid, body) VALUES(?, ?)", (cur.lastrowid, body))

    lat = []
    for m in msgs[:agent_n]:
        t0 = time.perf_counter()
        db.execute("BEGIN")
        put(m)
        db.execute("COMMIT")
        lat.append(time.perf_counter() - t0)
    rest = msgs[agent_n:]
    t0 = time.perf_counter()
    for i in range(0, len(rest), batch):
        db.execute("BEGIN")
        for m in rest[i : i + batch]:
            put(m)
        db.execute("COMMIT")
    bulk = time.perf_counter() - t0
    db.close()
    return lat, (len(rest) / bulk if rest else float("nan"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=100_000, help="total messages (default 100k)")
    ap.add_argument("--agent", type=int, default=None, help="how many go one at a time (default: a fifth)")
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--json", dest="json_out", help="also write results to this JSON file")
    args = ap.parse_args()
    agent_n = args.agent if args.agent is not None else args.messages // 5
    msgs = list(synthetic_messages(args.messages))
    with tempfile.TemporaryDirectory() as tmp:
        base_lat, base_bulk = bench_sqlite(Path(tmp) / "base.sqlite", msgs, agent_n, args.batch)
        lat, bulk = bench_vault(Path(tmp) / "vault", msgs, agent_n, args.batch)
    rows = [summary("vaultlcm agent-path ingest", lat), summary("sqlite+fts5 per-message commit", base_lat)]
    for r, rate in zip(rows, (bulk, base_bulk)):
        r["bulk_msgs_per_s"] = rate
    print(f"{args.messages:,} messages ({agent_n:,} one at a time, the rest in batches of {args.batch:,})")
    print_table(rows)
    ratio_p99 = rows[0]["p99_ms"] / rows[1]["p99_ms"]
    ratio_bulk = bulk / base_bulk
    print(f"p99 ratio vaultlcm/sqlite: {ratio_p99:.2f}x   bulk throughput ratio vaultlcm/sqlite: {ratio_bulk:.2f}x")
    dump_json(args.json_out, {"rows": rows, "ratio_p99": ratio_p99, "ratio_bulk": ratio_bulk})


if __name__ == "__main__":
    main()
