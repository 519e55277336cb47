"""Start-up costs of a built vault, each in a fresh process: before and after a change, in the same run.

What a user pays when a command opens a vault that already holds a history (issue 14):
the first ``assemble`` after open, the same again when nothing changed, ``status``,
``doctor`` (also after another process appended and compacted without the index),
and the agent's ingest of the first message of a new day. Each measure runs on a
fresh copy of the vault (``cp -a``; the built vault is never touched), for every
``--code`` tree in turn, round after round, so the trees share the machine's load::

    python benchmarks/bench_startup.py /work/scale-builds/vault-100000 \\
        --code before=/tmp/main-checkout --code after=. --rounds 3

``--code NAME=DIR`` runs the vaultlcm package found in ``DIR`` (its ``vaultlcm/``
folder goes first on ``PYTHONPATH``). Prints one JSON object per measure and a
table of medians with each tree's ratio to the first.
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
import textwrap
from pathlib import Path
from typing import Any

CHILD = """
    import json, sys, time, resource
    root, what = sys.argv[1], sys.argv[2]
    from vaultlcm import Vault, tokens
    with Vault(root) as v:
        conv = v.conversations()[0]
        t0 = time.perf_counter()
        if what == "assemble":
            v.assemble(conv, 16000)
        elif what == "status":
            v.status()
        elif what == "doctor":
            v.doctor()
        elif what == "append_compact":  # another process: new history, compacted, the index not opened
            v.ingest(conv, [{"role": "user" if i % 2 else "assistant", "content": f"later turn {i}: deploy went fine"}
                            for i in range(int(sys.argv[3]))])
            v.compact(conv, force=True)
        elif what == "new_day":
            last = v.catalog.execute("SELECT MAX(at) FROM messages WHERE conv=?", (conv,))[0][0]
            import datetime as dt
            day = dt.datetime.fromisoformat(last.replace("Z", "+00:00")) + dt.timedelta(days=1)
            v.ingest(conv, [{"role": "user", "content": "warm up", "timestamp": last}])
            t0 = time.perf_counter()
            v.ingest(conv, [{"role": "user", "content": "a new day", "timestamp": day.isoformat()}])
        s = time.perf_counter() - t0
    print(json.dumps({"s": s, "table_loaded": tokens._encoding is not None,
                      "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

#: (label, steps): each step runs in a new process on the same fresh copy; the last one is timed.
MEASURES: list[tuple[str, list[tuple[str, ...]]]] = [
    ("first assemble after open (ms)", [("assemble",)]),
    ("assemble, nothing changed (ms)", [("assemble",), ("assemble",)]),
    ("status (ms)", [("status",)]),
    ("status again (ms)", [("status",), ("status",)]),
    ("doctor (ms)", [("doctor",)]),
    ("doctor after another process appended 300 and compacted (ms)", [("append_compact", "300"), ("doctor",)]),
    ("ingest of a new day's first message (ms)", [("new_day",)]),
]


def run_child(code_dir: Path, root: Path, *args: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(code_dir)}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(CHILD), str(root), *args], capture_output=True,
                         text=True, env=env, check=False, cwd=tempfile.gettempdir())
    if out.returncode != 0:
        raise RuntimeError(f"child failed ({code_dir}, {args}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("vault", type=Path, help="a built vault (never modified: each measure runs on a copy)")
    ap.add_argument("--code", action="append", required=True, help="NAME=DIR of a vaultlcm source tree")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", nargs="*", help="measures whose label starts with one of these words")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "bench-startup")
    args = ap.parse_args()
    trees = [(name, Path(d).resolve()) for name, d in (c.split("=", 1) for c in args.code)]
    measures = [m for m in MEASURES if not args.only or any(m[0].startswith(w) for w in args.only)]
    results: dict[tuple[str, str], list[float]] = {}
    loads = []
    for r in range(args.rounds):
        for label, steps in measures:
            for name, code in trees:
                copy = args.workdir / "vault"
                shutil.rmtree(copy, ignore_errors=True)
                copy.parent.mkdir(parents=True, exist_ok=True)
                subprocess.run(["cp", "-a", str(args.vault), str(copy)], check=True)
                for step in steps:
                    got = run_child(code, copy, *step)
                results.setdefault((label, name), []).append(got["s"] * 1e3)
                loads.append(os.getloadavg()[0])
                print(json.dumps({"round": r, "measure": label, "code": name, **got}), flush=True)
    shutil.rmtree(args.workdir / "vault", ignore_errors=True)
    head = "| measure | " + " | ".join(n for n, _ in trees) + " |"
    print("\n" + head + "\n|" + "---|" * (len(trees) + 1))
    for label, _ in measures:
        base = statistics.median(results[(label, trees[0][0])])
        cells = []
        for name, _ in trees:
            med = statistics.median(results[(label, name)])
            cells.append(f"{med:,.0f}" + ("" if name == trees[0][0] else f" ({med / max(base, 1e-9):.2f}x)"))
        print(f"| {label} | " + " | ".join(cells) + " |")
    print(f"\n{args.vault.name}: medians of {args.rounds} round(s); 1-minute load average "
          f"{min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores.")


if __name__ == "__main__":
    main()
