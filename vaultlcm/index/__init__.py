"""The full-text search index over messages and summaries.

:func:`open_index` picks a backend (``"whoosh"`` or ``"tantivy"``), imported only
when an index is opened, so importing this package stays cheap. The modules:

* :mod:`~vaultlcm.index.base` -- the interface: :class:`SearchIndex`, its
  documents and hits, its errors (it imports no backend);
* :mod:`~vaultlcm.index.query` -- the tokenizer and the query language both
  backends share;
* :mod:`~vaultlcm.index.buffered` -- write buffering, background commits and
  the writer lock, shared by both backends;
* :mod:`~vaultlcm.index.whoosh_backend`, :mod:`~vaultlcm.index.tantivy_backend`.
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .base import (
    MATCHES, SORTS, IndexDoc, IndexLocked, IndexOtherBackend, IndexUnavailable, MatchCount, SearchHit, SearchIndex,
)

__all__ = [
    "MATCHES",
    "SORTS",
    "IndexDoc",
    "IndexLocked",
    "IndexOtherBackend",
    "IndexUnavailable",
    "MatchCount",
    "SearchHit",
    "SearchIndex",
    "backend_installed",
    "open_index",
]

#: The module each backend needs (whoosh-reloaded keeps the ``whoosh`` name).
_MODULES = {"whoosh": "whoosh", "tantivy": "tantivy"}


def backend_installed(backend: str) -> bool:
    """Whether ``backend``'s library can be imported here (without importing it)."""
    module = _MODULES.get(backend)
    return module is not None and find_spec(module) is not None


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
    be used (:class:`IndexOtherBackend` when it is a complete index of the other
    backend); ``reset=True`` wipes the directory first (then call ``rebuild``).
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
