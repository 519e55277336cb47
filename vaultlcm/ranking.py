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

from .index.query import ParsedQuery, chunk_tokens, make_snippet, text_chunks

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
    return LineScorer(pq).weight(line, avg_tokens)


class LineScorer:
    """:func:`line_weight` for many lines of one query, each distinct chunk examined once.

    A note's lines repeat their words and identifiers, and what a chunk holds of the
    query depends on the chunk alone: tokenizing every line of forty notes token by
    token was most of a relevance page's time.
    """

    def __init__(self, pq: ParsedQuery) -> None:
        self.pq = pq
        #: chunk -> (tokens it yields, ((clause, tokens of it that the clause holds), ...))
        self._seen: dict[str, tuple[int, tuple[tuple[int, int], ...]]] = {}

    def _chunk(self, chunk: str) -> tuple[int, tuple[tuple[int, int], ...]]:
        tokens = chunk_tokens(chunk)
        held = []
        for k, part in enumerate(self.pq.parts):
            n = sum(1 for tok in tokens if part.holds(tok))
            if n:
                held.append((k, n))
        got = self._seen[chunk] = (len(tokens), tuple(held))
        return got

    def weight(self, line: str, avg_tokens: float) -> tuple[int, float]:
        """How many of the query's clauses ``line`` holds, and its BM25-like weight for them."""
        seen = self._seen
        tf: dict[int, int] = {}
        n_tokens = 0
        for chunk in text_chunks(line):
            got = seen.get(chunk) or self._chunk(chunk)
            n_tokens += got[0]
            for k, n in got[1]:
                tf[k] = tf.get(k, 0) + n
        norm = _K1 * (1 - _B + _B * n_tokens / max(avg_tokens, 1.0))
        return len(tf), sum(f * (_K1 + 1) / (f + norm) for f in tf.values())

    def best_line(self, text: str) -> tuple[tuple[int, float], str]:
        """The line of ``text`` that best matches the query, with its ``(clauses, weight)`` (the first of equals)."""
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if not lines:
            return (0, 0.0), ""
        avg = sum(len(ln.split()) for ln in lines) / len(lines)
        return max(((self.weight(ln, avg), ln) for ln in lines), key=lambda x: x[0])


def best_line(text: str, pq: ParsedQuery) -> tuple[tuple[int, float], str]:
    """The line of ``text`` that best matches the query, with its ``(clauses, weight)``."""
    return LineScorer(pq).best_line(text)


@dataclass(frozen=True)
class Ranked:
    """A summary hit in its reranked place, and the line its snippet is cut around (None: the index's snippet)."""

    hit: Any
    line: str | None


def rank_summaries(hits: list[Any], texts: Iterable[str | None], pq: ParsedQuery) -> list[Ranked]:
    """``hits`` (index order) with the first :data:`RERANK` ordered by their best line.

    The snippets are left to the caller (:func:`ranked_page`): only the page shown needs them.
    """
    head, tail = hits[:RERANK], hits[RERANK:]
    scorer = LineScorer(pq)
    keyed = []
    for order, (hit, text) in enumerate(zip(head, texts)):
        if text is None:  # gone since the index saw it: keep its place and snippet
            keyed.append(((0, 0.0), order, Ranked(hit, None)))
            continue
        weight, line = scorer.best_line(text)
        keyed.append((weight, order, Ranked(hit, line if weight[0] else None)))
    keyed.sort(key=lambda x: (-x[0][0], -x[0][1], x[1]))
    return [r for _w, _o, r in keyed] + [Ranked(h, None) for h in tail]


def ranked_page(ranked: list[Ranked], texts: dict[str, str], pq: ParsedQuery) -> list[Any]:
    """The hits of ``ranked`` (one page of it) with their snippets: cut around the best line, else
    from the note's text (``texts`` by id), else the index's own."""
    out = []
    for r in ranked:
        if r.line is not None:
            out.append(replace(r.hit, snippet=make_snippet(r.line, pq)))
        elif not r.hit.snippet and (text := texts.get(r.hit.id)) is not None:
            out.append(replace(r.hit, snippet=make_snippet(text, pq)))
        else:
            out.append(r.hit)
    return out


def interleave(plan: PagePlan, messages: list[Any], summaries: list[Any]) -> list[Any]:
    """The page: ``messages`` and ``summaries`` (each already sliced for the page) in ``plan``'s places."""
    it_m, it_s = iter(messages), iter(summaries)
    page = []
    for kind in plan.kinds:
        nxt = next(it_s if kind == "summary" else it_m, None)
        if nxt is not None:
            page.append(nxt)
    return page
