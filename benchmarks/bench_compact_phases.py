"""Where a compaction's CPU goes, phase by phase, and a replay of its summarizations that a loaded machine cannot blur.

    python benchmarks/bench_compact_phases.py /work/scale-builds/vault-10000 [--primed] [--record reqs.pkl]
    python benchmarks/bench_compact_phases.py --replay reqs.pkl
    valgrind --tool=callgrind --instr-atstart=no python benchmarks/bench_compact_phases.py --replay reqs.pkl --callgrind
    valgrind --tool=callgrind --instr-atstart=no python benchmarks/bench_compact_phases.py BUILD --primed --callgrind

The first form is bench_scale's compaction measure (``COMPACT_MORE``: ``--messages``
new messages of the same traffic appended to a fresh copy of a built vault, then
one ``Vault.compact`` with the offline summarizer, CPU time) with the CPU of each
phase beside the total: the summarizer, writing the notes (``Dag.write_summary``),
reading the messages (choosing the chunks reads them), sizing the requests,
``Assembler.prime`` and the views. The build itself is never written: the copy is.

``--primed`` first counts the cost of every summary of the copy, as a vault
compacted by the current code already holds them (each compaction stores the
costs of the notes it writes) and brings the redaction tally up to date (every
compaction keeps it; the builds have none, so the first compaction reads every
log): the steady state, which bench_scale's ``COMPACT_MORE`` measures too (it
reports that one-time catch-up on its own).
Without it, ``prime`` also counts the older summaries the next context meets,
once per vault: the first compaction of a vault older code compacted.

``--record`` keeps every summarization request of the compaction and its text;
``--replay`` runs them again in a new process, checks every text is the same and
prints the CPU. With ``--callgrind`` (run under ``valgrind --tool=callgrind
--instr-atstart=no``) instructions are counted around the replay loop only: a count
that does not move with the machine's load, to compare two versions of the digest.
Given a build, ``--callgrind`` counts the compaction alone the same way (everything
else runs uninstrumented): two code trees compared on the whole of it.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_scale import traffic  # noqa: E402

CONV = "agent"


def _timed(owner: Any, name: str, label: str, spent: Counter[str]) -> None:
    """Add the CPU of every call of ``owner.name`` to ``spent[label]`` (the phases nest: each is inclusive)."""
    inner: Callable[..., Any] = getattr(owner, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        c0 = time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[label] += time.process_time() - c0

    setattr(owner, name, timed)


def _callgrind(on: bool) -> None:
    """Switch callgrind's instrumentation of this process on or off (run under ``--instr-atstart=no``)."""
    subprocess.run(["callgrind_control", "-i", "on" if on else "off", str(os.getpid())], check=True, capture_output=True)


def measure(build: Path, messages: int, *, primed: bool, record: Path | None, work: Path,
            callgrind: bool = False, profile: Path | None = None) -> dict[str, Any]:
    """Compact ``messages`` new messages on a copy of ``build``: total CPU, rate and CPU per phase."""
    from vaultlcm import Vault, compaction
    from vaultlcm import dag_writes
    from vaultlcm.assembly import Assembler
    from vaultlcm.compaction import Compactor
    from vaultlcm.dag import Dag
    from vaultlcm.redaction_tally import RedactionTally

    root = work / "vault"
    shutil.copytree(build, root, symlinks=True)
    catch_up = None
    if primed:
        with Vault(root) as v:
            v.sync(CONV)
            ids = [r.id for r in v.dag.all(CONV)]
            c0 = time.process_time()
            v.assembler.prime(CONV, ids, v.settings.context_budget_tokens)
            tally = RedactionTally(v.layout)  # the tally every compaction keeps (the builds have none yet)
            tally.counts(CONV)
            tally.save()
            catch_up = {"summaries": len(ids), "cpu_s": time.process_time() - c0}
    spent: Counter[str] = Counter()
    for owner, name, label in ((Compactor, "_summarize", "summarize"), (Dag, "write_summary", "write notes"),
                               (Compactor, "_leaf_chunk", "choose chunks (reads messages)"),
                               (Compactor, "_request", "size requests"), (Assembler, "prime", "prime"),
                               (Vault, "refresh_views", "home and index notes"),
                               # inside "write notes": the note's text, its file, its catalog rows
                               (dag_writes, "render_note", "  render the note"),
                               (dag_writes, "atomic_write", "  the note's file"),
                               (Dag, "_store", "  its catalog rows"),
                               # a pass's new notes are written at its end (Dag.staged_notes): not inside
                               # write_summary, so counted on their own; files, then the rows' transaction
                               (Dag, "flush_staged", "write notes, staged (each pass's end)"),
                               (dag_writes, "write_new_files", "  the staged notes' files"),
                               (Vault, "sync", "first sync (checks every note)")):
        _timed(owner, name, label, spent)
    recorded: list[tuple[Any, str]] = []
    if record is not None:
        plain = compaction.summarize_with_escalation

        def keep(summarizer: Any, request: Any) -> Any:
            result = plain(summarizer, request)
            recorded.append((request, result.text))
            return result

        compaction.summarize_with_escalation = keep  # type: ignore[assignment]
    extra = traffic(messages, seed=99)
    for m in extra:
        m.pop("timestamp")  # appended now, after the history (as bench_scale's COMPACT_MORE)
    with Vault(root) as v:
        v.ingest(CONV, extra)
        spent.clear()
        profiler = cProfile.Profile(time.process_time) if profile is not None else None
        if callgrind:
            _callgrind(True)
        if profiler is not None:
            profiler.enable()
        c0 = time.process_time()
        report = v.compact(CONV, force=True)[0]
        cpu = time.process_time() - c0
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(str(profile))
        if callgrind:
            _callgrind(False)
    if record is not None:
        record.write_bytes(pickle.dumps(recorded))
    return {"messages": messages, "cpu_s": cpu, "msgs_per_cpu_s": messages / max(cpu, 1e-9),
            "notes": len(report.created), "primed": catch_up,
            "phases_cpu_s": {k: round(v, 3) for k, v in spent.most_common()}}


def replay(path: Path, *, callgrind: bool) -> dict[str, Any]:
    """Summarize every recorded request again: CPU, and how many texts came out different (must be 0)."""
    from vaultlcm.settings import Settings
    from vaultlcm.summarizers.base import summarize_with_escalation
    from vaultlcm.summarizers.digest import DigestSummarizer
    from vaultlcm.tokens import count_tokens

    count_tokens("load the table before counting anything")
    recorded = pickle.loads(path.read_bytes())
    summarizer = DigestSummarizer(Settings().summary_max_input_tokens)
    if callgrind:
        _callgrind(True)
    c0 = time.process_time()
    different = sum(summarize_with_escalation(summarizer, request).text != text for request, text in recorded)
    cpu = time.process_time() - c0
    if callgrind:
        _callgrind(False)
    return {"requests": len(recorded), "different": different, "cpu_s": cpu}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build", nargs="?", type=Path, help="a built vault (bench_scale --builds DIR: DIR/vault-N); only copied")
    ap.add_argument("--messages", type=int, default=3000, help="new messages to compact (bench_scale: 3,000)")
    ap.add_argument("--primed", action="store_true",
                    help="count every summary's cost first: the steady state, as bench_scale (see the module docstring)")
    ap.add_argument("--record", type=Path, help="keep the summarization requests and their texts here")
    ap.add_argument("--replay", type=Path, help="summarize the requests kept by --record again")
    ap.add_argument("--callgrind", action="store_true",
                    help="count instructions around the replay loop (--replay) or the compaction (a build) only")
    ap.add_argument("--profile", type=Path, help="write a cProfile of the compaction alone to this file (pstats)")
    ap.add_argument("--workdir", type=Path, help="where the copy goes (default: a temporary folder, removed after)")
    args = ap.parse_args()
    if args.replay is not None:
        print(json.dumps(replay(args.replay, callgrind=args.callgrind)))
        return 0
    if args.build is None or not args.build.is_dir():
        ap.error("give a built vault to copy, or --replay FILE")
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="compact-phases-", dir=args.workdir))
    else:
        work = Path(tempfile.mkdtemp(prefix="compact-phases-"))
    try:
        print(json.dumps(measure(args.build, args.messages, primed=args.primed, record=args.record, work=work,
                                 callgrind=args.callgrind, profile=args.profile)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
