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

When both kinds are searched, a relevance page ranks messages and summaries
each on its own and gives every third place from the second to a summary,
ordered by its best line (:mod:`vaultlcm.ranking`: BM25 over whole notes buries
a note under any short message with the words, yet a note's line is where a
fact sits with its old value marked).

Every word must match. When fewer than :data:`RELAX_BELOW` raw messages have
every word (sorted by relevance), they all count as equally relevant and come
newest first (a newer statement supersedes an older one; BM25 alone put a
short stale line above the longer one that changed it), then the summaries
with every word. For a query of several words grep does not stop there:
after them come the raw messages with *some* of the plain words (the most
words first, then by relevance; identifiers, numbers and quoted phrases still
must match), and the result says so (``relaxed``, ``some_words``: how many of
those follow, and each hit's ``matched`` words). A question's words rarely all
sit in one message ("database host staging" vs "staging points at
pg-stage-5"). Summaries are left out of that last part: a long one holds some
of any few words by chance, and the messages it restates are searched
themselves. ``total``,
``by_kind`` and ``count`` always count the documents with every word; paging
runs on through the relaxed hits. Common queries (many documents with every
word) never pay for the second search.

When nothing has the words as written (not even some of them), a plain word
naming a doer is tried as the prefix of its root (``formatter`` -> ``format*``,
:func:`vaultlcm.index.query.related_forms`): the stemmer keeps such endings, so
"which formatter" never met "format with ruff". The result names the query it
answered (``related_forms``); ``count`` always counts the words as written.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import regex

from .errors import UsageError
from .fsutil import read_file
from .index.base import SORTS
from .index.buffered import day_of
from .index.query import related_forms
from .messages import epoch_seconds
from .ranking import RERANK, interleave, plan_page, rank_summaries, ranked_page
from .recall import ContextView, Placer, iso_time, scope_kind

if TYPE_CHECKING:
    from .history import History

SNIPPET_CHARS = 200
#: When fewer raw messages than this have every word of a query, the hits with some of its words follow.
RELAX_BELOW = 10
#: ... unless the words are so common that ranking every document with one of them would cost more
#: than a search should (``schema rollback`` where half the messages say "schema"): about this many.
RELAX_MAX_DOCS = 5_000
_READ_BATCH = 256  # messages read per step of a regex scan
# Where each entry starts (its metadata line names it), and what in a metadata line says the entry's
# text is not in the callout as plain lines (escaped, in a payload file, terminal codes taken out).
_ENTRY_PREFIX = '<!-- lcm:{"id":"'
#: What in a pattern can match a line break or a line boundary (the scan then strips callout prefixes).
_LINE_TOKENS = ("^", "$", "\\n", "\\s", "[^", "\\W", "\\D", "\\S", "\\Z", "\\A", "\\r", "(?s", "(?m", "\\R",
                "\\v", "\\h", "\\p", "\\P", "\\X", "[[:")
_SPECIAL = re.compile(r'"(?:esc|file|crlf|h)",\d|"ansi":|"xf":')


#: What in a pattern sees past the text it is matched in (where a string starts or ends, what comes
#: before or after a position, where the last match ended): a scan of a whole file, where an entry's
#: text sits between other lines, or of bodies joined together, could miss a match such a pattern makes
#: in one text alone, so each text is then searched by itself.
_WHOLE_TEXT_TOKENS = ("\\A", "\\Z", "\\z", "\\G", "\\K", "(?<=", "(?<!", "(?=", "(?!")
#: What separates two summary bodies in a joined search (see :meth:`_RegexScan._summaries`).
_BODY_JOIN = "\n\n"
_NEEDLE = "\n" + _ENTRY_PREFIX


def searches_whole_texts(rx: regex.Pattern[str]) -> bool:
    """Whether ``rx`` must be searched in each text by itself (see :data:`_WHOLE_TEXT_TOKENS`), not in a
    file or a run of bodies that holds the text among others. Tokens are looked for in the source as
    written: an escaped backslash before one only costs the slower search."""
    return bool(rx.flags & regex.REVERSE) or any(tok in rx.pattern for tok in _WHOLE_TEXT_TOKENS)


def _entry_starts(view: str) -> list[int]:
    starts = [0] if view.startswith(_ENTRY_PREFIX) else []
    pos = view.find(_NEEDLE)
    while pos >= 0:
        starts.append(pos + 1)
        pos = view.find(_NEEDLE, pos + 1)
    return starts


def _entry_at(view: str, pos: int) -> tuple[int, int]:
    """Start and end of the entry holding ``pos`` in a log's text (start -1: before the first entry).

    What ``bisect`` over :func:`_entry_starts` would say, from the lines around ``pos`` alone: a scan
    whose pattern falls in a few entries of a long day need not find where every entry starts.
    """
    before = view.rfind(_NEEDLE, 0, pos - 1 + len(_NEEDLE)) if pos > 0 else -1
    start = before + 1 if before >= 0 else (0 if view.startswith(_ENTRY_PREFIX) else -1)
    after = view.find(_NEEDLE, pos)
    return start, (after + 1 if after >= 0 else len(view))


def _entry_id(view: str, start: int) -> str:
    begin = start + len(_ENTRY_PREFIX)
    return view[begin : view.index('"', begin)]


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
    matched: tuple[str, ...] | None = None  # a relaxed hit: the query's words it has

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
        if self.matched is not None:
            d["matched"] = list(self.matched)
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
    #: False when a regex scan stopped once the page was full: ``total`` is then a lower bound.
    total_exact: bool = True
    #: Few documents have every word: they come first (``total`` of them), then ``some_words``
    #: documents with some of the words (most words first).
    relaxed: bool = False
    some_words: int = 0
    #: Nothing matched the words as written: the hits match this query of related forms instead
    #: (``formatter`` -> ``format*``; see :func:`vaultlcm.index.query.related_forms`).
    related_forms: str | None = None

    def to_dict(self) -> dict[str, Any]:
        end = self.offset + len(self.hits)
        more = end < self.total + self.some_words or (not self.total_exact and len(self.hits) == self.limit)
        out: dict[str, Any] = {
            "hits": [h.to_dict() for h in self.hits],
            "total": self.total,
            "offset": self.offset,
            "limit": self.limit,
            "sort": self.sort,
            "next_offset": end if more else None,
            "by_kind": self.by_kind,
        }
        if not self.total_exact:
            out["total_exact"] = False
        if self.partial:
            out["partial"] = True
        if self.relaxed:
            out["relaxed"] = True
            out["some_words"] = self.some_words
        if self.related_forms is not None:
            out["related_forms"] = self.related_forms
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
    history: "History",
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
    convs = [history.require_conversation(conversation)] if conversation else None
    if regex_mode:
        return _regex_grep(history, pattern, kind, convs, since, before, limit, offset, sort, count, view)
    index = history.indexer.ready()
    for conv in convs or history.conversations():
        history.sync(conv)  # files changed since we last looked (appends, edits by people)
        history.indexer.follow(conv)  # and into the index
    where: dict[str, Any] = dict(kind=kind, conversations=convs, since=since, before=before)
    if count:
        c = index.count_matches(pattern, per_day=True, **where)
        counts = Counts(c.total, c.by_kind.get("message", 0), c.by_kind.get("summary", 0), c.per_day)
        return GrepResult([], c.total, offset, limit, sort, counts=counts)
    found, total, by_kind, some = _search(history, index, pattern, kind, where, limit, offset, sort)
    forms = None
    if not total and not some and (alt := related_forms(pattern)) is not None:
        # Nothing holds the words as written; a doer's name ("formatter") often stands where the
        # text has the verb ("format with ruff"), which the stemmer does not join. Said so in the result.
        other = _search(history, index, alt, kind, where, limit, offset, sort)
        _, other_total, _, other_some = other
        if other_total or other_some:
            (found, total, by_kind, some), pattern, forms = other, alt, alt
    every = _labels(pattern) if some else None  # the hits from the search with every word say so
    hits = [Hit(h.id, h.kind, h.conversation, h.snippet, h.at, h.score, h.role, h.depth, h.seq,
                matched=(h.matched if h.matched is not None else every) if some else None) for h in found]
    _place(history, hits, view)
    return GrepResult(hits, total, offset, limit, sort, by_kind=_plural(by_kind), relaxed=some > 0, some_words=some,
                      related_forms=forms)


def _search(history: "History", index: Any, pattern: str, kind: str | None, where: dict[str, Any], limit: int,
            offset: int, sort: str) -> tuple[list[Any], int, dict[str, int], int]:
    """One page of an index search: its hits, the total with every word, that total by kind, and how
    many hits with some of the words follow (see :func:`_few`)."""
    if sort == "relevance" and kind is None:  # both kinds: each ranked on its own, then mixed
        c = index.count_matches(pattern, **where)
        total, by_kind = c.total, {k: c.by_kind.get(k, 0) for k in ("message", "summary")}
        if by_kind["message"] >= RELAX_BELOW and by_kind["summary"]:
            found = _mixed(history, index, pattern, offset, limit, by_kind, where)
        else:
            found = index.search(pattern, limit=limit, offset=offset, sort=sort, **where)
    else:
        found = index.search(pattern, limit=limit, offset=offset, sort=sort, **where)
        total, by_kind = _totals(index, pattern, found, offset, limit, where, "all")
    some = 0
    if sort == "relevance" and kind != "summary" and by_kind["message"] < RELAX_BELOW:
        found, some = _few(index, pattern, found, total, by_kind, offset, limit, where)
    return found, total, by_kind, some


Fetch = Callable[[int, int], list[Any]]


def _few(index: Any, pattern: str, found: list[Any], total: int, by_kind: dict[str, int], offset: int, limit: int,
         where: dict[str, Any]) -> tuple[list[Any], int]:
    """The page when few raw messages have every word, and how many raw messages have some of them.

    The order: the raw messages with every word, newest first (each states what the
    question is about, and a newer statement supersedes an older one; BM25 would put
    a short stale line above a longer one that changed it), joined, for a query of
    three words or more, by the messages with all of them but one when those are few
    too ("access tokens live" and "the access token lifetime went from ..."); then the
    summaries with every word, by relevance; then, for a query of several words, the
    raw messages with some of them (most words first, then by relevance). Only raw
    messages: a long summary holds some of any few words by chance, and the messages
    it restates are searched themselves.
    """
    n_msg, n_sum = by_kind["message"], by_kind["summary"]
    msg_where = {**where, "kind": "message"}

    def search(**kw: Any) -> Fetch:
        return lambda start, n: index.search(pattern, limit=n, offset=start, **{**where, **kw})

    if offset == 0 and len(found) == total:  # every match with all the words is on this page
        first = [h for h in found if h.kind == "message"]
        sums: Fetch = lambda start, n: [h for h in found if h.kind == "summary"][start : start + n]  # noqa: E731
    else:
        first = index.search(pattern, limit=n_msg, **msg_where) if n_msg else []
        sums = search(kind="summary")
    clauses = len(_labels(pattern))
    relaxable = _relaxable(pattern) and index.some_words_docs(pattern) <= RELAX_MAX_DOCS
    room = RELAX_BELOW - n_msg
    # One match="any" search serves this page (its cost is ranking every document with one
    # of the words, whatever the number kept): the messages with every word rank first.
    pool = index.search(pattern, limit=room + offset + limit, offset=n_msg, match="any", **msg_where) \
        if relaxable else []

    def anyword(start: int, n: int) -> list[Any]:
        if start + n <= len(pool) or len(pool) < room + offset + limit:  # the pool holds all there is
            return pool[start : start + n]
        return index.search(pattern, limit=n, offset=n_msg + start, match="any", **msg_where)

    if relaxable and clauses >= 3:  # the messages with all the words but one rank right after
        near = [h for h in pool[:room] if len(h.matched or ()) == clauses - 1]
        if len(near) < room:
            first += near
    first.sort(key=lambda h: (h.at, h.seq, h.id), reverse=True)
    skip = len(first)  # the messages already listed: under match="any" they rank first
    segments: list[tuple[int, Fetch]] = [(len(first), lambda start, n: first[start : start + n]), (n_sum, sums)]
    if relaxable:
        segments.append((-1, lambda start, n: anyword(skip - n_msg + start, n)))
    page: list[Any] = []
    start = offset
    for size, fetch in segments:
        if 0 <= size <= start:
            start -= size
            continue
        want = limit - len(page) if size < 0 else min(limit - len(page), size - start)
        got = fetch(start, want) if want > 0 else []
        page += got
        if size < 0 and start == 0 and len(got) < want:  # the open-ended last part ends on this page
            return page, len(first) - n_msg + len(got)
        start = 0
    if not relaxable:
        return page, 0
    return page, index.count_matches(pattern, match="any", **msg_where).total - n_msg


def _mixed(history: "History", index: Any, pattern: str, offset: int, limit: int, by_kind: dict[str, int],
           where: dict[str, Any]) -> list[Any]:
    """A relevance page of both kinds, each ranked on its own, summaries by their best line (:mod:`.ranking`)."""
    from .index.query import parse_query

    plan = plan_page(offset, limit, by_kind["message"], by_kind["summary"])
    n_msg, n_sum = plan.count("message"), plan.count("summary")
    msgs = index.search(pattern, limit=n_msg, offset=plan.message_start, **{**where, "kind": "message"}) if n_msg else []
    sums: list[Any] = []
    if n_sum:
        end = plan.summary_start + n_sum
        if plan.summary_start >= RERANK:  # past the reranked head the index's order stands
            sums = index.search(pattern, limit=n_sum, offset=plan.summary_start, **{**where, "kind": "summary"})
        else:
            pq = parse_query(pattern)
            # No snippets from the index: it would cut one from each of these long notes, and only
            # the page's few are shown, cut around their best line.
            head = index.search(pattern, limit=max(end, RERANK), snippets=False, **{**where, "kind": "summary"})
            bodies = history.dag.bodies([h.id for h in head[:RERANK]])
            ranked = rank_summaries(head, [bodies.get(h.id) for h in head[:RERANK]], pq)[plan.summary_start:end]
            bodies.update(history.dag.bodies([r.hit.id for r in ranked if r.hit.id not in bodies]))
            sums = ranked_page(ranked, bodies, pq)
    return interleave(plan, msgs, sums)


def _labels(pattern: str) -> tuple[str, ...]:
    from .index.query import parse_query

    return tuple(p.label for p in parse_query(pattern).parts)


def _totals(index: Any, pattern: str, found: list[Any], offset: int, limit: int, where: dict[str, Any],
            match: str) -> tuple[int, dict[str, int]]:
    """How many documents match in all, and by kind (counted only when the page does not tell)."""
    if offset == 0 and len(found) < limit:  # everything is on this page: no need to count
        return len(found), {k: sum(1 for h in found if h.kind == k) for k in ("message", "summary")}
    c = index.count_matches(pattern, match=match, **where)
    return c.total, dict(c.by_kind)


def _relaxable(pattern: str) -> bool:
    """Whether some of a query's clauses may match where all do not: several clauses, one a plain word."""
    from .index.query import parse_query

    pq = parse_query(pattern)
    return len(pq.clauses) > 1 and any(not p.required for p in pq.parts)


def _place(history: "History", hits: list[Hit], view: ContextView | None) -> None:
    placer = Placer(history, view)
    placer.prefetch([(h.id, h.kind) for h in hits])
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


#: The most threads of one regex scan that search at once (a count: two over the logs, one over the summaries).
_SCAN_THREADS = 3


class _RegexScan:
    """A newest-first regex scan over files, run on a worker thread so its time limit holds.

    The ``regex`` module's own ``timeout`` overshoots (a 1 s limit ran 2-3 s on a
    catastrophic pattern), so the caller waits for the worker only until the
    deadline and takes the hits found so far. Searches release the GIL
    (``concurrent=True``), so the caller wakes on time; an abandoned search ends at
    the regex module's own timeout and its thread then exits without a trace.
    """

    def __init__(self, history: "History", rx: regex.Pattern[str], convs: list[str], kind: str | None,
                 since: float | None, before: float | None, deadline: float, *, need: int | None = None,
                 oldest_first: bool = False) -> None:
        self.history, self.rx, self.convs, self.kind = history, rx, convs, kind
        self.since, self.before, self.deadline = since, before, deadline
        self.need, self.oldest_first = need, oldest_first
        self.stopped_early = False
        #: A search met the time limit: what was found is partial, however the threads ended.
        self.timed_out = False
        source = rx.pattern
        self.line_aware = any(tok in source for tok in _LINE_TOKENS)
        self.whole_text = searches_whole_texts(rx)
        self.hits: list[Hit] = []
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._done = threading.Event()

    def run(self) -> tuple[list[Hit], bool]:
        """The hits found before the deadline, and whether the scan was complete."""
        worker = threading.Thread(target=self._work, name="vaultlcm-regex-scan", daemon=True)
        worker.start()
        done = self._done.wait(timeout=max(0.0, self.deadline - time.monotonic()))
        self._stop.set()
        with self._lock:
            if self.error is not None:
                raise self.error
            # A worker that met the limit a moment before this wait did is done, not complete.
            return list(self.hits), done and not self.timed_out

    def _work(self) -> None:
        self._guarded(self._scan)
        self._done.set()

    def _guarded(self, step: Callable[[], None]) -> None:
        """Run ``step``; a stop ends it quietly, any other error is kept for the caller to raise."""
        try:
            step()
        except _Stop:
            pass
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, who raises it
            with self._lock:
                if self.error is None:
                    self.error = exc
            self._stop.set()

    def _scan(self) -> None:
        summaries = list(self.convs) if self.kind in (None, "summary") else []
        side: threading.Thread | None = None
        if self.need is None and summaries:
            # Counting every match, the summaries need nothing from the messages' hits: they are
            # searched on a second thread meanwhile (the searches and SQLite's reads let go of the GIL).
            def every_summary() -> None:
                for conv in summaries:
                    self._summaries(conv)

            side = threading.Thread(target=self._guarded, name="vaultlcm-regex-scan-summaries", daemon=True,
                                    args=(every_summary,))
            side.start()
        helper: threading.Thread | None = None
        try:
            # Messages first: their hits bound how far back the summaries must be read (see _summaries).
            for conv in self.convs:
                if self.kind not in (None, "message"):
                    continue
                paths = self.history.catalog.log_paths(conv, newest_first=not self.oldest_first)
                if self.need is None and len(paths) > 1:
                    # Counting every match, the order of the logs does not matter: every other one is
                    # scanned on a thread of its own (reads, SQLite and the pattern's searches let go of
                    # the GIL), as the summaries are.
                    helper = threading.Thread(target=self._guarded, name="vaultlcm-regex-scan-logs", daemon=True,
                                              args=(functools.partial(self._messages, conv, paths[1::2]),))
                    helper.start()
                    self._messages(conv, paths[::2])
                    helper.join()
                    helper = None
                else:
                    self._messages(conv, paths)
        except BaseException:
            self._stop.set()  # the other threads end too
            raise
        finally:
            for thread in (helper, side):
                if thread is not None:
                    thread.join()
        if side is None:
            for conv in summaries:
                self._summaries(conv)

    def _search(self, text: str, pos: int = 0) -> regex.Match[str] | None:
        """The first match in ``text`` from ``pos`` on, within what is left of the time limit."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            self.timed_out = True
        if self.timed_out or self._stop.is_set():
            raise _Stop
        try:
            # The regex module's timeout counts the CPU time of every thread of the process (two threads
            # searching at once: a 5 s timeout fired after 2.5 s), and up to three scan threads search at
            # once. The wall deadline is what run() holds; this only ends a search run() has given up on.
            return self.rx.search(text, pos, timeout=left * _SCAN_THREADS, concurrent=True)
        except TimeoutError:
            self.timed_out = True
            raise _Stop from None
        except RecursionError:
            raise UsageError("the regular expression is nested too deeply to run; simplify it") from None

    def _add(self, hit: Hit) -> None:
        with self._lock:
            if self._stop.is_set():  # the caller has taken its hits
                raise _Stop
            self.hits.append(hit)

    def _summaries(self, conv: str) -> None:
        """Summaries newest first (oldest, with that sort), a page at a time: with a page to fill,
        only as many are read as it takes.

        A page's bodies are searched joined (one search for each body that matches, as in a log),
        then each body found is searched alone: that match is the one reported, so joining never
        adds a hit, and a match that runs from one body into the next cannot hide one in the next
        (the search goes on where the next body starts). A pattern that sees past its text
        (:func:`searches_whole_texts`) searches every body alone.
        """
        found_here = 0
        after: tuple[str, str] | None = None
        bound = self._page_bound()
        windowed = self.since is not None or self.before is not None
        while rows := self.history.dag.by_time(conv, oldest_first=self.oldest_first, after=after):
            after = (rows[-1][2], rows[-1][0])
            if bound is not None or windowed:
                # A time per row only where one is asked of every row.
                ats = [epoch_seconds(r[2]) for r in rows]
                last = len(rows)
                if bound is not None:
                    for i, at in enumerate(ats):
                        if at > bound if self.oldest_first else at < bound:
                            # Older (newer) than a full page of hits already found: no summary from here
                            # on can be on the page.
                            last = i
                            break
                keep = [i for i in range(last) if _in_window(ats[i], self.since, self.before)]
            else:
                ats, last, keep = None, len(rows), list(range(len(rows)))
            for i in self._bodies_matching([rows[i][1] for i in keep]):
                k = keep[i]
                sid, body, latest_at, depth, last_seq = rows[k]
                m = self._search(body)
                if m is None:
                    continue
                at = ats[k] if ats is not None else epoch_seconds(latest_at)
                self._add(Hit(sid, "summary", conv, snip(body, m.start(), m.end()), at, 0.0,
                              depth=depth, seq=last_seq or 0))
                found_here += 1
                if self.need is not None and found_here >= self.need:
                    self.stopped_early = True  # the rest are older (newer, oldest first): not on this page
                    return
            if last < len(rows):
                self.stopped_early = True
                return

    def _bodies_matching(self, bodies: list[str]) -> list[int]:
        """Indexes in ``bodies``, in order, of those the pattern may match (a superset; each is searched
        alone after)."""
        if self.whole_text or len(bodies) < 2:
            return list(range(len(bodies)))
        starts = list(itertools.accumulate((len(b) + len(_BODY_JOIN) for b in bodies[:-1]), initial=0))

        def body_at(pos: int) -> tuple[int, int | None]:
            i = bisect.bisect_right(starts, pos) - 1
            return i, starts[i + 1] if i + 1 < len(starts) else None

        return list(self._units_matching(_BODY_JOIN.join(bodies), body_at))

    def _units_matching(self, text: str, unit_at: Callable[[int], tuple[int, int | None]]) -> Iterator[int]:
        """The units of ``text`` (the entries of a log, the bodies of a page) where the pattern matches, in
        order, one search each: ``unit_at(pos)`` names the unit holding ``pos`` and where the next one
        starts (None: it is the last). After a match the search goes on where the next unit starts, so a
        match that runs on into the next unit cannot hide one that starts there (as in ``finditer``), and
        a pattern found all over a unit costs one search."""
        pos: int | None = 0
        while pos is not None and (m := self._search(text, pos)) is not None:
            unit, pos = unit_at(m.start())
            yield unit

    def _page_bound(self) -> float | None:
        """The time of the ``need``-th hit in page order among those found so far (None: no full page yet)."""
        if self.need is None:
            return None
        with self._lock:
            times = sorted((h.at for h in self.hits), reverse=not self.oldest_first)
        return times[self.need - 1] if len(times) >= self.need else None

    def _messages(self, conv: str, paths: list[str]) -> None:
        """Scan whole log files (``paths``, newest day first), verifying only the entries where the pattern fell.

        Per file: one decode, the metadata lines swapped for a marker, the callout
        prefixes taken off, and one pass of the pattern over what is left (C speed,
        like ripgrep would do); each match is mapped to its entry and confirmed on the
        decoded message. Entries whose text is not written as plain lines (escaped,
        in a payload file, with terminal codes taken out) are always decoded and
        checked, so nothing is missed. The scan stops once it has ``need`` hits: the
        files not read hold only older messages.
        """
        catalog = self.history.catalog
        layout = self.history.layout
        found_here = 0
        checked: set[str] = set()  # folders already checked to hold no symlink on the way from the root
        windowed = self.since is not None or self.before is not None
        for rel in paths:
            if self._stop.is_set():
                raise _Stop
            folder, _, name = rel.rpartition("/")
            if windowed and not _day_in_window(name[:10], self.since, self.before):
                continue
            try:
                if folder not in checked:
                    layout.inside(layout.root / folder)
                    checked.add(folder)
                data = read_file(layout.root / rel)  # the file itself is opened without following a symlink
            except OSError:
                continue
            candidates = self._file_candidates(data.decode("utf-8", errors="replace"))
            rows = [r for r in catalog.rows_by_ids(sorted(candidates)).values()
                    if r.conv == conv and _in_window(epoch_seconds(r.at), self.since, self.before)]
            rows.sort(key=lambda r: (r.at, r.seq), reverse=not self.oldest_first)
            step = _READ_BATCH if self.need is None else max(8, min(_READ_BATCH, self.need))
            for i in range(0, len(rows), step):
                for row, msg in self._readable(rows[i : i + step]):
                    text = msg.searchable_text()
                    if m := self._search(text):
                        self._add(Hit(row.id, "message", conv, snip(text, m.start(), m.end()), epoch_seconds(row.at), 0.0,
                                      role=row.role, seq=row.seq))
                        found_here += 1
                if self.need is not None and found_here >= self.need:
                    # Every later row and file holds older messages (newer, scanning oldest first).
                    self.stopped_early = rel != paths[-1] or i + step < len(rows)
                    return

    def _file_candidates(self, text: str) -> set[str]:
        """Ids of the entries of one log where the pattern matches, plus those that must be decoded to tell."""
        # A pattern that can see a line break or a line start must not see the callout's "> "
        # prefixes; any other pattern matches the same text with them or without.
        view = text.replace("\n> ", "\n").replace("\n>\n", "\n\n") if self.line_aware else text
        if self.whole_text:
            # Where a text starts or ends, or what lies around it, is not what the file shows:
            # every entry is decoded and searched alone.
            return {_entry_id(view, start) for start in _entry_starts(view)}
        found: set[str] = set()
        for special in _SPECIAL.finditer(view):
            start, _end = _entry_at(view, special.start())
            if start >= 0:
                found.add(_entry_id(view, start))

        def entry_at(pos: int) -> tuple[int, int | None]:
            start, end = _entry_at(view, pos)
            return start, end if end < len(view) else None

        found.update(_entry_id(view, start) for start in self._units_matching(view, entry_at) if start >= 0)
        return found

    def _readable(self, rows: list[Any]) -> list[tuple[Any, Any]]:
        from .errors import VaultLCMError

        try:
            return self.history.log.read_rows(rows)
        except VaultLCMError:  # a damaged entry is skipped (doctor names it), the rest is searched
            out = []
            for row in rows:
                try:
                    out.extend(self.history.log.read_rows([row]))
                except VaultLCMError:
                    pass
            return out


def _regex_grep(
    history: "History", pattern: str, kind: str | None, convs: list[str] | None, since: float | None,
    before: float | None, limit: int, offset: int, sort: str, count: bool, view: ContextView | None,
) -> GrepResult:
    rx = compile_regex(pattern)
    names = convs or history.conversations()
    for conv in names:
        history.sync(conv)
    # The limit is the scan's (the setting says so): a new process's first sync of a large vault
    # (a stat of every note, 0.7 s at 1M messages) is not taken out of it.
    deadline = time.monotonic() + history.settings.regex_timeout_seconds
    # Without counting, the scan may stop once the page is full: later files only hold
    # older messages (with several conversations, every one is scanned that far).
    need = None if count else offset + limit
    scan = _RegexScan(history, rx, names, kind, since, before, deadline, need=need, oldest_first=sort == "oldest")
    hits, complete = scan.run()
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
    _place(history, page, view)
    by_kind = {k: sum(1 for h in hits if h.kind == k) for k in ("message", "summary")}
    return GrepResult(page, len(hits), offset, limit, sort, partial=partial, by_kind=_plural(by_kind),
                      total_exact=not scan.stopped_early)


def _in_window(at: float, since: float | None, before: float | None) -> bool:
    return (since is None or at >= since) and (before is None or at < before)


def _day_in_window(day: str, since: float | None, before: float | None) -> bool:
    """Whether a UTC day (a log's name) can hold messages between ``since`` and ``before``."""
    from datetime import UTC, datetime

    try:
        start = datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return True
    return (since is None or start + 86_400 > since) and (before is None or start < before)


def snip(text: str, start: int, end: int, width: int = SNIPPET_CHARS) -> str:
    """About ``width`` characters of ``text`` around ``start:end``, on one line."""
    left = max(0, start - (width - (end - start)) // 2)
    s = text[left : left + max(width, end - start)]
    s = " ".join(s.split())
    return ("…" if left else "") + s + ("…" if left + width < len(text) else "")
