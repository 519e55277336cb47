"""The cut: which nodes of the summary DAG stand for which part of history, for one budget.

A *cut* is a sequence of items in conversation order (summaries and raw
messages) such that every stored message lies under exactly one item. The
coarsest cut is the active context (root summaries and the messages no summary
covers); the finest is the raw history. :func:`plan_cut` starts from the
coarsest cut of the history before the protected tail and refines it:

1. when the whole history fits, it is all raw (the caller checks this first);
2. when even the coarsest cut does not fit (compaction is behind), its oldest
   items are left out (reported as omitted) until it does;
3. the deepest summaries are unfolded first, level by level, newest first
   within a level: a node is replaced by its children when they fit, else left
   as it is while older ones are tried. Every part of history is brought to one
   resolution before any part goes finer, and where a level cannot be
   completed, its newest part is the finer one;
4. then, from newest to oldest, a summary is replaced by its raw messages when
   they fit, else by its children, else left while older, smaller ones are
   tried: the history just before the tail turns raw first;
5. when compaction is behind, the budget left over goes to the newest messages
   of the newest leaf left out, as a window would show them.

The result satisfies what the property tests check: the cut fits ``room``;
every message lies under exactly one item shown or left out, and nothing is left
out unless the coarsest cut did not fit; either the cut is all raw, or no
summary left in it can be unfolded (into its children) within ``room``; and the
newest item left out would not fit.

Costs come from a :class:`Source`; items are plain data, so the planner is a
pure function of the DAG and the costs (no file is read or written here).
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from .catalog import MessageRow
from .dag import SummaryRow

#: The least a raw message can cost in a context (the per-message overhead).
MIN_MESSAGE_COST = 4


@dataclass
class Item:
    """One item of a cut: a summary node or a raw message."""

    kind: str  # "summary" | "message"
    first: int  # first seq covered
    last: int  # last seq covered
    cost: int
    count: int  # messages covered
    summary: SummaryRow | None = None
    message: MessageRow | None = None

    @property
    def id(self) -> str:
        return self.summary.id if self.summary is not None else self.message.id  # type: ignore[union-attr]

    @property
    def depth(self) -> int | None:
        """Depth of a summary; None for a raw message."""
        return self.summary.depth if self.summary is not None else None


class Source(Protocol):
    """What the planner needs to know about the DAG, each answer a bounded catalog read."""

    def children(self, item: Item) -> list[Item]:
        """The items one level below a summary (summaries, or the raw messages of a leaf)."""
        ...

    def raw(self, item: Item, limit: int) -> list[Item] | None:
        """Every raw message under a summary, in order; None when they clearly cost more than ``limit``."""
        ...


@dataclass
class Cut:
    """A planned cut of the history before the tail."""

    items: list[Item]
    omitted: list[Item] = field(default_factory=list)
    used: int = 0
    verbatim: bool = False


def summary_runs(kinds: Sequence[str | None]) -> int:
    """Number of maximal runs of summaries (each is rendered as one user message)."""
    return sum(1 for j, k in enumerate(kinds) if k == "summary" and (j == 0 or kinds[j - 1] != "summary"))


def cut_cost(items: Sequence[Item], run_cost: int) -> int:
    return sum(i.cost for i in items) + run_cost * summary_runs([i.kind for i in items])


def _delta(items: list[Item], i: int, new: list[Item], run_cost: int) -> int:
    prev = items[i - 1].kind if i > 0 else None
    nxt = items[i + 1].kind if i + 1 < len(items) else None
    runs = summary_runs([prev, *(n.kind for n in new), nxt]) - summary_runs([prev, items[i].kind, nxt])
    return sum(n.cost for n in new) - items[i].cost + run_cost * runs


def plan_cut(base: list[Item], room: int, source: Source, *, run_cost: int, order: str = "levels") -> Cut:
    """The finest cut of ``base`` within ``room`` tokens (see the module docstring).

    ``order`` ``"newest"`` skips step 3:
    depth first from the newest, the newest history gets the finest resolution
    and the oldest stays at the top of the DAG (kept for comparison; on the
    recall benchmark, levels hold more answers at every size).
    """
    items, omitted = _newest_that_fit(base, room, run_cost)
    used = cut_cost(items, run_cost)
    if order == "levels":
        used = _unfold_levels(items, used, room, source, run_cost)
    changed = True
    while changed:  # a second sweep only matters when an unfolding made the cut smaller
        changed = False
        i = len(items) - 1
        while i >= 0:
            item = items[i]
            if item.kind != "summary":
                i -= 1
                continue
            step = _try_unfold(items, i, used, room, source, run_cost)
            if step is None:
                i -= 1
                continue
            grown, delta = step
            used += delta
            changed = changed or delta < 0
            i += grown  # go on with the newest of the new items
    used = _partial_omitted(items, omitted, used, room, source, run_cost)
    return Cut(items, omitted, used, verbatim=not omitted and all(i.kind == "message" for i in items))


def _partial_omitted(items: list[Item], omitted: list[Item], used: int, room: int, source: Source, run_cost: int) -> int:
    """When the newest item left out is a leaf, show its newest messages that fit (as a window would)."""
    if not omitted or omitted[-1].summary is None or omitted[-1].summary.kind != "leaf":
        return used
    if items and items[0].first < omitted[-1].first:
        return used  # not the boundary: something older than it is shown
    kids = source.children(omitted[-1])
    shown: list[Item] = []
    for kid in reversed(kids):
        if used + cut_cost([kid, *shown, *items[:1]], run_cost) - cut_cost(items[:1], run_cost) > room:
            break
        shown.insert(0, kid)
    if not shown:
        return used
    used += cut_cost([*shown, *items[:1]], run_cost) - cut_cost(items[:1], run_cost)
    omitted.pop()
    omitted.extend(kids[: len(kids) - len(shown)])
    items[0:0] = shown
    return used


def _newest_that_fit(base: list[Item], room: int, run_cost: int) -> tuple[list[Item], list[Item]]:
    """The coarsest cut, or when even that does not fit (compaction is behind) its newest items that do."""
    used = 0
    start = len(base)
    while start > 0:
        item = base[start - 1]
        opens_run = item.kind == "summary" and not (start < len(base) and base[start].kind == "summary")
        add = item.cost + (run_cost if opens_run else 0)
        if used + add > room:
            break
        used += add
        start -= 1
    return list(base[start:]), list(base[:start])


def _try_unfold(items: list[Item], i: int, used: int, room: int, source: Source, run_cost: int) -> tuple[int, int] | None:
    """Replace the summary at ``i`` by its raw messages, else its children, if that fits.

    Returns how many items it grew by and the change in tokens, or None.
    """
    item = items[i]
    free = room - used + item.cost
    options: list[list[Item]] = []
    if item.summary is not None and item.summary.kind != "leaf" and item.count * MIN_MESSAGE_COST <= free:
        options.append(source.raw(item, free) or [])
    options.append(source.children(item))
    for option in options:
        if option:
            delta = _delta(items, i, option, run_cost)
            if used + delta <= room:
                items[i : i + 1] = option
                return len(option) - 1, delta
    return None


def _unfold_levels(items: list[Item], used: int, room: int, source: Source, run_cost: int) -> int:
    """Unfold condensed nodes deepest first, newest first within a depth, into their children only.

    The next node to try is taken from a heap (deepest, then newest first) rather than by scanning the
    cut for it each time, which made a plan quadratic in the items of the cut. Items are disjoint spans
    in conversation order, so a node's place in the cut is found by its first message (bisect), and no
    two candidates tie.
    """
    heap = [(-(it.depth or 0), -it.first, n, it) for n, it in enumerate(items) if _condensed(it)]
    heapq.heapify(heap)
    pushed = len(heap)
    while heap:
        *_, item = heapq.heappop(heap)
        k = bisect.bisect_left(items, item.first, key=lambda it: it.first)
        kids = source.children(item)
        delta = _delta(items, k, kids, run_cost) if kids else room + 1
        if kids and used + delta <= room:
            items[k : k + 1] = kids
            used += delta
            for kid in kids:
                if _condensed(kid):
                    heapq.heappush(heap, (-(kid.depth or 0), -kid.first, pushed, kid))
                    pushed += 1
    return used


def _condensed(item: Item) -> bool:
    return item.summary is not None and item.summary.kind != "leaf"


def can_unfold(items: list[Item], i: int, source: Source, room: int, run_cost: int) -> bool:
    """Whether the summary at ``i`` could be replaced by its children within ``room`` (for checks)."""
    return cut_cost(items, run_cost) + _delta(items, i, source.children(items[i]), run_cost) <= room
