"""The agent path of two code trees, alternating on fresh copies of a build, with FTS5 in the same round.

    python benchmarks/bench_ingest_ab.py /work/scale-builds/vault-100000 /work/scale-builds/fts-100000.sqlite \\
        --code before=/path/to/main --code after=/path/to/branch --rounds 4 --calls 300 [--stages]

Each round copies the vault (and the FTS5 database) once per code tree, runs
``--calls`` one-message ``Vault.ingest`` calls in a fresh process with that tree
first on ``PYTHONPATH`` (the same loop as ``bench_scale.py``'s INGEST child),
then the FTS5 per-message commit (``synchronous=FULL``) on its copy. The order
of the trees alternates between rounds. Prints each run and the medians over
the rounds: wall p50/p99, CPU p50 (the process's, every thread), and with
``--stages`` the median time of each stage of a call (``perf_counter_ns``
around the functions named in :data:`STAGES`, those a tree has). With
``--slowest N``, the N slowest calls of each run are printed one by one: their
stages, the garbage collector's pauses inside them, and how long a catalog
checkpoint (which runs on a thread of its own) overlapped them: what makes the
p99. The copies are deleted after each run; the build is never written.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_scale  # noqa: E402
from common import code_trees, percentile, run_in_tree  # noqa: E402

#: (module, attribute path, label): what ``--stages`` times, where the code tree has it.
STAGES = [
    ("vaultlcm.vault", "incoming_from_api", "validation"),
    ("vaultlcm.msglog", "MessageLog._prepare", "numbering (_prepare)"),
    ("vaultlcm.msglog", "render_entry_meta", "rendering"),
    ("vaultlcm.msglog", "durable_append", "log append with its sync"),
    ("vaultlcm.msglog", "start_append", "log write (sync on the sync thread)"),
    ("vaultlcm.fsutil", "PendingSync.wait", "waiting for the sync"),
    ("vaultlcm.catalog", "Catalog.record_append", "catalog transaction"),
    ("os", "fdatasync", "fdatasync itself"),
    ("vaultlcm.catalog_db", "_Checkpointer._checkpoint", "checkpoint (its own thread)"),
]

CHILD = """
    import gc, importlib, inspect, json, sys, time
    root, n, stages, slowest = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4])
    acc, cur, spans, pauses = {}, {}, [], []

    def timed(f, label):
        def wrapper(*args, **kwargs):
            t = time.perf_counter_ns()
            try:
                return f(*args, **kwargs)
            finally:
                end = time.perf_counter_ns()
                cur[label] = cur.get(label, 0) + end - t
                if label.startswith("checkpoint"):
                    spans.append((t, end))  # it runs on its own thread: which calls did it overlap?

        return wrapper

    def on_gc(phase, info):
        pauses.append((phase, time.perf_counter_ns()))

    if slowest:
        gc.callbacks.append(on_gc)

    for module, attr, label in stages:
        owner = importlib.import_module(module)
        *path, name = attr.split(".")
        for part in path:
            owner = getattr(owner, part, None)
        if owner is not None and hasattr(owner, name):
            wrapped = timed(getattr(owner, name), label)
            if isinstance(inspect.getattr_static(owner, name), staticmethod):
                wrapped = staticmethod(wrapped)  # else the instance would be passed to it as its first argument
            setattr(owner, name, wrapped)
    from vaultlcm import Vault
    lat, cpu, calls = [], [], []
    with Vault(root) as v:
        v.ingest("agent", [{"role": "user", "content": "warm up"}])
        for i in range(n):
            cur.clear()
            pauses.clear()
            t0, c0, ns0 = time.perf_counter(), time.process_time(), time.perf_counter_ns()
            v.ingest("agent", [{"role": "user" if i % 2 else "assistant", "content": f"agent turn {i}: deploy went fine"}])
            ns1 = time.perf_counter_ns()
            lat.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            for label, ns in cur.items():
                acc.setdefault(label, []).append(ns)
            if slowest:
                gc_ns = sum(b - a for (pa, a), (pb, b) in zip(pauses[::2], pauses[1::2]))
                overlap = sum(max(0, min(ns1, b) - max(ns0, a)) for a, b in spans[-4:])
                calls.append({"call": i, "ms": (ns1 - ns0) / 1e6, "gc_ms": gc_ns / 1e6,
                              "checkpoint_overlap_ms": overlap / 1e6,
                              "stages_us": {k: round(ns / 1e3) for k, ns in cur.items()}})
    import vaultlcm
    calls = sorted(calls, key=lambda c: -c["ms"])[:slowest]
    print(json.dumps({"lat": lat, "cpu": cpu, "stages": {k: sorted(x)[len(x) // 2] / 1e3 for k, x in acc.items()},
                      "slowest": calls, "vaultlcm": vaultlcm.__file__}))
"""


def run_tree(code: Path, vault: Path, work: Path, calls: int, stages: bool, slowest: int = 0) -> dict[str, Any]:
    copy = work / "vault"
    shutil.rmtree(copy, ignore_errors=True)
    subprocess.run(["cp", "-a", str(vault), str(copy)], check=True)
    try:
        out = run_in_tree(code, CHILD, [str(copy), str(calls), json.dumps(STAGES if stages or slowest else []),
                                        str(slowest)], cwd=work)
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    return out


def run_fts5(db: Path, work: Path, calls: int) -> dict[str, Any]:
    copy = work / "fts.sqlite"
    shutil.copyfile(db, copy)
    try:
        ref = bench_scale.fts5_measure(copy, calls, rounds=0)
    finally:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{copy}{suffix}").unlink(missing_ok=True)
    return {"lat": ref["ingest"], "cpu": ref["ingest_cpu"], "stages": {}}


def figures(run: dict[str, Any]) -> dict[str, Any]:
    return {"p50_ms": percentile(run["lat"], 50) * 1e3, "p99_ms": percentile(run["lat"], 99) * 1e3,
            "cpu_p50_ms": percentile(run["cpu"], 50) * 1e3, "stages_us": run["stages"],
            "slowest": run.get("slowest", [])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("vault", type=Path, help="a vault bench_scale.py built (copied for each run, never written)")
    ap.add_argument("fts5", type=Path, help="the FTS5 database bench_scale.py built for the same size")
    ap.add_argument("--code", action="append", required=True, metavar="NAME=PATH",
                    help="a code tree (the folder holding the vaultlcm package); give two or more")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--stages", action="store_true", help="also time each stage of a call")
    ap.add_argument("--slowest", type=int, default=0, metavar="N",
                    help="also print the N slowest calls of each run: their stages, the garbage collector's "
                         "pauses and how long a catalog checkpoint (on its own thread) overlapped them")
    ap.add_argument("--out", type=Path, default=None, help="write every run and the medians here (JSON)")
    args = ap.parse_args()
    trees = dict(code_trees(ap, args.code))
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in [*trees, "fts5"]}
    with tempfile.TemporaryDirectory(prefix="bench-ingest-ab-") as tmp:
        work = Path(tmp)
        for r in range(args.rounds):
            names = list(trees) if r % 2 == 0 else list(reversed(trees))
            for name in [*names, "fts5"]:
                run = (run_fts5(args.fts5, work, args.calls) if name == "fts5"
                       else run_tree(trees[name], args.vault, work, args.calls, args.stages, args.slowest))
                row = figures(run)
                runs[name].append(row)
                stages = "  " + json.dumps({k: round(v) for k, v in sorted(row["stages_us"].items())}) \
                    if row["stages_us"] else ""
                print(f"round {r} {name:>8}: wall p50 {row['p50_ms']:.3f} ms, p99 {row['p99_ms']:.2f} ms, "
                      f"CPU p50 {row['cpu_p50_ms']:.3f} ms{stages}", flush=True)
                for call in run.get("slowest", []):
                    print(f"    slow call {call['call']:>5}: {call['ms']:.2f} ms, checkpoint overlap "
                          f"{call['checkpoint_overlap_ms']:.2f} ms, gc {call['gc_ms']:.2f} ms  "
                          + json.dumps(call["stages_us"]), flush=True)
    ref = statistics.median(r["p50_ms"] for r in runs["fts5"])
    medians = {}
    print(f"medians over {args.rounds} rounds (load {os.getloadavg()[0]:.1f}):")
    for name, rows in runs.items():
        m = {key: statistics.median(r[key] for r in rows) for key in ("p50_ms", "p99_ms", "cpu_p50_ms")}
        medians[name] = m
        print(f"  {name:>8}: wall p50 {m['p50_ms']:.3f} ms ({m['p50_ms'] / ref:.2f}x FTS5), "
              f"p99 {m['p99_ms']:.2f} ms, CPU p50 {m['cpu_p50_ms']:.3f} ms")
    if args.out:
        args.out.write_text(json.dumps({"runs": runs, "medians": medians}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
