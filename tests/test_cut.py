"""The cut planner (``vaultlcm.cut``) on random DAGs: the heap-driven level unfolding makes exactly the
decisions of a scan for the deepest, newest candidate each time (the planner's first definition,
kept here as the oracle), and the plan keeps the properties the module docstring promises."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from vaultlcm import cut
from vaultlcm.catalog import MessageRow
from vaultlcm.cut import Item, _delta, plan_cut
from vaultlcm.dag import SummaryRow


def _summary(sid: str, kind: str, depth: int, first: int, last: int) -> SummaryRow:
    return SummaryRow(id=sid, conv="c", path=f"{sid}.md", size=0, mtime_ns=0, kind=kind, depth=depth,
                      earliest_at="", latest_at="", first_seq=first, last_seq=last, descendant_count=last - first + 1,
                      source_tokens=0, token_count=0, summarizer="", prompt="", level="", gen_hash="", body_hash="",
                      sources_hash="", sources_json="[]", body="", parent=None, stale=0)


class Tree:
    """A random DAG over messages 0..n-1: leaves over runs of messages, condensed nodes over runs of nodes."""

    def __init__(self, data: Any) -> None:
        n = data.draw(st.integers(1, 60), label="messages")
        self.children: dict[str, list[Item]] = {}
        level = [Item("message", s, s, data.draw(st.integers(4, 40)), 1,
                      message=MessageRow(id=f"m{s}", conv="c", seq=s, at="", role="user", tokens=1, path="", start=0,
                                         end=0, hash="")) for s in range(n)]
        depth = 0
        while len(level) > 1 and depth < 5:
            sizes = data.draw(st.lists(st.integers(1, 5), min_size=len(level), max_size=len(level)))
            out: list[Item] = []
            i = 0
            for size in sizes:
                if i >= len(level):
                    break
                run = level[i : i + size]
                i += size
                if len(run) == 1 and data.draw(st.booleans()):
                    out.append(run[0])  # left uncovered at this level, as the active context keeps some
                    continue
                sid = f"s{depth}_{run[0].first}"
                node = Item("summary", run[0].first, run[-1].last, data.draw(st.integers(10, 200)),
                            sum(r.count for r in run),
                            summary=_summary(sid, "leaf" if depth == 0 else "condensed", depth, run[0].first, run[-1].last))
                if depth > 0 and any(r.kind == "message" for r in run):
                    out.extend(run)  # a condensed node covers summaries only
                    continue
                self.children[sid] = list(run)
                out.append(node)
            level = out
            depth += 1
        self.base = level

    def source(self) -> Any:
        tree = self

        class Source:
            def children(self, item: Item) -> list[Item]:
                return [Item(**vars(k)) for k in tree.children.get(item.id, [])]

            def raw(self, item: Item, limit: int) -> list[Item] | None:
                out: list[Item] = []
                stack = [item]
                while stack:
                    it = stack.pop()
                    if it.kind == "message":
                        out.append(Item(**vars(it)))
                    else:
                        stack.extend(reversed(tree.children.get(it.id, [])))
                return out

        return Source()


def _unfold_levels_by_scan(items: list[Item], used: int, room: int, source: Any, run_cost: int) -> int:
    """The planner's first definition of step 3: scan the whole cut for the deepest, newest candidate."""
    skipped: set[str] = set()
    while True:
        candidates = [(it.depth or 0, it.first, k) for k, it in enumerate(items)
                      if it.summary is not None and it.summary.kind != "leaf" and it.id not in skipped]
        if not candidates:
            return used
        _, _, k = max(candidates)
        kids = source.children(items[k])
        delta = _delta(items, k, kids, run_cost) if kids else room + 1
        if kids and used + delta <= room:
            items[k : k + 1] = kids
            used += delta
        else:
            skipped.add(items[k].id)


def _shape(plan: cut.Cut) -> tuple[Any, ...]:
    return ([i.id for i in plan.items], [i.id for i in plan.omitted], plan.used, plan.verbatim)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_heap_unfolding_decides_as_the_scan_did(data: Any) -> None:
    tree = Tree(data)
    room = data.draw(st.integers(0, 3000), label="room")
    run_cost = data.draw(st.integers(0, 8), label="run_cost")
    new = plan_cut([Item(**vars(i)) for i in tree.base], room, tree.source(), run_cost=run_cost)
    heap_based = cut._unfold_levels
    cut._unfold_levels = _unfold_levels_by_scan  # type: ignore[assignment]
    try:
        old = plan_cut([Item(**vars(i)) for i in tree.base], room, tree.source(), run_cost=run_cost)
    finally:
        cut._unfold_levels = heap_based  # type: ignore[assignment]
    assert _shape(new) == _shape(old)
    # What the module promises: the cut fits, is in order and covers each message once.
    assert new.used <= room or not new.items
    spans = [(i.first, i.last) for i in [*new.omitted, *new.items]]
    assert sorted(spans) == spans
    covered = [s for a, b in spans for s in range(a, b + 1)]
    assert covered == sorted(set(covered))
