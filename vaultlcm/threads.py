"""Which thread a message belongs to: the main thread, a subagent, an abandoned branch, or no chat at all.

Agent transcripts are trees. Claude Code links each line to its parent
(``parentUuid``; a compaction boundary through ``logicalParentUuid``); pi /
OpenClaw links entries by ``id``/``parentId``. Only the *active branch* is the
conversation the agent is having; what was rewound or edited away stays in the
vault, marked, and out of the model's context. The lane of a message is derived
(from the thread links each log entry carries), never stored, so a branch that a
later import shows to be abandoned is marked as such without rewriting a log.

Rules:

* **Claude Code**: at a fork (a line with several children), children that are
  *alternatives* of each other — several user prompts, or assistant lines of
  different API requests — leave every alternative but the last abandoned, with
  everything below it. Siblings that are not alternatives (parallel tool calls of
  one request, their results, progress lines) are all kept.
* **pi / OpenClaw**: the session's leaf is its newest entry; the active branch is
  the path from the leaf to the root; other entries are abandoned.
* Subagent lines (``isSidechain``) are their own lane; non-chat lines too.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

MAIN, SIDE, ABANDONED, LINE = 0, 1, 2, 3
LANE_NAMES = {MAIN: "main", SIDE: "subagent", ABANDONED: "abandoned", LINE: "line"}
_STATIC = {None: MAIN, "side": SIDE, "line": LINE}


@dataclass(frozen=True)
class ThreadRow:
    id: str
    seq: int
    lane: str | None  # the static lane written in the entry: None, "side" or "line"
    thread: dict[str, Any] | None


def static_lane(lane: str | None) -> int:
    return _STATIC.get(lane, MAIN)


def lanes(rows: Iterable[ThreadRow]) -> dict[str, int]:
    """The lane of every row (see the module docstring)."""
    rows = sorted(rows, key=lambda r: r.seq)
    out = {r.id: static_lane(r.lane) for r in rows}
    by_format: dict[str, list[ThreadRow]] = defaultdict(list)
    for r in rows:
        if r.thread and isinstance(r.thread.get("u"), str):
            by_format[str(r.thread.get("f"))].append(r)
    abandoned: set[str] = set()
    abandoned |= _claude_code_abandoned(by_format.get("cc", []))
    abandoned |= _pi_abandoned(by_format.get("pi", []))
    for r in rows:
        if r.id in abandoned and out[r.id] == MAIN:
            out[r.id] = ABANDONED
    return out


def _tree(rows: list[ThreadRow]) -> tuple[dict[str, ThreadRow], dict[str | None, list[ThreadRow]]]:
    by_uuid: dict[str, ThreadRow] = {}
    for r in rows:
        by_uuid.setdefault(r.thread["u"], r)  # type: ignore[index]  # a duplicated line keeps its first copy
    children: dict[str | None, list[ThreadRow]] = defaultdict(list)
    for r in by_uuid.values():
        parent = r.thread.get("p")  # type: ignore[union-attr]
        children[parent if parent in by_uuid else None].append(r)
    return by_uuid, children


def _descendants(roots: Iterable[ThreadRow], children: dict[str | None, list[ThreadRow]]) -> set[str]:
    out: set[str] = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if node.id in out:
            continue
        out.add(node.id)
        stack.extend(children.get(node.thread["u"], ()))  # type: ignore[index]
    return out


def _claude_code_abandoned(rows: list[ThreadRow]) -> set[str]:
    by_uuid, children = _tree(rows)
    losers: list[ThreadRow] = []
    for parent, kids in children.items():
        if parent is None or len(kids) < 2:
            continue
        losers.extend(fork_losers(kids))
    return _descendants(losers, children)


def is_alternative(row: ThreadRow) -> bool:
    """Whether a Claude Code row can be an alternative at a fork (a prompt or an assistant line, not a subagent's)."""
    return row.thread is not None and row.thread.get("k") in ("prompt", "asst") and row.lane != "side"


def fork_losers(kids: list[ThreadRow]) -> list[ThreadRow]:
    """The children of one Claude Code line (in ``seq`` order) that lose to a later alternative."""
    prompts = [k for k in kids if k.thread.get("k") == "prompt" and k.lane != "side"]  # type: ignore[union-attr]
    losers = prompts[:-1]
    requests: dict[str, list[ThreadRow]] = {}
    for k in kids:
        if k.thread.get("k") == "asst" and k.lane != "side":  # type: ignore[union-attr]
            requests.setdefault(str(k.thread.get("r") or k.id), []).append(k)  # type: ignore[union-attr]
    for group in list(requests.values())[:-1]:
        losers.extend(group)
    return losers


def _pi_abandoned(rows: list[ThreadRow]) -> set[str]:
    by_uuid, children = _tree(rows)
    root_of: dict[str, str] = {}
    for root in children.get(None, []):
        for rid in _descendants([root], children):
            root_of[rid] = root.id
    leaf_of: dict[str, ThreadRow] = {}
    for r in rows:
        tree = root_of.get(r.id)
        if tree is not None and (tree not in leaf_of or r.seq > leaf_of[tree].seq):
            leaf_of[tree] = r
    active: set[str] = set()
    for leaf in leaf_of.values():
        node: ThreadRow | None = leaf
        while node is not None and node.id not in active:
            active.add(node.id)
            parent = node.thread.get("p")  # type: ignore[union-attr]
            node = by_uuid.get(parent) if isinstance(parent, str) else None
    return {r.id for r in by_uuid.values() if r.id not in active}
