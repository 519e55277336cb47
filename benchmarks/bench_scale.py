"""Costs that must not grow with history: vaultlcm at 10k, 100k and 1M messages, with references in the same run.

    python benchmarks/bench_scale.py --sizes 10000 100000 1000000 --out benchmarks/results/scale.json
    python benchmarks/bench_scale.py --render benchmarks/results/scale.json --write-docs   # docs/PERFORMANCE.md

For each size, a vault is built from realistic agent traffic spread over 350 days
(one conversation; bulk ingest by day, compaction, index), next to a SQLite FTS5
database holding the same messages. Then each measurement runs in a fresh
process (nothing warm but what a user's process would have):

* agent-path ingest: 300 single messages, durable before return, against a
  per-message FTS5 commit (``synchronous=FULL``) into the same-size database;
* indexed grep: words and identifiers on the configured backend, against the
  same queries on FTS5;
* regex grep: ``grep --regex`` (limit 20) against ripgrep scanning the same logs;
* compaction: CPU time to compact the newest messages appended on top of the
  history, with the offline summarizer;
* reindex: rebuild of catalog and index from the Markdown (rate, peak memory);
* first assemble, ``status`` and ``doctor`` in a new process.

Every number is also given as a ratio to its reference, and growth exponents
(log-log slope between sizes) show what grows with history. The machine is shared
and noisy: read the ratios and exponents, not single milliseconds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import percentile, synthetic_messages  # noqa: E402

DAYS = 350
QUERIES_WORDS = ["deploy timeout", "retry", "cache index", "migration schema", "latency error", "budget summary"]
QUERIES_IDS = ["src/app.py", "call_4242", "tests/test_api.py", "config/settings.toml"]
REGEX = r"line \d+: deploy .* failure"


def traffic(n: int, seed: int = 11) -> list[dict[str, Any]]:
    """``n`` messages over ``DAYS`` days, as ``benchmarks/common`` writes them, re-timed evenly."""
    msgs = list(synthetic_messages(n, seed=seed))
    per_day = max(1, math.ceil(n / DAYS))
    for i, m in enumerate(msgs):
        day, k = divmod(i, per_day)
        month, dom = divmod(day, 28)
        secs = int(k * 86_000 / per_day)
        m["timestamp"] = f"{2025 + month // 12}-{month % 12 + 1:02d}-{dom + 1:02d}T{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}Z"
    return msgs


def run_child(code: str, *args: str) -> dict[str, Any]:
    """Run ``code`` in a fresh Python; it prints one JSON object last."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"benchmark child failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


BUILD = """
    import json, sys, time, resource
    sys.path.insert(0, sys.argv[3])
    from bench_scale import traffic
    from vaultlcm import Vault
    root, n = sys.argv[1], int(sys.argv[2])
    msgs = traffic(n)
    t0 = time.perf_counter()
    with Vault.init(root) as v:
        day = None
        batch = []
        for m in msgs:
            d = m["timestamp"][:10]
            if d != day and batch:
                v.ingest("agent", batch)
                batch = []
            day = d
            batch.append(m)
        if batch:
            v.ingest("agent", batch)
        ingest_s = time.perf_counter() - t0
        c0 = time.process_time()
        t1 = time.perf_counter()
        v.compact("agent", force=True)
        compact_cpu = time.process_time() - c0
        compact_s = time.perf_counter() - t1
        t2 = time.perf_counter()
        v.grep("deploy")
        index_s = time.perf_counter() - t2
    print(json.dumps({"ingest_s": ingest_s, "compact_s": compact_s, "compact_cpu_s": compact_cpu, "index_s": index_s,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

INGEST = """
    import json, sys, time
    from vaultlcm import Vault
    root, n = sys.argv[1], int(sys.argv[2])
    lat = []
    with Vault(root) as v:
        v.ingest("agent", [{"role": "user", "content": "warm up"}])
        for i in range(n):
            t0 = time.perf_counter()
            v.ingest("agent", [{"role": "user" if i % 2 else "assistant", "content": f"agent turn {i}: deploy went fine"}])
            lat.append(time.perf_counter() - t0)
    print(json.dumps({"lat": lat}))
"""

GREP = """
    import json, sys, time
    from vaultlcm import Vault
    root = sys.argv[1]
    words, ids, regex = json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
    with Vault(root) as v:
        t0 = time.perf_counter(); v.grep("deploy"); first = time.perf_counter() - t0
        out = {"first": first, "words": [], "ids": []}
        for _ in range(5):
            for key, qs in (("words", words), ("ids", ids)):
                for q in qs:
                    t0 = time.perf_counter(); v.grep(q, limit=20); out[key].append(time.perf_counter() - t0)
        t0 = time.perf_counter(); r = v.grep(regex, regex=True, limit=20); out["regex"] = time.perf_counter() - t0
        out["regex_hits"], out["regex_partial"] = len(r["hits"]), bool(r.get("partial"))
    print(json.dumps(out))
"""

OPEN_READS = """
    import json, sys, time
    t0 = time.perf_counter()
    from vaultlcm import Vault
    root, what = sys.argv[1], sys.argv[2]
    with Vault(root) as v:
        t1 = time.perf_counter()
        if what == "assemble":
            v.assemble("agent", 16000)
        elif what == "status":
            v.status()
        elif what == "doctor":
            v.doctor()
        t2 = time.perf_counter()
    import resource
    print(json.dumps({"s": t2 - t1, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

COMPACT_MORE = """
    import json, sys, time
    sys.path.insert(0, sys.argv[3])
    from bench_scale import traffic
    from vaultlcm import Vault
    root, n = sys.argv[1], int(sys.argv[2])
    extra = traffic(n, seed=99)
    for m in extra:
        m.pop("timestamp")  # appended now, after the history
    with Vault(root) as v:
        v.ingest("agent", extra)
        c0 = time.process_time()
        report = v.compact("agent", force=True)[0]
        cpu = time.process_time() - c0
    print(json.dumps({"cpu_s": cpu, "messages": n, "created": len(report.created)}))
"""

REINDEX = """
    import json, sys, time, resource
    from vaultlcm import Vault
    root = sys.argv[1]
    with Vault(root) as v:
        t0 = time.perf_counter()
        r = v.reindex()
        s = time.perf_counter() - t0
    print(json.dumps({"s": s, "messages": r["messages"], "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def fts5_build(path: Path, msgs: list[dict[str, Any]]) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE m(id INTEGER PRIMARY KEY, role TEXT, ts TEXT, body TEXT)")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(body, tokenize='unicode61')")
    db.execute("BEGIN")
    for m in msgs:
        body = json.dumps(m["content"], ensure_ascii=False)
        cur = db.execute("INSERT INTO m(role, ts, body) VALUES(?,?,?)", (m["role"], m["timestamp"], body))
        db.execute("INSERT INTO f(rowid, body) VALUES(?,?)", (cur.lastrowid, body))
    db.execute("COMMIT")
    db.close()


def fts5_measure(path: Path, n_ingest: int) -> dict[str, Any]:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous=FULL")
    lat = []
    for i in range(n_ingest):
        t0 = time.perf_counter()
        db.execute("BEGIN")
        body = json.dumps(f"agent turn {i}: deploy went fine")
        cur = db.execute("INSERT INTO m(role, ts, body) VALUES('user','2026',?)", (body,))
        db.execute("INSERT INTO f(rowid, body) VALUES(?,?)", (cur.lastrowid, body))
        db.execute("COMMIT")
        lat.append(time.perf_counter() - t0)
    out: dict[str, Any] = {"ingest": lat, "words": [], "ids": []}
    for _ in range(5):
        for key, qs in (("words", QUERIES_WORDS), ("ids", QUERIES_IDS)):
            for q in qs:
                match = " ".join('"' + t.replace('"', '""') + '"' for t in q.split())
                t0 = time.perf_counter()
                list(db.execute("SELECT rowid, snippet(f, 0, '', '', '…', 12) FROM f WHERE f MATCH ? "
                                "ORDER BY rank LIMIT 20", (match,)))
                out[key].append(time.perf_counter() - t0)
    db.close()
    return out


def ripgrep(root: Path) -> float | None:
    rg = shutil.which("rg")
    if rg is None:
        return None
    t0 = time.perf_counter()
    subprocess.run([rg, "-c", REGEX, str(root / "conversations")], capture_output=True, check=False)
    return time.perf_counter() - t0


def measure(size: int, workdir: Path) -> dict[str, Any]:
    root = workdir / f"vault-{size}"
    db = workdir / f"fts-{size}.sqlite"
    print(f"[{size:,}] building the vault and the FTS5 reference…", file=sys.stderr, flush=True)
    build = run_child(BUILD, str(root), str(size), str(HERE))
    fts5_build(db, traffic(size))
    print(f"[{size:,}] measuring…", file=sys.stderr, flush=True)
    ing = run_child(INGEST, str(root), "300")["lat"]
    ref = fts5_measure(db, 300)
    grep = run_child(GREP, str(root), json.dumps(QUERIES_WORDS), json.dumps(QUERIES_IDS), REGEX)
    rg = ripgrep(root)
    compact = run_child(COMPACT_MORE, str(root), "3000", str(HERE))
    opened = {what: run_child(OPEN_READS, str(root), what) for what in ("assemble", "status", "doctor")}
    reindex = run_child(REINDEX, str(root))
    p = percentile
    return {
        "size": size,
        "build": build,
        "ingest_p50_ms": p(ing, 50) * 1e3, "ingest_p99_ms": p(ing, 99) * 1e3,
        "fts5_ingest_p50_ms": p(ref["ingest"], 50) * 1e3, "fts5_ingest_p99_ms": p(ref["ingest"], 99) * 1e3,
        "grep_p50_ms": p(grep["words"] + grep["ids"], 50) * 1e3, "grep_p95_ms": p(grep["words"] + grep["ids"], 95) * 1e3,
        "grep_ids_p50_ms": p(grep["ids"], 50) * 1e3, "grep_first_ms": grep["first"] * 1e3,
        "fts5_grep_p50_ms": p(ref["words"] + ref["ids"], 50) * 1e3, "fts5_grep_p95_ms": p(ref["words"] + ref["ids"], 95) * 1e3,
        "fts5_ids_p50_ms": p(ref["ids"], 50) * 1e3,
        "regex_ms": grep["regex"] * 1e3, "regex_hits": grep["regex_hits"], "regex_partial": grep["regex_partial"],
        "ripgrep_ms": rg * 1e3 if rg is not None else None,
        "compact_msgs_per_cpu_s": compact["messages"] / max(compact["cpu_s"], 1e-9),
        "reindex_msgs_per_min": reindex["messages"] / max(reindex["s"], 1e-9) * 60,
        "reindex_peak_rss_mb": reindex["peak_rss_mb"],
        "first_assemble_ms": opened["assemble"]["s"] * 1e3, "status_ms": opened["status"]["s"] * 1e3,
        "status_rss_mb": opened["status"]["rss_mb"], "doctor_ms": opened["doctor"]["s"] * 1e3,
    }


ROWS = [
    ("agent-path ingest p50 (ms)", "ingest_p50_ms", "fts5_ingest_p50_ms"),
    ("agent-path ingest p99 (ms)", "ingest_p99_ms", "fts5_ingest_p99_ms"),
    ("indexed grep p50 (ms)", "grep_p50_ms", "fts5_grep_p50_ms"),
    ("indexed grep p95 (ms)", "grep_p95_ms", "fts5_grep_p95_ms"),
    ("identifier grep p50 (ms)", "grep_ids_p50_ms", "fts5_ids_p50_ms"),
    ("regex grep, limit 20 (ms)", "regex_ms", "ripgrep_ms"),
    ("compaction (messages per CPU s)", "compact_msgs_per_cpu_s", None),
    ("reindex (messages per minute)", "reindex_msgs_per_min", None),
    ("reindex peak RSS (MB)", "reindex_peak_rss_mb", None),
    ("first assemble after open (ms)", "first_assemble_ms", None),
    ("status (ms)", "status_ms", None),
    ("doctor (ms)", "doctor_ms", None),
]


def exponent(results: list[dict[str, Any]], key: str) -> float | None:
    pts = [(r["size"], r[key]) for r in results if r.get(key)]
    if len(pts) < 2:
        return None
    (x0, y0), (x1, y1) = pts[0], pts[-1]
    return math.log(y1 / y0) / math.log(x1 / x0) if y0 > 0 and y1 > 0 else None


def render(results: list[dict[str, Any]], command: str) -> str:
    sizes = [r["size"] for r in results]
    head = "| | " + " | ".join(f"{s:,}" for s in sizes) + " | growth exponent |"
    lines = [head, "|---" * (len(sizes) + 2) + "|"]
    for label, key, ref in ROWS:
        cells = []
        for r in results:
            v = r.get(key)
            cell = "n/a" if v is None else f"{v:,.1f}" if v < 1000 else f"{v:,.0f}"
            if ref and r.get(ref):
                cell += f" ({v / r[ref]:.1f}x)" if v is not None else ""
            cells.append(cell)
        e = exponent(results, key)
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {'' if e is None else f'{e:.2f}'} |")
    refs = ["| reference | " + " | ".join("" for _ in sizes) + " | |"]
    for label, key in (("FTS5 ingest p50 (ms)", "fts5_ingest_p50_ms"), ("FTS5 grep p95 (ms)", "fts5_grep_p95_ms"),
                       ("ripgrep full scan (ms)", "ripgrep_ms")):
        refs.append(f"| {label} | " + " | ".join("n/a" if r.get(key) is None else f"{r[key]:,.1f}" for r in results) + " | |")
    return "\n".join([*lines, *refs[1:]]) + f"\n\nCommand: `{command}`\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None, help="write the raw results as JSON")
    ap.add_argument("--render", type=Path, default=None, help="print the table of a saved JSON instead of measuring")
    args = ap.parse_args()
    if args.render:
        data = json.loads(args.render.read_text())
        print(render(data["results"], data["command"]))
        return 0
    work = args.workdir or Path(tempfile.mkdtemp(prefix="vaultlcm-scale-"))
    results = [measure(n, work) for n in args.sizes]
    command = "python benchmarks/bench_scale.py --sizes " + " ".join(map(str, args.sizes))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"command": command, "results": results}, indent=1))
    print(render(results, command))
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
