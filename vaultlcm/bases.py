"""Obsidian, beyond links: the vault's index note, its Bases tables and its property types.

``Conversations.md``
    the vault-root index: every conversation's home note with its message and
    summary counts and its date range, newest activity first. Derived: rewritten
    (only) when its text would change; a note of that name vaultlcm did not write
    (tag ``lcm/index``) is left alone.
``Conversations.base`` and ``Summaries.base``
    Obsidian Bases (a core plugin) tables: one row per conversation (its home
    note's properties), and every summary note by conversation, depth and time.
    Written when missing and never overwritten: Obsidian saves view changes
    (column widths, sorting) into the file, and those are a person's.
``.obsidian/types.json``
    the property types Obsidian (and so Bases) uses to sort and filter: counts
    are numbers, times are date-times. Only types the vault does not define yet
    are added; a person's choice wins.

The home note (:mod:`vaultlcm.home`) carries the typed properties the index
and ``Conversations.base`` read (:func:`conversation_properties`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .fsutil import atomic_write, read_file

if TYPE_CHECKING:
    from .catalog import Catalog
    from .layout import VaultLayout

INDEX_NOTE = "Conversations.md"
CONVERSATIONS_BASE = "Conversations.base"
SUMMARIES_BASE = "Summaries.base"
TYPES_FILE = ".obsidian/types.json"
INDEX_TAG = '  - "lcm/index"'

#: Properties vaultlcm writes, with the Obsidian type that sorts and filters them right.
PROPERTY_TYPES = {
    # home notes
    "messages": "number", "summaries": "number", "max_depth": "number", "days": "number",
    "first_at": "datetime", "last_at": "datetime",
    # summary notes
    "depth": "number", "descendant_count": "number", "source_count": "number", "source_tokens": "number",
    "token_count": "number", "earliest_at": "datetime", "latest_at": "datetime",
}


@dataclass(frozen=True)
class ConversationStats:
    name: str
    messages: int
    days: int
    first_at: str | None
    last_at: str | None
    summaries: int
    max_depth: int | None


def _second(at: str | None) -> str | None:
    """``2026-03-02T09:14:05.120Z`` as ``2026-03-02T09:14:05Z``: a YAML timestamp Obsidian reads as a date-time."""
    if not at:
        return None
    return at[:19] + "Z"


def conversation_stats(catalog: "Catalog", layout: "VaultLayout", conversations: list[str]) -> list[ConversationStats]:
    """Counts and time span of each conversation, at a cost that does not grow with its history.

    Messages are the highest position (``seq`` counts 1, 2, ...), the span runs from
    the first message to the last, days are the daily logs, and one pass over the
    summaries counts them for every conversation.
    """
    if not conversations:
        return []
    if len(conversations) == 1:
        sums = {r[0]: r[1:] for r in catalog.execute(
            "SELECT conv, COUNT(*), MAX(depth) FROM summaries WHERE conv=? GROUP BY conv", (conversations[0],))}
    else:
        sums = {r[0]: r[1:] for r in catalog.execute("SELECT conv, COUNT(*), MAX(depth) FROM summaries GROUP BY conv")}
    out = []
    for name in conversations:
        last = catalog.execute("SELECT seq, at FROM messages WHERE conv=? ORDER BY seq DESC LIMIT 1", (name,))
        first = catalog.execute("SELECT at FROM messages WHERE conv=? ORDER BY seq LIMIT 1", (name,))
        logs = layout.logs_dir(name)
        days = sum(1 for p in logs.glob("*.md")) if logs.is_dir() else 0
        nsum, depth = sums.get(name, (0, None))
        out.append(ConversationStats(name, last[0][0] if last else 0, days, _second(first[0][0] if first else None),
                                     _second(last[0][1] if last else None), nsum, depth))
    return out


def conversation_properties(stats: ConversationStats) -> list[str]:
    """The typed frontmatter lines of a home note (numbers bare, times as YAML timestamps)."""
    lines = [f"messages: {stats.messages}", f"summaries: {stats.summaries}"]
    if stats.max_depth is not None:
        lines.append(f"max_depth: {stats.max_depth}")
    lines.append(f"days: {stats.days}")
    if stats.first_at and stats.last_at:
        lines += [f"first_at: {stats.first_at}", f"last_at: {stats.last_at}"]
    return lines


def render_index(stats: list[ConversationStats], home_link: Any) -> str:
    """The vault-root index note: every conversation, newest activity first."""
    rows = sorted(stats, key=lambda s: (s.last_at or "", s.name), reverse=True)
    lines = [
        "---",
        f"conversations: {len(rows)}",
        f"messages: {sum(s.messages for s in rows)}",
        f"summaries: {sum(s.summaries for s in rows)}",
        "tags:",
        INDEX_TAG,
        "---",
        "",
        "# Conversations",
        "",
        "Every conversation in this vault, newest activity first (times in UTC). vaultlcm rewrites this note "
        f"when a conversation changes. Sortable tables: [[{CONVERSATIONS_BASE}]] and [[{SUMMARIES_BASE}]] "
        "(summaries by conversation, depth and time).",
        "",
    ]
    for s in rows:
        span = f" · {_minute(s.first_at)} → {_minute(s.last_at)}" if s.first_at and s.last_at else ""
        depth = f" (depth {s.max_depth})" if s.max_depth is not None else ""
        lines.append(f"- {home_link(s.name)} · {_count(s.messages, 'message')} · "
                     f"{_count(s.summaries, 'summary', 'summaries')}{depth}{span}")
    if not rows:
        lines.append("_No conversations yet._")
    return "\n".join(lines) + "\n"


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else many or one + 's'}"


def _minute(at: str | None) -> str:
    return (at or "")[:16].replace("T", " ")


CONVERSATIONS_BASE_TEXT = """\
# vaultlcm: one row per conversation (its home note). Created when missing, never overwritten:
# change it freely in Obsidian; delete it to get this default back.
filters:
  and:
    - file.hasTag("lcm/conversation")
properties:
  file.name:
    displayName: Conversation
  note.messages:
    displayName: Messages
  note.summaries:
    displayName: Summaries
  note.max_depth:
    displayName: Depth
  note.days:
    displayName: Days
  note.first_at:
    displayName: First message
  note.last_at:
    displayName: Last message
views:
  - type: table
    name: Conversations
    order:
      - file.name
      - note.messages
      - note.summaries
      - note.max_depth
      - note.days
      - note.first_at
      - note.last_at
    sort:
      - property: note.last_at
        direction: DESC
"""

SUMMARIES_BASE_TEXT = """\
# vaultlcm: every summary note, by conversation, depth and time. Created when missing, never
# overwritten: change it freely in Obsidian; delete it to get this default back.
filters:
  and:
    - file.hasTag("lcm/summary")
properties:
  file.name:
    displayName: Summary
  note.conversation:
    displayName: Conversation
  note.kind:
    displayName: Kind
  note.depth:
    displayName: Depth
  note.earliest_at:
    displayName: From
  note.latest_at:
    displayName: To
  note.descendant_count:
    displayName: Messages
  note.token_count:
    displayName: Tokens
  note.summarizer:
    displayName: Summarizer
views:
  - type: table
    name: By conversation
    groupBy:
      property: note.conversation
      direction: ASC
    order:
      - file.name
      - note.depth
      - note.kind
      - note.earliest_at
      - note.latest_at
      - note.descendant_count
      - note.token_count
      - note.summarizer
    sort:
      - property: note.depth
        direction: DESC
      - property: note.earliest_at
        direction: ASC
  - type: table
    name: By time
    order:
      - file.name
      - note.conversation
      - note.earliest_at
      - note.latest_at
      - note.depth
      - note.descendant_count
    sort:
      - property: note.earliest_at
        direction: DESC
  - type: table
    name: Top levels
    filters:
      and:
        - "note.depth >= 1"
    groupBy:
      property: note.conversation
      direction: ASC
    order:
      - file.name
      - note.depth
      - note.earliest_at
      - note.latest_at
      - note.descendant_count
    sort:
      - property: note.depth
        direction: DESC
"""


def write_views(layout: "VaultLayout", stats: list[ConversationStats], home_link: Any) -> list[str]:
    """Write the index note (if its text changed), the ``.base`` files and property types (if missing).

    Returns the vault-relative paths written.
    """
    written: list[str] = []
    root = layout.root
    index = layout.inside(root / INDEX_NOTE)
    if not index.exists() or INDEX_TAG in read_file(index).decode("utf-8", errors="replace"):
        # a note of that name that vaultlcm did not write (an existing Obsidian vault) is a person's
        if atomic_write(index, render_index(stats, home_link).encode("utf-8")):
            written.append(INDEX_NOTE)
    for name, text in ((CONVERSATIONS_BASE, CONVERSATIONS_BASE_TEXT), (SUMMARIES_BASE, SUMMARIES_BASE_TEXT)):
        path = layout.inside(root / name)
        if not path.exists():
            atomic_write(path, text.encode("utf-8"))
            written.append(name)
    if _merge_types(layout):
        written.append(TYPES_FILE)
    return written


def _merge_types(layout: "VaultLayout") -> bool:
    """Add vaultlcm's property types to ``.obsidian/types.json``, keeping every type already there."""
    path = layout.inside(layout.root / TYPES_FILE)
    data: dict[str, Any] = {"types": {}}
    if path.exists():
        try:
            data = json.loads(read_file(path).decode("utf-8"))
        except (OSError, ValueError):
            return False  # not ours to repair
        if not isinstance(data, dict) or not isinstance(data.setdefault("types", {}), dict):
            return False
    types = data["types"]
    missing = {k: v for k, v in PROPERTY_TYPES.items() if k not in types}
    if not missing:
        return False
    types.update(missing)
    return atomic_write(path, (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
