"""``grep``: find messages and summaries, with what an agent needs to reason about each hit.

Full text goes through the index (stemmed words, exact identifiers, phrases,
prefixes; see :mod:`vaultlcm.index.query`); ``regex`` scans the files newest
first under a time limit, so a pathological pattern cannot hang.

Each hit carries its time (ISO-8601 UTC), its role (messages), its conversation,
``covered_by`` (the nearest covering summary) and ``shown_as``/``shown_depth``
(the node that stands for it in the model's context; see
:class:`vaultlcm.recall.Placement`). Hits come sorted by ``relevance`` (ties
newest first), ``newest`` or ``oldest``; ``total`` counts every match so a
caller knows when to page on with ``offset``, and ``count`` asks for the
totals alone, by kind and by day.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import regex

from .errors import UsageError
from .index.base import SORTS
from .index.buffered import day_of
from .recall import ContextView, Placer, iso_time, scope_kind

if TYPE_CHECKING:
    from .vault import Vault

SNIPPET_CHARS = 200
_READ_BATCH = 256  # messages read per step of a regex scan


@dataclass
class Hit:
    """One grep result (see the module docstring for the fields)."""

    id: str
    kind: str
    conversation: str
    snippet: str
    at: float
    score: float
    role: str = ""
    depth: int = -1
    seq: int = 0
    covered_by: str | None = None
    shown_as: str | None = None
    shown_depth: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "kind": self.kind, "conversation": self.conversation, "snippet": self.snippet}
        if self.covered_by:
            d["covered_by"] = self.covered_by
        d["at"] = iso_time(self.at)
        if self.kind == "message":
            d["role"] = self.role
        else:
            d["depth"] = self.depth
        d["shown_as"] = self.shown_as
        if self.shown_depth is not None:
            d["shown_depth"] = self.shown_depth
        if self.score:
            d["score"] = round(self.score, 4)
        return d


def _plural(by_kind: dict[str, int]) -> dict[str, int]:
    """``{"message": n, "summary": m}`` as the JSON says it: ``{"messages": n, "summaries": m}``."""
    return {{"message": "messages", "summary": "summaries"}[k]: n for k, n in by_kind.items()}


@dataclass
class Counts:
    """Every match of a query: in all, by kind, by UTC day."""

    total: int
    messages: int
    summaries: int
    per_day: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        days = {day: _plural(kinds) for day, kinds in self.per_day.items()}
        return {"total": self.total, "messages": self.messages, "summaries": self.summaries, "per_day": days}


@dataclass
class GrepResult:
    """A page of hits and the number of matches in all."""

    hits: list[Hit]
    total: int
    offset: int
    limit: int
    sort: str
    partial: bool = False
    counts: Counts | None = None
    by_kind: dict[str, int] = field(default_factory=dict)  # the total split: {"messages": n, "summaries": m}

    def to_dict(self) -> dict[str, Any]:
        end = self.offset + len(self.hits)
        out: dict[str, Any] = {
            "hits": [h.to_dict() for h in self.hits],
            "total": self.total,
            "offset": self.offset,
            "limit": self.limit,
            "sort": self.sort,
            "next_offset": end if end < self.total else None,
            "by_kind": self.by_kind,
        }
        if self.partial:
            out["partial"] = True
        return out


def check_grep_args(scope: str, limit: int, offset: int, sort: str) -> str | None:
    """Validate the common arguments; returns the index kind of ``scope``."""
    kind = scope_kind(scope)
    if limit <= 0:
        raise UsageError("--limit must be at least 1")
    if offset < 0:
        raise UsageError("--offset must be 0 or more")
    if sort not in SORTS:
        raise UsageError(f"unknown sort {sort!r}; use {', '.join(SORTS)}")
    return kind


def grep(
    vault: "Vault",
    pattern: str,
    *,
    conversation: str | None = None,
    regex_mode: bool = False,
    scope: str = "both",
    since: float | None = None,
    before: float | None = None,
    limit: int = 20,
    offset: int = 0,
    sort: str = "relevance",
    count: bool = False,
    view: ContextView | None = None,
) -> GrepResult:
    """Hits ``offset`` .. ``offset + limit`` for ``pattern`` and the number of matches in all.

    With ``count``, no hits: ``counts`` holds the totals by kind and by day.
    ``view`` decides ``shown_as`` (default: the top-level covering node).
    """
    kind = check_grep_args(scope, limit, offset, sort)
    convs = [vault.require_conversation(conversation)] if conversation else None
    if regex_mode:
        return _regex_grep(vault, pattern, kind, convs, since, before, limit, offset, sort, count, view)
    index = vault.indexer.ready()
    for conv in convs or vault.conversations():
        vault.sync(conv)  # files changed since we last looked (appends, edits by people)
        vault.indexer.follow(conv)  # and into the index
    where: dict[str, Any] = dict(kind=kind, conversations=convs, since=since, before=before)
    if count:
        c = index.count_matches(pattern, per_day=True, **where)
        counts = Counts(c.total, c.by_kind.get("message", 0), c.by_kind.get("summary", 0), c.per_day)
        return GrepResult([], c.total, offset, limit, sort, counts=counts)
    found = index.search(pattern, limit=limit, offset=offset, sort=sort, **where)
    if offset == 0 and len(found) < limit:  # everything is on this page: no need to count
        total, by_kind = len(found), {k: sum(1 for h in found if h.kind == k) for k in ("message", "summary")}
    else:
        c = index.count_matches(pattern, **where)
        total, by_kind = c.total, c.by_kind
    hits = [Hit(h.id, h.kind, h.conversation, h.snippet, h.at, h.score, h.role, h.depth, h.seq) for h in found]
    _place(vault, hits, view)
    return GrepResult(hits, total, offset, limit, sort, by_kind=_plural(by_kind))


def _place(vault: "Vault", hits: list[Hit], view: ContextView | None) -> None:
    placer = Placer(vault, view)
    for h in hits:
        p = placer.place(h.id, h.kind)
        h.covered_by, h.shown_as, h.shown_depth = p.covered_by, p.shown_as, p.shown_depth


# -- regex ---------------------------------------------------------------------------


def compile_regex(pattern: str) -> regex.Pattern[str]:
    """``pattern`` compiled case-insensitively, or a one-line :class:`UsageError` saying why not."""
    shown = pattern if len(pattern) <= 60 else pattern[:57] + "..."
    try:
        return regex.compile(pattern, regex.IGNORECASE | regex.MULTILINE)
    except regex.error as exc:
        raise UsageError(f"invalid regular expression {shown!r}: {exc}") from None
    except RecursionError:  # thousands of nested groups overflow the compiler's stack
        raise UsageError(
            f"regular expression {shown!r} is nested too deeply to compile; simplify it"
        ) from None
    except (OverflowError, MemoryError, ValueError) as exc:
        raise UsageError(f"regular expression {shown!r} is too large to compile ({exc}); simplify it") from None


class _Stop(Exception):
    """The regex scan must stop: out of time, or its caller has gone."""


class _RegexScan:
    """A newest-first regex scan over files, run on a worker thread so its time limit holds.

    The ``regex`` module's own ``timeout`` overshoots (a 1 s limit ran 2-3 s on a
    catastrophic pattern), so the caller waits for the worker only until the
    deadline and takes the hits found so far. Searches release the GIL
    (``concurrent=True``), so the caller wakes on time; an abandoned search ends at
    the regex module's own timeout and its thread then exits without a trace.
    """

    def __init__(self, vault: "Vault", rx: regex.Pattern[str], convs: list[str], kind: str | None,
                 since: float | None, before: float | None, deadline: float) -> None:
        self.vault, self.rx, self.convs, self.kind = vault, rx, convs, kind
        self.since, self.before, self.deadline = since, before, deadline
        self.hits: list[Hit] = []
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._done = threading.Event()

    def run(self) -> tuple[list[Hit], bool]:
        """The hits found before the deadline, and whether the scan was complete."""
        worker = threading.Thread(target=self._work, name="vaultlcm-regex-scan", daemon=True)
        worker.start()
        complete = self._done.wait(timeout=max(0.0, self.deadline - time.monotonic()))
        self._stop.set()
        with self._lock:
            if self.error is not None:
                raise self.error
            return list(self.hits), complete

    def _work(self) -> None:
        try:
            for conv in self.convs:
                if self.kind in (None, "summary"):
                    self._summaries(conv)
                if self.kind in (None, "message"):
                    self._messages(conv)
        except _Stop:
            pass
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, who raises it
            with self._lock:
                self.error = exc
        self._done.set()

    def _search(self, text: str) -> regex.Match[str] | None:
        left = self.deadline - time.monotonic()
        if left <= 0 or self._stop.is_set():
            raise _Stop
        try:
            return self.rx.search(text, timeout=left, concurrent=True)
        except TimeoutError:
            raise _Stop from None
        except RecursionError:
            raise UsageError("the regular expression is nested too deeply to run; simplify it") from None

    def _add(self, hit: Hit) -> None:
        with self._lock:
            if self._stop.is_set():  # the caller has taken its hits
                raise _Stop
            self.hits.append(hit)

    def _summaries(self, conv: str) -> None:
        from .indexing import _ts

        for s in sorted(self.vault.dag.all(conv), key=lambda r: r.latest_at, reverse=True):
            if s.parent == "!invalid":
                continue
            at = _ts(s.latest_at)
            if _in_window(at, self.since, self.before) and (m := self._search(s.body)):
                self._add(Hit(s.id, "summary", conv, snip(s.body, m.start(), m.end()), at, 0.0,
                              depth=s.depth, seq=s.last_seq or 0))

    def _messages(self, conv: str) -> None:
        from .indexing import _ts

        catalog = self.vault.catalog
        below = None  # newest first, a batch at a time
        while True:
            if self._stop.is_set():
                raise _Stop
            sql = "SELECT id FROM messages WHERE conv=?" + (" AND seq<?" if below is not None else "")
            params = (conv,) if below is None else (conv, below)
            batch = [r[0] for r in catalog.execute(sql + f" ORDER BY seq DESC LIMIT {_READ_BATCH}", params)]
            by_id = catalog.rows_by_ids(batch)
            rows = [by_id[i] for i in batch if i in by_id]
            if not rows:
                return
            below = min(r.seq for r in rows)
            rows = [r for r in rows if _in_window(_ts(r.at), self.since, self.before)]
            for row, msg in self.vault.log.read_rows(rows):
                text = msg.searchable_text()
                if m := self._search(text):
                    self._add(Hit(row.id, "message", conv, snip(text, m.start(), m.end()), _ts(row.at), 0.0,
                                  role=row.role, seq=row.seq))


def _regex_grep(
    vault: "Vault", pattern: str, kind: str | None, convs: list[str] | None, since: float | None,
    before: float | None, limit: int, offset: int, sort: str, count: bool, view: ContextView | None,
) -> GrepResult:
    deadline = time.monotonic() + vault.settings.regex_timeout_seconds
    rx = compile_regex(pattern)
    names = convs or vault.conversations()
    for conv in names:
        vault.sync(conv)
    hits, complete = _RegexScan(vault, rx, names, kind, since, before, deadline).run()
    partial = not complete
    # Newest first is the scan's order and the default; "relevance" has no meaning for a regex.
    hits.sort(key=lambda h: (h.at, h.seq, h.id), reverse=sort != "oldest")
    if count:
        per_day: dict[str, dict[str, int]] = {}
        for h in sorted(hits, key=lambda h: h.at):
            day = per_day.setdefault(day_of(h.at), {})
            day[h.kind] = day.get(h.kind, 0) + 1
        n_msg = sum(1 for h in hits if h.kind == "message")
        counts = Counts(len(hits), n_msg, len(hits) - n_msg, per_day)
        return GrepResult([], len(hits), offset, limit, sort, partial=partial, counts=counts)
    page = hits[offset : offset + limit]
    _place(vault, page, view)
    by_kind = {k: sum(1 for h in hits if h.kind == k) for k in ("message", "summary")}
    return GrepResult(page, len(hits), offset, limit, sort, partial=partial, by_kind=_plural(by_kind))


def _in_window(at: float, since: float | None, before: float | None) -> bool:
    return (since is None or at >= since) and (before is None or at < before)


def snip(text: str, start: int, end: int, width: int = SNIPPET_CHARS) -> str:
    """About ``width`` characters of ``text`` around ``start:end``, on one line."""
    left = max(0, start - (width - (end - start)) // 2)
    s = text[left : left + max(width, end - start)]
    s = " ".join(s.split())
    return ("…" if left else "") + s + ("…" if left + width < len(text) else "")
