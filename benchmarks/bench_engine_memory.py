"""Memory of a long-running ``Engine``: does its RSS grow with history?

    python benchmarks/bench_engine_memory.py --messages 200000 --out benchmarks/results/engine_memory.json

One ``Engine`` lives for the whole run, as a 24/7 agent's would: every message
is ingested on the agent path (one message per call, durable before return),
``after_turn`` schedules compaction in the background after each turn, the
context is assembled every ``--assemble-every`` turns and the memory tools
(``lcm_grep``) are called every ``--grep-every`` turns, so the index is open and
followed too. Traffic is ``benchmarks/common`` agent traffic, about 2,860
messages a day (a million over 350 days).

Every ``--sample-every`` messages the process's resident set (``VmRSS``) is
recorded. The result is the RSS at the end, its high-water mark, and the
slope in MiB per 1,000 messages over the second half of the run (a least-squares
fit, so one spike does not decide it): flat means costs do not grow with
history. The machine is shared and noisy: read the slope, not single samples.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import synthetic_messages  # noqa: E402

from vaultlcm import Engine, Vault  # noqa: E402

PER_DAY = 2_860
START = datetime(2025, 1, 1, tzinfo=UTC)


def rss_mib() -> float:
    """Current resident set of this process (not the high-water mark), in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # not Linux: the high-water mark


def slope(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of ``(messages, MiB)`` points, in MiB per 1,000 messages."""
    if len(points) < 2:
        return float("nan")
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    return sxy / sxx * 1000 if sxx else float("nan")


def traffic(n: int, seed: int = 5) -> Any:
    """Agent traffic re-timed to :data:`PER_DAY` messages a day."""
    for i, m in enumerate(synthetic_messages(n, seed=seed)):
        m["timestamp"] = (START + timedelta(seconds=i * 86_400 // PER_DAY)).strftime("%Y-%m-%dT%H:%M:%SZ")
        yield m


def run(root: Path, messages: int, *, sample_every: int, assemble_every: int, grep_every: int,
        budget: int, progress: bool = False) -> dict[str, Any]:
    Vault.init(root).close()
    samples: list[tuple[int, float]] = []
    t0 = time.perf_counter()
    with Engine(root, "agent", token_budget=budget) as engine:
        samples.append((0, rss_mib()))
        turn = 0
        for i, msg in enumerate(traffic(messages), start=1):
            engine.ingest(msg)
            if msg["role"] == "user" or i == messages:
                turn += 1
                engine.after_turn()
                if turn % assemble_every == 0:
                    engine.assemble()
                if turn % grep_every == 0:
                    engine.call_tool("lcm_grep", {"pattern": "deploy timeout"})
            if i % sample_every == 0:
                samples.append((i, rss_mib()))
                if progress:
                    print(f"{i:>9,} messages  {samples[-1][1]:8.1f} MiB  {time.perf_counter() - t0:7.0f} s",
                          file=sys.stderr, flush=True)
        engine.wait_idle(600)
        end_rss = rss_mib()
    second_half = [p for p in samples if p[0] >= messages // 2]
    return {
        "messages": messages,
        "seconds": time.perf_counter() - t0,
        "rss_end_mib": end_rss,
        "rss_peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "slope_mib_per_1k": slope(second_half),
        "slope_all_mib_per_1k": slope(samples),
        "samples": samples,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--sample-every", type=int, default=10_000)
    ap.add_argument("--assemble-every", type=int, default=10, help="turns between assembled contexts")
    ap.add_argument("--grep-every", type=int, default=250, help="turns between lcm_grep calls")
    ap.add_argument("--budget", type=int, default=16_000, help="the engine's token budget")
    ap.add_argument("--workdir", type=Path, default=None, help="where to build the vault (default: a temp folder)")
    ap.add_argument("--out", type=Path, default=None, help="write the result as JSON")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="vaultlcm-engine-mem-", dir=args.workdir) as tmp:
        result = run(Path(tmp) / "vault", args.messages, sample_every=args.sample_every,
                     assemble_every=args.assemble_every, grep_every=args.grep_every, budget=args.budget,
                     progress=True)
    result["command"] = "python benchmarks/bench_engine_memory.py " + " ".join(sys.argv[1:])
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))
    print(f"{result['messages']:,} messages in {result['seconds']:.0f} s: RSS {result['rss_end_mib']:.0f} MiB at the end "
          f"(peak {result['rss_peak_mib']:.0f} MiB); slope {result['slope_mib_per_1k']:.2f} MiB per 1,000 messages "
          f"over the second half ({result['slope_all_mib_per_1k']:.2f} over the whole run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
