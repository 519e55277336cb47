"""The optional fast search backend: Tantivy through tantivy-py.

Install it with ``pip install 'vaultlcm[tantivy]'``.

* Tokenization: Tantivy's built-in tokenizers split ``snake_case`` and
  ``src/app.py`` apart and cannot emit the whole identifier as well, so the text
  is tokenized in Python by the same analyzer (:func:`~vaultlcm.index.query.index_terms`) as
  the Whoosh backend and handed over as a pre-tokenized string. Both backends
  therefore match exactly the same queries.
* Queries are built through the API (term, phrase, regex-phrase, boolean), never
  through Tantivy's query parser, which has no wildcards and its own syntax.
* Tantivy merges segments in its own background threads, and allows one writer
  per index; our writer lock file comes first, so a second process opens the
  index read-only instead of failing inside Tantivy.
* Tantivy reads its segment files through memory maps, and every page a search
  (or the writer's deletes and merges, through the same maps) touched stays in
  the process's resident set for as long as the segment lives: in a process
  that runs for months that grows with the index. A searcher left unused for
  :data:`RELEASE_IDLE` seconds is let go with the native index object that
  holds its maps (see :meth:`TantivyIndex._release`); the next search maps the
  files again, touching only what it reads.
* Tantivy starts its indexing threads anew at every commit, and glibc gives
  each new thread a malloc arena (up to 8 per core) in which that commit's
  segment buffers are built and freed. A writer that follows an engine commits
  a turn's documents a few times a second, so with one indexing thread per
  core it spread those buffers over twice as many arenas, each keeping 14-15
  MiB freed, in proportion to the writer's heap. The writer that follows has
  :data:`FOLLOW_THREADS` indexing thread and the least heap tantivy takes
  (:data:`FOLLOW_HEAP`); a rebuild, which indexes everything in one commit,
  takes a writer with one thread per core and :data:`WRITER_HEAP`
  (:meth:`TantivyIndex._n_rebuild`).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import IndexError_
from .base import KINDS, Filters, Forget, IndexDoc, MatchCount
from .buffered import COORD, BufferedIndex, Row, match_count, tie_key
from .query import ParsedQuery, QAny, QNode, QPhrase, QPhrasePrefix, QPrefix, QTerm, TokenMaker

try:
    import tantivy
    from tantivy import Occur, Order, Query
except ImportError as exc:  # an optional extra
    raise IndexError_(
        "the tantivy search backend needs the tantivy package: run `pip install 'vaultlcm[tantivy]'`, "
        "or use the default whoosh backend."
    ) from exc

#: Expand a prefix into at most this many scored terms; beyond it, a constant-score
#: regex query matches them all (recall is what grep needs).
MAX_PREFIX_TERMS = 512
WRITER_HEAP = 64_000_000  # bytes; a rebuild's writer flushes a segment when it fills up
#: Indexing threads of the writer between rebuilds (a turn's documents a commit; see the module's notes).
FOLLOW_THREADS = 1
#: Bytes of that writer's buffers: tantivy's least for one thread. A commit of a turn never fills it, and
#: what each commit allocates (and frees) grows with it: 15 MiB less kept free by the arenas than at 64 MB.
FOLLOW_HEAP = 15_000_000
#: Indexing threads of a rebuild's writer: 0 lets tantivy take one per core (at most 8).
REBUILD_THREADS = 0
#: Seconds a searcher may sit unused before the pages it mapped are let go (:meth:`TantivyIndex._release`).
RELEASE_IDLE = 5.0
#: How many of each kind's best matches a count keeps for the searches that follow it: a
#: page of 20 with the band settling its ties (buffered.BAND_SIZE) and the summaries' rerank head.
HEAD = 128


def build_schema() -> "tantivy.Schema":
    sb = tantivy.SchemaBuilder()
    # "raw": ids and names are exact keys (ids are deleted by term on upsert).
    sb.add_text_field("id", stored=True, tokenizer_name="raw")
    sb.add_text_field("kind", stored=True, tokenizer_name="raw", fast=True)  # fast: counted by kind
    sb.add_text_field("conversation", stored=True, tokenizer_name="raw")
    sb.add_text_field("role", stored=True, tokenizer_name="raw")
    sb.add_text_field("content_hash", stored=True, tokenizer_name="raw")
    sb.add_integer_field("depth", stored=True)
    sb.add_float_field("at", stored=True, indexed=True, fast=True)  # range filters, sorts, per-day counts
    sb.add_integer_field("seq", stored=True, fast=True)  # orders equal times
    sb.add_integer_field("tie", fast=True)  # tie_key(id): the last tie-break
    # Always fed pre-tokenized text; "raw" only matters if something re-tokenizes.
    sb.add_text_field("text", stored=True, tokenizer_name="raw")
    return sb.build()


def _regex_literal(text: str) -> str:
    """``text`` as a regex matching itself (hex escapes work in every Tantivy regex)."""
    return "".join(c if c.isalnum() else f"\\x{{{ord(c):x}}}" for c in text)


def _document(d: IndexDoc) -> "tantivy.Document":
    doc = tantivy.Document()
    doc.add_text("id", d.id)
    doc.add_text("kind", d.kind)
    doc.add_text("conversation", d.conversation)
    doc.add_text("role", d.role)
    doc.add_text("content_hash", d.content_hash)
    doc.add_integer("depth", int(d.depth))
    doc.add_float("at", float(d.at))
    doc.add_integer("seq", int(d.seq))
    doc.add_integer("tie", tie_key(d.id))
    doc.add_pre_tokenized_text("text", tantivy.PreTokenizedString(d.text, _TOKENS.tokens(d.text)))
    return doc


#: The text's tokens as :func:`~vaultlcm.index.query.index_terms` gives them, made straight into
#: tantivy's ``Token`` objects (a rebuild's main cost is per token). No character offsets: the text
#: field indexes positions only, and snippets are cut in Python.
_TOKENS = TokenMaker(tantivy.Token)


class TantivyIndex(BufferedIndex):
    """:class:`~vaultlcm.index.base.SearchIndex` on Tantivy."""

    backend = "tantivy"

    def __init__(self, path: Path | str, **kwargs: Any) -> None:
        self._ix: Any = None
        self._writer: Any = None
        self._writer_threads = FOLLOW_THREADS  # of the writer, when there is one
        self._searcher: Any = None
        self._schema = build_schema()
        #: meta.json as the searcher saw it: a commit (any process's) or a merge rewrites it with a new opstamp.
        self._meta: bytes | None = None
        #: (searcher, query, filters without kind, {kind: (best rows, count)}) of the last count; see _n_tally.
        self._memo: tuple[Any, ParsedQuery, Filters, dict[str, tuple[list[Row], int]]] | None = None
        #: When a search last used the native index (monotonic), None while nothing was read since the last release.
        self._used_at: float | None = None
        super().__init__(path, **kwargs)

    # -- open / create

    def _n_create(self) -> None:
        self._ix = tantivy.Index(self._schema, path=str(self.path), reuse=False)
        self._n_become_writer()
        self._n_refresh()

    def _n_open(self) -> None:
        if not (self.path / "meta.json").exists():
            raise FileNotFoundError(f"{self.path / 'meta.json'} is missing")
        self._ix = tantivy.Index.open(str(self.path))
        self._n_refresh()
        _ = self._searcher.num_docs  # load every segment now: fail at open, not mid-search
        if self.writable:
            self._n_become_writer()

    def _n_become_writer(self, threads: int = FOLLOW_THREADS) -> None:
        heap = FOLLOW_HEAP if threads == FOLLOW_THREADS else WRITER_HEAP
        self._writer = self._ix.writer(heap_size=heap, num_threads=threads)
        self._writer_threads = threads

    def _swap_writer(self, threads: int) -> None:
        """Replace the writer by one with ``threads`` indexing threads (one writer per index: the old one goes first)."""
        self._n_close()
        self._n_become_writer(threads)

    def _n_refresh(self) -> None:
        now = time.monotonic()
        if self._used_at is not None and now - self._used_at >= RELEASE_IDLE:
            self._release()  # a reader process has no idle thread: it lets go on its next search instead
        if self._used_at is None:
            with self._cv:  # the writer's idle thread sleeps without a deadline: give it one
                self._used_at = now
                self._cv.notify_all()
        self._used_at = now
        # Every search refreshes first. While meta.json reads the same, no commit or merge happened
        # since, and the searcher held (with what was counted on it) still sees the latest state.
        # Read before the reload: a commit landing in between leaves the two different, so the
        # next refresh reloads again (never the other way round).
        try:
            meta: bytes | None = (self.path / "meta.json").read_bytes()
        except OSError:
            meta = None
        if meta is not None and meta == self._meta and self._searcher is not None:
            return
        self._ix.reload()  # also picks up other processes' commits
        self._searcher = self._ix.searcher()
        self._meta, self._memo = meta, None

    def _release(self) -> None:
        """Let go of every page the searches mapped in: replace the native index object by a fresh one.

        The reader inside the native index maps each segment's files and keeps the maps (and
        whatever pages were touched through them) while the segment lives; reloading it after a
        commit keeps the maps of the segments that did not change. Only dropping the index object
        (with the searcher and the counts kept on it) unmaps them. The writer is left alone: it
        keeps no maps between commits (its deletes and merges open the files and close them again).
        Opening costs a few milliseconds; the next search starts cold but reads the same files.
        """
        fresh = tantivy.Index.open(str(self.path))
        self._searcher, self._memo, self._meta = None, None, None
        self._ix = fresh
        self._used_at = None

    def _live(self) -> Any:
        """The searcher; after a release that raced the read lock, a fresh one (the reads hold that lock)."""
        if self._searcher is None:
            self._n_refresh()
        return self._searcher

    def _idle_wait(self) -> float | None:
        used = self._used_at
        return None if used is None else max(0.0, used + RELEASE_IDLE - time.monotonic())

    def _n_maintain(self) -> None:
        # The writer's idle thread (after a commit, or woken by _idle_wait): searches hold the read lock.
        used = self._used_at
        if used is not None and time.monotonic() - used >= RELEASE_IDLE:
            with self._read_lock:
                if self._used_at is not None and time.monotonic() - self._used_at >= RELEASE_IDLE:
                    self._release()

    def _n_close(self) -> None:
        if self._writer is not None:
            writer, self._writer = self._writer, None
            writer.wait_merging_threads()  # finishes merges, then drops the writer

    # -- writes

    def _n_apply(self, upserts: list[IndexDoc], deletes: list[str]) -> None:
        w = self._writer
        try:
            for doc_id in deletes:
                w.delete_documents_by_term("id", doc_id)
            for d in upserts:
                # Deletes apply to everything added before them (opstamp order),
                # so the new version added right after survives.
                w.delete_documents_by_term("id", d.id)
                w.add_document(_document(d))
            w.commit()
        except BaseException:
            w.rollback()
            raise

    forgets_in_rebuild = True

    def _n_rebuild(self, docs: Iterator[IndexDoc | Forget]) -> None:
        # Everything in one commit: an indexing thread per core. The writer stays so until the index is
        # opened again (a rebuild's process usually exits after it): going back at once would wait for
        # the merges the rebuild's segments start.
        if self._writer_threads != REBUILD_THREADS:
            self._swap_writer(REBUILD_THREADS)
        w = self._writer
        try:
            # Takes effect with the commit: readers switch atomically. Not delete_all_documents: after it
            # (tantivy-py 0.27, tantivy 0.25), a writer that had deleted before could later miss a delete of
            # a document the rebuild added, so an upsert left two copies (tests/test_tantivy_writer_threads.py
            # has the sequence). Segments left with no live document are dropped at the commit all the same.
            w.delete_documents_by_query(Query.all_query())
            for d in docs:
                if isinstance(d, Forget):
                    # Applies to the documents added before it (opstamp order), not to those after.
                    w.delete_documents_by_term("conversation", d.conversation)
                    continue
                w.add_document(_document(d))
            w.commit()
        except BaseException:
            w.rollback()
            raise

    # -- reads

    def _n_count(self) -> int:
        return int(self._live().num_docs)

    def _n_hashes(self) -> dict[str, str]:
        s = self._live()
        n = s.num_docs
        if n == 0:
            return {}
        out: dict[str, str] = {}
        for _score, addr in s.search(Query.all_query(), limit=n, count=False).hits:
            doc = s.doc(addr)
            out[doc.get_first("id")] = doc.get_first("content_hash") or ""
        return out

    def _n_load(self, refs: list[Any]) -> list[dict[str, Any]]:
        out = []
        for addr in refs:
            doc = self._live().doc(addr)
            fields = {k: doc.get_first(k) or "" for k in ("id", "kind", "conversation", "text", "role")}
            depth = doc.get_first("depth")
            fields["depth"] = -1 if depth is None else depth
            out.append(fields)
        return out

    def _query(self, pq: ParsedQuery, filters: Filters) -> Any:
        compiled = [self._compile(c) for c in pq.clauses]
        if filters.match == "any" and len(compiled) > 1 and not all(p.required for p in pq.parts):
            # Each clause a document has adds COORD to its BM25: more of the words first. Plain
            # words are optional (one is enough when nothing is required), the rest required.
            def coord(c: Any) -> Any:
                return Query.boolean_query([(Occur.Should, Query.const_score_query(c, COORD)), (Occur.Should, c)])

            required = [(Occur.Must, coord(c)) for c, p in zip(compiled, pq.parts) if p.required]
            optional = [(Occur.Should, coord(c)) for c, p in zip(compiled, pq.parts) if not p.required]
            clauses = required + [(Occur.Must if not required else Occur.Should, Query.boolean_query(optional))]
        else:
            clauses = [(Occur.Must, c) for c in compiled]
        filt: list[Any] = []
        if filters.kind is not None:
            filt.append((Occur.Must, Query.term_query(self._schema, "kind", filters.kind)))
        if filters.conversations is not None:
            filt.append((Occur.Must, Query.term_set_query(self._schema, "conversation", list(filters.conversations))))
        if filters.since is not None or filters.before is not None:
            rng = Query.range_query(
                self._schema, "at", tantivy.FieldType.Float, filters.since, filters.before,
                include_lower=True, include_upper=filters.before is None,  # before is exclusive
            )
            filt.append((Occur.Must, rng))
        if filt:  # filters must not change scores
            clauses.append((Occur.Must, Query.const_score_query(Query.boolean_query(filt), 0.0)))
        return clauses[0][1] if len(clauses) == 1 else Query.boolean_query(clauses)

    def _n_search(self, pq: ParsedQuery, filters: Filters, n: int, sort: str) -> list[Row]:
        s = self._live()
        memo = self._memo
        if memo is not None and sort == "relevance" and filters.kind is not None and memo[0] is s \
                and memo[1] == pq and memo[2] == replace(filters, kind=None):
            rows, count = memo[3][filters.kind]
            if n <= len(rows) or len(rows) == count:  # the head holds these (top-n is a prefix of top-HEAD)
                return rows[:n]
        q = self._query(pq, filters)
        if sort == "relevance":
            hits = s.search(q, limit=n, count=False).hits
        else:
            order = Order.Desc if sort == "newest" else Order.Asc
            hits = s.search(q, limit=n, count=False, order_by_field="at", order=order).hits
        return self._rows(hits, scored=sort == "relevance")

    def _rows(self, hits: list[tuple[Any, Any]], *, scored: bool) -> list[Row]:
        if not hits:
            return []
        s = self._live()
        addrs = [a for _, a in hits]
        ats = s.fast_field_values("at", addrs)
        seqs = s.fast_field_values("seq", addrs)
        ties = s.fast_field_values("tie", addrs)
        return [(key if scored else 0.0, at or 0.0, seq or 0, tie or 0, addr)
                for (key, addr), at, seq, tie in zip(hits, ats, seqs, ties)]

    def _n_tally(self, pq: ParsedQuery, filters: Filters, per_day: bool) -> MatchCount:
        if not per_day and filters.kind is None:
            return self._by_kind_with_heads(pq, filters)
        agg: dict[str, Any] = {"terms": {"field": "kind", "size": 16}}
        if per_day:
            agg["aggs"] = {"days": {"histogram": {"field": "at", "interval": 86400.0, "min_doc_count": 1}}}
        result = self._live().aggregate(self._query(pq, filters), {"kinds": agg})
        by_kind: Counter[str] = Counter()
        by_day: Counter[tuple[int, str]] = Counter()
        for bucket in result["kinds"]["buckets"]:
            kind = str(bucket["key"])
            by_kind[kind] += int(bucket["doc_count"])
            for day in bucket.get("days", {}).get("buckets", []):
                if day["doc_count"]:
                    by_day[(int(day["key"] // 86400), kind)] += int(day["doc_count"])
        return match_count(by_kind, by_day)

    def _by_kind_with_heads(self, pq: ParsedQuery, filters: Filters) -> MatchCount:
        """Count each kind with a search that also keeps its best :data:`HEAD` matches.

        A grep counts a query by kind, then ranks a page of each kind: done apart, the
        matches of a common phrase are walked three times (0.2M of them at 1M messages:
        30 ms a walk). Counting inside each kind's ranked search walks them once, and
        the page searches that follow on the same searcher are served from the heads.
        """
        s = self._live()
        queries = {kind: self._query(pq, replace(filters, kind=kind)) for kind in KINDS}
        found: dict[str, Any] = {}
        errors: list[BaseException] = []

        def walk(kind: str) -> None:
            try:
                found[kind] = s.search(queries[kind], limit=HEAD, count=True)
            except BaseException as exc:  # noqa: BLE001 - raised again below, in the caller's thread
                errors.append(exc)

        # The walks are tantivy's own work, done without the GIL: the summaries' on a thread beside the
        # messages', so the call takes the longer walk, not their sum (a phrase in a third of 1M
        # documents: about 30 ms of messages and 13 of summaries).
        side = threading.Thread(target=walk, args=("summary",), name="vaultlcm-count-summaries", daemon=True)
        side.start()
        walk("message")
        side.join()
        if errors:
            raise errors[0]
        heads = {kind: (self._rows(found[kind].hits, scored=True), int(found[kind].count)) for kind in KINDS}
        self._memo = (s, pq, filters, heads)
        return match_count(Counter({k: c for k, (_, c) in heads.items()}), Counter())

    def _n_doc_freq(self, term: str) -> int:
        return int(self._live().doc_freq("text", term))

    def _compile(self, node: QNode) -> Any:
        schema = self._schema
        if isinstance(node, QTerm):
            return Query.term_query(schema, "text", node.text)
        if isinstance(node, QPhrase):
            return Query.phrase_query(schema, "text", list(node.words))
        if isinstance(node, QPrefix):
            terms = self._live().terms_with_prefix("text", node.text, limit=MAX_PREFIX_TERMS + 1)
            if not terms:
                return Query.empty_query()
            if len(terms) > MAX_PREFIX_TERMS:
                return Query.regex_query(schema, "text", _regex_literal(node.text) + ".*")
            return Query.boolean_query([(Occur.Should, Query.term_query(schema, "text", t)) for t, _ in terms])
        if isinstance(node, QPhrasePrefix):
            words: list[str | tuple[int, str]] = [_regex_literal(w) for w in node.words[:-1]]
            words.append(_regex_literal(node.words[-1]) + ".*")
            return Query.regex_phrase_query(schema, "text", words)
        assert isinstance(node, QAny)
        return Query.boolean_query([(Occur.Should, self._compile(o)) for o in node.options])
