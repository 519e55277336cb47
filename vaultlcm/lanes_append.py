"""The lanes after an append, from the rows around what was appended.

:func:`vaultlcm.threads.lanes` recomputes every lane of a conversation from all its
thread links: O(history) at every append, 0.28 s of a 0.71 s Claude Code hook event
at 9.6k lines. An append adds rows at the end of the conversation, and almost
always below a line that has no other child; then the new row's lane follows its
parent's and nothing else moves. :func:`lane_changes_after_append` works that out
from index lookups around each new row (the catalog's ``messages_thread_u`` and
``messages_thread_p`` indexes, on the ``u`` and ``p`` of the JSON in ``messages.thread``),
processing the new rows in ``seq`` order as if each were appended alone, and
answers None whenever a condition it relies on does not hold; the caller then
recomputes everything (:func:`full_lane_changes`). Both give exactly the lanes
:func:`~vaultlcm.threads.lanes` gives (tests/test_lanes_incremental.py).

It relies on the lanes before the append being those of the full recompute (the
catalog updates them in the transaction that inserts the rows), and, for each new
row, on:

* the new rows being the newest of the conversation (``seq``), each unique;
* no existing row naming the new row's uuid as its parent (a child that arrived
  before its parent would hang from a new place: recomputed);
* the new row's uuid being new in its format's tree, or its older copy kept (a
  later copy of a uuid is ignored by the rules, so it keeps its static lane);
* Claude Code: the parent's state read from the nearest line above it that can be
  abandoned (a ``main`` lane says it); a new alternative at a fork marks the
  branch it beats abandoned by walking that branch's children by index;
* pi: the parent being its tree's leaf (a ``main`` line with no other child, or,
  for a non-chat line, the newest pi entry of the conversation whose tree has a
  root); a branch from an older entry moves the active branch: recomputed.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Iterable
from typing import Any, NamedTuple

from .threads import ABANDONED, MAIN, ThreadRow, fork_losers, is_alternative, lanes, static_lane

#: How often each path was taken in this process: ``fast`` or ``full:<why>`` (read by the tests).
COUNTS: Counter[str] = Counter()

#: The rows :func:`vaultlcm.threads.lanes` reads: every message of a conversation with thread links or a lane.
FULL_SQL = ("SELECT id, seq, lane, slane, thread FROM messages "
            "WHERE conv=? AND (thread IS NOT NULL OR slane IS NOT NULL)")
_BY = ("SELECT id, seq, lane, slane, thread FROM messages "
       "WHERE conv=? AND json_valid(thread) AND json_extract(thread, '$.{}')=?")
_BY_U, _BY_P = _BY.format("u"), _BY.format("p")
#: A conversation holding a thread SQLite cannot read as JSON (a hand-edited log): its rows are not in the indexes.
_BAD_SQL = "SELECT 1 FROM messages WHERE conv=? AND thread IS NOT NULL AND NOT json_valid(thread) LIMIT 1"
#: Steps up through subagent and non-chat lines before giving up (a chain that long is recomputed).
MAX_CLIMB = 256
#: Rows looked at, newest first, for the newest pi entry before a new one.
PI_LOOKBACK = 32


class _Row(NamedTuple):
    id: str
    seq: int
    lane: int
    slane: str | None
    thread: Any

    def as_thread_row(self) -> ThreadRow:
        return ThreadRow(self.id, self.seq, self.slane, self.thread)


class _Fallback(Exception):
    """A condition of the fast path does not hold (the reason is the message)."""


def full_lane_changes(rows: Iterable[tuple[str, int, int, str | None, str | None]]) -> list[tuple[int, str]]:
    """``(lane, id)`` of every row of :data:`FULL_SQL` whose lane differs from the full recompute."""
    rows = list(rows)
    computed = lanes(ThreadRow(i, s, sl, json.loads(t) if t else None) for i, s, _lane, sl, t in rows)
    return [(computed[i], i) for i, _s, lane, _sl, _t in rows if computed[i] != lane]


def relane_after_append(db: sqlite3.Connection, conv: str, ids: list[str] | None) -> None:
    """Bring the lanes of ``conv`` up to date after the rows ``ids`` were appended (None: rows not all
    known, recompute), inside the caller's transaction: the lanes a later append builds on are never
    those of a half-recorded one."""
    changes = lane_changes_after_append(db, conv, ids) if ids is not None else None
    if ids is None:
        COUNTS["full:rows not all inserted"] += 1
    if changes is None:
        changes = full_lane_changes(db.execute(FULL_SQL, (conv,)))
    if changes:
        db.executemany("UPDATE messages SET lane=? WHERE id=?", changes)


def lane_changes_after_append(db: sqlite3.Connection, conv: str, ids: list[str]) -> list[tuple[int, str]] | None:
    """``(lane, id)`` of the rows whose lane the append of ``ids`` changed; None: recompute them all."""
    try:
        changes = _Append(db, conv).run(ids)
    except _Fallback as why:
        COUNTS[f"full:{why}"] += 1
        return None
    COUNTS["fast"] += 1
    return changes


def _usable(value: Any) -> bool:
    """A uuid the indexes find as itself (SQLite's JSON functions cut a string at a NUL)."""
    return isinstance(value, str) and "\x00" not in value


class _Append:
    """One append's lane update (see the module docstring)."""

    def __init__(self, db: sqlite3.Connection, conv: str) -> None:
        self.db, self.conv = db, conv
        self.lane: dict[str, int] = {}  # lanes decided here, by id (new rows and rows that moved)
        self.before: dict[str, int] = {}  # the lane each of those had in the table
        #: The new row being added: the tree is every row before it (new rows are taken in ``seq`` order).
        self.cut = 0

    def run(self, ids: list[str]) -> list[tuple[int, str]]:
        db, conv = self.db, self.conv
        if db.execute(_BAD_SQL, (conv,)).fetchone():
            raise _Fallback("unreadable thread")
        marks = ",".join("?" * len(ids))
        new = sorted((self._row(r) for r in db.execute(
            f"SELECT id, seq, lane, slane, thread FROM messages WHERE id IN ({marks})", ids)), key=lambda r: r.seq)
        if len(new) != len(ids):
            raise _Fallback("rows missing")
        newest = db.execute("SELECT id, seq FROM messages WHERE conv=? ORDER BY seq DESC LIMIT ?",
                            (conv, len(new) + 1)).fetchall()
        if ({i for i, _s in newest[: len(new)]} != set(ids) or len({r.seq for r in new}) != len(new)
                or (len(newest) > len(new) and newest[-1][1] >= new[0].seq)):
            raise _Fallback("not at the end")
        for row in new:
            self.before[row.id] = row.lane
            self.lane[row.id] = static_lane(row.slane)
            self.cut = row.seq
            self._add(row)
        return [(lane, i) for i, lane in self.lane.items() if lane != self.before[i]]

    # -- reading -----------------------------------------------------------------------------

    def _row(self, r: tuple[Any, ...]) -> _Row:
        thread = json.loads(r[4]) if r[4] else None
        if thread is not None and not isinstance(thread, dict):
            raise _Fallback("thread not an object")
        return _Row(r[0], int(r[1]), int(r[2]), r[3], thread)

    def _lane(self, row: _Row) -> int:
        return self.lane.get(row.id, row.lane)

    def _set(self, row: _Row, lane: int) -> None:
        self.before.setdefault(row.id, row.lane)
        self.lane[row.id] = lane

    def _find(self, sql: str, value: str, key: str, fmt: str) -> list[_Row]:
        """Rows of the format ``fmt`` in the tree (before :attr:`cut`) whose ``key`` is ``value``."""
        if not _usable(value):
            raise _Fallback("uuid the index cannot find")
        out = []
        for r in self.db.execute(sql, (self.conv, value)):
            row = self._row(r)
            t = row.thread
            if (row.seq < self.cut and isinstance(t.get("u"), str) and str(t.get("f")) == fmt
                    and t.get(key) == value):
                out.append(row)
        return sorted(out, key=lambda r: r.seq)

    def _node(self, uuid: Any, fmt: str) -> _Row | None:
        """The row a uuid names in its tree (its first copy), or None when it is not there."""
        if uuid is None:
            return None
        if not isinstance(uuid, str):
            raise _Fallback("parent not a string")
        found = self._find(_BY_U, uuid, "u", fmt)
        return found[0] if found else None

    def _children(self, node: _Row, fmt: str) -> list[_Row]:
        """The children of a tree node (each the first copy of its uuid), in ``seq`` order."""
        kids = self._find(_BY_P, node.thread["u"], "p", fmt)
        return [k for k in kids if getattr(self._node(k.thread["u"], fmt), "id", None) == k.id]

    # -- one new row ---------------------------------------------------------------------------

    def _add(self, row: _Row) -> None:
        t = row.thread
        if t is None or not isinstance(t.get("u"), str):
            return  # in no tree: its static lane
        fmt = str(t.get("f"))
        if fmt not in ("cc", "pi"):
            return
        uuid, parent_id = t["u"], t.get("p")
        if self._find(_BY_U, uuid, "u", fmt):
            return  # a later copy of a uuid: the rules ignore it, it keeps its static lane
        if parent_id == uuid:
            raise _Fallback("own parent")
        if self._find(_BY_P, uuid, "p", fmt):
            raise _Fallback("child before parent")
        parent = self._node(parent_id, fmt)
        if parent is None:
            return  # a root: nothing above it can abandon it
        if fmt == "cc":
            self._add_claude_code(row, parent)
        else:
            self._add_pi(row, parent)

    def _add_claude_code(self, row: _Row, parent: _Row) -> None:
        mine = static_lane(row.slane)
        alternative = is_alternative(row.as_thread_row())
        if mine != MAIN and not alternative:
            return  # neither abandoned (its static lane shows) nor beating anything
        dead = self._abandoned(parent)
        if alternative:
            kids = self._children(parent, "cc")
            old = {k.id for k in fork_losers([k.as_thread_row() for k in kids])}
            new = {k.id for k in fork_losers([k.as_thread_row() for k in [*kids, row]])}
            if not dead:
                for kid in kids:
                    if kid.id in new and kid.id not in old:
                        self._abandon_below(kid, parent)
            dead = dead or row.id in new
        if dead and mine == MAIN:
            self._set(row, ABANDONED)

    def _abandoned(self, node: _Row) -> bool:
        """Whether a Claude Code line is abandoned: a ``main`` line's lane says it; a subagent's or a
        non-chat line (never an alternative itself) is abandoned when the line above it is."""
        seen: set[str] = set()
        current: _Row | None = node
        while current is not None:
            if static_lane(current.slane) == MAIN:
                return self._lane(current) == ABANDONED
            if is_alternative(current.as_thread_row()):
                raise _Fallback("non-chat alternative")
            if current.id in seen or len(seen) >= MAX_CLIMB:
                raise _Fallback("long climb")
            seen.add(current.id)
            current = self._node(current.thread.get("p"), "cc")
        return False

    def _abandon_below(self, top: _Row, fork: _Row) -> None:
        """Mark a branch that just lost at ``fork`` abandoned: its ``main`` lines, walking its children."""
        stack, seen = [top], set()
        while stack:
            node = stack.pop()
            if node.id in seen:
                continue
            if node.id == fork.id:
                raise _Fallback("cycle")  # the fork is below the branch that lost there, and so is the new row
            seen.add(node.id)
            if static_lane(node.slane) == MAIN:
                if self._lane(node) == ABANDONED:
                    continue  # already below a loser: so is everything under it
                self._set(node, ABANDONED)
            stack.extend(self._children(node, "cc"))

    def _add_pi(self, row: _Row, parent: _Row) -> None:
        if self._children(parent, "pi"):
            raise _Fallback("pi branch")
        if static_lane(parent.slane) == MAIN:
            if self._lane(parent) != MAIN:
                raise _Fallback("pi under abandoned")
            return  # the parent was its tree's leaf: the new row extends the active branch
        newest = self._newest_pi()
        if newest is None or newest.id != parent.id:
            raise _Fallback("pi line not newest")
        # The newest entry is its tree's leaf when the tree has a root: the first ``main`` line above
        # it is then on the active branch, or there is none up to the root.
        seen: set[str] = set()
        current: _Row | None = parent
        while current is not None:
            if static_lane(current.slane) == MAIN:
                if self._lane(current) != MAIN:
                    raise _Fallback("pi under abandoned")
                return
            if current.id in seen or len(seen) >= MAX_CLIMB:
                raise _Fallback("long climb")
            seen.add(current.id)
            current = self._node(current.thread.get("p"), "pi")

    def _newest_pi(self) -> _Row | None:
        for r in self.db.execute(
                "SELECT id, seq, lane, slane, thread FROM messages "
                "WHERE conv=? AND seq<? ORDER BY seq DESC LIMIT ?", (self.conv, self.cut, PI_LOOKBACK)):
            if r[4]:
                row = self._row(r)
                if isinstance(row.thread.get("u"), str) and str(row.thread.get("f")) == "pi":
                    return row
        return None

