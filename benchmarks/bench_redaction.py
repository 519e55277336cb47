"""What keeping secrets off disk costs: ingest with redaction on against off, in the same run.

    python benchmarks/bench_redaction.py --messages 2000 --lines 3000 --rounds 3

Agent path: one message per ``Vault.ingest`` call (synthetic agent traffic, one
secret in every 50th message). Import path: a Claude Code transcript built from
the test fixture's real line shapes (thinking, tool calls, large tool results,
``toolUseResult`` copies of files), ingested whole with ``ingest_bytes``, then
re-imported (everything already stored). Both run with ``redact_secrets`` off
and on in the same process; the ratio on/off is the cost.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import dump_json, print_table, summary, synthetic_messages  # noqa: E402

from vaultlcm.settings import load_settings  # noqa: E402
from vaultlcm.vault import Vault  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "claude-code" / "session.jsonl"


def transcript(lines: int) -> bytes:
    src = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip()]
    out, prev = [], None
    for i in range(lines):
        rec = dict(src[i % len(src)])
        if "uuid" in rec:
            rec["uuid"], rec["parentUuid"] = str(uuid.UUID(int=i + 1)), prev
            prev = rec["uuid"]
        out.append(json.dumps(rec))
    return ("\n".join(out) + "\n").encode("utf-8")


def agent_messages(n: int) -> list[dict]:
    msgs = list(synthetic_messages(n))
    for i in range(0, n, 50):
        if isinstance(msgs[i]["content"], str):
            msgs[i]["content"] += f" (token ghp_{uuid.uuid4().hex[:36].ljust(36, 'x')})"
    return msgs


def run(redact: bool, msgs: list[dict], data: bytes, root: Path) -> dict[str, object]:
    settings = load_settings(None, {}, {"redact_secrets": redact})
    with Vault.init(root / ("on" if redact else "off"), settings=settings, environ={}) as v:
        lat = []
        for m in msgs:
            t0 = time.perf_counter()
            v.ingest("agent", [m])
            lat.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        v.ingest_bytes("import", data, format="claude-code")
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = v.ingest_bytes("import", data, format="claude-code")
        second = time.perf_counter() - t0
        assert again.new == 0
    return {"agent": summary(f"agent ingest, redaction {'on' if redact else 'off'}", lat[len(lat) // 10:]),
            "import_s": first, "reimport_s": second}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=2000, help="agent-path messages")
    ap.add_argument("--lines", type=int, default=3000, help="Claude Code transcript lines")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved off/on rounds (best of each is reported)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    msgs, data = agent_messages(args.messages), transcript(args.lines)
    results: dict[bool, list[dict[str, object]]] = {False: [], True: []}
    for round_ in range(args.rounds):  # interleaved, best of each: a shared machine's noise hits both alike
        for redact in (False, True):
            with tempfile.TemporaryDirectory() as tmp:
                results[redact].append(run(redact, msgs, data, Path(tmp)))
    off, on = (min(results[r], key=lambda x: x["agent"]["p50_ms"]) for r in (False, True))  # type: ignore[index]
    for best, runs in ((off, results[False]), (on, results[True])):
        best["import_s"] = min(r["import_s"] for r in runs)  # type: ignore[type-var]
        best["reimport_s"] = min(r["reimport_s"] for r in runs)  # type: ignore[type-var]
    rows = [off["agent"], on["agent"]]
    print_table(rows)  # type: ignore[arg-type]
    ratios = {
        "agent_p50_on_over_off": on["agent"]["p50_ms"] / off["agent"]["p50_ms"],  # type: ignore[index]
        "agent_p99_on_over_off": on["agent"]["p99_ms"] / off["agent"]["p99_ms"],  # type: ignore[index]
        "import_on_over_off": on["import_s"] / off["import_s"],  # type: ignore[operator]
        "reimport_on_over_off": on["reimport_s"] / off["reimport_s"],  # type: ignore[operator]
    }
    print(f"transcript: {len(data) / 1e6:.1f} MB, {args.lines} lines; import {off['import_s']:.2f}s off, "
          f"{on['import_s']:.2f}s on; re-import {off['reimport_s']:.2f}s off, {on['reimport_s']:.2f}s on")
    for k, v in ratios.items():
        print(f"{k}: {v:.3f}")
    if args.json:
        dump_json(args.json, {"off": off, "on": on, "ratios": ratios})


if __name__ == "__main__":
    main()
