"""The messages this process just appended, kept for its next compaction so it need not read them back.

A long-running agent ingests a few messages per turn and compacts the older ones
a little later, in the same process; bench_scale's compaction measure ingests
3,000 messages and compacts them right away. Reading those messages back from
their logs (the bytes, the entry, the JSON, the parts) was about a tenth of a
compaction's CPU, for messages the process held a moment before.

What is kept is checked before it is used: the catalog's row must name the same
log and byte span, and the log must still hold there the bytes written (read and
compared, which costs a small part of decoding them). A log a person edited
since gives other bytes, so the message is read from disk as before. Messages
with payload files (``files/``) are never kept: those files are read and checked
against their names on every read.

The store is bounded by messages and by entry bytes, oldest dropped first, and a
message is dropped once handed over: a long-running engine holds at most the
bound, whatever its history.
"""

from __future__ import annotations

import copy
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .catalog import MessageRow
from .errors import VaultLCMError
from .fsutil import NOFOLLOW
from .layout import VaultLayout
from .logcodec import ParsedEntry, StoredMessage, _copy_json
from .messages import Message

#: Most messages kept (bench_scale's compaction measure appends 3,000 at once).
MAX_MESSAGES = 4096
#: Most entry bytes kept (about 2.5 MB for those 3,000; a turn's messages are far fewer).
MAX_BYTES = 4 << 20


@dataclass(frozen=True, slots=True)
class _Kept:
    path: str
    start: int
    end: int
    raw: bytes
    message: Message


def _private_copy(message: Message) -> Message:
    """A copy sharing no container with ``message``: a caller may change its own records after ingest."""
    copied = copy.copy(message)  # pydantic's own shallow copy (its fields dict copied), a third of model_copy's cost
    fields = copied.__dict__
    for name in ("content", "extra", "hints"):
        fields[name] = _copy_json(fields[name])
    return copied


def has_payload_files(meta: dict[str, Any]) -> bool:
    """Whether an entry refers to payload files (externalized parts or large extra fields)."""
    return bool(meta.get("xf")) or any(len(p) > 4 and isinstance(p[4], dict) and "f" in p[4] for p in meta["parts"])


class JustWritten:
    """Messages appended by this process, by id, until a compaction takes them or the bound drops them."""

    def __init__(self, layout: VaultLayout, max_messages: int = MAX_MESSAGES, max_bytes: int = MAX_BYTES) -> None:
        self.layout = layout
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self._kept: OrderedDict[str, _Kept] = OrderedDict()
        self._bytes = 0
        # Ingest and a background compaction run on different threads of one engine.
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._kept)

    @property
    def bytes(self) -> int:
        """Entry bytes held now (at most ``max_bytes``)."""
        return self._bytes

    def add(self, writes: Sequence[tuple[str, Any, Sequence[ParsedEntry], Any]], stored: Sequence[StoredMessage]) -> None:
        """Keep the messages of an append that is durable now: ``writes`` as the writer hands them to
        :meth:`Catalog.record_append` (vault path, file, entries, tail), ``stored`` what it appended."""
        by_id = {sm.id: sm.message for sm in stored}
        kept = [(e.id, _Kept(rel, e.start, e.end, e.raw, _private_copy(by_id[e.id])))
                for rel, _file, entries, _tail in writes for e in entries
                if e.id in by_id and len(e.raw) <= self.max_bytes and not has_payload_files(e.meta)]
        with self._lock:
            for msg_id, item in kept:
                old = self._kept.pop(msg_id, None)
                if old is not None:
                    self._bytes -= len(old.raw)
                self._kept[msg_id] = item
                self._bytes += len(item.raw)
            while self._kept and (len(self._kept) > self.max_messages or self._bytes > self.max_bytes):
                self._bytes -= len(self._kept.popitem(last=False)[1].raw)

    def take(self, rows: Sequence[MessageRow]) -> dict[str, Message]:
        """The kept messages of ``rows`` whose log still holds, at the row's span, the bytes written; by id.

        Each message asked for is dropped here. The bytes are read and compared, not trusted to
        the catalog: an edit of the same size within the file system's clock tick leaves a log's
        stat as it was, and what is returned must be what :meth:`MessageLog.read_rows` would
        decode from the disk now. Only the decoding is saved.
        """
        out: dict[str, Message] = {}
        if not self._kept:
            return out
        by_path: dict[str, list[tuple[MessageRow, _Kept]]] = {}
        with self._lock:
            for row in rows:
                item = self._kept.pop(row.id, None)
                if item is None:
                    continue
                self._bytes -= len(item.raw)
                if (item.path, item.start, item.end) == (row.path, row.start, row.end):
                    by_path.setdefault(row.path, []).append((row, item))
        for rel, found in by_path.items():
            try:
                fd = os.open(self.layout.inside(self.layout.root / rel), os.O_RDONLY | NOFOLLOW)
            except (OSError, VaultLCMError):
                continue  # read_rows says what is wrong
            try:
                for row, item in found:
                    if os.pread(fd, len(item.raw), item.start) == item.raw:
                        out[row.id] = item.message
            finally:
                os.close(fd)
        return out

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self._bytes = 0
