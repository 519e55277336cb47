"""Run the recall benchmark: contexts vs baselines, the scripted agent, summary quality.

    python benchmarks/recall/run.py --sizes 32k 128k 512k --budgets 8000 16000 32000 --write-docs
    python benchmarks/recall/run.py --quick            # a tiny session, one budget: a smoke run

For each history size a session is generated (``sessions.py``; same seed,
same bytes), ingested into a fresh vault one day at a time and compacted with
``force``. Then, on that vault:

* ``contexts``: vaultlcm's ``assemble`` against the sliding window and the
  window plus one summary, at every budget (``context.py``);
* ``agent``: the scripted grep/expand agent over every question (``agent.py``);
* ``quality``: compression, make-up, repetition and facts kept by depth of the
  summary notes (``quality.py``), on the session's vault and on the shipped
  sample transcript built as ``vaultlcm demo`` builds it.

``--write-docs`` writes ``docs/RECALL.md`` and ``docs/recall.svg``; ``--json``
keeps every number (including per-question traces).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recall import context, quality, report, sessions
from recall.agent import run_agent

PARTS = ("contexts", "agent", "quality")
REPO = Path(__file__).resolve().parents[2]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run_size(size: str, seed: int, budgets: list[int], parts: set[str], workdir: Path) -> tuple[dict[str, Any], dict[str, Any] | None]:
    t0 = time.perf_counter()
    session = sessions.generate(size, seed)
    gen_s = time.perf_counter() - t0
    out: dict[str, Any] = {"messages": len(session.messages), "tokens": session.tokens, "days": len(session.by_day()),
                           "questions": len(session.qas), "kinds": {q.id: q.kind for q in session.qas},
                           "timings": {"generate_s": gen_s}}
    log(f"{size}: {len(session.messages):,} messages, {session.tokens:,} tokens over {out['days']} days, "
        f"{len(session.qas)} questions (generated in {gen_s:.1f}s)")
    built = context.build_vault(session, workdir / f"vault-{size}")
    out["timings"].update(ingest_s=built.ingest_s, compact_s=built.compact_s)
    log(f"{size}: ingested in {built.ingest_s:.1f}s, compacted in {built.compact_s:.1f}s")
    if "contexts" in parts:
        t0 = time.perf_counter()
        cells = context.run_contexts(session, built, budgets, workdir, log=log)
        out["contexts"] = [{"strategy": c.strategy, "budget": c.budget, "score": c.score, "tokens": c.tokens,
                            "seconds": c.seconds, "extra": c.extra, "found": c.found} for c in cells]
        out["timings"]["contexts_s"] = time.perf_counter() - t0
    q_report = None
    with built.open() as vault:
        if "agent" in parts:
            t0 = time.perf_counter()
            out["agent"] = run_agent(vault, session.qas)
            out["timings"]["agent_s"] = time.perf_counter() - t0
            a = out["agent"]
            log(f"{size}: agent found {a['found']}/{a['questions']}, latest first {a['latest_first']}/{a['updated_questions']} "
                f"({out['timings']['agent_s']:.1f}s, features {a['features']})")
        if "quality" in parts:
            t0 = time.perf_counter()
            plants = [(built.ids[p.index], p.needle) for p in session.plants]
            q_report = quality.report(vault, context.CONV, plants)
            out["timings"]["quality_s"] = time.perf_counter() - t0
    return out, q_report


def sample_quality(workdir: Path) -> dict[str, Any]:
    from vaultlcm.sample import SAMPLE_CONVERSATION, build_sample_vault

    root = workdir / "sample-vault"
    build_sample_vault(root)
    with context.Vault(root, environ={}) as vault:
        return quality.report(vault, SAMPLE_CONVERSATION)


def machine_note() -> str:
    return (f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
            "shared machine, timings are indicative only")


def write_docs(results: dict[str, Any], docs: Path) -> None:
    docs.mkdir(parents=True, exist_ok=True)
    if "--write-docs" not in results["command"]:  # rendered from a --json run: show how to regenerate the page
        results = {**results, "command": results["command"] + " --write-docs"}
    (docs / "recall.svg").write_text(report.svg_chart(results), encoding="utf-8")
    rows = [[s, f"{r['messages']:,}", f"{r['tokens']:,}", r["days"], r["questions"],
             *(f"{r['timings'][k]:.0f}s" if k in r["timings"] else "–" for k in ("ingest_s", "compact_s", "contexts_s", "agent_s"))]
            for s, r in results["sizes"].items()]
    sizes_table = report.table(["history", "messages", "tokens", "days", "questions", "ingest", "compact --force",
                                "contexts", "agent"], rows, markdown=True)
    feats: dict[str, bool] = next((r["agent"]["features"] for r in results["sizes"].values() if r.get("agent")), {})
    used = ", ".join(f"`{k.replace('_', ' ')}` {'yes' if v else 'no'}" for k, v in feats.items()) or "not run"
    text = f"""# Recall: does the context hold what the agent needs?

Generated by `{results['command']}` on {results['date']}
({results['machine']}), seed {results['seed']}:

{sizes_table}

The benchmark lives in `benchmarks/recall/` (standard library and vaultlcm only;
`tests/test_bench_recall.py` runs it end to end on a tiny session).

## What is measured

**Sessions.** `sessions.py` generates multi-day coding-agent sessions in plain
English: a user asks for work, the agent reads files, edits code, runs pytest
(failures included), greps, reads logs, deploys and commits; there is
chit-chat and there are decisions with reasons. Days follow working hours on
weekdays. Facts are planted across the whole history, inside ordinary messages
or tool results, and asked about as a person would ask (no question contains
its answer; the generator checks that each answer occurs only where it was
planted):

| kind | example question | answer |
|---|---|---|
| single | Who took over on-call for billing-service? | Greta |
| preference | Which library did I say to use for time zones? | zoneinfo |
| updated | When is the 4.2 release? | October 4 (stale: October 3) |
| before_after | What base image did the workers use before the upgrade? | python:3.10-slim |
| two_hop | Which commit fixed the bug from LEDG-512? | a commit hash, reachable only through the function the ticket names |
| counting | How many times did the routing-api deploy fail? | N events, each with its own build number |

**Score.** An answer counts when its exact string is in the text (case and
runs of whitespace aside, not glued to a longer word or number; dates also as
`Oct 4`). A counting question counts when every event's detail is there (so a
reader could count them) or when the count is stated next to the subject
("failed 6 times"). Rules in `benchmarks/recall/scoring.py`; they are the same
for every strategy.

**Strategies** (same messages, same budget): *vaultlcm* = ingest one call per
day, `compact(force=True)`, `assemble(conv, budget)` (on a copy of the
compacted vault per budget; "assemble wrote" says whether it changed any file);
*window* = the newest raw messages that fit, counted as vaultlcm counts a raw
message; *window+summary* = the newest messages in half the budget plus one
summary of everything older by the vault's own summarizer, with the rest of
the budget as its target.

**Scripted agent.** For each question: 1–3 content words from the question
(never the answer; the usual English stop words left out), `grep` with limit 10
(dropping the weakest words when nothing matches; `offset` paging when the API
has it), expand the 3 best hits within 4,000 tokens (every message hit for
counting), and for two-hop questions grep once more for identifiers found in
the first results (those written near an identifier the question names first,
verbatim messages before summaries, never one of the same form as the
question's own). "Latest first": for changed
values, the first thing the agent saw holding the latest value came no later
than the first holding the stale one. Newer recall options are used when the
API has them, detected from the signatures of `Vault.grep` / `Vault.expand`
(`offset`, `around`, `query`) and from the keys of a grep result (the raw
messages of `by_kind`, else `total` or `count`: a counting question is also
answered when that number equals the count). In this run: {used}.

**Reading the context table.** *budget use* is `estimated_tokens / budget`
of what `assemble` returned; *assemble wrote* says whether the call changed a
file of the vault (today it compacts further when the active context does not
fit); *summaries + raw* counts the summary blocks and raw messages in the
context.

**Summary quality.** Read from the notes' frontmatter and bodies: compression
(body tokens / source tokens) by depth, the share of leaf words copied verbatim
(5-word runs) from tool calls/results and from the user, the share of a
condensed note's 8-grams found in its children, and whether each planted
fragment's string survives in the leaf over its message and in that leaf's
ancestors.

## Results

![Answers present in the assembled context](recall.svg)

{report.all_tables(results, markdown=True)}

## Against the bars (the product contract, issues 8–10)

{chr(10).join(report.verdicts(results))}

## Reproduce

```
{results['command']}
```

Add `--json results.json` for every number, including per-question traces of
the agent; `--parts contexts agent quality` to run a part alone; `--quick` for
a tiny smoke run.
"""
    (docs / "RECALL.md").write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", nargs="+", default=["32k", "128k", "512k"], choices=list(sessions.SIZES))
    ap.add_argument("--budgets", nargs="+", type=int, default=[8000, 16000, 32000])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    ap.add_argument("--quick", action="store_true", help="a tiny session and one budget (a smoke run)")
    ap.add_argument("--no-sample", action="store_true", help="skip the sample-transcript quality report")
    ap.add_argument("--write-docs", action="store_true", help="write docs/RECALL.md and docs/recall.svg")
    ap.add_argument("--docs-dir", type=Path, default=REPO / "docs")
    ap.add_argument("--json", dest="json_out", type=Path, help="write every number to this JSON file")
    ap.add_argument("--workdir", type=Path, help="where to build vaults (default: a temporary folder)")
    ap.add_argument("--render", type=Path, metavar="JSON", help="print (and with --write-docs write) the results of an earlier --json run")
    args = ap.parse_args(argv)
    if args.render:
        loaded: dict[str, Any] = json.loads(args.render.read_text(encoding="utf-8"))
        print(report.all_tables(loaded))
        if args.write_docs:
            write_docs(loaded, args.docs_dir)
        return loaded
    if args.quick:
        args.sizes, args.budgets = ["tiny"], [8000]
    parts = set(args.parts)
    shown = ["--quick"] if args.quick else ["--sizes", *args.sizes, "--budgets", *map(str, args.budgets)]
    shown += ["--seed", str(args.seed)] + (["--parts", *args.parts] if parts != set(PARTS) else [])
    shown += (["--no-sample"] if args.no_sample else []) + (["--write-docs"] if args.write_docs else [])
    results: dict[str, Any] = {
        "command": "python benchmarks/recall/run.py " + " ".join(shlex.quote(a) for a in shown),
        "date": datetime.now(UTC).strftime("%Y-%m-%d"), "machine": machine_note(), "seed": args.seed,
        "sizes": {}, "quality": {},
    }
    with tempfile.TemporaryDirectory(prefix="recall-bench-", dir=args.workdir) as tmp:
        work = Path(tmp)
        for size in args.sizes:
            res, q = run_size(size, args.seed, args.budgets, parts, work)
            results["sizes"][size] = res
            if q is not None:
                results["quality"][f"session {size}"] = q
        if "quality" in parts and not args.no_sample:
            results["quality"]["sample transcript"] = sample_quality(work)
    print(report.all_tables(results))
    print("\n" + "\n".join(report.verdicts(results)))
    if args.json_out:
        args.json_out.write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
    if args.write_docs:
        write_docs(results, args.docs_dir)
        log(f"wrote {args.docs_dir / 'RECALL.md'} and {args.docs_dir / 'recall.svg'}")
    return results


if __name__ == "__main__":
    main()
