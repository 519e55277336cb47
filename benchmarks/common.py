"""Shared helpers for the benchmark scripts: synthetic agent traffic and timing."""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import textwrap
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

WORDS = (
    "deploy config service retry timeout cache index build test failure patch review merge branch "
    "database migration schema query latency error warning token budget summary context agent tool "
    "file path module function class variable parameter result output input request response"
).split()
PATHS = ["src/app.py", "src/db/models.py", "tests/test_api.py", "config/settings.toml", "docs/README.md"]


def synthetic_messages(n: int, *, seed: int = 7, start_day: int = 1) -> Iterator[dict[str, Any]]:
    """Realistic-looking agent traffic: user asks, assistant calls tools, tools answer."""
    rng = random.Random(seed)
    for i in range(n):
        minute = i // 4
        ts = f"2026-11-{start_day + (minute // 1440) % 28:02d}T{(minute // 60) % 24:02d}:{minute % 60:02d}:{i % 60:02d}Z"
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 60)))
        kind = i % 4
        if kind == 0:
            yield {"role": "user", "timestamp": ts, "content": f"Please look at {rng.choice(PATHS)}: {words}"}
        elif kind == 1:
            yield {"role": "assistant", "timestamp": ts, "content": [
                {"type": "text", "text": words},
                {"type": "tool_call", "id": f"call_{i}", "name": "read_file", "arguments": {"path": rng.choice(PATHS)}},
            ]}
        elif kind == 2:
            yield {"role": "tool", "timestamp": ts, "content": [
                {"type": "tool_result", "call_id": f"call_{i - 1}", "content": f"line {i}: {words}\n" * rng.randint(1, 6)},
            ]}
        else:
            yield {"role": "assistant", "timestamp": ts, "content": f"Decided: {words}. Next: update {rng.choice(PATHS)}."}


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1)))))
    return ordered[k]


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def summary(name: str, samples: list[float]) -> dict[str, float]:
    return {
        "name": name,  # type: ignore[dict-item]
        "n": len(samples),
        "p50_ms": percentile(samples, 50) * 1000,
        "p95_ms": percentile(samples, 95) * 1000,
        "p99_ms": percentile(samples, 99) * 1000,
        "mean_ms": statistics.fmean(samples) * 1000 if samples else float("nan"),
    }


def print_table(rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    keys = list(rows[0])
    widths = {k: max(len(k), *(len(_fmt(r.get(k))) for r in rows)) for k in keys}
    print("  ".join(k.ljust(widths[k]) for k in keys))
    for r in rows:
        print("  ".join(_fmt(r.get(k)).ljust(widths[k]) for k in keys))


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.3f}" if abs(v) < 100 else f"{v:,.0f}"
    return str(v)


def dump_json(path: str | None, data: Any) -> None:
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2)


def code_trees(ap: argparse.ArgumentParser, specs: list[str]) -> list[tuple[str, Path]]:
    """``--code NAME=PATH`` arguments of an A/B benchmark: two or more trees, each holding the vaultlcm package."""
    trees: list[tuple[str, Path]] = []
    for spec in specs:
        name, _, path = spec.partition("=")
        if not name or not path or not (Path(path) / "vaultlcm" / "__init__.py").is_file():
            ap.error(f"--code {spec!r}: expected NAME=PATH, PATH holding the vaultlcm package")
        trees.append((name, Path(path).resolve()))
    if len(trees) < 2:
        ap.error("give at least two --code trees")
    if len({name for name, _ in trees}) < len(trees):
        ap.error("give each --code tree its own name")
    return trees


def run_in_tree(code: Path, child: str, args: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``child`` (Python source printing one JSON object last, with ``vaultlcm``: the module's file)
    in a fresh interpreter importing vaultlcm from ``code``; returns that object.

    Raises ``RuntimeError`` when the child fails, a thread of it died (a measurement without, say, the
    catalog's checkpointer is not one), or it imported vaultlcm from anywhere but ``code``.
    """
    # ``cwd`` must not hold a vaultlcm package: ``python -c`` puts the current folder first on sys.path,
    # before PYTHONPATH, and that package would be measured instead of the tree.
    environ = {**os.environ, **(env or {}), "PYTHONPATH": str(code)}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(child), *args], capture_output=True, text=True,
                          check=False, cwd=cwd, env=environ)
    if proc.returncode != 0 or "Exception in thread" in proc.stderr:
        raise RuntimeError(f"benchmark child ({code}) failed:\n{proc.stderr[-3000:]}")
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    if not Path(out["vaultlcm"]).resolve().is_relative_to(code.resolve()):
        raise RuntimeError(f"the child imported {out['vaultlcm']}, not the tree {code}")
    return out
