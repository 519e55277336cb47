"""Costs that must not grow with history: vaultlcm at 10k, 100k and 1M messages, with references in the same run.

    python benchmarks/bench_scale.py --sizes 10000 100000 1000000 --out benchmarks/results/scale.json
    python benchmarks/bench_scale.py --render benchmarks/results/scale.json --write-docs   # docs/PERFORMANCE.md, docs/performance.svg

For each size, a vault is built from realistic agent traffic spread over 350 days
(one conversation; bulk ingest by day, compaction, index), next to a SQLite FTS5
database holding the same messages. Then each measurement runs in a fresh
process (nothing warm but what a user's process would have):

* agent-path ingest: 300 single messages, durable before return, against a
  per-message FTS5 commit (``synchronous=FULL``) into the same-size database;
* indexed grep: words and identifiers on each backend (``--backends``; the
  first one is the default setting's and serves every other measure), against
  the same queries on FTS5;
* regex grep: ``grep --regex`` (limit 20, and ``--count`` of every match)
  against ripgrep counting every match in the same logs;
* compaction: CPU time to compact the newest messages appended on top of the
  history, with the offline summarizer, in the steady state; the one-time
  catch-up a vault compacted by older code needs first (counting what its
  summaries cost in a context, which the current code stores as it writes
  each note) is measured before it and reported on its own;
* reindex: rebuild of catalog and index from the Markdown (rate, peak memory),
  once per backend;
* first assemble, ``status`` and ``doctor`` in a new process.

``--builds DIR`` keeps the built vaults and reuses them (building 100k messages
takes most of a run); every run still measures a fresh copy.

Every number is also given as a ratio to its reference, and growth exponents
(log-log slope between sizes) show what grows with history. The machine is shared
and noisy: read the ratios and exponents, not single milliseconds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from html import escape
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


def run_child(code: str, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``code`` in a fresh Python (``env``: extra environment variables); it prints one JSON object last."""
    environ = {**os.environ, **(env or {})}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                         check=False, env=environ)
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

# CPU is the process's (every thread): the log's fdatasync runs on a sync thread of its own.
INGEST = """
    import json, sys, time
    from vaultlcm import Vault
    root, n = sys.argv[1], int(sys.argv[2])
    lat, cpu = [], []
    with Vault(root) as v:
        v.ingest("agent", [{"role": "user", "content": "warm up"}])
        for i in range(n):
            t0, c0 = time.perf_counter(), time.process_time()
            v.ingest("agent", [{"role": "user" if i % 2 else "assistant", "content": f"agent turn {i}: deploy went fine"}])
            lat.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    print(json.dumps({"lat": lat, "cpu": cpu}))
"""

GREP = """
    import json, statistics, sys, time
    from vaultlcm import Vault
    root = sys.argv[1]
    words, ids, regex = json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
    with Vault(root) as v:
        t0 = time.perf_counter(); v.grep("deploy"); first = time.perf_counter() - t0
        out = {"first": first, "words": [], "ids": [], "backend": v.settings.index_backend}
        rounds = int(sys.argv[6])
        for _ in range(rounds):
            for key, qs in (("words", words), ("ids", ids)):
                for q in qs:
                    t0 = time.perf_counter(); v.grep(q, limit=20); out[key].append(time.perf_counter() - t0)
        if sys.argv[5] == "regex":
            lat, count = [], []
            for _ in range(rounds):
                t0 = time.perf_counter(); r = v.grep(regex, regex=True, limit=20); lat.append(time.perf_counter() - t0)
                t0 = time.perf_counter(); c = v.grep(regex, regex=True, count=True); count.append(time.perf_counter() - t0)
            out["regex"], out["regex_count"] = statistics.median(lat), statistics.median(count)
            out["regex_hits"], out["regex_partial"] = len(r["hits"]), bool(r.get("partial") or c.get("partial"))
            out["regex_total"] = c["total"]
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
    try:  # this process's own peak (ru_maxrss carries the script's across fork and exec)
        with open("/proc/self/status") as f:
            kb = next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:"))
    except (OSError, StopIteration):
        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"s": t2 - t1, "rss_mb": kb / 1024}))
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
        # The one-time catch-up of a vault older code compacted: what its summaries cost in a context
        # was never stored (the current code stores each note's cost as it writes it), so the first
        # compaction would count the older ones its next context meets. Counted here, all of them,
        # and reported on its own: the rate below is the steady state of a vault the current code keeps.
        # So is the redaction tally `status` reads (every compaction brings it up to date, counting only
        # the bytes logged since; a vault no compaction of the current code saw has none, and the first
        # one reads every log).
        from vaultlcm.redaction_tally import RedactionTally
        v.sync("agent")
        ids = [r.id for r in v.dag.all("agent", bodies=False)]
        c0 = time.process_time()
        v.assembler.prime("agent", ids, v.settings.context_budget_tokens)
        tally = RedactionTally(v.layout)
        tally.counts("agent")
        tally.save()
        catch_up = time.process_time() - c0
    with Vault(root) as v:
        v.ingest("agent", extra)
        c0 = time.process_time()
        report = v.compact("agent", force=True)[0]
        cpu = time.process_time() - c0
    print(json.dumps({"cpu_s": cpu, "messages": n, "created": len(report.created), "catch_up_cpu_s": catch_up,
                      "catch_up_summaries": len(ids)}))
"""

REINDEX = """
    import json, os, sys, threading, time, resource
    from vaultlcm import Vault
    root = sys.argv[1]

    def tree_rss() -> int:
        # The summed RSS of this process and its descendants (tantivy's index is built in a child
        # process), read from /proc; elsewhere this process's own high-water mark.
        try:
            kids, rss = {}, {}
            for d in os.listdir("/proc"):
                if d.isdigit():
                    try:
                        with open(f"/proc/{d}/stat") as f:
                            fields = f.read().rsplit(")", 1)[1].split()
                    except OSError:
                        continue
                    kids.setdefault(int(fields[1]), []).append(int(d))
                    rss[int(d)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        total, todo = 0, [os.getpid()]
        while todo:
            pid = todo.pop()
            total += rss.get(pid, 0)
            todo.extend(kids.get(pid, []))
        return total

    peak, done = [0], threading.Event()

    def sample() -> None:
        while not done.wait(0.1):
            peak[0] = max(peak[0], tree_rss())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    cpu0 = [sum(resource.getrusage(w)[:2]) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    with Vault(root) as v:
        t0 = time.perf_counter()
        r = v.reindex()
        s = time.perf_counter() - t0
    done.set()
    sampler.join()
    cpu = sum(sum(resource.getrusage(w)[:2]) - c for w, c in zip((resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN), cpu0))
    # This process's own high-water mark: ``ru_maxrss`` would carry the script's (a fork copies it, exec keeps
    # it), which is a gigabyte when the script generated the messages itself. Children: the sampler's tree.
    try:
        with open("/proc/self/status") as f:
            single = next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:"))
    except (OSError, StopIteration):
        single = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"s": s, "cpu_s": cpu, "messages": r["messages"], "backend": r["backend"],
                      "peak_rss_mb": max(peak[0] / 2**20, single / 1024)}))
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


def fts5_measure(path: Path, n_ingest: int, rounds: int = 5) -> dict[str, Any]:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous=FULL")
    lat, cpu = [], []
    for i in range(n_ingest):
        t0, c0 = time.perf_counter(), time.thread_time()
        db.execute("BEGIN")
        body = json.dumps(f"agent turn {i}: deploy went fine")
        cur = db.execute("INSERT INTO m(role, ts, body) VALUES('user','2026',?)", (body,))
        db.execute("INSERT INTO f(rowid, body) VALUES(?,?)", (cur.lastrowid, body))
        db.execute("COMMIT")
        lat.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
    out: dict[str, Any] = {"ingest": lat, "ingest_cpu": cpu, "words": [], "ids": []}
    for _ in range(rounds):
        for key, qs in (("words", QUERIES_WORDS), ("ids", QUERIES_IDS)):
            for q in qs:
                match = " ".join('"' + t.replace('"', '""') + '"' for t in q.split())
                t0 = time.perf_counter()
                list(db.execute("SELECT rowid, snippet(f, 0, '', '', '…', 12) FROM f WHERE f MATCH ? "
                                "ORDER BY rank LIMIT 20", (match,)))
                out[key].append(time.perf_counter() - t0)
    db.close()
    return out


def ripgrep(root: Path, runs: int = 5) -> float | None:
    """Median time of ripgrep counting every match of :data:`REGEX` in the logs (a full scan)."""
    rg = shutil.which("rg")
    if rg is None:
        return None
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([rg, "-c", "-i", REGEX, str(root / "conversations")], capture_output=True, check=False)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


REFRESH = """
    import json, sys, time
    from vaultlcm import Vault
    t0 = time.perf_counter()
    with Vault(sys.argv[1]) as v:
        v.status()  # the catalog, read again from the files
        v.grep("deploy")  # the index's full catch-up against the new catalog; a clean close keeps its marks
    print(json.dumps({"s": time.perf_counter() - t0}))
"""


def catalog_schema(vault: Path) -> str | None:
    """The schema version of a vault's catalog (None: no catalog)."""
    path = vault / ".vaultlcm" / "catalog.sqlite"
    if not path.exists():
        return None
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        row = con.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
    finally:
        con.close()
    return None if row is None else str(row[0])


def refresh_catalog(vault: Path) -> None:
    """Bring a kept build's catalog to this library's schema before it is copied.

    A catalog of another schema is dropped and read again from the files by the first process
    that opens the vault, and the index then compares every document against it: in a measured
    step (the first ingest call, a grep) that would be timed as the step's cost. Done once here,
    in the kept build, instead.
    """
    from vaultlcm.catalog_schema import SCHEMA_VERSION

    if catalog_schema(vault) in (None, SCHEMA_VERSION):
        return
    print(f"[{vault.name}] the kept build's catalog is of another schema: reading it again…", file=sys.stderr,
          flush=True)
    try:  # the backend the build's index was made with (its settings file may say another)
        backend = json.loads((vault / ".vaultlcm" / "index" / "vaultlcm-index.json").read_text())["backend"]
    except (OSError, ValueError, KeyError):
        backend = None
    run_child(REFRESH, str(vault), env={"VAULTLCM_INDEX_BACKEND": str(backend)} if backend else None)


def build(size: int, root: Path, db: Path, builds: Path | None, backend: str = "whoosh") -> dict[str, Any]:
    """Build the vault (indexed with ``backend``) and the FTS5 database at ``root``/``db``, or copy them from
    ``builds`` when built before."""
    env = {"VAULTLCM_INDEX_BACKEND": backend}
    if builds is None:
        info = run_child(BUILD, str(root), str(size), str(HERE), env=env)
        fts5_build(db, traffic(size))
        return info
    cached, cached_db, meta = builds / f"vault-{size}", builds / f"fts-{size}.sqlite", builds / f"build-{size}.json"
    if not meta.exists():
        shutil.rmtree(cached, ignore_errors=True)
        info = run_child(BUILD, str(cached), str(size), str(HERE), env=env)
        fts5_build(cached_db, traffic(size))
        meta.write_text(json.dumps(info))
    refresh_catalog(cached)
    shutil.copytree(cached, root, symlinks=True)
    shutil.copy2(cached_db, db)
    return {**json.loads(meta.read_text()), "reused": True}


def measure(size: int, workdir: Path, backends: list[str], builds: Path | None = None, *, ingests: int = 300,
            rounds: int = 5, skip_reindex: bool = False) -> dict[str, Any]:
    """Every measure at one history size (see the module docstring); ``rounds`` repeats each query.

    ``skip_reindex``: no full rebuild (the longest step at 1M); only the default backend's searches,
    on the index the build made, are measured.
    """
    root = workdir / f"vault-{size}"
    db = workdir / f"fts-{size}.sqlite"
    shutil.rmtree(root, ignore_errors=True)
    db.unlink(missing_ok=True)
    print(f"[{size:,}] building the vault and the FTS5 reference…", file=sys.stderr, flush=True)
    built = build(size, root, db, builds, backends[0])
    print(f"[{size:,}] measuring…", file=sys.stderr, flush=True)
    load = [os.getloadavg()[0]]  # the machine may be shared: say how busy it was
    ingested = run_child(INGEST, str(root), str(ingests))
    ing = ingested["lat"]
    ref = fts5_measure(db, ingests, rounds)
    default = backends[0]
    env = {"VAULTLCM_INDEX_BACKEND": default}
    grep = run_child(GREP, str(root), json.dumps(QUERIES_WORDS), json.dumps(QUERIES_IDS), REGEX, "regex", str(rounds), env=env)
    rg = ripgrep(root, rounds)
    compact = run_child(COMPACT_MORE, str(root), str(max(50, min(3000, size // 3))), str(HERE), env=env)
    opened = {what: run_child(OPEN_READS, str(root), what, env=env) for what in ("assemble", "status", "doctor")}
    p = percentile
    out: dict[str, Any] = {
        "size": size,
        "build": built,
        "backend": default,
        "ingest_p50_ms": p(ing, 50) * 1e3, "ingest_p99_ms": p(ing, 99) * 1e3,
        "fts5_ingest_p50_ms": p(ref["ingest"], 50) * 1e3, "fts5_ingest_p99_ms": p(ref["ingest"], 99) * 1e3,
        # CPU time of the calling thread (fsync waits excluded): what a loaded machine distorts least.
        "ingest_cpu_p50_ms": p(ingested["cpu"], 50) * 1e3, "fts5_ingest_cpu_p50_ms": p(ref["ingest_cpu"], 50) * 1e3,
        "fts5_grep_p50_ms": p(ref["words"] + ref["ids"], 50) * 1e3, "fts5_grep_p95_ms": p(ref["words"] + ref["ids"], 95) * 1e3,
        "fts5_ids_p50_ms": p(ref["ids"], 50) * 1e3,
        "regex_ms": grep["regex"] * 1e3, "regex_count_ms": grep["regex_count"] * 1e3, "regex_hits": grep["regex_hits"],
        "regex_total": grep["regex_total"], "regex_partial": grep["regex_partial"],
        "ripgrep_ms": rg * 1e3 if rg is not None else None,
        "compact_msgs_per_cpu_s": compact["messages"] / max(compact["cpu_s"], 1e-9),
        # Once per vault older code compacted (see COMPACT_MORE): not part of the rate above.
        "compact_catch_up_cpu_s": compact.get("catch_up_cpu_s"), "compact_catch_up_summaries": compact.get("catch_up_summaries"),
        "first_assemble_ms": opened["assemble"]["s"] * 1e3, "status_ms": opened["status"]["s"] * 1e3,
        "status_rss_mb": opened["status"]["rss_mb"], "doctor_ms": opened["doctor"]["s"] * 1e3,
    }
    # Each backend: a full reindex with it (the index is then that backend's), then its searches.
    for backend in backends:
        if skip_reindex and backend != default:
            continue
        print(f"[{size:,}] reindex and grep with {backend}…", file=sys.stderr, flush=True)
        env = {"VAULTLCM_INDEX_BACKEND": backend}
        reindex = {"messages": None, "s": None, "cpu_s": None, "peak_rss_mb": None} if skip_reindex else run_child(REINDEX, str(root), env=env)
        # The default backend's searches ran above, on the index the build and the agent's ingests made.
        g = grep if backend == default else run_child(
            GREP, str(root), json.dumps(QUERIES_WORDS), json.dumps(QUERIES_IDS), REGEX, "", str(rounds), env=env)
        load.append(os.getloadavg()[0])
        out[backend] = {
            "grep_p50_ms": p(g["words"] + g["ids"], 50) * 1e3, "grep_p95_ms": p(g["words"] + g["ids"], 95) * 1e3,
            "grep_ids_p50_ms": p(g["ids"], 50) * 1e3, "grep_first_ms": g["first"] * 1e3,
            "reindex_msgs_per_min": None if skip_reindex else reindex["messages"] / max(reindex["s"], 1e-9) * 60,
            "reindex_msgs_per_cpu_min": None if skip_reindex else reindex["messages"] / max(reindex["cpu_s"], 1e-9) * 60,
            "reindex_peak_rss_mb": reindex["peak_rss_mb"],
        }
    load.append(os.getloadavg()[0])
    out["load_avg"], out["cpus"] = max(load), os.cpu_count()
    return out


#: (label, key, reference key): a key under a backend's name is read as "<backend>.<key>".
ROWS = [
    ("agent-path ingest p50 (ms)", "ingest_p50_ms", "fts5_ingest_p50_ms"),
    ("agent-path ingest p99 (ms)", "ingest_p99_ms", "fts5_ingest_p99_ms"),
    ("agent-path ingest CPU p50 (ms)", "ingest_cpu_p50_ms", "fts5_ingest_cpu_p50_ms"),
    ("indexed grep p50 (ms), {b}", "{b}.grep_p50_ms", "fts5_grep_p50_ms"),
    ("indexed grep p95 (ms), {b}", "{b}.grep_p95_ms", "fts5_grep_p95_ms"),
    ("identifier grep p50 (ms), {b}", "{b}.grep_ids_p50_ms", "fts5_ids_p50_ms"),
    ("regex grep, limit 20 (ms)", "regex_ms", "ripgrep_ms"),
    ("regex grep --count, every match (ms)", "regex_count_ms", "ripgrep_ms"),
    ("compaction (messages per CPU s)", "compact_msgs_per_cpu_s", None),
    ("compaction's one-time catch-up: costs of summaries older code wrote (CPU s)", "compact_catch_up_cpu_s", None),
    ("reindex (messages per minute), {b}", "{b}.reindex_msgs_per_min", None),
    ("reindex (messages per CPU minute, every process), {b}", "{b}.reindex_msgs_per_cpu_min", None),
    ("reindex peak RSS (MB), {b}", "{b}.reindex_peak_rss_mb", None),  # the process tree's summed RSS
    ("first assemble after open (ms)", "first_assemble_ms", None),
    ("status (ms)", "status_ms", None),
    ("status peak RSS (MB)", "status_rss_mb", None),
    ("doctor (ms)", "doctor_ms", None),
]
REFERENCES = [("SQLite FTS5 ingest p50 (ms)", "fts5_ingest_p50_ms"), ("SQLite FTS5 grep p95 (ms)", "fts5_grep_p95_ms"),
              ("SQLite FTS5 identifier grep p50 (ms)", "fts5_ids_p50_ms"), ("ripgrep -c, full scan (ms)", "ripgrep_ms")]
#: What the chart draws (latencies that must not grow with history), and its references.
CHART = [("indexed grep p95, {b}", "{b}.grep_p95_ms"), ("identifier grep p50, {b}", "{b}.grep_ids_p50_ms"),
         ("regex grep, limit 20", "regex_ms"), ("first assemble", "first_assemble_ms"), ("status", "status_ms"),
         ("doctor", "doctor_ms"), ("agent-path ingest p50", "ingest_p50_ms")]
CHART_REFS = [("SQLite FTS5 grep p95", "fts5_grep_p95_ms"), ("ripgrep full scan", "ripgrep_ms")]


def value(r: dict[str, Any], key: str) -> float | None:
    """``r[key]``, where ``a.b`` reads ``r[a][b]``; None when absent."""
    node: Any = r
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return None if node is None else float(node)


def backends_of(results: list[dict[str, Any]]) -> list[str]:
    seen: list[str] = []
    for r in results:
        for b in ("whoosh", "tantivy"):
            if isinstance(r.get(b), dict) and b not in seen:
                seen.append(b)
    return seen


def expand_rows(rows: list[tuple[str, str, Any]], results: list[dict[str, Any]]) -> list[tuple[str, str, Any]]:
    out = []
    for row in rows:
        if "{b}" in row[1]:
            out += [(row[0].format(b=b), row[1].format(b=b), *row[2:]) for b in backends_of(results)]
        else:
            out.append(row)
    return out


def exponent(results: list[dict[str, Any]], key: str) -> float | None:
    """Growth exponent: the log-log slope of ``key`` between the smallest and the largest size."""
    pts = [(r["size"], value(r, key)) for r in results if value(r, key)]
    if len(pts) < 2:
        return None
    (x0, y0), (x1, y1) = pts[0], pts[-1]
    return math.log(y1 / y0) / math.log(x1 / x0) if y0 and y1 and y0 > 0 and y1 > 0 and x1 != x0 else None


def _num(v: float) -> str:
    return f"{v:,.2f}" if v < 10 else f"{v:,.1f}" if v < 1000 else f"{v:,.0f}"


def render(results: list[dict[str, Any]], command: str) -> str:
    """The Markdown table: every measure per size (with its ratio to the reference), growth exponents, references."""
    sizes = [r["size"] for r in results]
    head = "| | " + " | ".join(f"{s:,} messages" for s in sizes) + " | growth exponent |"
    lines = [head, "|---" * (len(sizes) + 2) + "|"]
    for label, key, ref in expand_rows(ROWS, results):
        cells = []
        for r in results:
            v, base = value(r, key), value(r, ref) if ref else None
            cell = "n/a" if v is None else _num(v)
            if v is not None and base:
                cell += f" ({v / base:.1f}x)"
            cells.append(cell)
        e = exponent(results, key)
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {'' if e is None else f'{e:.2f}'} |")
    for label, key in REFERENCES:
        cells = ["n/a" if value(r, key) is None else _num(value(r, key) or 0.0) for r in results]
        e = exponent(results, key)
        lines.append(f"| *reference:* {label} | " + " | ".join(cells) + f" | {'' if e is None else f'{e:.2f}'} |")
    loads = ", ".join(f"{r['size']:,}: {r['load_avg']:.1f}" for r in results if r.get("load_avg") is not None)
    regex = ", ".join(f"{r['size']:,}: {r.get('regex_hits')} hits, {r.get('regex_total')} in all"
                      f"{' (partial)' if r.get('regex_partial') else ''}" for r in results)
    cpus = results[0].get("cpus") or "?"
    busy = f" Highest 1-minute load average of the {cpus}-core machine while measuring: {loads}." if loads else ""
    return "\n".join(lines) + f"\n\nRegex pattern `{REGEX}` ({regex}).{busy}\n\nCommand: `{command}`\n"


PALETTE = ["#3b6ea8", "#c9812b", "#7a9a3c", "#a8443b", "#6b4fa0", "#2b8f8f", "#8a6d3b", "#555555", "#d4a017"]


def svg_chart(results: list[dict[str, Any]]) -> str:
    """Latency against history size, log-log: one line per measure, references dashed."""
    series = [(label, key, False) for label, key in expand_rows(CHART, results)]  # type: ignore[arg-type]
    series += [(label, key, True) for label, key in CHART_REFS]
    points = {key: [(r["size"], value(r, key)) for r in results if (value(r, key) or 0) > 0] for _, key, _ in series}
    ys = [y for pts in points.values() for _, y in pts if y]
    xs = [r["size"] for r in results]
    if not ys or not xs:
        return '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>\n'
    lo_y, hi_y = 10 ** math.floor(math.log10(min(ys))), 10 ** math.ceil(math.log10(max(ys)))
    lo_x, hi_x = 10 ** math.floor(math.log10(min(xs))), 10 ** math.ceil(math.log10(max(xs)))
    if hi_x == lo_x:
        hi_x = lo_x * 10
    if hi_y == lo_y:
        hi_y = lo_y * 10
    left, top, pw, ph, legend_w = 64, 36, 420, 300, 250
    width, height = left + pw + 20 + legend_w, top + ph + 50

    def px(x: float) -> float:
        return left + pw * math.log10(x / lo_x) / math.log10(hi_x / lo_x)

    def py(y: float) -> float:
        return top + ph - ph * math.log10(y / lo_y) / math.log10(hi_y / lo_y)

    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            'font-family="Helvetica, Arial, sans-serif" font-size="11">'),
           f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
           f'<text x="{left}" y="20" font-size="13" font-weight="bold">Latency (ms) against history size (messages), log-log</text>']
    y = lo_y
    while y <= hi_y * 1.0001:
        out.append(f'<line x1="{left}" y1="{py(y):.1f}" x2="{left + pw}" y2="{py(y):.1f}" stroke="#dddddd"/>')
        out.append(f'<text x="{left - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y:g}</text>')
        y *= 10
    x = lo_x
    while x <= hi_x * 1.0001:
        out.append(f'<line x1="{px(x):.1f}" y1="{top}" x2="{px(x):.1f}" y2="{top + ph}" stroke="#eeeeee"/>')
        out.append(f'<text x="{px(x):.1f}" y="{top + ph + 16}" text-anchor="middle">{x:,.0f}</text>')
        x *= 10
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#999999"/>')
    ly = top + 6
    for i, (label, key, dashed) in enumerate(series):
        pts = points[key]
        ref = i - len(series) + len(CHART_REFS)  # references: greys, each its own dash
        color = ["#777777", "#333333"][ref % 2] if dashed else PALETTE[i % len(PALETTE)]
        dash = f' stroke-dasharray="{["6,4", "2,3"][ref % 2]}"' if dashed else ""
        if len(pts) > 1:
            path = " ".join(f"{px(a):.1f},{py(b):.1f}" for a, b in pts if b)
            out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"{dash}/>')
        for a, b in pts:
            if b:
                out.append(f'<circle cx="{px(a):.1f}" cy="{py(b):.1f}" r="3" fill="{color}">'
                           f'<title>{escape(label)} at {a:,}: {b:,.1f} ms</title></circle>')
        out.append(f'<line x1="{left + pw + 20}" y1="{ly}" x2="{left + pw + 44}" y2="{ly}" stroke="{color}" '
                   f'stroke-width="2"{dash}/>')
        out.append(f'<text x="{left + pw + 50}" y="{ly + 4}">{escape(label)}</text>')
        ly += 18
    out.append(f'<text x="{left + pw / 2}" y="{height - 8}" text-anchor="middle" fill="#555555">'
               "a flat line does not grow with history; dashed: references in the same run</text>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


BEGIN, END = "<!-- bench_scale:begin -->", "<!-- bench_scale:end -->"


def write_docs(results: list[dict[str, Any]], command: str, docs: Path) -> list[Path]:
    """Put the table between the markers of ``docs/PERFORMANCE.md`` and write the chart next to it, and
    the raw results behind both in ``performance.json`` (``--render docs/performance.json`` gives the
    table again, ``--merge`` adds a new run of one size to it: the results outlive the machine)."""
    docs.mkdir(parents=True, exist_ok=True)
    page, chart, raw = docs / "PERFORMANCE.md", docs / "performance.svg", docs / "performance.json"
    chart.write_text(svg_chart(results), encoding="utf-8")
    raw.write_text(json.dumps({"command": command, "results": results}, indent=1) + "\n", encoding="utf-8")
    block = f"{BEGIN}\n{render(results, command)}\n![Latency against history size](performance.svg)\n{END}"
    text = page.read_text(encoding="utf-8") if page.exists() else f"# Performance\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text or END not in text:
        text = text.rstrip("\n") + f"\n\n{BEGIN}\n{END}\n"
    head, rest = text.split(BEGIN, 1)
    page.write_text(head + block + rest.split(END, 1)[1], encoding="utf-8")
    return [page, chart, raw]


def _stop_on_sigterm(_signum: int, _frame: Any) -> None:
    # Raised inside subprocess.run, which then kills the child it waits on: a run stopped with kill
    # (SIGTERM) leaves no build child behind, still writing into the kept build's folder.
    raise SystemExit(143)


def main() -> int:
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--backends", nargs="+", choices=["whoosh", "tantivy"], default=["whoosh", "tantivy"],
                    help="index backends to measure grep and reindex on; the first is the one every other "
                    "measure uses (default: whoosh, the default setting, then tantivy)")
    ap.add_argument("--ingests", type=int, default=300, help="single-message ingests timed per size (default 300)")
    ap.add_argument("--rounds", type=int, default=5, help="times each query is repeated (default 5)")
    ap.add_argument("--workdir", type=Path, default=None, help="where the vaults are built (default: a temp folder)")
    ap.add_argument("--builds", type=Path, default=None,
                    help="keep each size's built vault and FTS5 database here and reuse them on later runs "
                    "(every run measures a fresh copy)")
    ap.add_argument("--skip-reindex", action="store_true",
                    help="measure no full rebuild (the longest step at 1M): only the first backend's searches, on "
                    "the index the build made")
    ap.add_argument("--merge", type=Path, nargs="+", default=None, metavar="JSON",
                    help="with --render: add the sizes of these saved runs to the table (each keeps its own command)")
    ap.add_argument("--out", type=Path, default=None, help="write the raw results as JSON")
    ap.add_argument("--render", type=Path, default=None, help="print the table of a saved JSON instead of measuring")
    ap.add_argument("--write-docs", type=Path, nargs="?", const=HERE.parent / "docs", default=None, metavar="DIR",
                    help="also put the table in DIR/PERFORMANCE.md (between its markers) and the chart in "
                    "DIR/performance.svg (default DIR: the repository's docs/)")
    args = ap.parse_args()
    if args.render:
        data = json.loads(args.render.read_text())
        results, command = data["results"], data["command"]
        for extra in args.merge or []:
            more = json.loads(extra.read_text())
            results = sorted(results + more["results"], key=lambda r: r["size"])
            command += "` and `" + more["command"]
    else:
        work = args.workdir or Path(tempfile.mkdtemp(prefix="vaultlcm-scale-"))
        if args.builds:
            args.builds.mkdir(parents=True, exist_ok=True)
        results = [measure(n, work, args.backends, args.builds, ingests=args.ingests, rounds=args.rounds,
                           skip_reindex=args.skip_reindex) for n in args.sizes]
        command = ("python benchmarks/bench_scale.py --sizes " + " ".join(map(str, args.sizes))
                   + " --backends " + " ".join(args.backends) + (" --skip-reindex" if args.skip_reindex else ""))
        if (args.ingests, args.rounds) != (300, 5):
            command += f" --ingests {args.ingests} --rounds {args.rounds}"
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps({"command": command, "results": results}, indent=1))
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(render(results, command))
    if args.write_docs:
        for path in write_docs(results, command, args.write_docs):
            print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
