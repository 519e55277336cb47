"""One small full-text index interface, shared by the Whoosh and Tantivy backends.

The index is derived state: it can be deleted at any time and rebuilt from the
vault with :meth:`SearchIndex.rebuild`. Callers only ever see this module's types;
the backend (:func:`vaultlcm.index.open_index`, ``"whoosh"`` or ``"tantivy"``)
can change without touching them.

The query language and the tokenizer, identical on both backends, are described
in :mod:`vaultlcm.index.query`; buffering, background commits and the writer
lock in :mod:`vaultlcm.index.buffered`.

Results come in one of :data:`SORTS`: ``relevance`` (BM25 in bands: hits
of comparable score, equal ones included however the floats round, come
newest first; see :mod:`vaultlcm.index.buffered`),
``newest`` or ``oldest`` (by ``at``, then conversation order ``seq``). Searches
page with ``offset``; :meth:`SearchIndex.count_matches` counts every match, by
kind and by day, so a caller knows how many pages there are.

A query's words must all match (``match="all"``, the default). With
``match="any"`` a document needs one of them, and documents with more of the
words come first (then by relevance, as above); each hit then names the words it
has (:attr:`SearchHit.matched`). A caller uses it when every word together finds
nothing: the words of a question rarely all sit in one message.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from ..errors import IndexError_

#: The values of :attr:`IndexDoc.kind`.
KINDS = ("message", "summary")
#: The index backends :func:`open_index` knows.
BACKENDS = ("whoosh", "tantivy")
#: The orders :meth:`SearchIndex.search` can return hits in.
SORTS = ("relevance", "newest", "oldest")
#: How many of a query's words a document must have: every one, or at least one.
MATCHES = ("all", "any")


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
    seq: int = 0  # position in its conversation (a summary: its last message); orders equal times


@dataclass(frozen=True)
class Forget:
    """An item of a rebuild's stream (:meth:`SearchIndex.rebuild`), not a document: the documents of
    ``conversation`` streamed so far are dropped (what comes after it stays). For a rebuild that
    indexed a conversation as its logs were read and then found that its positions did not stand;
    only backends with :attr:`SearchIndex.forgets_in_rebuild` accept it."""

    conversation: str


@dataclass(frozen=True)
class SearchHit:
    """One search result; ``snippet`` is plain text around the first match.

    ``score`` is the BM25 score under ``relevance`` and 0.0 under the time sorts.
    ``matched`` (``match="any"`` only) names the query's words the hit has, as
    they were written in the query.
    """

    id: str
    kind: str
    conversation: str
    score: float
    snippet: str
    at: float
    role: str = ""
    depth: int = -1
    seq: int = 0
    matched: tuple[str, ...] | None = None


@dataclass(frozen=True)
class MatchCount:
    """How many documents match a query: in all, by kind, and by UTC day.

    ``per_day`` maps ``YYYY-MM-DD`` to ``{kind: count}`` (only days with matches,
    in date order); it is empty unless asked for.
    """

    total: int
    by_kind: dict[str, int]
    per_day: dict[str, dict[str, int]]


class IndexUnavailable(IndexError_):
    """The index directory cannot be used (corrupt, wrong version, missing files).

    The caller should rebuild it: ``open_index(backend, path, reset=True)`` then
    :meth:`SearchIndex.rebuild`. ``reason`` is what is wrong, without the advice
    the message ends with (``fix``), for a caller that rebuilds on its own.
    """

    def __init__(self, reason: str, fix: str = "Rebuild it with `vaultlcm reindex`.") -> None:
        super().__init__(f"{reason}. {fix}" if fix else reason)
        self.reason = reason


class IndexOtherBackend(IndexUnavailable):
    """The directory holds a complete index of the other backend (``found``), usable by it as it is."""

    def __init__(self, message: str, found: str) -> None:
        super().__init__(message, fix="")
        self.found = found


class IndexLocked(IndexError_):
    """Another process holds the index's writer lock (this one can only search)."""


# ------------------------------------------------------------------ the interface


@dataclass(frozen=True)
class Filters:
    """Search filters, already validated (``since`` inclusive, ``before`` exclusive).

    ``match`` says how many of the query's clauses a document needs (:data:`MATCHES`).
    """

    kind: str | None = None
    conversations: tuple[str, ...] | None = None
    since: float | None = None
    before: float | None = None
    match: str = "all"


class SearchIndex(ABC):
    """A full-text index of messages and summaries (see the module docstring)."""

    backend: ClassVar[str]
    #: Whether :meth:`rebuild` accepts :class:`Forget` items in its stream (with ``unique``).
    forgets_in_rebuild: ClassVar[bool] = False
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
        offset: int = 0,
        sort: str = "relevance",
        match: str = "all",
        snippets: bool = True,
    ) -> list[SearchHit]:
        """Hits ``offset`` to ``offset + limit`` for ``query`` in ``sort`` order.

        Sees everything added before the call. ``match="any"``: see the module docstring.
        ``snippets=False``: every hit's ``snippet`` is empty (for a caller that cuts its own
        from a text it reads anyway; a long note's snippet costs more than its search).
        """

    def some_words_docs(self, query: str) -> int:
        """About how many documents hold one of the query's plain words (what ``match="any"`` must score).

        From the words' document frequencies, without expanding prefixes: cheap, a
        guide to whether a ``match="any"`` search is worth its cost, not a count.
        """
        return 0

    def outdated_docs(self) -> int:
        """How many documents are stored in a format this version reads more slowly than its own
        (a rebuild rewrites them); 0 when every one is in the current format."""
        return 0

    @abstractmethod
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
        """Count every document ``search`` would find for the same arguments."""

    @abstractmethod
    def flush(self) -> None:
        """Commit everything added so far and make it visible to search."""

    @abstractmethod
    def rebuild(self, docs: Iterable[IndexDoc | Forget], progress: Callable[[int], None] | None = None, *,
                unique: bool = False) -> int:
        """Replace the whole index with ``docs`` (bulk path); returns the doc count.

        ``unique``: no id repeats in ``docs`` (the caller vouches), so none is remembered;
        then ``docs`` may hold :class:`Forget` items on the backends that accept them."""

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
