"""How a ``relevance`` page of ``grep`` mixes raw messages and summary notes.

BM25 scores of a message and of a summary note do not compare: a note restates
dozens of messages, so length normalisation buries it under any short message
that has the words, and on a busy topic (a word every tool result repeats) no
summary would ever reach the first pages. Yet a summary is where a fact sits in
one line, with the value it replaced marked (``route cap: 140 stops (was 120
stops)``), and the place from which ``expand --query`` reaches the sources. So a
page ranks each kind on its own and gives every :data:`SUMMARY_EVERY`-th place,
from the second on, to a summary while summaries last (messages fill the rest).

Summaries are ordered by their best line, not by the note as a whole: the most
query clauses in one line, then that line's own weight (the words repeated in a
short line first, BM25's saturation and length normalisation applied to the
line), then the index's order (relevance bands, newest first). Only the first
:data:`RERANK` summaries of the index's order are re-read: past them the index's
order stands. A reranked summary's snippet is cut around its best line.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from .index.query import ParsedQuery, iter_tokens, make_snippet

#: Every this many places of a relevance page, one goes to a summary (the 2nd, 5th, 8th ...).
SUMMARY_EVERY = 3
#: How many of the index's best summaries are re-read and ordered by their best line.
RERANK = 40
# BM25's usual constants, applied to one line of a note.
_K1, _B = 1.2, 0.75


@dataclass(frozen=True)
class PagePlan:
    """Which kind fills each place of a page, and where each kind's list starts."""

    kinds: tuple[str, ...]  # "message" or "summary", one per place of the page
    message_start: int
    summary_start: int

    def count(self, kind: str) -> int:
        return sum(1 for k in self.kinds if k == kind)


def plan_page(offset: int, limit: int, n_messages: int, n_summaries: int) -> PagePlan:
    """The kinds of places ``offset`` .. ``offset + limit`` in the mixed order (see the module docstring)."""
    m = s = 0
    kinds: list[str] = []
    starts = (0, 0)
    end = min(offset + limit, n_messages + n_summaries)
    for place in range(end):
        if place == offset:
            starts = (m, s)
        wants_summary = place % SUMMARY_EVERY == 1
        if (wants_summary and s < n_summaries) or m >= n_messages:
            s += 1
            kind = "summary"
        else:
            m += 1
            kind = "message"
        if place >= offset:
            kinds.append(kind)
    return PagePlan(tuple(kinds), *starts)


def line_weight(line: str, pq: ParsedQuery, avg_tokens: float) -> tuple[int, float]:
    """How many of the query's clauses one line holds, and its BM25-like weight for them."""
    tf: dict[int, int] = {}
    n_tokens = 0
    for tok, _pos, _start, _end in iter_tokens(line):
        n_tokens += 1
        for k, part in enumerate(pq.parts):
            if part.holds(tok):
                tf[k] = tf.get(k, 0) + 1
    norm = _K1 * (1 - _B + _B * n_tokens / max(avg_tokens, 1.0))
    return len(tf), sum(f * (_K1 + 1) / (f + norm) for f in tf.values())


def best_line(text: str, pq: ParsedQuery) -> tuple[tuple[int, float], str]:
    """The line of ``text`` that best matches the query, with its ``(clauses, weight)``."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return (0, 0.0), ""
    avg = sum(len(ln.split()) for ln in lines) / len(lines)
    return max(((line_weight(ln, pq, avg), ln) for ln in lines), key=lambda x: x[0])


def rank_summaries(hits: list[Any], texts: Iterable[str | None], pq: ParsedQuery) -> list[Any]:
    """``hits`` (index order) with the first :data:`RERANK` ordered by their best line, snippets cut there."""
    head, tail = hits[:RERANK], hits[RERANK:]
    keyed = []
    for order, (hit, text) in enumerate(zip(head, texts)):
        if text is None:  # gone since the index saw it: keep its place and snippet
            keyed.append(((0, 0.0), order, hit))
            continue
        weight, line = best_line(text, pq)
        keyed.append((weight, order, replace(hit, snippet=make_snippet(line, pq)) if weight[0] else hit))
    keyed.sort(key=lambda x: (-x[0][0], -x[0][1], x[1]))
    return [hit for _w, _o, hit in keyed] + tail


def interleave(plan: PagePlan, messages: list[Any], summaries: list[Any]) -> list[Any]:
    """The page: ``messages`` and ``summaries`` (each already sliced for the page) in ``plan``'s places."""
    it_m, it_s = iter(messages), iter(summaries)
    page = []
    for kind in plan.kinds:
        nxt = next(it_s if kind == "summary" else it_m, None)
        if nxt is not None:
            page.append(nxt)
    return page
