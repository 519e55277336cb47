"""The machinery both backends share: write buffering, the commit thread, the writer lock.

:class:`BufferedIndex` implements :class:`~vaultlcm.index.base.SearchIndex` on
top of a few ``_n_*`` hooks that each backend fills in with its native calls.

Write path: :meth:`~BufferedIndex.add` only puts documents in a memory buffer; a
background thread commits them in batches (every ``commit_interval`` seconds or
``batch_docs`` documents). :meth:`~BufferedIndex.search` flushes first, so a
search always sees every document added before it. One process at a time may
write an index (a lock file in the index directory); other processes open it
read-only and can search.

An index directory holds :data:`VERSION_FILE`, written last when the index is
created; an index whose schema version, analyzer (the stemmer and its version)
or backend does not match raises :class:`~vaultlcm.index.base.IndexUnavailable`
and must be rebuilt (the vault does that by itself).

Ordering (:meth:`BufferedIndex.search`): the backend returns the best ``n``
documents by the sort's primary key (score, or time); ties at the cut are
resolved here by the secondary key (time, then conversation order), fetching
more when a tie runs past what was fetched.

Under ``relevance``, scores form *bands*: a band starts at the best score not
yet placed and holds the scores within :data:`RELEVANCE_BAND` (relative) of
it, at most :data:`BAND_SIZE` of them; bands come best first, and inside a band
hits come newest first. BM25
differences that small say more about message length than about meaning, and
in an agent's history a newer statement supersedes an older one (a deadline
that moved, a version that changed), so the newer of two comparable hits
should come first. Equal scores (floats computed in different orders) share a
band however they round (up to its size: thousands of equal scores on a common
word are not all ordered by time, which would cost a full scoring pass per page).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import threading
import time
import weakref
from abc import abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from ..errors import IndexError_, UsageError
from .base import (
    BACKENDS, KINDS, MATCHES, SORTS, Filters, Forget, IndexDoc, IndexLocked, IndexOtherBackend, IndexUnavailable,
    MatchCount, SearchHit, SearchIndex,
)
from .query import ParsedQuery, QAny, QTerm, make_snippet, matched_words, parse_query, stemmer_name

#: 2: stemmed words (stem tokens), CJK characters as words, seq and kind columns.
SCHEMA_VERSION = 2
#: Scores within this relative distance of each other are a tie.
TIE_TOLERANCE = 1e-5
#: A relevance band holds the scores within this fraction below its best one (ordered newest first) ...
RELEVANCE_BAND = 0.3
#: ... and at most this many hits, so that settling the order at a page's end costs one bounded re-fetch.
BAND_SIZE = 64
#: A tie at the cut is resolved over at most this many fetched documents.
MAX_TIE_FETCH = 10_000
#: Under ``match="any"`` each clause a document matches adds this to its score, so
#: documents with more of the words come first whatever their BM25 (a sum of BM25
#: scores stays far below it). A power of two: exact in the float32 scores of Tantivy.
COORD = 4096.0
VERSION_FILE = "vaultlcm-index.json"
LOCK_FILE = "writer.lock"
PID_FILE = "writer.pid"
#: Files of ours that may sit in an index directory before the index exists.
#: vaultlcm-marks.json belongs to vaultlcm.indexing (what the index holds, saved at a clean close).
_OUR_FILES = frozenset({VERSION_FILE, LOCK_FILE, PID_FILE, "vaultlcm-marks.json"})

_open_indexes: "weakref.WeakSet[BufferedIndex]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:  # pending documents would otherwise die with the daemon thread
    for ix in list(_open_indexes):
        try:
            ix.close()
        except Exception:  # noqa: BLE001 - best effort at interpreter exit
            pass


class BufferedIndex(SearchIndex):
    """Shared machinery: buffering, the commit thread, the writer lock, versioning.

    Backends implement the ``_n_*`` hooks, which only run under ``_write_lock``
    (writes) or ``_read_lock`` (searches), so they need no locking of their own.
    """

    def __init__(
        self,
        path: Path | str,
        *,
        lock_timeout: float = 10.0,
        commit_interval: float = 0.5,
        batch_docs: int = 5000,
        max_pending: int = 50_000,
        reset: bool = False,
    ) -> None:
        self.path = Path(path)
        self.lock_timeout = lock_timeout
        self.commit_interval = commit_interval
        self.batch_docs = batch_docs
        self.max_pending = max_pending
        self._pending: dict[str, IndexDoc | None] = {}  # id -> doc, None = removal
        self._pending_since = 0.0
        self._cv = threading.Condition()  # guards _pending and _closing
        self._write_lock = threading.RLock()  # serializes every native write
        self._read_lock = threading.RLock()  # serializes native searches
        self._closing = False
        self._closed = False
        self._bg_error: BaseException | None = None
        self._thread: threading.Thread | None = None
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise IndexError_(f"cannot create the search index directory {self.path}: {exc}") from exc
        self._lock = FileLock(str(self.path / LOCK_FILE), thread_local=False)
        self.writable = False
        if reset:
            self._acquire_writer(self.lock_timeout)
            self._wipe()
        else:
            self._try_acquire_writer()
        try:
            self._open_or_create()
        except BaseException:
            self._release_writer()
            raise
        if self.writable:
            self._start_thread()
        _open_indexes.add(self)

    # -- locking and opening

    def _try_acquire_writer(self) -> bool:
        try:
            self._lock.acquire(timeout=0)
        except (Timeout, OSError):  # OSError: read-only media; we can still search
            return False
        self._became_writer()
        return True

    def _acquire_writer(self, timeout: float) -> None:
        try:
            self._lock.acquire(timeout=timeout)
        except Timeout:
            raise IndexLocked(
                f"another process{self._holder()} holds the search index at {self.path} "
                f"(waited {timeout:g} s for its writer lock); this process can only search it. "
                "Stop the other vaultlcm process or retry when it is done."
            ) from None
        except OSError as exc:
            raise IndexError_(f"cannot take the writer lock of the search index at {self.path}: {exc}") from exc
        self._became_writer()

    def _became_writer(self) -> None:
        self.writable = True
        try:
            (self.path / PID_FILE).write_text(f"{os.getpid()}\n", encoding="ascii")
        except OSError:
            pass  # only used to name the holder in error messages

    def _holder(self) -> str:
        try:
            pid = (self.path / PID_FILE).read_text(encoding="ascii").strip()
        except OSError:
            return ""
        return f" (pid {pid})" if pid.isdigit() else ""

    def _release_writer(self) -> None:
        if self.writable:
            self.writable = False
            try:
                self._lock.release()
            except Exception:  # noqa: BLE001 - releasing must not mask the real error
                pass

    def _wipe(self) -> None:
        """Delete everything in the index directory but our lock files."""
        # An index directory holds only flat files (and our merge-* scratch dirs):
        # refuse to empty anything else, such as a vault passed by mistake.
        odd = [p.name for p in self.path.iterdir()
               if (p.is_dir() and not p.name.startswith("merge-")) or p.suffix == ".md" or p.name == "vaultlcm.toml"]
        if odd:
            self._release_writer()
            raise UsageError(
                f"refusing to reset {self.path}: it does not look like a search index directory "
                f"(it holds {', '.join(sorted(odd)[:3])}). Point the index at its own directory."
            )
        for p in self.path.iterdir():
            if p.name in (LOCK_FILE, PID_FILE):
                continue
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)

    def _read_version(self) -> dict[str, Any] | None:
        vf = self.path / VERSION_FILE
        try:
            raw = vf.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise IndexUnavailable(f"cannot read {vf}: {exc}") from exc
        try:
            meta = json.loads(raw)
        except ValueError:
            meta = None
        if not isinstance(meta, dict):
            raise IndexUnavailable(f"{vf} is not valid JSON")
        return meta

    def _open_or_create(self) -> None:
        meta = self._read_version()
        if meta is None:
            others = [p.name for p in self.path.iterdir() if p.name not in _OUR_FILES]
            if others:
                raise IndexUnavailable(
                    f"{self.path} holds files ({', '.join(sorted(others)[:3])}...) but no {VERSION_FILE}: "
                    "not a vaultlcm index, or one whose creation was interrupted"
                )
            if not self.writable:
                # Another process holds the lock and is creating the index right now.
                deadline = time.monotonic() + self.lock_timeout
                while meta is None and time.monotonic() < deadline:
                    time.sleep(0.05)
                    meta = self._read_version()
                if meta is None:
                    raise IndexLocked(
                        f"the search index at {self.path} is being created by another process{self._holder()}; "
                        "retry when it is done."
                    )
            else:
                self._guard(self._n_create, "create")
                tmp = self.path / (VERSION_FILE + ".tmp")
                payload = {"format": "vaultlcm-index", "schema_version": SCHEMA_VERSION, "backend": self.backend,
                           "analyzer": stemmer_name()}
                tmp.write_text(json.dumps(payload, sort_keys=True) + "\n", encoding="utf-8")
                os.replace(tmp, self.path / VERSION_FILE)  # last: its presence means "complete"
                return
        if meta.get("schema_version") == SCHEMA_VERSION and meta.get("backend") in BACKENDS and (
                meta.get("backend") != self.backend):
            raise IndexOtherBackend(
                f"the search index at {self.path} is a {meta['backend']} index; this one opens {self.backend}",
                str(meta["backend"]))
        if meta.get("schema_version") != SCHEMA_VERSION or meta.get("backend") != self.backend:
            raise IndexUnavailable(
                f"the search index at {self.path} is {meta.get('backend')!r} schema version "
                f"{meta.get('schema_version')!r}; this vaultlcm needs {self.backend!r} version {SCHEMA_VERSION}"
            )
        if meta.get("analyzer") != stemmer_name():
            raise IndexUnavailable(
                f"the search index at {self.path} was built with the stemmer {meta.get('analyzer')!r}; "
                f"this vaultlcm stems with {stemmer_name()!r}"
            )
        self._guard(self._n_open, "open")

    def _guard(self, fn: Callable[..., Any], what: str, *args: Any) -> Any:
        """Run a native call; unexpected backend failures become IndexUnavailable."""
        try:
            return fn(*args)
        except (IndexError_, UsageError, KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        # Corrupt files surface as many types (struct, zlib, pickle, OSError ...) and
        # tantivy panics as pyo3's PanicException, which is not an Exception.
        except BaseException as exc:
            raise IndexUnavailable(
                f"the {self.backend} search index at {self.path} failed to {what} "
                f"({type(exc).__name__}: {exc})"
            ) from exc

    def _ensure_writer(self) -> None:
        if self._closed:
            raise IndexError_(f"the search index at {self.path} is closed")
        if self.writable:
            return
        with self._write_lock:
            if self.writable:
                return
            self._acquire_writer(self.lock_timeout)
            try:
                self._guard(self._n_become_writer, "open for writing")
            except BaseException:
                self._release_writer()
                raise
            self._start_thread()

    # -- background commits

    def _start_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"vaultlcm-index-{self.backend}", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cv:
                if not self._pending and not self._closing:
                    self._cv.wait(timeout=self._idle_wait())
                # Let a batch build up for commit_interval, unless it is already full.
                while self._pending and not self._closing and len(self._pending) < self.batch_docs:
                    left = self._pending_since + self.commit_interval - time.monotonic()
                    if left <= 0:
                        break
                    self._cv.wait(timeout=left)
                if self._closing:
                    return
            try:
                self._commit_pending()
                self._bg_error = None
            except BaseException as exc:  # noqa: BLE001 - the batch went back to the buffer;
                self._bg_error = exc  # flush() retries it in the caller's thread and raises there
                with self._cv:
                    self._cv.wait(timeout=1.0)  # don't spin on a broken index
            try:
                with self._write_lock:
                    if not self._closed:
                        self._n_maintain()
            except Exception:  # noqa: BLE001 - maintenance is an optimization only
                pass

    def _idle_wait(self) -> float | None:
        """How long the idle thread sleeps before calling ``_n_maintain`` again."""
        return None

    def _commit_pending(self) -> None:
        with self._write_lock:
            with self._cv:
                batch, self._pending = self._pending, {}
            if not batch:
                return
            upserts = [d for d in batch.values() if d is not None]
            deletes = [i for i, d in batch.items() if d is None]
            try:
                self._guard(self._n_apply, "commit", upserts, deletes)
            except BaseException:
                with self._cv:  # put the batch back; anything added since is newer and wins
                    batch.update(self._pending)
                    self._pending = batch
                raise

    def _enqueue(self, items: Iterable[tuple[str, IndexDoc | None]]) -> None:
        self._ensure_writer()
        with self._cv:
            pending = self._pending
            was_empty = not pending
            for key, doc in items:
                pending[key] = doc
            size = len(pending)
            if was_empty:  # wake the committer: the batch's clock starts now
                self._pending_since = time.monotonic()
                self._cv.notify()
            elif size >= self.batch_docs:
                self._cv.notify()
        if size >= self.max_pending:  # the committer can't keep up: apply back-pressure
            self.flush()

    # -- public API

    def add(self, docs: Iterable[IndexDoc]) -> None:
        """Upsert documents by id. Cheap: they are committed by the background thread."""

        def items() -> Iterator[tuple[str, IndexDoc]]:
            for d in docs:
                if d.kind not in KINDS:
                    raise UsageError(f"index document {d.id!r} has kind {d.kind!r}; expected one of {KINDS}")
                yield d.id, d

        self._enqueue(list(items()))

    def remove(self, ids: Iterable[str]) -> None:
        """Remove documents by id; buffered like :meth:`add`."""
        self._enqueue([(i, None) for i in ids])

    def flush(self) -> None:
        """Commit pending documents (writer) or pick up other processes' commits (reader)."""
        if self._closed:
            raise IndexError_(f"the search index at {self.path} is closed")
        if self.writable:
            self._commit_pending()
        with self._read_lock:
            if self.writable:
                self._guard(self._n_refresh, "refresh")
                return
            try:
                self._n_refresh()
            except BaseException as exc:  # noqa: BLE001 - retried once below
                if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                    raise
                # The writer process may have deleted merged-away segment files
                # between our reading its table of contents and opening them.
                time.sleep(0.05)
                self._guard(self._n_refresh, "refresh")

    def _filters(
        self, kind: str | None, conversations: Sequence[str] | None, since: float | None, before: float | None,
        match: str = "all",
    ) -> Filters | None:
        """Validated filters, or None when they can match nothing."""
        if kind is not None and kind not in KINDS:
            raise UsageError(f"search kind must be one of {KINDS} or None, not {kind!r}")
        if match not in MATCHES:
            raise UsageError(f"search match must be one of {', '.join(MATCHES)}, not {match!r}")
        if isinstance(conversations, str):
            conversations = [conversations]
        if conversations is not None and not conversations:
            return None
        return Filters(kind, tuple(conversations) if conversations is not None else None, since, before, match)

    def search(
        self,
        query: str,
        *,
        kind: str | None = None,
        conversations: Sequence[str] | None = None,
        since: float | None = None,
        before: float | None = None,
        limit: int = 20,
        offset: int = 0,
        sort: str = "relevance",
        match: str = "all",
        snippets: bool = True,
    ) -> list[SearchHit]:
        if sort not in SORTS:
            raise UsageError(f"search sort must be one of {', '.join(SORTS)}, not {sort!r}")
        if offset < 0:
            raise UsageError(f"search offset must be 0 or more, not {offset}")
        filters = self._filters(kind, conversations, since, before, match)
        pq = parse_query(query)
        if not pq.clauses or limit <= 0 or filters is None:
            return []
        return self._read(self._ranked, "search", pq, filters, limit, offset, sort, snippets)

    def count_matches(
        self,
        query: str,
        *,
        kind: str | None = None,
        conversations: Sequence[str] | None = None,
        since: float | None = None,
        before: float | None = None,
        per_day: bool = False,
        match: str = "all",
    ) -> MatchCount:
        filters = self._filters(kind, conversations, since, before, match)
        pq = parse_query(query)
        if not pq.clauses or filters is None:
            return MatchCount(0, {k: 0 for k in KINDS}, {})
        return self._read(self._n_tally, "count", pq, filters, per_day)

    def some_words_docs(self, query: str) -> int:
        pq = parse_query(query)
        terms = [[o.text for o in (c.options if isinstance(c, QAny) else (c,)) if isinstance(o, QTerm)]
                 for c, part in zip(pq.clauses, pq.parts) if not part.required]
        if not terms:
            return 0
        self.flush()
        with self._read_lock:
            return sum(max((self._guard(self._n_doc_freq, "count", t) for t in options), default=0)
                       for options in terms)

    def _ranked(self, pq: ParsedQuery, filters: Filters, limit: int, offset: int, sort: str,
                snippets: bool = True) -> list[SearchHit]:
        need = offset + limit
        # A few more than asked, so that ties at the cut can be ordered. Under relevance a band at the
        # cut is the common case, and settling it took a second search: fetch what settles it at once
        # (the page is the same: rows past the cut's band only fill later bands).
        n = need + (BAND_SIZE + 10 if sort == "relevance" else 10)
        while True:
            raw = self._n_search(pq, filters, n, sort)
            if len(raw) < n or n >= MAX_TIE_FETCH or need > len(raw) or not _tied_at_cut(raw, need, sort):
                break
            # The tie runs past what was fetched.
            if sort == "relevance":
                # A band holds at most BAND_SIZE hits: fetching that many past the cut settles it.
                if n >= need + BAND_SIZE + 10:
                    break
                n = need + BAND_SIZE + 10
            else:  # equal times: fetch more until the run of them ends
                n = min(n * 4, MAX_TIE_FETCH)
        page = order_rows(raw, sort)[offset:need]
        if not page:
            return []
        stored = self._n_load([r[4] for r in page])
        scored = sort == "relevance"
        anyword = filters.match == "any"
        return [
            SearchHit(id=f["id"], kind=f["kind"], conversation=f["conversation"],
                      score=split_score(score)[1] if scored else 0.0,
                      snippet=make_snippet(f["text"], pq) if snippets else "", at=float(at), role=f.get("role") or "",
                      depth=int(f.get("depth", -1)), seq=int(seq),
                      matched=matched_words(f["text"], pq) if anyword else None)
            for (score, at, seq, _key, _ref), f in zip(page, stored)
        ]

    def rebuild(self, docs: Iterable[IndexDoc | Forget], progress: Callable[[int], None] | None = None, *,
                unique: bool = False) -> int:
        """Drop everything and index ``docs`` with the backend's bulk path.

        Ids should be unique; when one repeats, the last version wins (like add).
        ``unique``: the caller vouches that no id repeats (primary keys of the catalog),
        so no set of every id is kept: memory stays flat however many documents come.
        Documents added while the rebuild runs are applied after it.
        """
        self._ensure_writer()
        with self._write_lock:
            with self._cv:
                self._pending.clear()  # superseded: the rebuild indexes the source of truth
            later: dict[str, IndexDoc] = {}
            seen: set[str] = set()
            count = [0]

            def checked() -> Iterator[IndexDoc | Forget]:
                kept: Counter[str] = Counter()  # per conversation, for Forget (only with unique)
                for i, d in enumerate(docs, 1):
                    if isinstance(d, Forget):
                        if not (unique and self.forgets_in_rebuild):
                            raise UsageError(f"{self.backend} rebuilds do not take Forget items (or not without unique)")
                        count[0] -= kept.pop(d.conversation, 0)
                        yield d
                        continue
                    if d.kind not in KINDS:
                        raise UsageError(f"index document {d.id!r} has kind {d.kind!r}; expected one of {KINDS}")
                    if unique:
                        count[0] += 1
                        if self.forgets_in_rebuild:
                            kept[d.conversation] += 1
                        yield d
                    elif d.id in seen:
                        later[d.id] = d
                    else:
                        seen.add(d.id)
                        count[0] += 1
                        yield d
                    if progress is not None and i % 1000 == 0:
                        progress(i)

            self._guard(self._n_rebuild, "rebuild", checked())
            if later:
                self._guard(self._n_apply, "commit", list(later.values()), [])
            if progress is not None:
                progress(count[0])
        with self._read_lock:
            self._guard(self._n_refresh, "refresh")
        return count[0]

    def stored_hashes(self) -> dict[str, str]:
        return self._read(self._n_hashes, "read")  # type: ignore[no-any-return]

    def count(self) -> int:
        return int(self._read(self._n_count, "read"))

    def outdated_docs(self) -> int:
        return int(self._read(self._n_outdated, "read"))

    def _read(self, fn: Callable[..., Any], what: str, *args: Any) -> Any:
        """``fn(*args)`` on what is committed: the pending documents flushed first, under the read lock,
        its failures turned into index errors (``what`` names the operation, see :meth:`_guard`)."""
        self.flush()
        with self._read_lock:
            return self._guard(fn, what, *args)

    def _n_outdated(self) -> int:
        """Committed documents in an older, slower format (see :meth:`SearchIndex.outdated_docs`)."""
        return 0

    def close(self) -> None:
        if self._closed:
            return
        with self._cv:
            self._closing = True
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join()
        try:
            if self.writable:
                self._commit_pending()
        finally:
            self._closed = True
            with self._write_lock, self._read_lock:
                try:
                    self._n_close()
                finally:
                    self._release_writer()
            _open_indexes.discard(self)

    # -- backend hooks

    @abstractmethod
    def _n_create(self) -> None:
        """Create an empty native index in ``self.path`` (we hold the writer lock)."""

    @abstractmethod
    def _n_open(self) -> None:
        """Open the existing native index (writable or not); fail loudly if unusable."""

    def _n_become_writer(self) -> None:
        """Called when a read-only instance obtains the writer lock later."""

    @abstractmethod
    def _n_apply(self, upserts: list[IndexDoc], deletes: list[str]) -> None:
        """Commit one batch: upsert ``upserts`` by id, delete ``deletes``."""

    @abstractmethod
    def _n_refresh(self) -> None:
        """Make the searcher see the latest commit."""

    @abstractmethod
    def _n_search(self, pq: ParsedQuery, filters: Filters, n: int, sort: str) -> list[Row]:
        """Top ``n`` matches by the sort's primary key (score, or ``at``) as ``(score, at, seq, tie, ref)``.

        ``tie`` is the document's :func:`tie_key`; ``ref`` feeds ``_n_load``. The
        order among equal keys does not matter. ``score`` may be 0.0 under the
        time sorts.
        """

    @abstractmethod
    def _n_tally(self, pq: ParsedQuery, filters: Filters, per_day: bool) -> MatchCount:
        """Count every match, by kind (and by UTC day when asked)."""

    @abstractmethod
    def _n_doc_freq(self, term: str) -> int:
        """How many committed documents hold ``term`` (deleted ones may still count)."""

    @abstractmethod
    def _n_load(self, refs: list[Any]) -> list[dict[str, Any]]:
        """Stored ``id``, ``kind``, ``conversation``, ``text``, ``role`` and ``depth`` for each ref."""

    @abstractmethod
    def _n_rebuild(self, docs: Iterator[IndexDoc | Forget]) -> None:
        """Replace the index content with ``docs`` (unique ids) in one commit (:class:`Forget` items only
        when :attr:`forgets_in_rebuild`)."""

    @abstractmethod
    def _n_hashes(self) -> dict[str, str]: ...

    @abstractmethod
    def _n_count(self) -> int: ...

    @abstractmethod
    def _n_close(self) -> None: ...

    def _n_maintain(self) -> None:
        """Background housekeeping between commits (e.g. merging segments)."""



# ------------------------------------------------------------------ ordering

Row = tuple[float, float, int, int, Any]  # (score, at, seq, tie key, ref)


def tie_key(doc_id: str) -> int:
    """A stable signed 64-bit number per id: the last tie-break, so that every order is total.

    Without it, documents equal in score, time and seq would come in the order of
    their place in the index, which changes when segments merge (a page could
    then repeat or skip one) and differs between backends.
    """
    return int.from_bytes(hashlib.blake2b(doc_id.encode("utf-8"), digest_size=8).digest(), "big", signed=True)


def split_score(score: float) -> tuple[int, float]:
    """``(clauses matched, BM25)`` of a ``match="any"`` score (0 clauses for an ordinary score)."""
    if score < COORD:
        return 0, score
    k = int(score // COORD)
    return k, score - k * COORD


def _in_band(lead: float, score: float) -> bool:
    """True when ``score`` belongs to the relevance band that ``lead`` starts."""
    (kl, bl), (ks, bs) = split_score(lead), split_score(score)
    return kl == ks and bl - bs <= max(RELEVANCE_BAND, TIE_TOLERANCE) * abs(bl)


def _bands(scores: list[float]) -> list[int]:
    """The band of each score (scores best first); see the module docstring."""
    # Each score is compared with its band's first score, not the previous one,
    # so a slope of slightly lower scores does not chain into one endless band.
    out: list[int] = []
    band, lead, members = -1, None, 0
    for score in scores:
        if lead is None or members >= BAND_SIZE or not _in_band(lead, score):
            band, lead, members = band + 1, score, 0
        members += 1
        out.append(band)
    return out


def _tied_at_cut(raw: list[Row], need: int, sort: str) -> bool:
    """True when the last fetched row may belong with row ``need - 1`` (its order isn't settled)."""
    if sort != "relevance":
        ordered = sorted(raw, key=lambda r: -r[1] if sort == "newest" else r[1])
        return ordered[need - 1][1] == ordered[-1][1]
    scores = sorted((r[0] for r in raw), reverse=True)
    bands = _bands(scores)
    return bands[need - 1] == bands[-1]


def order_rows(rows: list[Row], sort: str) -> list[Row]:
    """``rows`` in ``sort`` order: by relevance band (newest first inside), or by time then ``seq``."""
    if sort == "newest":
        return sorted(rows, key=lambda r: (-r[1], -r[2], -r[0], r[3]))
    if sort == "oldest":
        return sorted(rows, key=lambda r: (r[1], r[2], -r[0], r[3]))
    # Equal scores newest first here too: where a band is full, the newer of them stay in it, whatever
    # order the backend listed them in.
    by_score = sorted(rows, key=lambda r: (-r[0], -r[1], -r[2], r[3]))
    keyed = [(band, -r[1], -r[2], -r[0], r[3], r) for band, r in zip(_bands([r[0] for r in by_score]), by_score)]
    keyed.sort(key=lambda k: k[:5])
    return [k[5] for k in keyed]


def day_of(at: float) -> str:
    """The UTC calendar day (``YYYY-MM-DD``) of a unix time."""
    try:
        return datetime.fromtimestamp(at, UTC).date().isoformat()
    except (OverflowError, OSError, ValueError):  # a time no calendar day holds
        return "0001-01-01" if at < 0 else "9999-12-31"


def match_count(by_kind: Counter[str], by_day: Counter[tuple[int, str]]) -> MatchCount:
    """A :class:`MatchCount` from counts by kind and by ``(day number since the epoch, kind)``."""
    per_day: dict[str, dict[str, int]] = {}
    for (day, kind), count in sorted(by_day.items()):
        per_day.setdefault(day_of(day * 86400.0), {})[kind] = count
    return MatchCount(sum(by_kind.values()), {k: by_kind.get(k, 0) for k in KINDS}, per_day)
