"""A minimal agent loop with the Anthropic SDK, using vaultlcm for its context.

    export ANTHROPIC_API_KEY=...
    python examples/anthropic_agent.py --vault agent-memory --conversation demo "What did we decide about retries?"

Each turn: the user's message is ingested, the context is assembled within the
budget (fresh tail + summaries), the model is called with vaultlcm's memory
tools (lcm_grep, lcm_describe, lcm_expand, lcm_expand_query), tool calls are
answered from the vault, every message is ingested, and after_turn schedules
compaction in the background. Run it again with another question: the agent
remembers, however long the conversation gets.
"""

from __future__ import annotations

import argparse
import os
import sys

from vaultlcm import Engine

SYSTEM = "You are a helpful engineering assistant. Be concise."


def run_turn(engine: Engine, client, model: str, user_text: str, budget: int, max_steps: int = 6) -> str:  # type: ignore[no-untyped-def]
    engine.ingest({"role": "user", "content": user_text})
    tools = engine.tool_definitions("anthropic")
    for _ in range(max_steps):
        ctx = engine.assemble(budget, format="anthropic")
        reply = client.messages.create(
            model=model,
            max_tokens=1024,
            system=SYSTEM + "\n\n" + ctx.system_prompt_addition,
            messages=ctx.messages,
            tools=tools,
        )
        blocks = [b.model_dump(exclude_none=True) for b in reply.content]
        engine.ingest({"role": "assistant", "content": blocks}, format="anthropic")
        calls = [b for b in blocks if b.get("type") == "tool_use"]
        if not calls:
            engine.after_turn(budget)
            return "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        results = [
            {"type": "tool_result", "tool_use_id": c["id"], "content": engine.call_tool(c["name"], c.get("input", {}))}
            for c in calls
        ]
        engine.ingest({"role": "user", "content": results}, format="anthropic")
    engine.after_turn(budget)
    return "(stopped after too many tool calls)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("question", nargs="+")
    ap.add_argument("--vault", default="agent-memory")
    ap.add_argument("--conversation", default="demo")
    ap.add_argument("--model", default=os.environ.get("VAULTLCM_EXAMPLE_MODEL", "claude-haiku-4-5"))
    ap.add_argument("--budget", type=int, default=40_000)
    args = ap.parse_args()
    if not os.environ.get("ANTHROPIC_API_KEY"):
        print("Error: ANTHROPIC_API_KEY is not set; export it to run this example", file=sys.stderr)
        return 1
    import anthropic

    client = anthropic.Anthropic()  # reads ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL
    engine = Engine(args.vault, args.conversation)
    try:
        engine.bootstrap()
        print(run_turn(engine, client, args.model, " ".join(args.question), args.budget))
    finally:
        engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
