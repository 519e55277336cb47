"""The full-text search index over messages and summaries.

:func:`open_index` picks a backend (``"whoosh"`` or ``"tantivy"``), imported only
when an index is opened, so importing this package stays cheap. The modules:

* :mod:`~vaultlcm.index.base` -- the interface: :class:`SearchIndex`, its
  documents and hits, its errors, and :func:`open_index`;
* :mod:`~vaultlcm.index.query` -- the tokenizer and the query language both
  backends share;
* :mod:`~vaultlcm.index.buffered` -- write buffering, background commits and
  the writer lock, shared by both backends;
* :mod:`~vaultlcm.index.whoosh_backend`, :mod:`~vaultlcm.index.tantivy_backend`.
"""

from __future__ import annotations

from .base import MATCHES, SORTS, IndexDoc, IndexLocked, IndexUnavailable, MatchCount, SearchHit, SearchIndex, open_index

__all__ = [
    "MATCHES",
    "SORTS",
    "IndexDoc",
    "IndexLocked",
    "IndexUnavailable",
    "MatchCount",
    "SearchHit",
    "SearchIndex",
    "open_index",
]
