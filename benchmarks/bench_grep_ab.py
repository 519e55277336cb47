"""Indexed grep of two code trees, alternating on one copy of a build: latency and the same answers.

    python benchmarks/bench_grep_ab.py /work/scale-builds/vault-1000000 --backend tantivy \\
        --code before=/path/to/main --code after=/path/to/branch --rounds 3 [--out F]

The build is copied once (grep follows the catalog into the index, so it may
write derived state; the build itself is never written) and every run greps that
copy in a fresh process with one tree first on ``PYTHONPATH``: one warm-up
``grep("deploy")``, then ``--passes`` times each of ``bench_scale.py``'s queries
(its words and its identifiers, ``limit=20``), as its GREP child does. The order
of the trees alternates between rounds. ``--backend`` greps with that index
backend: the copy is reindexed with it first when its index is of the other one
(``bench_scale.py`` leaves a build indexed by the last backend it measured).
Prints each run (p50, p95 and the
slowest call, in ms) and, per tree, the medians over the rounds and their ratio
to the first tree's; a run whose answers (the totals by kind and the first hits
of every query) differ from the first tree's is reported, since a faster grep
that answers otherwise is not the same grep. The copy is deleted at the end.
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

CHILD = """
    import hashlib, json, sys, time
    import vaultlcm
    from vaultlcm import Vault
    root, passes, queries = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
    lat, answers = [], {}
    with Vault(root) as v:
        v.grep("deploy")
        for _ in range(passes):
            for q in queries:
                t0 = time.perf_counter()
                r = v.grep(q, limit=20)
                lat.append(time.perf_counter() - t0)
                answers[q] = [r["total"], r["by_kind"], [h["id"] for h in r["hits"]]]
        backend = v.settings.index_backend
    digest = hashlib.sha256(json.dumps(answers, sort_keys=True).encode()).hexdigest()[:16]
    print(json.dumps({"lat": lat, "answers": digest, "backend": backend, "vaultlcm": vaultlcm.__file__}))
"""


def index_backend(vault: Path) -> str | None:
    try:
        return str(json.loads((vault / ".vaultlcm" / "index" / "vaultlcm-index.json").read_text())["backend"])
    except (OSError, ValueError, KeyError):
        return None


def run_tree(code: Path, vault: Path, work: Path, passes: int, backend: str | None) -> dict[str, Any]:
    queries = bench_scale.QUERIES_WORDS + bench_scale.QUERIES_IDS
    return run_in_tree(code, CHILD, [str(vault), str(passes), json.dumps(queries)], cwd=work,
                       env={"VAULTLCM_INDEX_BACKEND": backend} if backend else None)


def figures(run: dict[str, Any]) -> dict[str, Any]:
    return {"p50_ms": percentile(run["lat"], 50) * 1e3, "p95_ms": percentile(run["lat"], 95) * 1e3,
            "max_ms": max(run["lat"]) * 1e3, "answers": run["answers"], "backend": run["backend"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("vault", type=Path, help="a vault bench_scale.py built (copied once, never written)")
    ap.add_argument("--code", action="append", required=True, metavar="NAME=PATH",
                    help="a code tree (the folder holding the vaultlcm package); give two or more")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--passes", type=int, default=3, help="times each query is asked in one run")
    ap.add_argument("--backend", choices=("whoosh", "tantivy"), default=None,
                    help="the index backend to grep with (default: the build's setting)")
    ap.add_argument("--out", type=Path, default=None, help="write every run and the medians here (JSON)")
    args = ap.parse_args()
    trees = code_trees(ap, args.code)

    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in trees}
    with tempfile.TemporaryDirectory(prefix="grep-ab-") as tmp:
        work = Path(tmp)
        copy = work / "vault"
        subprocess.run(["cp", "-a", str(args.vault), str(copy)], check=True)
        if args.backend and index_backend(copy) != args.backend:
            env = {**os.environ, "PYTHONPATH": str(trees[0][1])}
            env.pop("VAULTLCM_INDEX_BACKEND", None)  # reindex --backend refuses an override it cannot record
            subprocess.run([sys.executable, "-m", "vaultlcm", "--vault", str(copy), "reindex", "--backend", args.backend,
                            "--quiet"], check=True, cwd=work, env=env, stdout=subprocess.DEVNULL)
        for r in range(args.rounds):
            for name, code in trees if r % 2 == 0 else list(reversed(trees)):
                row = figures(run_tree(code, copy, work, args.passes, args.backend))
                runs[name].append(row)
                print(f"round {r + 1} {name:>10}: p50 {row['p50_ms']:7.1f} ms  p95 {row['p95_ms']:7.1f} ms  "
                      f"max {row['max_ms']:7.1f} ms  ({row['backend']}, answers {row['answers']})", flush=True)
        shutil.rmtree(copy, ignore_errors=True)

    first = trees[0][0]
    reference = runs[first][0]["answers"]
    medians: dict[str, dict[str, Any]] = {}
    for name, _ in trees:
        med = {k: statistics.median(row[k] for row in runs[name]) for k in ("p50_ms", "p95_ms", "max_ms")}
        med["same_answers"] = all(row["answers"] == reference for row in runs[name])
        medians[name] = med
    print("\nmedians over the rounds:")
    for name, med in medians.items():
        ratio = med["p95_ms"] / medians[first]["p95_ms"]
        print(f"  {name:>10}: p50 {med['p50_ms']:7.1f} ms  p95 {med['p95_ms']:7.1f} ms ({ratio:.2f}x {first}'s)"
              + ("" if med["same_answers"] else f"  ANSWERS DIFFER from {first}'s"))
    if args.out:
        args.out.write_text(json.dumps({"vault": str(args.vault), "rounds": args.rounds, "passes": args.passes,
                                        "runs": runs, "medians": medians}, indent=1) + "\n")
    return 0 if all(med["same_answers"] for med in medians.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
