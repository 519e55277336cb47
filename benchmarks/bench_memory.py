"""Recall of planted facts: LCM against a sliding window with one running summary.

    python benchmarks/bench_memory.py --messages 5000 --facts 40 --budget 16000

A long synthetic conversation carries ``--facts`` planted facts (a ticket id and
a value each) at random positions. After ingesting and compacting:

* **in context**: the share of facts whose value appears in the context each
  approach hands the model at ``--budget`` tokens. LCM: ``assemble``. Baseline
  (the same run): the newest messages that fit half the budget, plus one
  extractive summary of everything older squeezed into the other half (a
  "sliding window + single summary" memory, with the same summarizer);
* **grep + expand**: the share of facts an agent recovers verbatim with the
  memory tools: ``grep`` the ticket id, then ``expand`` the covering summary
  (or read the message) and look for the value. The PRODUCT bar is 100%.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import dump_json, print_table, synthetic_messages  # noqa: E402

from vaultlcm import Vault  # noqa: E402
from vaultlcm.compaction import message_for_summary  # noqa: E402
from vaultlcm.messages import message_from_native  # noqa: E402
from vaultlcm.summarizers import ExtractiveSummarizer, SourceItem, SummaryRequest, summarize_with_escalation  # noqa: E402
from vaultlcm.tokens import count_tokens  # noqa: E402


def plant(messages: list[dict], facts: int, seed: int) -> list[tuple[int, str, str]]:
    rng = random.Random(seed)
    planted = []
    positions = sorted(rng.sample(range(10, len(messages) - 40), facts))
    for n, pos in enumerate(positions):
        ticket, value = f"FACT-{4000 + n}", f"port {20000 + rng.randrange(9999)} on host h{n}.internal"
        messages[pos] = {"role": "user", "timestamp": messages[pos]["timestamp"],
                         "content": f"Decided: for {ticket} we use {value}. Remember this."}
        planted.append((pos, ticket, value))
    return planted


def baseline_context(messages: list[dict], budget: int) -> str:
    """Newest messages within half the budget + one summary of all older ones in the other half."""
    texts = [message_for_summary(message_from_native(m)) for m in messages]
    window: list[str] = []
    used = 0
    i = len(texts)
    while i > 0 and used + count_tokens(texts[i - 1]) <= budget // 2:
        i -= 1
        used += count_tokens(texts[i])
        window.insert(0, texts[i])
    older = tuple(SourceItem(id=f"m{k}", kind="message", text=t) for k, t in enumerate(texts[:i]))
    summary = ""
    if older:
        req = SummaryRequest(conversation="b", depth=0, items=older, target_tokens=budget // 2)
        summary = summarize_with_escalation(ExtractiveSummarizer(max_input_tokens=10**9), req).text
    return summary + "\n" + "\n".join(window)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=5000)
    ap.add_argument("--facts", type=int, default=40)
    ap.add_argument("--budget", type=int, default=16_000)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args()
    msgs = list(synthetic_messages(args.messages, seed=args.seed))
    # The shared generator makes every fourth message a "Decided: ..." line; real chatter is
    # mostly not decisions, so tone those down to let planted decisions stand out as in life.
    for m in msgs:
        if isinstance(m["content"], str):
            m["content"] = m["content"].replace("Decided: ", "Looked at ").replace(". Next: update", ", then opened")
    planted = plant(msgs, args.facts, args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        with Vault.init(Path(tmp)) as v:
            v.ingest("mem", msgs)
            # As an agent would run it: compaction keeps the context under the soft threshold.
            v.compact("mem", target_tokens=int(args.budget * v.settings.context_threshold))
            ctx = v.assemble("mem", args.budget)
            lcm_text = json.dumps(ctx.messages, ensure_ascii=False)
            recovered = 0
            for _, ticket, value in planted:
                hits = v.grep(ticket, conversation="mem", limit=5)["hits"]
                found = False
                for h in hits:
                    target = h["id"] if h["kind"] == "message" else h["id"]
                    got = v.expand(target, max_tokens=4000)
                    if value in json.dumps(got, ensure_ascii=False):
                        found = True
                        break
                recovered += found
    base_text = baseline_context(msgs, args.budget)
    lcm_in = sum(value in lcm_text for _, _, value in planted)
    base_in = sum(value in base_text for _, _, value in planted)
    rows = [
        {"approach": "vaultlcm assemble", "facts_in_context": lcm_in, "share": lcm_in / len(planted), "tokens": ctx.estimated_tokens},
        {"approach": "sliding window + 1 summary", "facts_in_context": base_in, "share": base_in / len(planted), "tokens": count_tokens(base_text)},
        {"approach": "vaultlcm grep + expand", "facts_in_context": recovered, "share": recovered / len(planted), "tokens": 0},
    ]
    print(f"{args.messages:,} messages, {len(planted)} planted facts, budget {args.budget:,} tokens")
    print_table(rows)
    dump_json(args.json_out, rows)


if __name__ == "__main__":
    main()
