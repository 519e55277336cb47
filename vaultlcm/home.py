"""The home note of a conversation: ``conversations/<conv>/<conv>.md``.

Regenerated from derived state whenever it would change (never to record a time),
so git shows a diff only when the conversation itself changed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .vault import Vault


def render_home(vault: "Vault", conv: str) -> str:
    layout = vault.layout
    logs = sorted(p.stem for p in layout.logs_dir(conv).glob("*.md")) if layout.logs_dir(conv).is_dir() else []
    lines = [
        "---",
        f'conversation: "{conv}"',
        "tags:",
        "  - lcm/conversation",
        "---",
        "",
        f"# {conv}",
        "",
        "## Daily logs",
        "",
    ]
    rel_logs = layout.relative(layout.logs_dir(conv))
    lines.extend(f"- [[{rel_logs}/{day}|{day}]]" for day in logs)
    if not logs:
        lines.append("_No messages yet._")
    return "\n".join(lines) + "\n"
