"""Crash suite: SIGKILL a working vault at random points and check that nothing acknowledged is lost.

Each trial starts a worker process on a fresh or reused vault. The worker ingests
multi-day batches (one call spans three daily logs), runs compaction, rebuilds the
index and keeps a watcher running, printing an acknowledgement line after every
call that returned. The trial kills it with SIGKILL at a random moment, then
checks, in a new process:

* every acknowledged message is there, byte for byte;
* no call is partly stored: every call's messages are all there or none are;
* ``doctor --fix`` leaves the vault clean (``doctor`` alone: no problems);
* the next writer works.

Run it: ``python benchmarks/crash_suite.py --trials 200`` (the test suite runs a
few trials; ``tests/test_crash_suite.py``).
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

WORKER = textwrap.dedent(
    """
    import json, random, sys
    from vaultlcm import Vault
    root, seed = sys.argv[1], int(sys.argv[2])
    rng = random.Random(seed)
    with Vault(root) as v:
        watcher = v.watch(debounce_ms=20)
        n = 0
        while True:
            n += 1
            call = f"{seed}-{n}"
            size = rng.randint(3, 12)
            records = [{"role": "user" if i % 2 == 0 else "assistant",
                        "timestamp": f"2026-11-{1 + (i * 3) // size:02d}T{10 + n % 10:02d}:{i:02d}:00Z",
                        "content": f"call {call} message {i} of {size} " + "payload " * rng.choice([3, 40, 400])}
                       for i in range(size)]
            ids = v.ingest("crash", records)
            print(json.dumps({"call": call, "ids": ids, "size": size}), flush=True)  # acknowledged
            roll = rng.random()
            if roll < 0.15:
                v.compact("crash", force=True)
            elif roll < 0.2:
                v.reindex()
            elif roll < 0.3:
                v.grep("payload")
    """
)


@dataclass
class Outcome:
    trials: int = 0
    acknowledged_calls: int = 0
    acknowledged_messages: int = 0
    lost: int = 0
    partial_calls: int = 0
    doctor_problems_after_fix: int = 0
    doctor_problems_before_fix: int = 0
    failed_restarts: int = 0
    details: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if k != "details"} | {"details": self.details[:10]}


def one_trial(root: Path, seed: int, out: Outcome, *, max_wait: float = 60.0) -> None:
    from vaultlcm import Vault

    rng = random.Random(seed)
    proc = subprocess.Popen([sys.executable, "-c", WORKER, str(root), str(seed)], stdout=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)  # type: ignore[arg-type]
    reader.start()
    deadline = time.monotonic() + max_wait
    while not lines and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(rng.uniform(0.0, 2.5))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    reader.join(timeout=10)
    acked = [json.loads(line) for line in lines if line.endswith("\n")]
    out.trials += 1
    out.acknowledged_calls += len(acked)
    out.acknowledged_messages += sum(a["size"] for a in acked)
    with Vault(root) as v:
        report = v.doctor()
        out.doctor_problems_before_fix += len(report["problems"])
        out.details += [f"seed {seed}: {p['kind']}: {p['detail']}" for p in report["problems"]]
        texts = {m.id: m.text for m in v.messages("crash")}
        for a in acked:
            for i, mid in enumerate(a["ids"]):
                if not texts.get(mid, "").startswith(f"call {a['call']} message {i} "):
                    out.lost += 1
                    out.details.append(f"seed {seed}: lost {mid} of call {a['call']}")
        fixed = v.doctor(fix=True)
        out.doctor_problems_after_fix += len(fixed["problems"])
        out.details += [f"seed {seed} after fix: {p['kind']}: {p['detail']}" for p in fixed["problems"]]
        try:
            v.ingest("crash", [{"role": "user", "content": f"after trial {seed}"}])
        except Exception as exc:  # noqa: BLE001 - what we measure
            out.failed_restarts += 1
            out.details.append(f"seed {seed}: restart failed: {exc}")


def partial_calls(root: Path) -> list[str]:
    """Calls present only partly, the interrupted ones included (every message says its call's size)."""
    from vaultlcm import Vault

    with Vault(root) as v:
        counts: dict[str, set[int]] = {}
        sizes: dict[str, int] = {}
        for m in v.messages("crash"):
            words = m.text.split()
            if len(words) > 5 and words[0] == "call":
                counts.setdefault(words[1], set()).add(int(words[3]))
                sizes[words[1]] = int(words[5])
    return [f"call {c} has {len(seen)} of {sizes[c]} messages" for c, seen in counts.items()
            if seen != set(range(sizes[c]))]


def run(trials: int, seed: int = 0, root: Path | None = None) -> Outcome:
    from vaultlcm import Vault

    out = Outcome()
    with tempfile.TemporaryDirectory() as tmp:
        vault = root or Path(tmp) / "v"
        Vault.init(vault).close()
        for k in range(trials):
            one_trial(vault, seed * 100_000 + k, out)
        partial = partial_calls(vault)
        out.partial_calls += len(partial)
        out.details += partial
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    started = time.monotonic()
    out = run(args.trials, args.seed)
    print(json.dumps(out.to_dict(), indent=1))
    print(f"{out.trials} trials in {time.monotonic() - started:.0f}s: {out.acknowledged_messages} acknowledged "
          f"messages in {out.acknowledged_calls} calls; lost {out.lost}; partially stored calls {out.partial_calls}; "
          f"doctor problems before fix {out.doctor_problems_before_fix}, after fix {out.doctor_problems_after_fix}; "
          f"failed restarts {out.failed_restarts}")
    return 0 if not (out.lost or out.partial_calls or out.doctor_problems_after_fix or out.failed_restarts) else 1


if __name__ == "__main__":
    sys.exit(main())
