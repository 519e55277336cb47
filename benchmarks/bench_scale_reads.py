"""The read side of ``bench_scale.py`` on a vault it already built (when the full protocol takes too long).

    python benchmarks/bench_scale.py --sizes 100000 --builds /tmp/scale-builds ...   # builds vault-100000 first
    python benchmarks/bench_scale_reads.py /tmp/scale-builds/vault-100000 /tmp/scale-builds/fts-100000.sqlite \\
        --backend tantivy --out reads-100k.json

In one process, next to its reference in the same run: indexed grep (the same
queries as ``bench_scale.py``) against FTS5 on the same messages, regex grep (a
page of 20, and ``--count``) against ``rg -c``, and the time of the first grep,
which builds the index when the vault has none for the backend. Writes into the
vault's derived state only (``.vaultlcm/``): run it on a copy to keep a build
pristine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_scale  # noqa: E402
from common import percentile  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("vault", type=Path)
    ap.add_argument("fts5", type=Path, help="the FTS5 database bench_scale.py built for the same size")
    ap.add_argument("--backend", choices=["whoosh", "tantivy"], default="tantivy")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    os.environ["VAULTLCM_INDEX_BACKEND"] = args.backend
    from vaultlcm import Vault

    out: dict = {"backend": args.backend, "load": [os.getloadavg()[0]]}
    with Vault(args.vault) as v:
        t = time.perf_counter()
        v.grep("deploy")
        out["first_grep_s"] = time.perf_counter() - t
        out["documents"] = v.indexer.open().count()
        words: list[float] = []
        ids: list[float] = []
        for _ in range(args.rounds):
            for into, queries in ((words, bench_scale.QUERIES_WORDS), (ids, bench_scale.QUERIES_IDS)):
                for q in queries:
                    t = time.perf_counter()
                    v.grep(q, limit=20)
                    into.append(time.perf_counter() - t)
        out["grep_p50_ms"] = percentile(words + ids, 50) * 1e3
        out["grep_p95_ms"] = percentile(words + ids, 95) * 1e3
        out["grep_ids_p50_ms"] = percentile(ids, 50) * 1e3
        page, count = [], []
        for _ in range(args.rounds):
            t = time.perf_counter()
            r = v.grep(bench_scale.REGEX, regex=True, limit=20)
            page.append(time.perf_counter() - t)
            t = time.perf_counter()
            c = v.grep(bench_scale.REGEX, regex=True, count=True)
            count.append(time.perf_counter() - t)
        out["regex_ms"], out["regex_count_ms"] = statistics.median(page) * 1e3, statistics.median(count) * 1e3
        out["regex_hits"], out["regex_total"] = len(r["hits"]), c["total"]
        out["regex_partial"] = bool(r.get("partial") or c.get("partial"))
    out["load"].append(os.getloadavg()[0])
    ref = bench_scale.fts5_measure(args.fts5, 0, args.rounds)
    out["fts5_grep_p95_ms"] = percentile(ref["words"] + ref["ids"], 95) * 1e3
    out["fts5_ids_p50_ms"] = percentile(ref["ids"], 50) * 1e3
    rg = bench_scale.ripgrep(args.vault, args.rounds)
    out["ripgrep_ms"] = rg * 1e3 if rg is not None else None
    out["load"].append(os.getloadavg()[0])
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    text = json.dumps(out, indent=1)
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
