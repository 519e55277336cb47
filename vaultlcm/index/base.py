"""One small full-text index interface, shared by the Whoosh and Tantivy backends.

The index is derived state: it can be deleted at any time and rebuilt from the
vault with :meth:`SearchIndex.rebuild`. Callers only ever see this module's types;
the backend (``open_index("whoosh" | "tantivy", path)``) can change without
touching them.

Query language (identical on both backends, never raises on odd input)
------------------------------------------------------------------------
* ``deploy failed`` -- every word must match (AND), case-insensitive.
* ``"disk is full"`` -- a quoted phrase: the words in this order, adjacent. An
  unterminated quote runs to the end of the query.
* ``deploy*`` -- prefix: ``deploy``, ``deployed``, ``deployment`` ...
  (``"open src/ap*"`` is a phrase whose last word is a prefix).
* Identifiers are first-class: ``m-3f2a``, ``src/app.py``, ``snake_case_name``,
  ``CamelCase``, ``call_01``, ``user@example.com``, ``8443`` match as a whole,
  and their parts match too (``app``, ``snake``, ``camel``, ``case`` ...).
* Everything else is literal: ``foo(``, ``***``, ``a:b"c`` never raise; characters
  that are not letters or digits only separate words. A query with no word left
  (``***``, ``""``) matches nothing.

There are no operators (AND/OR/NOT are ordinary words) and no field syntax.

How text is tokenized (:func:`iter_tokens`): a *chunk* is a run of word
characters joined by ``- . / : @ \\`` (``src/app.py``). Each chunk yields its
*parts* (alphanumeric runs, further split at camelCase boundaries) at consecutive
positions, plus the lower-cased whole chunk and each camelCase word as extra
tokens at the position of their first part. So a phrase of parts matches an
identifier inside a longer one, and a prefix of the whole (``src/ap*``) works.
Tokens are cut at :data:`MAX_TOKEN_CHARS` characters on both sides.

Ranking is BM25; equal scores are ordered newest first (by ``at``).

Write path: :meth:`SearchIndex.add` only puts documents in a memory buffer; a
background thread commits them in batches (every ``commit_interval`` seconds or
``batch_docs`` documents). :meth:`SearchIndex.search` flushes first, so a search
always sees every document added before it. One process at a time may write an
index (a lock file in the index directory); other processes open it read-only
and can search.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import threading
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import regex
from filelock import FileLock, Timeout

from ..errors import IndexError_, UsageError

SCHEMA_VERSION = 1
VERSION_FILE = "vaultlcm-index.json"
LOCK_FILE = "writer.lock"
PID_FILE = "writer.pid"
#: Files of ours that may sit in an index directory before the index exists.
_OUR_FILES = frozenset({VERSION_FILE, LOCK_FILE, PID_FILE})
MAX_TOKEN_CHARS = 64
SNIPPET_CHARS = 200
KINDS = ("message", "summary")


# --------------------------------------------------------------------------- types


@dataclass(frozen=True)
class IndexDoc:
    """One searchable unit: a raw message or a summary node."""

    id: str  # message id "m-..." or summary id "sum_..." (unique key)
    kind: str  # "message" | "summary"
    conversation: str
    text: str  # searchable text
    at: float  # unix seconds (UTC): message time / latest_at of a summary
    role: str = ""  # message role (empty for summaries)
    depth: int = -1  # summary depth, -1 for messages
    content_hash: str = ""  # hash of the source content, lets callers detect drift


@dataclass(frozen=True)
class SearchHit:
    """One search result; ``snippet`` is plain text around the first match."""

    id: str
    kind: str
    conversation: str
    score: float
    snippet: str
    at: float


class IndexUnavailable(IndexError_):
    """The index directory cannot be used (corrupt, wrong version, missing files).

    The caller should rebuild it: ``open_index(backend, path, reset=True)`` then
    :meth:`SearchIndex.rebuild`.
    """


class IndexLocked(IndexError_):
    """Another process holds the index's writer lock (this one can only search)."""


# ------------------------------------------------------------------------ analysis

# A chunk: word characters joined by identifier punctuation (src/app.py, m-3f2a).
_CHUNK = regex.compile(r"\w+(?:[-./:@\\]\w+)*")
# Parts of a chunk: alphanumeric runs ("_" and joiners separate them).
_PART = regex.compile(r"[^\W_]+")
# camelCase boundaries: fooBar -> foo|Bar, HTTPServer -> HTTP|Server.
_CAMEL = regex.compile(r"(?<=\p{Ll})(?=\p{Lu})|(?<=\p{Lu})(?=\p{Lu}\p{Ll})")
_SPACES = regex.compile(r"\s+")


def _plain(word: str) -> bool:
    """True when a word needs no splitting (the common case, kept cheap)."""
    return word.isalnum() and (word.islower() or word.isupper() or word.istitle() or not _CAMEL.search(word))


def _subwords(part: str) -> list[str]:
    return [part] if _plain(part) else [s for s in _CAMEL.split(part) if s]


def iter_tokens(text: str) -> Iterator[tuple[str, int, int, int]]:
    """Yield ``(token, position, start_char, end_char)`` for ``text``.

    Parts advance the position; whole chunks and camelCase words are extra
    tokens at the position of their first part (see the module docstring).
    Per token text, positions never decrease (Whoosh needs that).
    """
    pos = 0
    cut = MAX_TOKEN_CHARS
    for m in _CHUNK.finditer(text):
        chunk = m.group()
        start = m.start()
        if _plain(chunk):  # fast path: an ordinary word
            yield chunk.lower()[:cut], pos, start, m.end()
            pos += 1
            continue
        first = pos
        single_part = False
        for pm in _PART.finditer(chunk):
            part = pm.group()
            ps = start + pm.start()
            subs = _subwords(part)
            if len(subs) > 1:
                yield part.lower()[:cut], pos, ps, ps + len(part)
            for sub in subs:
                yield sub.lower()[:cut], pos, ps, ps + len(sub)
                ps += len(sub)
                pos += 1
            single_part = len(part) == len(chunk)
        if not single_part:
            yield chunk.lower()[:cut], first, start, m.end()


def analyze(text: str) -> list[tuple[str, int, int, int]]:
    """All tokens of ``text`` as a list (see :func:`iter_tokens`)."""
    return list(iter_tokens(text))


# ----------------------------------------------------------------- query language


@dataclass(frozen=True)
class QTerm:
    """One token."""

    text: str


@dataclass(frozen=True)
class QPhrase:
    """Two or more tokens at consecutive positions."""

    words: tuple[str, ...]


@dataclass(frozen=True)
class QPrefix:
    """Any token starting with ``text``."""

    text: str


@dataclass(frozen=True)
class QPhrasePrefix:
    """A phrase whose last word is a prefix (two or more words)."""

    words: tuple[str, ...]


@dataclass(frozen=True)
class QAny:
    """At least one of the options (how an identifier matches whole or by parts)."""

    options: tuple["QNode", ...]


QNode = QTerm | QPhrase | QPrefix | QPhrasePrefix | QAny


@dataclass(frozen=True)
class ParsedQuery:
    """A query in backend-neutral form: every clause must match."""

    clauses: tuple[QNode, ...]
    terms: frozenset[str]  # exact tokens, for snippets
    prefixes: tuple[str, ...]  # prefixes, for snippets


# A quoted phrase (closing quote optional) or a run of non-space, non-quote chars.
_QUERY_PART = regex.compile(r'"([^"]*)"?|([^\s"]+)')


def _word_clause(text: str, prefix: bool, quoted: bool, terms: set[str], prefixes: list[str]) -> QNode | None:
    cut = MAX_TOKEN_CHARS
    chunks = [m.group() for m in _CHUNK.finditer(text)]
    subs = [s.lower()[:cut] for c in chunks for p in _PART.findall(c) for s in _subwords(p)]
    if not subs:
        return None
    terms.update(subs[:-1] if prefix else subs)
    if prefix:
        prefixes.append(subs[-1])
    # The whole identifier as one token (only a bare single-chunk word has one).
    whole = chunks[0].lower()[:cut] if len(chunks) == 1 and not quoted else None
    if len(subs) == 1:
        return QPrefix(subs[0]) if prefix else QTerm(subs[0])
    seq = tuple(subs)
    node: QNode = QPhrasePrefix(seq) if prefix else QPhrase(seq)
    if whole is None:
        return node
    if prefix:
        prefixes.append(whole)
        return QAny((QPrefix(whole), node))
    terms.add(whole)
    return QAny((QTerm(whole), node))


def parse_query(query: str) -> ParsedQuery:
    """Translate user input into a :class:`ParsedQuery`; never raises.

    ``clauses`` is empty when nothing searchable is left (``***``); callers
    return no hits for such a query.
    """
    clauses: list[QNode] = []
    terms: set[str] = set()
    prefixes: list[str] = []
    for m in _QUERY_PART.finditer(query or ""):
        quoted = m.group(1) is not None
        raw = (m.group(1) if quoted else m.group(2)).strip()
        core = raw.rstrip("*")
        node = _word_clause(core, core != raw, quoted, terms, prefixes)
        if node is not None and node not in clauses:
            clauses.append(node)
    return ParsedQuery(tuple(clauses), frozenset(terms), tuple(prefixes))


@functools.lru_cache(maxsize=256)
def _candidates(pq: ParsedQuery) -> regex.Pattern[str]:
    """Case-insensitive substrings where a match may start (a cheap pre-scan)."""
    words = sorted(pq.terms | set(pq.prefixes), key=len, reverse=True)
    return regex.compile("|".join(regex.escape(w) for w in words) or "(?!)", regex.IGNORECASE | regex.FULLCASE)


def _is_match(tok: str, pq: ParsedQuery) -> bool:
    return tok in pq.terms or (bool(pq.prefixes) and tok.startswith(pq.prefixes))


def _first_match(text: str, pq: ParsedQuery) -> int:
    """Offset of the first token matching the query (0 if none is found)."""
    # Tokenizing whole documents for every hit dominated search time, so find
    # candidates with one regex and tokenize only the whitespace-delimited run
    # around each (no chunk spans whitespace, so its tokens are the same).
    rx = _candidates(pq)
    pos = 0
    while (m := rx.search(text, pos)) is not None:
        run_start = max(text.rfind(c, 0, m.start()) for c in " \n\t\r") + 1
        ws = _SPACES.search(text, m.end())
        run_end = ws.start() if ws else len(text)
        for tok, _pos, start, _end in iter_tokens(text[run_start:run_end]):
            if _is_match(tok, pq):
                return run_start + start
        pos = run_end
    for tok, _pos, start, _end in iter_tokens(text):  # exotic case folding: be exact
        if _is_match(tok, pq):
            return start
    return 0


def make_snippet(text: str, pq: ParsedQuery, width: int = SNIPPET_CHARS) -> str:
    """About ``width`` characters of ``text`` around the first match, one line."""
    hit = _first_match(text, pq)
    # Start a little before the match, on a word boundary when one is near.
    begin = max(0, hit - width // 4)
    if begin:  # snap to the word boundary nearest to the ideal start
        ends = [m.end() for m in _SPACES.finditer(text, max(0, begin - 20), hit)]
        begin = min(ends, key=lambda e: abs(e - begin)) if ends else begin
    window = _SPACES.sub(" ", text[begin : begin + width * 2]).strip()
    cut = window[:width]
    if len(window) > width:
        space = cut.rfind(" ")
        cut = (cut[:space] if space > width // 2 else cut) + " …"
    return ("… " if begin else "") + cut


# ------------------------------------------------------------------ the interface


@dataclass(frozen=True)
class Filters:
    """Search filters, already validated (``since`` inclusive, ``before`` exclusive)."""

    kind: str | None = None
    conversations: tuple[str, ...] | None = None
    since: float | None = None
    before: float | None = None


class SearchIndex(ABC):
    """A full-text index of messages and summaries (see the module docstring)."""

    backend: ClassVar[str]
    path: Path

    @abstractmethod
    def add(self, docs: Iterable[IndexDoc]) -> None:
        """Upsert documents by id; buffered, committed in the background."""

    @abstractmethod
    def remove(self, ids: Iterable[str]) -> None:
        """Remove documents by id (unknown ids are ignored); buffered like add."""

    @abstractmethod
    def search(
        self,
        query: str,
        *,
        kind: str | None = None,
        conversations: Sequence[str] | None = None,
        since: float | None = None,
        before: float | None = None,
        limit: int = 20,
    ) -> list[SearchHit]:
        """Best ``limit`` hits for ``query`` (sees everything added before the call)."""

    @abstractmethod
    def flush(self) -> None:
        """Commit everything added so far and make it visible to search."""

    @abstractmethod
    def rebuild(self, docs: Iterable[IndexDoc], progress: Callable[[int], None] | None = None) -> int:
        """Replace the whole index with ``docs`` (bulk path); returns the doc count."""

    @abstractmethod
    def stored_hashes(self) -> dict[str, str]:
        """``id -> content_hash`` of every indexed document."""

    @abstractmethod
    def count(self) -> int:
        """Number of indexed documents (after a flush)."""

    @abstractmethod
    def close(self) -> None:
        """Flush, stop the background thread and release the writer lock."""

    def __enter__(self) -> "SearchIndex":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
            raise IndexUnavailable(f"cannot read {vf}: {exc}. Rebuild it with `vaultlcm reindex`.") from exc
        try:
            meta = json.loads(raw)
        except ValueError:
            meta = None
        if not isinstance(meta, dict):
            raise IndexUnavailable(f"{vf} is not valid JSON. Rebuild the index with `vaultlcm reindex`.")
        return meta

    def _open_or_create(self) -> None:
        meta = self._read_version()
        if meta is None:
            others = [p.name for p in self.path.iterdir() if p.name not in _OUR_FILES]
            if others:
                raise IndexUnavailable(
                    f"{self.path} holds files ({', '.join(sorted(others)[:3])}...) but no {VERSION_FILE}: "
                    "not a vaultlcm index, or one whose creation was interrupted. "
                    "Rebuild it with `vaultlcm reindex`."
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
                payload = {"format": "vaultlcm-index", "schema_version": SCHEMA_VERSION, "backend": self.backend}
                tmp.write_text(json.dumps(payload, sort_keys=True) + "\n", encoding="utf-8")
                os.replace(tmp, self.path / VERSION_FILE)  # last: its presence means "complete"
                return
        if meta.get("schema_version") != SCHEMA_VERSION or meta.get("backend") != self.backend:
            raise IndexUnavailable(
                f"the search index at {self.path} is {meta.get('backend')!r} schema version "
                f"{meta.get('schema_version')!r}; this vaultlcm needs {self.backend!r} version {SCHEMA_VERSION}. "
                "Rebuild it with `vaultlcm reindex`."
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
                f"({type(exc).__name__}: {exc}). Rebuild it with `vaultlcm reindex`."
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

    def search(
        self,
        query: str,
        *,
        kind: str | None = None,
        conversations: Sequence[str] | None = None,
        since: float | None = None,
        before: float | None = None,
        limit: int = 20,
    ) -> list[SearchHit]:
        if kind is not None and kind not in KINDS:
            raise UsageError(f"search kind must be one of {KINDS} or None, not {kind!r}")
        if isinstance(conversations, str):
            conversations = [conversations]
        pq = parse_query(query)
        if not pq.clauses or limit <= 0 or (conversations is not None and not conversations):
            return []
        filters = Filters(kind, tuple(conversations) if conversations is not None else None, since, before)
        self.flush()
        with self._read_lock:
            return self._guard(self._ranked, "search", pq, filters, limit)

    def _ranked(self, pq: ParsedQuery, filters: Filters, limit: int) -> list[SearchHit]:
        # Fetch a few more than asked so that ties at the cut can be ordered newest
        # first; fetch more while the tie runs past the end of what was fetched.
        n = limit + 10
        while True:
            raw = self._n_search(pq, filters, n)
            if len(raw) < n or round(raw[-1][0], 6) < round(raw[limit - 1][0], 6) or n > limit + 5000:
                break
            n *= 4
        raw.sort(key=lambda r: (-round(r[0], 6), -r[1]))
        top = raw[:limit]
        stored = self._n_load([r[2] for r in top])
        return [
            SearchHit(id=f["id"], kind=f["kind"], conversation=f["conversation"], score=float(score),
                      snippet=make_snippet(f["text"], pq), at=float(at))
            for (score, at, _ref), f in zip(top, stored)
        ]

    def rebuild(self, docs: Iterable[IndexDoc], progress: Callable[[int], None] | None = None) -> int:
        """Drop everything and index ``docs`` with the backend's bulk path.

        Ids should be unique; when one repeats, the last version wins (like add).
        Documents added while the rebuild runs are applied after it.
        """
        self._ensure_writer()
        with self._write_lock:
            with self._cv:
                self._pending.clear()  # superseded: the rebuild indexes the source of truth
            later: dict[str, IndexDoc] = {}
            seen: set[str] = set()

            def unique() -> Iterator[IndexDoc]:
                for i, d in enumerate(docs, 1):
                    if d.kind not in KINDS:
                        raise UsageError(f"index document {d.id!r} has kind {d.kind!r}; expected one of {KINDS}")
                    if d.id in seen:
                        later[d.id] = d
                    else:
                        seen.add(d.id)
                        yield d
                    if progress is not None and i % 1000 == 0:
                        progress(i)

            self._guard(self._n_rebuild, "rebuild", unique())
            if later:
                self._guard(self._n_apply, "commit", list(later.values()), [])
            if progress is not None:
                progress(len(seen))
        with self._read_lock:
            self._guard(self._n_refresh, "refresh")
        return len(seen)

    def stored_hashes(self) -> dict[str, str]:
        self.flush()
        with self._read_lock:
            return self._guard(self._n_hashes, "read")

    def count(self) -> int:
        self.flush()
        with self._read_lock:
            return int(self._guard(self._n_count, "read"))

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
    def _n_search(self, pq: ParsedQuery, filters: Filters, n: int) -> list[tuple[float, float, Any]]:
        """Top ``n`` matches as ``(score, at, ref)``, best first; ``ref`` feeds ``_n_load``."""

    @abstractmethod
    def _n_load(self, refs: list[Any]) -> list[dict[str, Any]]:
        """Stored ``id``, ``kind``, ``conversation`` and ``text`` for each ref."""

    @abstractmethod
    def _n_rebuild(self, docs: Iterator[IndexDoc]) -> None:
        """Replace the index content with ``docs`` (unique ids) in one commit."""

    @abstractmethod
    def _n_hashes(self) -> dict[str, str]: ...

    @abstractmethod
    def _n_count(self) -> int: ...

    @abstractmethod
    def _n_close(self) -> None: ...

    def _n_maintain(self) -> None:
        """Background housekeeping between commits (e.g. merging segments)."""


def open_index(
    backend: str,
    path: Path | str,
    *,
    reset: bool = False,
    lock_timeout: float = 10.0,
    commit_interval: float = 0.5,
    batch_docs: int = 5000,
) -> SearchIndex:
    """Open (or create) the index at ``path`` with ``backend`` ("whoosh" | "tantivy").

    Raises :class:`IndexUnavailable` when the directory holds an index that can't
    be used; ``reset=True`` wipes the directory first (then call ``rebuild``).
    A process that can't get the writer lock opens the index read-only: it can
    search, and its writes wait up to ``lock_timeout`` seconds for the lock and
    then raise :class:`IndexLocked`.
    """
    kwargs: dict[str, Any] = dict(
        reset=reset, lock_timeout=lock_timeout, commit_interval=commit_interval, batch_docs=batch_docs
    )
    if backend == "whoosh":
        from .whoosh_backend import WhooshIndex

        return WhooshIndex(path, **kwargs)
    if backend == "tantivy":
        from .tantivy_backend import TantivyIndex

        return TantivyIndex(path, **kwargs)
    raise UsageError(f"unknown index backend {backend!r}; use 'whoosh' or 'tantivy'")

