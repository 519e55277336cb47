"""The default search backend: Whoosh (the maintained ``whoosh-reloaded`` fork).

What was measured and how this module answers it:

* A commit costs ~40-90 ms and merging segments costs about as much as indexing
  the documents again (~1k docs/s), so merging inside commits stalled writers for
  tens of seconds. Batches are therefore committed with ``merge=False``.
* Segments then pile up and queries slow down. When there are more than
  ``merge_threshold`` segments, a merge of the smallest ones is built **in a
  child process** (so it neither holds the index lock nor competes for this
  process's GIL) into a scratch directory; swapping the result into the table
  of contents takes milliseconds under the lock. Documents deleted or replaced
  while the merge ran are re-applied to the merged segment during the swap.
* ``rebuild`` uses Whoosh's multiprocessing writer (one process per core) and
  swaps the new segments in with one commit, so readers never see an empty index.
"""

from __future__ import annotations

import bisect
import gc
import heapq
import os
import pickle
import secrets
import shutil
import subprocess
import sys
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from itertools import compress
from pathlib import Path
from typing import Any

from whoosh import columns, fields, query
from whoosh.analysis import Token, Tokenizer
from whoosh.codec.whoosh3 import W3Codec, W3Segment
from whoosh.collectors import TopCollector
from whoosh.matching.wrappers import RequireMatcher

from ..procs import bind_forked_children, die_with_parent
from ..errors import IndexError_
from .base import KINDS, Filters, Forget, IndexDoc, MatchCount
from .buffered import COORD, BufferedIndex, Row, match_count, tie_key
from .whoosh_blocks import ArrayBlocks
from .whoosh_postings import Matches, evaluate, summary_sets
from .whoosh_postings import supported as postings_supported
from .whoosh_writing import POOL_MB, compact_term_table, wide_merges
from .whoosh_storage import MappedStorage, create_in, open_dir
from .query import ParsedQuery, QAny, QNode, QPhrase, QPhrasePrefix, QPrefix, QTerm, index_terms, iter_tokens

#: Expand a prefix into at most this many scored terms; beyond it, match them all
#: with a constant score (cheaper, and recall is what grep needs).
MAX_PREFIX_TERMS = 512
#: A query's matches are kept for the searches that follow its count only up to this many (16 bytes each).
MEMO_MATCHES = 1_000_000


class VaultTokenizer(Tokenizer):
    """Whoosh adapter for :func:`vaultlcm.index.query.iter_tokens` (picklable: no state)."""

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))

    def __call__(  # type: ignore[override]
        self,
        value: str,
        positions: bool = False,
        chars: bool = False,
        keeporiginal: bool = False,
        removestops: bool = True,
        start_pos: int = 0,
        start_char: int = 0,
        tokenize: bool = True,
        mode: str = "",
        **kwargs: Any,
    ) -> Iterator[Token]:
        t = Token(positions, chars, removestops=removestops, mode=mode, **kwargs)
        if not tokenize:  # Whoosh asks for the value as a single token
            t.original = t.text = value.lower()
            t.boost, t.stopped = 1.0, False
            if positions:
                t.pos = start_pos
            if chars:
                t.startchar, t.endchar = start_char, start_char + len(value)
            yield t
            return
        if not chars and not keeporiginal:
            # The index path (positions only): the cheaper token list without offsets.
            for text, pos in index_terms(value):
                t.text = text
                t.boost, t.stopped = 1.0, False
                if positions:
                    t.pos = start_pos + pos
                yield t
            return
        for text, pos, start, end in iter_tokens(value):
            t.text = text
            t.boost, t.stopped = 1.0, False
            if keeporiginal:
                t.original = text
            if positions:
                t.pos = start_pos + pos
            if chars:
                t.startchar, t.endchar = start_char + start, start_char + end
            yield t


class SecureIdCodec(W3Codec):
    """Whoosh's codec, naming new segments from the OS's randomness, its writers' term tables compact.

    Whoosh draws segment names from the global ``random`` module, so a program
    that seeds it (reproducible agents, test frameworks such as hypothesis) gets
    the same names again, and a new segment then collides with an existing one
    (its files are overwritten, or the commit fails on an assertion). Picklable:
    the table of contents stores each segment's codec.
    """

    def new_segment(self, storage: Any, indexname: str) -> Any:
        return W3Segment(self, indexname, segid=secrets.token_hex(8))

    def field_writer(self, storage: Any, segment: Any) -> Any:
        # Its term table's entries in arrays (see whoosh_writing): a 1M rebuild's workers 225 -> 140 MB each.
        return compact_term_table(super().field_writer(storage, segment))


class ArrayBlockCodec(ArrayBlocks, SecureIdCodec):
    """:class:`SecureIdCodec` with each block of postings as arrays (:mod:`.whoosh_blocks`): what new
    segments are written with. A class of its own, since the table of contents names each segment's
    codec: segments :class:`SecureIdCodec` wrote are read with Whoosh's pickled blocks."""


class _RequireMatcher(RequireMatcher):
    """``RequireMatcher`` without the whoosh 2.7.5 bug: after skipping to a better
    block it may already sit on a match, which ``_find_next`` asserts it doesn't."""

    def skip_to_quality(self, minquality: float) -> int:
        skipped = self.a.skip_to_quality(minquality)
        if self.a.is_active() and self.b.is_active() and self.a.id() != self.b.id():
            self.child._find_next()
        return skipped


class _Require(query.Require):
    """Filter clause: intersects with the text query, scored by the text query only."""

    def matcher(self, searcher: Any, context: Any = None) -> Any:
        scored = self.a.matcher(searcher, context)
        return _RequireMatcher(scored, self.b.matcher(searcher, searcher.boolean_context()))


def build_schema() -> fields.Schema:
    return fields.Schema(
        id=fields.ID(stored=True, unique=True, sortable=True),
        kind=fields.ID(stored=True, sortable=True),  # sortable: a column, read per match when counting
        conversation=fields.ID(stored=True),
        role=fields.STORED(),
        depth=fields.STORED(),
        # A column, not stored: stored_hashes() reads it without decompressing texts.
        content_hash=fields.COLUMN(columns.VarBytesColumn()),
        # A column, read per candidate for time filters and tie-breaks: an indexed
        # NUMERIC range expands into hundreds of terms and cost ~25 ms per query.
        at=fields.COLUMN(columns.NumericColumn("d", default=0.0)),
        seq=fields.COLUMN(columns.NumericColumn("q", default=0)),  # orders equal times
        tie=fields.COLUMN(columns.NumericColumn("q", default=0)),  # tie_key(id): the last tie-break
        text=fields.TEXT(analyzer=VaultTokenizer(), phrase=True, stored=True),
    )


def _fields(d: IndexDoc) -> dict[str, Any]:
    return dict(
        id=d.id, kind=d.kind, conversation=d.conversation, role=d.role, depth=d.depth,
        content_hash=d.content_hash.encode("utf-8"), at=float(d.at), seq=int(d.seq),
        tie=tie_key(d.id), text=d.text,
    )


class WhooshIndex(BufferedIndex):
    """:class:`~vaultlcm.index.base.SearchIndex` on Whoosh."""

    backend = "whoosh"
    merge_threshold = 8  # segments; more than this triggers a background merge
    merge_factor = 4  # a segment joins a merge while it is <= factor x the docs gathered so far
    rebuild_procs = min(2, os.cpu_count() or 1)
    #: What this process writes new segments with (a background merge writes ArrayBlockCodec's).
    segment_codec: type[SecureIdCodec] = ArrayBlockCodec

    def __init__(self, path: Path | str, **kwargs: Any) -> None:
        self._ix: Any = None
        self._searcher: Any = None
        self._cols: dict[str, Any] = {}
        #: The last query evaluated on the postings, kept for the count that follows a page.
        self._memo: tuple[Any, ...] | None = None
        self._merge: dict[str, Any] | None = None  # the running merge job
        self._merge_backoff = 0.0
        super().__init__(path, **kwargs)

    # -- open / create

    def _n_create(self) -> None:
        self._ix = create_in(str(self.path), build_schema())
        self._open_searcher()
        self._clean_merge_dirs()

    def _n_open(self) -> None:
        try:
            ix = open_dir(str(self.path))
        except BaseException:
            # Whoosh leaves the half-read table of contents open when it is corrupt;
            # close it now rather than warn at some random later point.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ResourceWarning)
                gc.collect()
            raise
        if set(ix.schema.names()) != set(build_schema().names()):
            raise ValueError(f"unexpected fields {sorted(ix.schema.names())}")
        self._ix = ix
        self._open_searcher()
        self._searcher.doc_count()  # the searcher opened every segment: unreadable ones fail here
        if self.writable:
            self._clean_merge_dirs()

    def _n_become_writer(self) -> None:
        self._clean_merge_dirs()

    def _open_searcher(self) -> None:
        self._searcher = self._ix.searcher()
        self._cols, self._memo = {}, None

    def _n_refresh(self) -> None:
        old = self._searcher
        if self._ix.latest_generation() == old.reader().generation():
            return
        # Not Searcher.refresh(): in whoosh-reloaded 2.7.5 it keeps the old segment
        # objects next to the new ones (deleted docs come back, merged docs double)
        # and it crashes on an empty index.
        self._searcher, self._cols, self._memo = self._ix.searcher(), {}, None
        old.close()

    def _n_close(self) -> None:
        self._abort_merge()
        if self._searcher is not None:
            self._searcher.close()
            self._searcher = None

    # -- writes

    def _writer(self) -> Any:
        # Our file lock makes us the only writer, but a merge swap or a crashed
        # predecessor's lock may still be settling: wait a little, never forever.
        return self._ix.writer(timeout=5.0, delay=0.05, codec=self.segment_codec())

    def _n_apply(self, upserts: list[IndexDoc], deletes: list[str]) -> None:
        w = self._writer()
        try:
            # One searcher finds every old version of the batch's ids; update_document and
            # delete_by_term open one per call (every segment's files, each time), which made
            # a catch-up of a few thousand documents take minutes.
            with w.searcher() as s:
                for doc_id in [*deletes, *(d.id for d in upserts)]:
                    for docnum in s.docs_for_query(query.Term("id", doc_id), for_deletion=True):
                        w.delete_document(docnum)
            for d in upserts:
                w.add_document(**_fields(d))
            w.commit(merge=False)
        except BaseException:
            if not w.is_closed:  # a failed commit must not keep whoosh's write lock
                w.cancel()
            raise

    def _n_rebuild(self, docs: Iterator[IndexDoc | Forget]) -> None:
        # forgets_in_rebuild is False: BufferedIndex.rebuild refuses Forget items before they reach here.
        self._abort_merge()
        procs = self.rebuild_procs
        if procs > 1:
            bind_forked_children()  # the writer's worker processes die with this one
        codec = self.segment_codec()
        with wide_merges():  # the workers fork inside, at the first documents
            w = (self._ix.writer(procs=procs, multisegment=True, limitmb=POOL_MB / procs, codec=codec)
                 if procs > 1 else self._ix.writer(limitmb=POOL_MB, codec=codec))
            n = 0
            try:
                for d in docs:
                    assert not isinstance(d, Forget)
                    w.add_document(**_fields(d))
                    n += 1
            except BaseException:
                _stop_workers(w)
                w.cancel()
                raise
            # Drop every old segment in the same commit: readers switch atomically.
            w.commit(mergetype=lambda writer, segments: [])
        got = self._ix.doc_count()
        if got != n:  # a worker process died: Whoosh would silently lose its batch
            raise IndexError_(f"rebuild indexed {got} of {n} documents")

    # -- reads

    def _n_count(self) -> int:
        return int(self._searcher.doc_count())

    def _n_outdated(self) -> int:
        # Segments written before ArrayBlockCodec keep Whoosh's pickled blocks (read about half as fast).
        return sum(seg.doc_count() for seg in self._ix._segments() if not isinstance(seg.codec(), ArrayBlockCodec))

    def _n_hashes(self) -> dict[str, str]:
        reader = self._searcher.reader()
        if reader.doc_count_all() == 0:
            return {}
        ids = reader.column_reader("id")
        hashes = reader.column_reader("content_hash")
        return {ids[n]: hashes[n].decode("utf-8") for n in reader.all_doc_ids()}

    def _n_load(self, refs: list[Any]) -> list[dict[str, Any]]:
        return [self._searcher.stored_fields(n) for n in refs]  # id, kind, conversation, role, depth, text

    def _column(self, name: str) -> Any:
        """A column reader of the current searcher (a mapping docnum -> value), cached."""
        col = self._cols.get(name)
        if col is None:
            reader = self._searcher.reader()
            if not reader.has_column(name):  # an empty index
                return _Constant({"at": 0.0, "seq": 0, "tie": 0}.get(name, ""))
            col = self._cols[name] = reader.column_reader(name)
        return col

    def _query(self, pq: ParsedQuery, filters: Filters) -> Any:
        compiled = [self._compile(c) for c in pq.clauses]
        q: Any
        optional = [c for c, part in zip(compiled, pq.parts) if not part.required]
        if filters.match == "any" and len(compiled) > 1 and optional:
            # Each clause a document has adds COORD to its BM25: more of the words first.
            anyof = query.Or([query.Or([query.ConstantScoreQuery(c, COORD), c]) for c in optional])
            required = [query.Or([query.ConstantScoreQuery(c, COORD), c])
                        for c, part in zip(compiled, pq.parts) if part.required]
            q = query.AndMaybe(query.And(required) if len(required) > 1 else required[0], anyof) if required else anyof
        else:
            q = query.And(compiled)
        filt: list[Any] = []
        if filters.kind is not None:
            filt.append(query.Term("kind", filters.kind))
        if filters.conversations is not None:
            filt.append(query.Or([query.Term("conversation", c) for c in filters.conversations]))
        if filt:
            # Require: intersected by skipping and scored by the text query only;
            # search(filter=...) would first build the set of every matching doc.
            q = _Require(q, query.And(filt) if len(filt) > 1 else filt[0])
        return q

    def _matches(self, q: Any, filters: Filters) -> Iterator[tuple[int, float]]:
        """``(docnum, at)`` of every match inside the time window (no scoring)."""
        at = self._column("at")
        since, before = filters.since, filters.before
        for docnum in self._searcher.docs_for_query(q):
            t = at[docnum]
            if (since is None or t >= since) and (before is None or t < before):
                yield docnum, t

    def _evaluated(self, pq: ParsedQuery, filters: Filters) -> Matches | None:
        """Every match's global number and score from the postings, by kind (None: a shape only
        Whoosh's matchers take).

        A grep asks for the count of a query, then for a page of messages and one of
        summaries: one evaluation of both kinds, scored and split by kind as it goes,
        serves all three.
        """
        pq = self._terms_for_prefixes(pq)
        if not postings_supported(pq, filters):
            return None
        both = replace(filters, kind=None)
        memo = self._memo
        if memo is not None and memo[0] is self._searcher and memo[1] == pq and memo[2] == both:
            found = memo[3]
        else:
            found = evaluate(self._searcher, pq, both, self._column("at"), scored=True, summaries=self._summary_sets())
            # Kept only while small: a long-running process must not hold a common word's every match.
            self._memo = (self._searcher, pq, both, found) if len(found) <= MEMO_MATCHES else None
        return found

    def _summary_sets(self) -> dict[int, set[int]]:
        """The summaries of each segment of the current searcher, read once per searcher."""
        got = self._cols.get("summary-sets")
        if got is None:
            got = self._cols["summary-sets"] = summary_sets(self._searcher)
        return got  # type: ignore[no-any-return]

    def _n_search(self, pq: ParsedQuery, filters: Filters, n: int, sort: str) -> list[Row]:
        at, seq, tie = self._column("at"), self._column("seq"), self._column("tie")
        found = self._evaluated(pq, filters)
        if found is not None:
            docs, scores = found.of(filters.kind)
            if sort == "relevance":
                if len(docs) <= n:
                    return [(score, at[d], seq[d], tie[d], d) for d, score in zip(docs, scores)]
                # The n-th best score; more documents may share it than fit: the newest of them make the
                # page (they are listed newest first), whatever the order the segments hold them in.
                cut = heapq.nlargest(n, scores)[-1]
                page = list(compress(zip(scores, docs), map(cut.__lt__, scores)))
                tied = compress(docs, map(cut.__eq__, scores))
                page += [(cut, d) for d in heapq.nlargest(n - len(page), tied, key=lambda d: (at[d], seq[d], -tie[d]))]
                return [(score, at[d], seq[d], tie[d], d) for score, d in page]
            pick = heapq.nlargest if sort == "newest" else heapq.nsmallest
            return [(0.0, at[d], seq[d], tie[d], d) for d in pick(n, docs, key=at.__getitem__)]
        q = self._query(pq, filters)
        timed = filters.since is not None or filters.before is not None
        if sort != "relevance":
            newest = sort == "newest"
            if not timed:
                results = self._searcher.search(q, limit=n, sortedby="at", reverse=newest)
                return [(0.0, at[d], seq[d], tie[d], d) for d in results.docs()]
            # The time window is a column, not an index: pick the best n by hand.
            pick = heapq.nlargest if newest else heapq.nsmallest
            return [(0.0, t, seq[d], tie[d], d) for d, t in pick(n, self._matches(q, filters), key=lambda m: m[1])]
        if not timed:
            # No matcher "replacement": whoosh 2.7.5 swaps a union whose parts each look too
            # weak for an intersection, on quality bounds that are wrong across segments, and
            # so drops better documents of later segments (a word OR its stem, for one).
            collector = TopCollector(limit=n, usequality=True, replace=0)
            self._searcher.search_with_collector(q, collector)
            return [(score, at[d], seq[d], tie[d], d) for d, score in collector.results().items()]
        # Time filter: score every text match (whoosh's early termination barely
        # helps anyway), keep the best n inside the window.
        out: list[Row] = []
        since, before = filters.since, filters.before
        for d, score in self._searcher.search(q, limit=None).items():
            t = at[d]
            if (since is None or t >= since) and (before is None or t < before):
                out.append((score, t, seq[d], tie[d], d))
                if len(out) >= n:
                    break
        return out

    def _n_tally(self, pq: ParsedQuery, filters: Filters, per_day: bool) -> MatchCount:
        by_kind: Counter[str] = Counter()
        by_day: Counter[tuple[int, str]] = Counter()
        found = self._evaluated(pq, filters)
        if found is not None:
            at = self._column("at")
            for kind in KINDS if filters.kind is None else (filters.kind,):
                docs = found.of(kind)[0]
                by_kind[kind] = len(docs)
                if per_day:
                    by_day.update((int(at[d] // 86400), kind) for d in docs)
            return match_count(by_kind, by_day)
        kinds = self._column("kind")
        for d, t in self._matches(self._query(pq, filters), filters):
            k = kinds[d]
            k = k.decode("utf-8") if isinstance(k, bytes) else k
            by_kind[k] += 1
            if per_day:
                by_day[(int(t // 86400), k)] += 1
        return match_count(by_kind, by_day)

    def _n_doc_freq(self, term: str) -> int:
        return int(self._searcher.reader().doc_frequency("text", term))

    def _compile(self, node: QNode) -> Any:
        if isinstance(node, QTerm):
            return query.Term("text", node.text)
        if isinstance(node, QPhrase):
            return query.Phrase("text", list(node.words), slop=1)
        if isinstance(node, QPrefix):
            return self._prefix(node.text)
        if isinstance(node, QPhrasePrefix):
            words = [query.Term("text", w) for w in node.words[:-1]]
            return query.Sequence([*words, self._prefix(node.words[-1])])
        assert isinstance(node, QAny)
        return query.Or([self._compile(o) for o in node.options])

    def _prefix(self, text: str) -> Any:
        terms = self._prefix_terms(text)
        if terms is None:
            return query.Prefix("text", text)  # constant score, unbounded
        if not terms:
            return query.NullQuery
        return query.Or([query.Term("text", t) for t in terms])

    def _terms_for_prefixes(self, pq: ParsedQuery) -> ParsedQuery:
        """``pq`` with each clause that is a prefix (``deploy*``) given as the terms it stands for, as
        :meth:`_prefix` gives it to Whoosh's matchers (the same matches and scores), so the postings
        evaluate it; a prefix of more than :data:`MAX_PREFIX_TERMS` terms stays (Whoosh's constant score)."""
        if not any(isinstance(c, QPrefix) for c in pq.clauses):
            return pq
        clauses = []
        for clause in pq.clauses:
            terms = self._prefix_terms(clause.text) if isinstance(clause, QPrefix) else None
            clauses.append(clause if terms is None else QAny(tuple(QTerm(t) for t in terms)))
        return replace(pq, clauses=tuple(clauses))

    def _prefix_terms(self, prefix: str) -> list[str] | None:
        """The indexed words starting with ``prefix`` (None: more than :data:`MAX_PREFIX_TERMS`), read
        from the term table once per searcher: a grep asks for them in its count and each of its pages."""
        key = f"prefix:{prefix}"
        if key not in self._cols:
            self._cols[key] = _expand(prefix, self._searcher.reader())
        return self._cols[key]  # type: ignore[no-any-return]

    # -- background merges

    def _idle_wait(self) -> float | None:
        return 0.5 if self._merge is not None else None

    def _merge_dirs(self) -> list[Path]:
        return [p for p in self.path.glob("merge-*") if p.is_dir()]

    def _clean_merge_dirs(self) -> None:
        for p in self._merge_dirs():  # left by a crash; never in the table of contents
            shutil.rmtree(p, ignore_errors=True)

    def _n_maintain(self) -> None:
        if self._merge is not None:
            if self._merge["proc"].poll() is None:
                return  # still running
            self._finish_merge()  # then plan the next one right away
        if time.monotonic() < self._merge_backoff:
            return
        segments = list(self._ix._segments())
        plan = plan_merge(segments, self.merge_threshold, self.merge_factor)
        if plan:
            self._start_merge(plan)

    def _start_merge(self, segments: list[Any]) -> None:
        job = self.path / f"merge-{uuid.uuid4().hex[:12]}"
        job.mkdir()
        with open(job / "job.pickle", "wb") as f:
            pickle.dump({"index": str(self.path), "segments": segments}, f)
        snapshot = [(s.segment_id(), s.doc_count_all(), sorted(s.deleted_docs())) for s in segments]
        # The child must import this very package, even from an uninstalled checkout.
        root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
        code = "import sys; from vaultlcm.index.whoosh_backend import merge_main; merge_main(sys.argv[1])"
        parent = os.getpid()
        with open(job / "stderr.txt", "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-c", code, str(job)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env,
                preexec_fn=lambda: die_with_parent(parent),  # never outlives a killed parent
            )
        self._merge = {"proc": proc, "dir": job, "snapshot": snapshot}

    def _abort_merge(self) -> None:
        job, self._merge = self._merge, None
        if job is None:
            return
        proc = job["proc"]
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(job["dir"], ignore_errors=True)

    def _finish_merge(self) -> None:
        job = self._merge
        assert job is not None
        result = job["dir"] / "result.pickle"
        if job["proc"].returncode != 0 or not result.exists():
            self._abort_merge()
            self._merge_backoff = time.monotonic() + 60.0  # don't retry a failing merge in a loop
            return
        with open(result, "rb") as f:
            merged = pickle.load(f)
        w = self._writer()
        try:
            current = {s.segment_id(): s for s in w.segments}
            if any(sid not in current for sid, _, _ in job["snapshot"]):
                w.cancel()  # a rebuild replaced those segments meanwhile
                self._abort_merge()
                return
            # Docs deleted from the source segments while the merge ran must be
            # deleted from the merged copy too. The merge copied each segment's
            # live docs in order, so a doc's new number is its rank among them.
            base = 0
            for sid, count_all, was_deleted in job["snapshot"]:
                for old in set(current[sid].deleted_docs()).difference(was_deleted):
                    merged.delete_document(base + old - bisect.bisect_left(was_deleted, old))
                base += count_all - len(was_deleted)
            prefix = merged.segment_id() + "."
            for p in (job["dir"] / "out").iterdir():
                if p.name.startswith(prefix):
                    os.replace(p, self.path / p.name)
            gone = {sid for sid, _, _ in job["snapshot"]}
            w.commit(mergetype=lambda writer, segs: [s for s in segs if s.segment_id() not in gone] + [merged])
        except BaseException:
            if not w.is_closed:
                w.cancel()
            self._abort_merge()
            raise
        self._abort_merge()  # removes the job directory; the next search refreshes


def _expand(prefix: str, reader: Any) -> list[str] | None:
    """The indexed words starting with ``prefix`` (None: more than :data:`MAX_PREFIX_TERMS`)."""
    terms = []
    for t in reader.expand_prefix("text", prefix):
        terms.append(t.decode("utf-8") if isinstance(t, bytes) else t)
        if len(terms) > MAX_PREFIX_TERMS:
            return None
    return terms


def _stop_workers(writer: Any) -> None:
    """End the worker processes of a multiprocessing writer that is being cancelled.

    Whoosh's ``cancel`` only flags its own copy of each worker: a worker waiting on the job
    queue waits forever, and the interpreter's exit with it (multiprocessing joins its
    children at exit), while one with jobs queued reads files the cancel deletes and prints
    its traceback. Terminated first, they do neither.
    """
    tasks = list(getattr(writer, "tasks", ()))
    for task in tasks:
        task.terminate()
    for task in tasks:
        task.join(5)


class _Constant:
    """A stand-in column of an empty index: every document has the default value."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __getitem__(self, docnum: int) -> Any:
        return self.value


def plan_merge(segments: list[Any], threshold: int, factor: int) -> list[Any] | None:
    """Pick the segments to merge, or None when there are few enough.

    Log-structured: gather the smallest segments while the next one is not much
    bigger than everything gathered so far, so each document is re-merged only
    about log(n) times and big segments are left alone.
    """
    if len(segments) <= threshold:
        return None
    ordered = sorted(segments, key=lambda s: s.doc_count())
    group = [ordered[0]]
    total = max(1, ordered[0].doc_count())
    for seg in ordered[1:]:
        if seg.doc_count() > factor * total:
            break
        group.append(seg)
        total += seg.doc_count()
    return group if len(group) > 1 else ordered[:2]


def merge_main(job_dir: str) -> None:
    """Child process: merge the job's segments into a new segment under ``job/out``."""
    from whoosh.reading import SegmentReader
    from whoosh.writing import SegmentWriter

    job = Path(job_dir)
    with open(job / "job.pickle", "rb") as f:
        spec = pickle.load(f)
    schema = build_schema()
    src = MappedStorage(spec["index"])
    (job / "out").mkdir()
    scratch = create_in(str(job / "out"), schema)
    w = SegmentWriter(scratch, _lk=False, codec=ArrayBlockCodec())
    for seg in spec["segments"]:
        reader = SegmentReader(src, schema, seg)
        w.add_reader(reader)
        reader.close()
    merged = w._finalize_segment()
    w._finish()
    tmp = job / "result.pickle.tmp"
    with open(tmp, "wb") as f:
        pickle.dump(merged, f)
    os.replace(tmp, job / "result.pickle")

