"""The home note of a conversation: ``conversations/<conv>/<conv>.md``.

Written from derived state when the conversation gains a day or a summary and
after a file import, and only if its text changed: it records no times of its
own, so git shows a diff only when the conversation itself changed. It holds
the conversation's properties (typed: message and summary counts, depth, days,
first and last message time), the top-level summaries (the start of the
timeline), a Mermaid diagram of the upper DAG (nodes link to their notes), and
the daily logs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .vault import Vault

MAX_DIAGRAM_NODES = 120


def render_home(vault: "Vault", conv: str) -> str:
    from .bases import conversation_properties, conversation_stats

    layout = vault.layout
    logs_dir = layout.logs_dir(conv)
    logs = sorted(p.stem for p in logs_dir.glob("*.md")) if logs_dir.is_dir() else []
    summaries = vault.dag.all(conv)
    roots = [s for s in vault.dag.roots(conv)]
    stats = conversation_stats(vault.catalog, layout, [conv])
    lines = [
        "---",
        f'conversation: "{conv}"',
        # typed properties (numbers, date-times) for Bases and Dataview; see vaultlcm.bases
        *(conversation_properties(stats[0]) if stats else []),
        "tags:",
        '  - "lcm/conversation"',
        "---",
        "",
        f"# {conv}",
        "",
    ]
    if roots:
        lines += ["## Top-level summaries", ""]
        for r in roots:
            lines.append(
                f"- [[{r.id}]] · {r.kind}, depth {r.depth} · {r.earliest_at} → {r.latest_at} · "
                f"{r.descendant_count} messages"
            )
        lines.append("")
    upper = [s for s in summaries if s.depth >= 1]
    if upper:
        shown = sorted(upper, key=lambda s: (-s.depth, s.first_seq or 0, s.id))[:MAX_DIAGRAM_NODES]
        shown_ids = {s.id for s in shown}
        lines += ["## Summary DAG", "", "```mermaid", "graph TD"]
        leaf_counts: dict[str, int] = {}
        for s in sorted(shown, key=lambda s: (-s.depth, s.first_seq or 0, s.id)):
            for child in s.sources:
                if child in shown_ids:
                    lines.append(f"    {s.id} --> {child}")
                else:
                    leaf_counts[s.id] = leaf_counts.get(s.id, 0) + 1
        for sid in sorted(leaf_counts):
            lines.append(f'    {sid} --> {sid}_leaves(["{leaf_counts[sid]} lower nodes"])')
        lines.append(f"    class {','.join(sorted(shown_ids))} internal-link;")
        lines += ["```", ""]
        if len(upper) > len(shown):
            lines += [f"_Diagram shows the {len(shown)} highest of {len(upper)} condensed nodes._", ""]
    lines += ["## Daily logs", ""]
    rel_logs = layout.relative(logs_dir)
    lines.extend(f"- [[{rel_logs}/{day}|{day}]]" for day in logs)
    if not logs:
        lines.append("_No messages yet._")
    return "\n".join(lines) + "\n"
