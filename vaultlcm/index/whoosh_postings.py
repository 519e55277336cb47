"""Whoosh queries evaluated on the postings directly: sets and a heap instead of matcher trees.

Whoosh scores through a tree of Python matcher objects (a union per stemmed word,
an intersection per query, spans per phrase): several Python calls per posting
per node, for every matching document, and again to count them. Most of grep's
time on Whoosh went there (a two-word query at 10k messages: 1-2 s).

:func:`evaluate` reads each term's postings once per segment a block at a
time (ids and weights come as arrays), intersects the clauses as Python sets
(C loops), and reads a common word for a rare one's few documents from the
blocks that may hold them alone (a block's last id is in its header). It checks
phrase positions only for the documents every word of the phrase is in (once per
distinct combination of the words' encoded positions: in agent text the same
offsets recur), and for an identifier's parts only where its whole token is
missing (see :func:`_whole`). It scores only the documents that match every
clause, with Whoosh's own BM25F scorer objects (global idf and average length,
the segment's field length), so the scores are Whoosh's. One evaluation, kept as
arrays by kind (:class:`Matches`), serves both the pages (the best ``n``) and the
count (by kind, by day).

It covers the query shapes grep sends (terms, stemmed words, phrases, the
identifier's "whole token or its parts as a phrase", and a prefix clause once
the backend has given it as the words it stands for) with ``match="all"``;
anything else (a prefix of more than 512 words or inside an identifier,
``match="any"``) goes through Whoosh's matchers.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from itertools import accumulate, chain, compress, repeat
from pickle import loads
from typing import Any

from whoosh.codec.whoosh3 import LENGTHS_COLUMN, _lenfield
from whoosh.formats import Positions
from whoosh.matching.wrappers import FilterMatcher
from whoosh.scoring import BM25FScorer, bm25
from whoosh.util.numeric import byte_to_length

from .base import KINDS, Filters
from .whoosh_blocks import block_weights
from .query import ParsedQuery, QAny, QNode, QPhrase, QTerm


class Matches:
    """Every match of a query by kind (``message``, ``summary``): for each, the documents' global
    numbers and their scores, two arrays of one order (a common word's 400k matches as tuples cost
    more to build and take apart than to score). Iterating gives ``(docnum, score)`` pairs."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: dict[str, tuple[array[int], array[float]]] = {k: (array("q"), array("d")) for k in KINDS}

    def extend(self, kind: str, offset: int, docs: Iterable[int], scores: Iterable[float]) -> None:
        """Add a segment's documents of ``kind`` (numbered from ``offset``) and their scores, in one order."""
        numbers, values = self.parts[kind]
        numbers.extend(map(offset.__add__, docs) if offset else docs)
        values.extend(scores)

    def of(self, kind: str | None) -> tuple[array[int], array[float]]:
        """The documents of ``kind`` (None: both) and their scores."""
        if kind is not None:
            return self.parts[kind]
        (m_docs, m_scores), (s_docs, s_scores) = self.parts["message"], self.parts["summary"]
        return m_docs + s_docs, m_scores + s_scores

    def __iter__(self) -> Iterator[tuple[int, float]]:
        return chain.from_iterable(zip(*part) for part in self.parts.values())

    def __len__(self) -> int:
        return sum(len(docs) for docs, _scores in self.parts.values())


def summary_sets(searcher: Any) -> dict[int, set[int]]:
    """The summaries of each segment of ``searcher`` (its numbers there), by the segment's offset."""
    return {offset: _Segment(sub, sub.reader(), "text").ids("kind", "summary")
            for sub, offset in searcher.leaf_searchers()}


def supported(pq: ParsedQuery, filters: Filters) -> bool:
    """Whether :class:`PostingsQuery` evaluates this query (else Whoosh's matchers do)."""
    if filters.match != "all":
        return False

    def ok(node: QNode) -> bool:
        if isinstance(node, (QTerm, QPhrase)):
            return True
        return isinstance(node, QAny) and all(isinstance(o, (QTerm, QPhrase)) for o in node.options)

    return bool(pq.clauses) and all(ok(c) for c in pq.clauses)


#: A read of a term's postings skips the blocks without a wanted document when the wanted ones are
#: fewer than a 32nd of its documents (a block holds up to 128: most blocks hold none of them).
_SPARSE = 32


class _Segment:
    """One segment's postings, read once per term and evaluation."""

    def __init__(self, searcher: Any, reader: Any, field: str) -> None:
        self.searcher, self.reader, self.field = searcher, reader, field
        self.deleted = set(reader.deleted_docs_set) if reader.has_deletions() else set()
        #: ``term -> (covers, docnum -> weight)``: complete for the documents of ``covers`` (None: all).
        self._postings: dict[str, tuple[set[int] | None, dict[int, float]]] = {}
        #: Positions by their encoded value: a short message's few positions recur across documents.
        self._decoded: dict[bytes, list[int]] = {}
        self._decode: Callable[[bytes], list[int]] | None = None
        #: ``docnum -> encoded positions`` of a phrase's words, kept from reading their postings.
        self._values: dict[str, dict[int, bytes]] = {}
        self._scorers: dict[str, Any] = {}

    def _matcher(self, field: str, term: str) -> Any:
        if (field, term) not in self.reader:
            return None
        m = self.reader.postings(field, term)
        if isinstance(m, FilterMatcher):  # deletions are subtracted as a set instead
            m = m.child
            m.reset()  # the filter has already stepped over leading deleted documents
        return m

    def ids(self, field: str, term: str) -> set[int]:
        """The live documents holding ``term`` in an id field (kind, conversation)."""
        out: set[int] = set()
        for m in self._blocks(field, term):
            out.update(_block(m, "ids"))
        return out - self.deleted

    def _blocks(self, field: str, term: str, only: list[int] | None = None) -> Iterator[Any]:
        """The term's matcher at each of its blocks in turn (none when the segment lacks the term); with
        ``only`` (ascending document numbers), only at the blocks that may hold one of them (a block's
        last id is in its header: the others are stepped over undecoded)."""
        m = self._matcher(field, term)
        j = 0
        while m is not None and m.is_active():
            if only is None:
                yield m
            else:
                if j == len(only):
                    return
                top = getattr(m, "_maxid", None)  # (a list of one posting has none)
                if top is None or only[j] <= top:
                    yield m
                    j = len(only) if top is None else bisect_right(only, top, j)
            m._next_block()

    def _wanted(self, term: str, within: set[int] | None) -> list[int] | None:
        """``within`` in order when a read of ``term`` for its documents skips blocks: when they are fewer
        than a :data:`_SPARSE`-th of the term's (else None: every block is read)."""
        if within is None or len(within) * _SPARSE >= self.reader.doc_frequency(self.field, term):
            return None
        return sorted(within)

    def postings(self, term: str, *, values: bool = False, within: set[int] | None = None) -> dict[int, float]:
        """``docnum -> weight`` (term frequency) of the live documents holding ``term``; with ``within``,
        it may hold only those of ``within`` (and others), and it skips, undecoded, the blocks holding
        none of them when they are few (a rare word's documents looked up in a common word's postings).

        ``values``: also keep each posting's encoded positions from the same read of each block, so
        :meth:`values` needs no second read of them.
        """
        cached = self._postings.get(term)
        if cached is not None:
            covers, got = cached
            if covers is None or (within is not None and within <= covers):
                return got
        only = self._wanted(term, within)
        got = {}
        kept: dict[int, bytes] | None = None
        if values:
            kept = self._values[term] = {}
        else:
            self._values.pop(term, None)  # from an earlier read, which may not cover this one's documents
        for m in self._blocks(self.field, term, only):
            ids = _block(m, "ids")
            got.update(zip(ids, _block(m, "weights")))
            if kept is not None:
                kept.update(zip(ids, _block(m, "values")))
        for d in self.deleted.intersection(got):
            del got[d]
        self._postings[term] = (None if only is None else set(only), got)
        return got

    def values(self, term: str, docs: set[int]) -> dict[int, bytes]:
        """``docnum -> encoded positions`` of (at least) the documents of ``docs`` holding ``term``:
        kept by the read of its postings, else read from the blocks holding one of them."""
        kept = self._values.get(term)
        if kept is not None:
            return kept
        out: dict[int, bytes] = {}
        for m in self._blocks(self.field, term, self._wanted(term, docs)):
            out.update(zip(_block(m, "ids"), _block(m, "values")))
        return out

    def decoded(self, value: bytes) -> list[int]:
        """The positions ``value`` encodes, decoded once per distinct value and evaluation."""
        got = self._decoded.get(value)
        if got is None:
            if self._decode is None:
                self._decode = self._decoder()
            got = self._decoded[value] = self._decode(value)
        return got

    def _decoder(self) -> Callable[[bytes], list[int]]:
        fmt = self.reader.schema[self.field].format
        return _decode_positions if type(fmt) is Positions else fmt.decoder("positions")  # type: ignore[no-any-return]

    def scorer(self, term: str) -> Any:
        s = self._scorers.get(term)
        if s is None:
            s = self._scorers[term] = self.searcher.weighting.scorer(self.searcher, self.field, term)
        return s


def _block(m: Any, what: str) -> Any:
    """The current block's ids, weights or values (Whoosh reads a block lazily)."""
    if what == "ids":
        if m._ids is None:
            m._read_ids()
        return m._ids[m._i:]
    if what == "weights":
        if m._weights is None:
            if m._data is None:
                m._read_data()
            # Whoosh's own reader builds a block of one weight from a generator, a Python step a posting.
            m._weights = block_weights(m._data[1], m._blocklength)
        weights: Any = m._weights
        return weights[m._i:]
    if m._values is None:
        m._read_values()
    return m._values[m._i:]


def _decode_positions(value: bytes) -> list[int]:
    """``Positions.decode_positions`` without its per-call overhead: a 4-byte count, then the gaps
    between positions pickled (Whoosh's block may have cut the pickle's final ``.``)."""
    return list(accumulate(loads(value[4:] if value.endswith(b".") else value[4:] + b".")))


def _phrase_docs(seg: _Segment, words: tuple[str, ...], within: set[int] | None,
                 known: set[int] | None = None) -> set[int]:
    """The documents holding ``words`` at consecutive positions (limited to ``within``); those of
    ``known`` among the documents holding every word are taken to hold them so, unchecked."""
    # Rarest word first: the smallest sets, and no read of the others when it is missing.
    order = sorted(range(len(words)), key=lambda k: seg.reader.doc_frequency(seg.field, words[k]))
    docs: set[int] | None = None
    for w in dict.fromkeys(words[k] for k in order):
        got = seg.postings(w, values=known is None, within=within if docs is None else docs).keys()
        docs = set(got) if docs is None else docs.intersection(got)
        if within is not None:
            docs &= within
        if not docs:
            return set()
    assert docs is not None
    held = docs & known if known else set()
    check = docs - held if held else docs
    if not check:
        return held
    # Whether a document holds the phrase depends on its words' encoded positions alone, and in agent
    # text the same combinations recur (a path's parts at the same few offsets of short messages: 215k
    # documents of a 1M-message vault hold src/app.py's parts in 54k combinations, of 31k, 16k and 51k
    # distinct values): each combination is checked once, each value decoded once, and the documents
    # are sorted by the verdicts in C loops.
    listed = list(check)
    keys = list(zip(*(map(seg.values(words[k], check).__getitem__, listed) for k in order)))
    verdict = {key: _holds_phrase(seg, order, key) for key in set(keys)}
    return held.union(compress(listed, map(verdict.__getitem__, keys)))


def _holds_phrase(seg: _Segment, order: list[int], values: tuple[bytes, ...]) -> bool:
    """Whether the encoded positions ``values`` of the phrase's words (word ``order[i]`` at
    ``values[i]``) have a start where every word sits at its place."""
    starts: set[int] | None = None
    for k, value in zip(order, values):
        here = {p - k for p in seg.decoded(value)}
        starts = here if starts is None else starts & here
        if not starts:
            return False
    return True


def _options(node: QNode) -> tuple[QNode, ...]:
    return node.options if isinstance(node, QAny) else (node,)


def _option_docs(seg: _Segment, node: QNode, within: set[int] | None, known: set[int] | None = None) -> set[int]:
    if isinstance(node, QTerm):
        got = seg.postings(node.text, within=within).keys()
        return set(got) if within is None else within.intersection(got)
    assert isinstance(node, QPhrase)
    return _phrase_docs(seg, node.words, within, known)


def _whole(clause: QNode) -> QNode | None:
    """An identifier's whole token, when ``clause`` is "the identifier whole or its parts as a phrase".

    A document holding the whole token (``src/app.py``) holds its parts in a row too (the tokenizer
    puts them at consecutive positions: ``src``, ``app``, ``py``), so only the documents without it
    need their positions checked; they are nearly always most of an identifier's matches. The
    exception is a document whose identifier differs in case where the query's splits into words
    (``GitHub`` asked, ``github`` written, which is ``git hub`` only in the query): it matches either
    way, and is scored as holding the parts (Whoosh's matchers would score the whole token alone).
    """
    if isinstance(clause, QAny) and len(clause.options) == 2:
        whole, parts = clause.options
        if isinstance(whole, QTerm) and isinstance(parts, QPhrase):
            return whole
    return None


def _weights(seg: _Segment, node: QNode, within: set[int]) -> list[tuple[dict[int, float], Any]]:
    """``(postings, scorer)`` of each word an option scores in the documents of ``within`` (a phrase:
    the sum of its words' scores, as Whoosh's span matcher gives it)."""
    words = (node.text,) if isinstance(node, QTerm) else node.words  # type: ignore[union-attr]
    return [(seg.postings(w, within=within), seg.scorer(w)) for w in words]


def _bm25_of(scorer: Any) -> Any:
    """The scorer's BM25 as a plain function of (weight, length), without a method call per document."""
    if isinstance(scorer, BM25FScorer):
        idf, avgfl, b, k1 = scorer.idf, scorer.avgfl, scorer.B, scorer.K1
        return lambda weight, length: bm25(idf, weight, length, avgfl, b, k1)
    return scorer._score


def _length_norm(k1: float, b: float, avgfl: float, fl: int) -> float:
    """The part of Whoosh's ``bm25`` that depends on the length alone, by its operations in its order:
    ``bm25(idf, tf, fl, avgfl, B, K1) == idf * ((tf * (K1 + 1)) / (tf + _length_norm(K1, B, avgfl, fl)))``."""
    return k1 * ((1 - b) + b * fl / avgfl)


def evaluate(searcher: Any, pq: ParsedQuery, filters: Filters, at: Any, *, scored: bool = True,
             summaries: dict[int, set[int]] | None = None) -> Matches:
    """Every document matching ``pq`` and ``filters``, with its Whoosh BM25F score (0.0 unscored), by
    kind; ``summaries``: :func:`summary_sets` of ``searcher``, if the caller keeps them."""
    out = Matches()
    since, before = filters.since, filters.before
    for sub, offset in searcher.leaf_searchers():
        reader = sub.reader()
        if reader.doc_count() == 0:
            continue
        seg = _Segment(sub, reader, "text")
        within: set[int] | None = None
        if filters.kind is not None:
            within = seg.ids("kind", filters.kind)
        if filters.conversations is not None:
            convs: set[int] = set()
            for c in filters.conversations:
                convs |= seg.ids("conversation", c)
            within = convs if within is None else within & convs
        # Cheapest clause first: its set bounds every later one. Each option's documents are kept for
        # the scoring below: the final set is a subset of the one each option was evaluated within, so
        # what it holds of them is what evaluating the option again would give (a phrase's positions twice).
        found: dict[int, set[int]] = {}  # by id() of the option (a node may be equal to another one)
        for clause in sorted(pq.clauses, key=lambda c: _cost(seg, c)):
            docs: set[int] = set()
            whole = _whole(clause)
            for option in _options(clause):
                got = _option_docs(seg, option, within, found.get(id(whole)) if whole is not None else None)
                found[id(option)] = got
                docs |= got
            within = docs
            if not within:
                break
        if not within:
            continue
        if since is not None or before is not None:
            within = {d for d in within if (since is None or at[offset + d] >= since)
                      and (before is None or at[offset + d] < before)}
        local = summaries.get(offset) if summaries is not None else None
        if local is None:
            local = seg.ids("kind", "summary")
        sums = within & local
        listed = [*(within - sums if sums else within), *sums]  # the messages, then the summaries
        n_msg = len(listed) - len(sums)
        if not scored:
            out.extend("message", offset, listed[:n_msg], repeat(0.0, n_msg))
            out.extend("summary", offset, listed[n_msg:], repeat(0.0, len(sums)))
            continue
        options = []
        for option in (o for clause in pq.clauses for o in _options(clause)):
            # Only the documents of ``within`` are scored below, so the option's own set is enough.
            docs = found[id(option)]  # (in the query's order: the scores add up as before)
            if docs:  # (a word missing from this segment has no scorer here)
                options.append((docs, _weights(seg, option, within)))
        scores = _scores_by_table(listed, options, reader)
        if scores is None:
            scores = _scores(listed, options, reader)
        out.extend("message", offset, listed[:n_msg], scores[:n_msg])
        out.extend("summary", offset, listed[n_msg:], scores[n_msg:])
    return out


def _scores(listed: list[int], options: list[tuple[set[int], list[tuple[dict[int, float], Any]]]],
            reader: Any) -> list[float]:
    """The scores of the documents ``listed`` by Whoosh's scorers, a call per document and word."""
    length_of = _field_lengths(reader)
    words_fn = [(docs, [(post, _bm25_of(scorer)) for post, scorer in words]) for docs, words in options]
    scores: list[float] = []
    for d in listed:
        length = length_of(d)
        score = 0.0
        for docs, fns in words_fn:
            if d in docs:
                part = 0.0
                for post, fn in fns:
                    part += fn(post[d], length)
                score += part
        scores.append(score)
    return scores


def _scores_by_table(listed: list[int], options: list[tuple[set[int], list[tuple[dict[int, float], Any]]]],
                     reader: Any) -> list[float] | None:
    """The scores of the documents ``listed`` as Whoosh's BM25F gives them, without a call per document
    and word; None where this does not apply.

    Whoosh's ``bm25(idf, tf, fl, avgfl, B, K1)`` is ``idf * ((tf * (K1 + 1)) / (tf + K1 * ((1 - B) +
    B * fl / avgfl)))``. Every word shares ``avgfl``, ``B`` and ``K1`` (they belong to the field), and
    ``fl`` is one of the 255 lengths a length byte stands for, so the part after ``tf +`` is computed
    once per length byte, by the same operations in the same order: the same floats as Whoosh's.
    """
    raw = _length_bytes(reader)
    scorers = [scorer for _docs, words in options for _post, scorer in words]
    if raw is None or not scorers or any(type(sc) is not BM25FScorer for sc in scorers):
        return None
    avgfl, b, k1 = scorers[0].avgfl, scorers[0].B, scorers[0].K1
    if any((sc.avgfl, sc.B, sc.K1) != (avgfl, b, k1) for sc in scorers):
        return None
    k1_plus_1 = k1 + 1
    try:
        norm: list[float | None] = [None, *(_length_norm(k1, b, avgfl, fl) for fl in _LENGTHS[1:] if fl is not None)]
    except ZeroDivisionError:
        return None
    table = [(docs, [(post, sc.idf) for post, sc in words]) for docs, words in options]
    scored: list[float] = []
    append = scored.append
    try:
        for d in listed:
            k = norm[raw[d]]
            score = 0.0
            for docs, words in table:
                if d in docs:
                    part = 0.0
                    for post, idf in words:
                        tf = post[d]
                        part += idf * ((tf * k1_plus_1) / (tf + k))  # type: ignore[operator]
                    score += part
            append(score)
    except (IndexError, TypeError):
        return None  # a length Whoosh reads as None (byte 0, or past the column): the general path's case
    return scored


def _length_bytes(reader: Any) -> bytes | None:
    """The segment's length column of the text field, one byte per document (None: another codec)."""
    try:
        col = reader._perdoc._cached_reader(_lenfield("text"), LENGTHS_COLUMN)
        raw = col._dbfile.get(col._basepos, col._count) if col is not None else None
    except AttributeError:
        return None
    if raw is None or col._fixedlen != 1:
        return None
    return bytes(raw)


def _field_lengths(reader: Any) -> Any:
    """``docnum -> reader.doc_field_length(docnum, "text", 1)`` for one segment, its length column read
    in one piece (a call per document through Whoosh's column readers cost a fifth of an evaluation)."""
    raw = _length_bytes(reader)
    if raw is None:  # another codec: ask per document
        return lambda d: reader.doc_field_length(d, "text", 1)
    table = _LENGTHS
    n = len(raw)
    # A document past the column's end has the default byte 0; Whoosh then answers None.
    return lambda d: table[raw[d]] if d < n else None


#: What each length byte stands for (byte 0 reads as None, as in ``doc_field_length``).
_LENGTHS: list[int | None] = [None] + [byte_to_length(b) for b in range(1, 256)]


def _cost(seg: _Segment, clause: QNode) -> int:
    """About how many documents a clause touches (a phrase: its rarest word)."""
    total = 0
    for option in _options(clause):
        if isinstance(option, QTerm):
            total += seg.reader.doc_frequency(seg.field, option.text)
        else:
            total += min(seg.reader.doc_frequency(seg.field, w) for w in option.words)  # type: ignore[union-attr]
    return total
