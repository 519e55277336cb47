"""Where a turn of a long-running ``Engine`` goes, on a vault that already holds history.

    python benchmarks/bench_engine_memory.py --backend tantivy --messages 10000 --keep /tmp/v10k
    python benchmarks/profile_engine_turn.py /tmp/v10k --done 10000 --turns 150 --profile /tmp/turn-10k.prof

Opens the vault kept by ``bench_engine_memory.py --keep`` with one ``Engine`` (the same
budget and settings), continues the same traffic from message ``--done``, warms up
(the first sync of a process checks every note), then runs ``--turns`` turns exactly as
the memory benchmark does, with compaction in the calling thread so that ``cProfile``
and the ``perf_counter`` splits see all of it. Prints the milliseconds per turn, the
splits by part, and the top of the profile. The vault gains those turns: profile at
10k, then carry it on with another run, and so on.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import itertools
import json
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_engine_memory import Splits, traffic, turns  # noqa: E402

from vaultlcm import Engine  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("vault", type=Path)
    ap.add_argument("--done", type=int, required=True, help="messages the vault already holds (the traffic resumes there)")
    ap.add_argument("--turns", type=int, default=150)
    ap.add_argument("--warmup", type=int, default=20, help="turns run before measuring")
    ap.add_argument("--budget", type=int, default=16_000)
    ap.add_argument("--assemble-every", type=int, default=10)
    ap.add_argument("--grep-every", type=int, default=250)
    ap.add_argument("--profile", type=Path, default=None, help="write the cProfile stats there")
    ap.add_argument("--out", type=Path, default=None, help="write the splits as JSON")
    args = ap.parse_args()
    environ = {"VAULTLCM_CONTEXT_BUDGET_TOKENS": str(args.budget), "VAULTLCM_BACKGROUND_COMPACTION": "false"}
    stream = turns(itertools.islice(traffic(args.done + 40 * (args.turns + args.warmup)), args.done, None))
    profiler = cProfile.Profile()
    splits = Splits()
    with Engine(args.vault, "agent", token_budget=args.budget, environ=environ) as engine:
        splits.instrument(engine)
        ingest_batch = splits.timed("ingest", engine.ingest_batch)
        after_turn = splits.timed("after_turn", engine.after_turn)
        assemble = splits.timed("assemble", engine.assemble)
        call_tool = splits.timed("grep", engine.call_tool)
        n_messages = 0
        t0 = 0.0
        for n, turn in enumerate(stream, start=1):
            if n == args.warmup + 1:
                splits.window(1)
                profiler.enable()
                t0 = time.perf_counter()
            ingest_batch(turn)
            after_turn()
            if n % args.assemble_every == 0:
                assemble()
            if n % args.grep_every == 0:
                call_tool("lcm_grep", {"pattern": "deploy timeout"})
            if n > args.warmup:
                n_messages += len(turn)
            if n == args.warmup + args.turns:
                break
        seconds = time.perf_counter() - t0
        profiler.disable()
    parts = splits.window(n_messages)
    result = {"done": args.done, "turns": args.turns, "messages": n_messages,
              "ms_per_turn": seconds * 1000 / args.turns, "ms_per_message": seconds * 1000 / n_messages,
              "parts_per_turn_ms": {k: round(v["ms_per_message"] * n_messages / args.turns, 2) for k, v in parts.items()}}
    print(json.dumps(result, indent=1))
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(35)
    print(out.getvalue())
    if args.profile:
        profiler.dump_stats(args.profile)
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
