"""CPU per Claude Code hook event over a session that grows to ~15 MB: full reads against reading what is new.

The session is the fixture session (tests/fixtures/claude-code/session.jsonl, 33
lines, 52 KB) repeated with new ids and later times, as in docs/PERFORMANCE.md
("The Claude Code hook re-reads the session"); ``--subagents`` moves the
subagent lines into ``<session>/subagents/agent-<id>.jsonl`` files as recent
Claude Code versions write them (the hook then merges the files by time). It
grows in ``--events`` steps; after each step one hook event runs in a fresh
process (``run_hook`` without detaching, as the worker the hook forks does), and
its CPU (user + system, imports included) is measured through ``wait4``.

Modes: ``full`` deletes the hook's resume state before every event (what every
event cost before: the whole session read and parsed), ``new`` keeps it::

    python benchmarks/bench_hook.py --mb 15 --events 50 --out /tmp/hook.json

Prints one JSON line per event and a table: CPU per event at the start (mean of
the first five events) and at the end (the last five) of the session, per mode,
and the size of the state kept for the session.
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
import zlib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "claude-code" / "session.jsonl"
SESSION = "7f3b2c1e-9a4d-4e5f-8b6a-0c1d2e3f4a5b"
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
CHILD = """
import json, sys
from pathlib import Path
from vaultlcm.claude_code import run_hook
payload, root = sys.argv[1], Path(sys.argv[2])
run_hook(payload.encode(), root=root, create=True, environ={"XDG_CACHE_HOME": sys.argv[3]}, time_limit=3600,
         detach=False)
"""


def copies(n: int) -> list[list[tuple[str, bytes]]]:
    """``n`` copies of the fixture session's lines, each with its own ids and a later time: ``(file, line)``."""
    base = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()]
    out = []
    for k in range(n):
        text = json.dumps(base)
        for old in sorted({v for rec in base for key in ("uuid", "parentUuid", "agentId", "messageId", "leafUuid")
                           if isinstance(v := rec.get(key), str)}, key=len, reverse=True):
            # Each id of each copy its own (the fixture's ids differ only in their last digits: cutting
            # those off and writing k there gave one id to ten lines of a copy, unlike any real session).
            text = text.replace(old, f"{old[:-12]}{zlib.crc32(old.encode()) % 10**6:06d}{k:06d}"
                                if len(old) > 12 else f"{old}{k}")
        recs = json.loads(text)
        lines = []
        for i, rec in enumerate(recs):
            if isinstance(rec.get("timestamp"), str):  # rising through the copies: 10 s a line
                at = START + timedelta(seconds=10 * (k * len(recs) + i))
                rec["timestamp"] = at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
            where = f"agent-{rec['agentId']}" if rec.get("isSidechain") and rec.get("agentId") else "main"
            lines.append((where, json.dumps(rec, ensure_ascii=False).encode("utf-8") + b"\n"))
        out.append(lines)
    return out


def write(folder: Path, lines: list[tuple[str, bytes]], subagents: bool) -> Path:
    """Append ``lines`` to the session's files (subagent lines to their own files with ``subagents``)."""
    main = folder / f"{SESSION}.jsonl"
    handles: dict[Path, list[bytes]] = {}
    for where, line in lines:
        path = main if where == "main" or not subagents else folder / SESSION / "subagents" / f"{where}.jsonl"
        handles.setdefault(path, []).append(line)
    for path, chunk in handles.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab") as fh:
            fh.write(b"".join(chunk))
    return main


def run_event(main: Path, vault: Path) -> tuple[float, str]:
    """One hook event in a fresh process: its CPU seconds and the line it logged."""
    payload = json.dumps({"session_id": SESSION, "transcript_path": str(main), "cwd": "/home/dev/ledgerly",
                          "hook_event_name": "Stop"})
    cache = vault.parent / "cache"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, payload, str(vault), str(cache)],
                            env=os.environ | {"PYTHONPATH": str(ROOT)})
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    try:
        log = (vault / ".vaultlcm" / "hooks.log").read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        failed = cache / "vaultlcm" / "hooks.log"
        raise SystemExit(f"the hook failed: {failed.read_text(encoding='utf-8') if failed.exists() else proc.returncode}")
    if ": error: " in log[-1] or "unexpected error" in log[-1]:
        raise SystemExit(f"the hook failed: {log[-1]}")
    return usage.ru_utime + usage.ru_stime, log[-1]


def grow(mode: str, args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    folder = work / mode / "projects" / "-home-dev-ledgerly"
    vault = work / mode / "vault"
    folder.mkdir(parents=True)
    parts = copies(args.copies)
    per = max(1, len(parts) // args.events)
    rows: list[dict[str, Any]] = []
    for event in range(args.events):
        chunk = [line for part in parts[event * per:(event + 1) * per] for line in part]
        if event == args.events - 1:
            chunk += [line for part in parts[(event + 1) * per:] for line in part]
        main = write(folder, chunk, args.subagents)
        if mode == "full":
            shutil.rmtree(vault / ".vaultlcm" / "claude-code-resume", ignore_errors=True)
        cpu, line = run_event(main, vault)
        size = sum(p.stat().st_size for p in folder.rglob("*.jsonl"))
        state = sum(p.stat().st_size for p in (vault / ".vaultlcm" / "claude-code-resume").glob("*.state"))
        row = {"mode": mode, "event": event + 1, "session_mb": round(size / 1e6, 2), "cpu_s": round(cpu, 3),
               "state_bytes": state, "log": line.split(": ", 1)[-1]}
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=15.7, help="session size at the end (MB)")
    parser.add_argument("--events", type=int, default=50)
    parser.add_argument("--modes", nargs="+", default=["full", "new"], choices=["full", "new"])
    parser.add_argument("--subagents", action="store_true", help="subagent lines in their own files")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    args.copies = max(args.events, round(args.mb * 1e6 / FIXTURE.stat().st_size))
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-hook-"))
    work.mkdir(parents=True, exist_ok=True)
    results = {mode: grow(mode, args, work) for mode in args.modes}
    edge = min(5, max(1, args.events // 3))
    print(f"\n| mode | events | session (MB) | CPU/event, first {edge} (s) | CPU/event, last {edge} (s) | state (KB) |")
    print("|---|---|---|---|---|---|")
    summary = {}
    for mode, rows in results.items():
        start = statistics.mean(r["cpu_s"] for r in rows[:edge])
        end = statistics.mean(r["cpu_s"] for r in rows[-edge:])
        summary[mode] = {"start_cpu_s": round(start, 3), "end_cpu_s": round(end, 3),
                         "session_mb": rows[-1]["session_mb"], "state_bytes": rows[-1]["state_bytes"],
                         "whole_reads": sum("read whole" in r["log"] for r in rows)}
        print(f"| {mode} | {len(rows)} | {rows[-1]['session_mb']} | {start:.3f} | {end:.3f} | "
              f"{rows[-1]['state_bytes'] / 1000:.1f} |")
    if args.out:
        args.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "summary": summary,
                                        "events": results}, indent=1), encoding="utf-8")
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
