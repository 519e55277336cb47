"""The protected tail: what every context shows verbatim, and how it is made to fit a budget.

The tail is the newest real user message (not a bare tool result) and everything
after it, and at least ``fresh_tail_count`` newest messages, reaching back to the
call of any tool result in it (:func:`find_tail`). When it exceeds the budget
(:func:`fit_tail`) it first shrinks to the newest turn and the messages before it
that fit; when the newest turn alone is too big, its oldest tool results become
stubs naming their id and size (the newest kept whole), then its oldest messages
after the user message are left out; a budget that cannot hold the newest user
message itself raises :class:`~vaultlcm.errors.BudgetTooSmallError`. Calls and
their results leave or stay together. Compaction uses :func:`find_tail` too: it
never summarizes the tail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from . import apiformat
from .catalog import MessageRow
from .errors import BudgetTooSmallError
from .messages import Message
from .msglog import MessageLog
from .threads import MAIN
from .tokens import count_tokens

#: How far back the newest real user message is looked for (catalog rows, newest first).
TAIL_SEARCH_LIMIT = 5000


class Sizes(Protocol):
    """What fitting the tail needs of a call's history: the decoded messages and their measured sizes."""

    messages: dict[str, Message]

    def measure(self, rows: Iterable[MessageRow], stubs: dict[str, dict[str, int]] | None = None) -> bool: ...

    def cost(self, row: MessageRow) -> int: ...


def is_user_turn(message: Message) -> bool:
    """A message a person (or a calling program) wrote, not a tool result carried in a user message."""
    return message.role == "user" and any(b.get("type") != "tool_result" for b in message.content)


@dataclass
class Tail:
    """The protected tail of one call: its rows, its anchor, the results shown as stubs and what was left out."""

    rows: list[MessageRow]  # oldest first
    anchor: MessageRow | None  # the newest real user message
    stubs: dict[str, dict[str, int]] = field(default_factory=dict)
    dropped: list[MessageRow] = field(default_factory=list)

    @property
    def start(self) -> int:
        return self.rows[0].seq if self.rows else 1 << 62


def _newest_rows(log: MessageLog, conv: str, before: int, limit: int) -> list[MessageRow]:
    ids = [r[0] for r in log.catalog.execute(
        "SELECT id FROM messages WHERE conv=? AND seq<? AND lane=? ORDER BY seq DESC LIMIT ?", (conv, before, MAIN, limit))]
    found = log.catalog.rows_by_ids(ids)
    return [found[i] for i in ids if i in found]


def find_tail(
    log: MessageLog, conv: str, count: int, read: Callable[[MessageRow], Message]
) -> tuple[list[MessageRow], MessageRow | None]:
    """The protected tail (oldest first) and its anchor, the newest real user message.

    The tail is the anchor and everything after it, and at least ``count`` newest
    messages, reaching back to the call of any tool result in it. Only catalog rows
    are walked; only the tail's messages and older rows with role ``user`` are read.
    """
    want = max(1, count)
    newest: list[MessageRow] = []  # newest first
    anchor: MessageRow | None = None
    before = 1 << 62
    page = max(64, want)
    while len(newest) < TAIL_SEARCH_LIMIT:
        rows = _newest_rows(log, conv, before, page)
        if not rows:
            break
        for row in rows:
            newest.append(row)
            if anchor is None and row.role == "user" and is_user_turn(read(row)):
                anchor = row
        before = rows[-1].seq
        if anchor is not None and len(newest) >= want:
            break
        page = min(page * 2, 1024)
    keep = want if anchor is None else max(want, newest.index(anchor) + 1)
    # Never open the tail with a tool result whose call lies before it: take the call in too.
    open_results: set[str] = set()
    for row in newest[:keep]:
        msg = read(row)
        open_results.update(msg.tool_result_ids)
        open_results.difference_update(msg.tool_call_ids)
    while open_results and keep < len(newest):
        msg = read(newest[keep])
        keep += 1
        open_results.difference_update(msg.tool_call_ids)
        open_results.update(msg.tool_result_ids)
    return list(reversed(newest[:keep])), anchor


def _answers(rows: list[MessageRow], i: int, hist: Sizes) -> list[int]:
    """Indices of the rows after ``i`` that hold results of the calls made in row ``i``."""
    calls = set(hist.messages[rows[i].id].tool_call_ids)
    return [j for j in range(i + 1, len(rows)) if calls & set(hist.messages[rows[j].id].tool_result_ids)]


def _group_start(rows: list[MessageRow], hist: Sizes) -> int:
    """Where the newest message and the calls its results answer begin."""
    start = len(rows) - 1
    open_results = set(hist.messages[rows[start].id].tool_result_ids)
    while open_results and start > 0:
        start -= 1
        msg = hist.messages[rows[start].id]
        open_results.difference_update(msg.tool_call_ids)
        open_results.update(msg.tool_result_ids)
    return start


def fit_tail(conv: str, budget: int, tail: Tail, hist: Sizes) -> int:
    """Make the tail fit ``budget`` (shrink, then stubs, then drop); returns its cost.

    Calls and their results leave or stay together, so the tail never opens with an
    answer whose question is gone.
    """
    hist.measure(tail.rows, tail.stubs)
    cost = sum(hist.cost(r) for r in tail.rows)
    if cost <= budget:
        return cost
    anchored = tail.anchor is not None and tail.anchor in tail.rows
    turn_at = tail.rows.index(tail.anchor) if anchored else _group_start(tail.rows, hist)  # type: ignore[arg-type]
    turn = tail.rows[turn_at:]
    turn_cost = sum(hist.cost(r) for r in turn)
    if turn_cost <= budget:
        # Keep the newest turn and as many messages before it as fit; the rest is history again.
        start = turn_at
        while start > 0 and turn_cost + hist.cost(tail.rows[start - 1]) <= budget:
            start -= 1
            turn_cost += hist.cost(tail.rows[start])
        while start < turn_at and hist.messages[tail.rows[start].id].tool_result_ids and not set(
                hist.messages[tail.rows[start].id].tool_result_ids) & {
                c for r in tail.rows[start:] for c in hist.messages[r.id].tool_call_ids}:
            turn_cost -= hist.cost(tail.rows[start])
            start += 1  # an answer whose call stays in history goes back to history with it
        tail.rows = tail.rows[start:]
        return turn_cost
    tail.rows = turn
    # The newest turn alone is too big: its oldest tool results become stubs, the newest last.
    results = [(row, b) for row in turn for b in hist.messages[row.id].content if b.get("type") == "tool_result"]
    stub_cost = count_tokens(apiformat.STUB_RESULT.format(tokens=10**6, message="m-" + "0" * 16, id="x" * 24))
    for row, block in results:
        size = apiformat.result_tokens(block)
        if size <= stub_cost or str(block.get("call_id")) in tail.stubs.get(row.id, {}):
            continue
        tail.stubs.setdefault(row.id, {})[str(block.get("call_id"))] = size
        hist.measure([row], tail.stubs)
        turn_cost = sum(hist.cost(r) for r in tail.rows)
        if turn_cost <= budget:
            return turn_cost
    # Still too big: leave out the oldest exchanges after the user message.
    first = 1 if anchored else 0
    while turn_cost > budget and first < len(tail.rows):
        group = [first, *_answers(tail.rows, first, hist)]
        if not anchored and len(group) == len(tail.rows):
            break
        for j in sorted(group, reverse=True):
            gone = tail.rows.pop(j)
            tail.dropped.append(gone)
            turn_cost -= hist.cost(gone)
    # What went from the front (no user message holds it) is older than the tail now starts:
    # history again, which plans it like any older message; listing it as left out too would
    # show it twice.
    tail.dropped = [r for r in tail.dropped if r.seq > tail.start]
    if turn_cost > budget:
        raise BudgetTooSmallError(conv, budget, tail.rows[0].id, turn_cost, anchored)
    return turn_cost
