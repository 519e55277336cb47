"""Summary quality: compression by depth, tool traffic and user words, copying, planted facts.

    python benchmarks/summary_quality.py                 # sample transcript + generated sessions
    python benchmarks/summary_quality.py --episodes 120 --json out.json

For each conversation, after ``compact --force`` with the default settings:

* **ratio by depth**: body tokens / source tokens of each note (median, max);
  the bar for leaves is a median of at most 0.35;
* **tool share / user share** of leaf bodies: tokens on Done lines, and on
  Asked lines (the user's own words);
* **8-gram repetition** of condensed notes: the share of a note's word
  8-grams that also occur in its children (median; bar: at most 0.30);
* **planted facts** (generated sessions, see ``sessions.py``): the share whose
  answer string is still in the leaf covering the fact (bar: 80%), in its
  depth-1 and depth-2 ancestors (bar at depth 2: 50%).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sessions import agent_session  # noqa: E402

from vaultlcm import Settings, Vault  # noqa: E402
from vaultlcm.dag import SummaryRow  # noqa: E402
from vaultlcm.sample import sample_transcript  # noqa: E402
from vaultlcm.summarizers.body import ASKED, DONE, parse_body  # noqa: E402
from vaultlcm.tokens import count_tokens  # noqa: E402

_WORD = re.compile(r"\w+|[^\w\s]")


def ngrams(text: str, n: int = 8) -> set[tuple[str, ...]]:
    words = _WORD.findall(text.lower())
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def repetition(note: str, children: list[str]) -> float:
    mine = ngrams(note)
    if not mine:
        return 0.0
    theirs: set[tuple[str, ...]] = set()
    for child in children:
        theirs |= ngrams(child)
    return len(mine & theirs) / len(mine)


def section_tokens(body: str, section: str) -> int:
    return sum(count_tokens(line.text) for line in parse_body(body).section(section))


def ancestor(vault: Vault, row: SummaryRow, depth: int) -> SummaryRow | None:
    node: SummaryRow | None = row
    while node is not None and node.depth < depth:
        node = vault.dag.get(node.parent) if node.parent and node.parent != "!invalid" else None
    return node if node is not None and node.depth == depth else None


def measure(vault: Vault, conv: str, facts: list[tuple[str, str, str]]) -> dict[str, Any]:
    rows = vault.dag.all(conv)
    by_depth: dict[int, list[float]] = {}
    for r in rows:
        by_depth.setdefault(r.depth, []).append(r.token_count / max(1, r.source_tokens))
    leaves = [r for r in rows if r.depth == 0]
    leaf_tokens = sum(r.token_count for r in leaves) or 1
    reps = [repetition(r.body, [c.body for c in vault.dag.children(r.id)]) for r in rows if r.depth > 0]
    out: dict[str, Any] = {
        "conversation": conv,
        "notes": len(rows),
        "ratio_by_depth": {d: {"n": len(v), "median": round(statistics.median(v), 3), "max": round(max(v), 3)}
                           for d, v in sorted(by_depth.items())},
        "tool_share": round(sum(section_tokens(r.body, DONE) for r in leaves) / leaf_tokens, 3),
        "user_share": round(sum(section_tokens(r.body, ASKED) for r in leaves) / leaf_tokens, 3),
        "repetition_median": round(statistics.median(reps), 3) if reps else None,
        "repetition_max": round(max(reps), 3) if reps else None,
    }
    if facts:
        kept: dict[int, list[bool]] = {0: [], 1: [], 2: []}
        by_kind: dict[str, list[bool]] = {}
        by_kind2: dict[str, list[bool]] = {}
        for mid, kind, answer in facts:
            msg = vault.catalog.get(mid)
            leaf = vault.dag.get(msg.covered) if msg is not None and msg.covered else None
            if leaf is None:
                continue  # still in the fresh tail: nothing to summarize
            for depth in (0, 1, 2):
                node = ancestor(vault, leaf, depth)
                if node is not None:
                    kept[depth].append(answer.lower() in node.body.lower())
            by_kind.setdefault(kind, []).append(answer.lower() in leaf.body.lower())
            top = ancestor(vault, leaf, 2)
            if top is not None:
                by_kind2.setdefault(kind, []).append(answer.lower() in top.body.lower())
        out["facts"] = {
            f"depth_{d}": {"n": len(v), "kept": round(sum(v) / len(v), 3) if v else None} for d, v in kept.items()
        }
        out["facts_leaf_by_kind"] = {k: round(sum(v) / len(v), 2) for k, v in sorted(by_kind.items())}
        out["facts_depth2_by_kind"] = {k: round(sum(v) / len(v), 2) for k, v in sorted(by_kind2.items())}
    return out


def run(root: Path, name: str, records: list[dict[str, Any]], planted: list[tuple[int, str, str]]) -> dict[str, Any]:
    with Vault.init(root / name, settings=Settings(), environ={}) as vault:
        data = "\n".join(json.dumps(r, ensure_ascii=False) for r in records).encode()
        ids = vault.ingest_bytes(name, data, format="native", source=name).ids
        vault.compact(name, force=True)
        facts = [(ids[i], kind, answer) for i, kind, answer in planted]
        result = measure(vault, name, facts)
        result["messages"] = len(ids)
        result["source_tokens"] = sum(r.tokens for r in vault.catalog.rows(name))
        return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, nargs="*", default=[40, 160], help="episodes per generated session")
    ap.add_argument("--seeds", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        sample = [json.loads(line) for line in sample_transcript().decode().splitlines() if line.strip()]
        results.append(run(root, "sample", sample, []))
        for seed in args.seeds:
            for episodes in args.episodes:
                records, planted = agent_session(seed, episodes)
                results.append(run(root, f"s{seed}-e{episodes}", records, planted))
    for r in results:
        line = (f"{r['conversation']:>12}  {r['messages']:5d} msgs {r['source_tokens']:7d} tok  "
                f"notes {r['notes']:3d}  ratio " + " ".join(f"d{d}={v['median']}" for d, v in r["ratio_by_depth"].items())
                + f"  tools {r['tool_share']}  user {r['user_share']}  rep8 {r['repetition_median']} (max {r['repetition_max']})")
        if "facts" in r:
            line += "  facts " + " ".join(f"{k}={v['kept']} (n={v['n']})" for k, v in r["facts"].items())
        print(line)
        if "facts_leaf_by_kind" in r:
            print(" " * 14 + "leaf facts by kind: " + ", ".join(f"{k} {v}" for k, v in r["facts_leaf_by_kind"].items()))
            print(" " * 14 + "depth-2 facts by kind: " + ", ".join(f"{k} {v}" for k, v in r["facts_depth2_by_kind"].items()))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
