"""The messages this process just appended, kept for its next compaction so it need not read them back.

A long-running agent ingests a few messages per turn and compacts the older ones
a little later, in the same process; bench_scale's compaction measure ingests
3,000 messages and compacts them right away. Reading those messages back from
their logs (open, read, find the entry, parse its hidden JSON line) was about a
tenth of a compaction's CPU, for entries the writer held a moment before.

What is kept is the entry the writer rendered (its bytes and the metadata its
hidden line holds: what :func:`~vaultlcm.logcodec.iter_entries` would parse back
from those bytes), not the message: keeping it costs the ingest nothing, and the
message is decoded from it when asked for (a fresh object, sharing nothing with
the caller's records), by the same :func:`~vaultlcm.logcodec.decode_entry` that
reads a log. Before that the catalog's row must name the same log and byte span,
and the log must still hold those bytes there (read and compared: an edit of the
same size within the file system's clock tick leaves a log's stat as it was). A
log a person edited since gives other bytes, so the message is read from disk as
before.

The store is bounded by entries and by entry bytes, oldest dropped first, and an
entry is dropped once asked for: a long-running engine holds at most the bound,
whatever its history.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from .catalog import MessageRow
from .errors import VaultLCMError
from .fsutil import NOFOLLOW
from .layout import VaultLayout
from .logcodec import ParsedEntry, PayloadStore, decode_entry
from .messages import Message

#: Most entries kept (bench_scale's compaction measure appends 3,000 at once).
MAX_MESSAGES = 4096
#: Most entry bytes kept (about 2.5 MB for those 3,000; a turn's messages are far fewer).
MAX_BYTES = 4 << 20


class JustWritten:
    """Messages appended by this process, by id, until a compaction takes them or the bound drops them."""

    def __init__(self, layout: VaultLayout, payloads: Callable[[str], PayloadStore],
                 max_messages: int = MAX_MESSAGES, max_bytes: int = MAX_BYTES) -> None:
        """``payloads``: the payload store of a conversation (a message's externalized parts are read from it)."""
        self.layout = layout
        self.payloads = payloads
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        #: By message id: (conversation, vault path of its log, the entry as written).
        self._kept: OrderedDict[str, tuple[str, str, ParsedEntry]] = OrderedDict()
        self._bytes = 0
        # Ingest and a background compaction run on different threads of one engine.
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._kept)

    @property
    def bytes(self) -> int:
        """Entry bytes held now (at most ``max_bytes``)."""
        return self._bytes

    def add(self, conv: str, writes: Sequence[tuple[str, Any, Sequence[ParsedEntry], Any]]) -> None:
        """Keep the entries of an append to ``conv`` that is durable now: ``writes`` as the writer hands them
        to :meth:`Catalog.record_append` (vault path, file, entries, tail)."""
        with self._lock:
            for rel, _file, entries, _tail in writes:
                for e in entries:
                    size = len(e.raw)
                    if size > self.max_bytes:
                        continue
                    old = self._kept.pop(e.id, None)
                    if old is not None:
                        self._bytes -= len(old[2].raw)
                    self._kept[e.id] = (conv, rel, e)
                    self._bytes += size
            while self._kept and (len(self._kept) > self.max_messages or self._bytes > self.max_bytes):
                self._bytes -= len(self._kept.popitem(last=False)[1][2].raw)

    def take(self, rows: Sequence[MessageRow]) -> dict[str, Message]:
        """The kept messages of ``rows`` whose log still holds, at the row's span, the bytes written; by id.

        Each entry asked for is dropped here. What is returned is what :meth:`MessageLog.read_rows`
        would decode from the disk now; only finding and parsing the entry is saved.
        """
        out: dict[str, Message] = {}
        if not self._kept:
            return out
        by_path: dict[str, list[tuple[MessageRow, str, ParsedEntry]]] = {}
        with self._lock:
            for row in rows:
                item = self._kept.pop(row.id, None)
                if item is None:
                    continue
                conv, rel, e = item
                self._bytes -= len(e.raw)
                if (rel, e.start, e.end, conv) == (row.path, row.start, row.end, row.conv):
                    by_path.setdefault(rel, []).append((row, conv, e))
        stores: dict[str, PayloadStore] = {}
        for rel, found in by_path.items():
            try:
                fd = os.open(self.layout.inside(self.layout.root / rel), os.O_RDONLY | NOFOLLOW)
            except (OSError, VaultLCMError):
                continue  # read_rows says what is wrong
            try:
                for row, conv, e in found:
                    if os.pread(fd, len(e.raw), e.start) != e.raw:
                        continue
                    store = stores.get(conv)
                    if store is None:
                        store = stores[conv] = self.payloads(conv)
                    out[row.id] = decode_entry(e, store)
            finally:
                os.close(fd)
        return out

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self._bytes = 0
