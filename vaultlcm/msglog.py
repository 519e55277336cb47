"""The message log: appending messages to daily Markdown logs and reading them back.

Appends to one conversation are serialized across processes by a file lock in
``.vaultlcm/locks/``; each ingest call is validated and rendered in full before
the first byte is written, written with one ``write`` per daily file, and
fsynced before the call returns.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from filelock import FileLock, Timeout

from .catalog import Catalog, MessageRow
from .errors import CorruptVaultError, DuplicateIdError, LockTimeoutError, NotFoundError
from .fsutil import atomic_write, durable_append, truncate
from .layout import VaultLayout
from .logcodec import ParsedEntry, StoredMessage, day_header, decode_entry, iter_entries, render_entry
from .messages import Message, format_timestamp, make_message_id, parse_timestamp
from .tokens import count_tokens


class FileStore:
    """Externalized payloads of one conversation, named by content hash."""

    def __init__(self, files_dir: Path) -> None:
        self.files_dir = files_dir
        self.pending: dict[str, bytes] = {}

    def put(self, data: bytes, ext: str) -> str:
        name = f"file_{hashlib.sha256(data).hexdigest()[:16]}.{ext}"
        if not (self.files_dir / name).exists():
            self.pending[name] = data
        return name

    def get(self, name: str) -> bytes:
        if name in self.pending:
            return self.pending[name]
        try:
            return (self.files_dir / name).read_bytes()
        except FileNotFoundError:
            raise CorruptVaultError(
                f"payload file {name} is missing; restore it from git or a backup", path=self.files_dir / name
            ) from None

    def commit(self) -> list[Path]:
        written = []
        for name, data in sorted(self.pending.items()):
            path = self.files_dir / name
            atomic_write(path, data)
            written.append(path)
        self.pending.clear()
        return written


def message_tokens(message: Message) -> int:
    """Tokens a message costs in a model's context (text, thinking, tools, results)."""
    return count_tokens(message.searchable_text()) + 4


class MessageLog:
    """Append and read the raw messages of every conversation of a vault."""

    def __init__(
        self,
        layout: VaultLayout,
        catalog: Catalog,
        *,
        large_payload_tokens: int,
        lock_timeout: float,
        clock: Callable[[], datetime],
    ) -> None:
        self.layout = layout
        self.catalog = catalog
        self.large_payload_tokens = large_payload_tokens
        self.lock_timeout = lock_timeout
        self.clock = clock

    def lock(self, conv: str) -> FileLock:
        self.layout.locks_dir.mkdir(parents=True, exist_ok=True)
        return FileLock(str(self.layout.lock_path(conv)), timeout=self.lock_timeout)

    def sync(self, conv: str) -> list[str]:
        """Catch the catalog up with the logs of ``conv``; returns ids of new or changed messages."""
        return self.catalog.sync_logs(conv, self.layout.logs_dir(conv))

    def append(self, conv: str, messages: Sequence[Message], on_new_day: Callable[[str], None] | None = None) -> list[StoredMessage]:
        """Store ``messages`` (already validated) at the end of ``conv``; all or nothing."""
        if not messages:
            return []
        lock = self.lock(conv)
        try:
            lock.acquire()
        except Timeout:
            raise LockTimeoutError(
                f"conversation {conv!r} is locked by another process ({self.layout.lock_path(conv)}) for more "
                f"than {self.lock_timeout:.0f}s; retry, or run `vaultlcm doctor --fix` if no other process is running"
            ) from None
        try:
            self.sync(conv)
            self._repair_torn(conv)
            stored = self._prepare(conv, messages)
            store = FileStore(self.layout.files_dir(conv))
            by_day: dict[str, list[tuple[StoredMessage, bytes]]] = defaultdict(list)
            for sm in stored:
                data = render_entry(sm, store, count_tokens=count_tokens, large_tokens=self.large_payload_tokens)
                by_day[sm.day].append((sm, data))
            store.commit()
            for day, items in sorted(by_day.items()):
                path = self.layout.log_path(conv, day)
                new = not path.exists()
                blob = b"".join(d for _, d in items)
                if new:
                    blob = day_header(conv, day, self.home_link(conv)) + blob
                start = durable_append(path, blob)
                if new and on_new_day is not None:
                    on_new_day(day)
                rel = self.layout.relative(path)
                entries = [e for e in iter_entries(blob, path=rel, base_offset=start) if isinstance(e, ParsedEntry)]
                self.catalog.record_append(conv, rel, path, entries)
            return stored
        finally:
            lock.release()

    def home_link(self, conv: str) -> str:
        return f"[[{self.layout.relative(self.layout.home_note(conv))[:-3]}|{conv}]]"

    def _repair_torn(self, conv: str) -> None:
        torn = self.catalog.torn_logs(conv)
        for rel, parsed in torn:
            # Bytes after the last whole entry were never acknowledged: a crash tore the write.
            truncate(self.layout.root / rel, parsed)
        if torn:
            self.sync(conv)

    def _prepare(self, conv: str, messages: Sequence[Message]) -> list[StoredMessage]:
        seq = self.catalog.last_seq(conv)
        given = [m.id for m in messages if m.id is not None]
        if len(set(given)) != len(given):
            dup = next(i for i in given if given.count(i) > 1)
            raise DuplicateIdError(f"message id {dup} appears twice in this input; ids must be unique")
        clash = self.catalog.has_ids(given)
        if clash:
            other = self.catalog.get(sorted(clash)[0])
            where = f" (in {other.path})" if other else ""
            raise DuplicateIdError(
                f"message id {sorted(clash)[0]} already exists in the vault{where}; ingest each message once, "
                "or drop 'id' from the input to let vaultlcm assign new ids"
            )
        now = self.clock()
        out: list[StoredMessage] = []
        taken = set(given)
        for msg in messages:
            seq += 1
            hints = dict(msg.hints)
            timestamp = msg.timestamp
            if timestamp is None:
                timestamp = format_timestamp(now)
                hints["timestamp_assigned"] = True
            at = parse_timestamp(timestamp)
            msg = msg.model_copy(update={"timestamp": timestamp, "hints": hints})
            if msg.id is None:
                salt = 0
                new_id = make_message_id(conv, seq, msg, salt)
                while new_id in taken or self.catalog.get(new_id) is not None:
                    salt += 1
                    new_id = make_message_id(conv, seq, msg, salt)
                hints["id_assigned"] = True
                msg = msg.model_copy(update={"id": new_id, "hints": hints})
            taken.add(msg.id)  # type: ignore[arg-type]
            out.append(StoredMessage(message=msg, conversation=conv, seq=seq, at=at, tokens=message_tokens(msg)))
        return out

    # -- reading -----------------------------------------------------------------

    def read_row(self, row: MessageRow) -> Message:
        path = self.layout.root / row.path
        with path.open("rb") as fh:
            fh.seek(row.start)
            data = fh.read(row.end - row.start)
        entries = [e for e in iter_entries(data, path=row.path, base_offset=row.start) if isinstance(e, ParsedEntry)]
        if not entries or entries[0].id != row.id:
            # The file changed under the catalog: re-read it and try once more.
            self.sync(row.conv)
            fresh = self.catalog.get(row.id)
            if fresh is None or fresh == row:
                raise CorruptVaultError(f"message {row.id} is not where the catalog says", path=row.path)
            return self.read_row(fresh)
        return decode_entry(entries[0], FileStore(self.layout.files_dir(row.conv)))

    def read_rows(self, rows: Sequence[MessageRow]) -> list[tuple[MessageRow, Message]]:
        """Read several messages, each by its byte span (cost follows the rows, not the log)."""
        out = []
        stores: dict[str, FileStore] = {}
        for row in rows:
            store = stores.setdefault(row.conv, FileStore(self.layout.files_dir(row.conv)))
            path = self.layout.root / row.path
            with path.open("rb") as fh:
                fh.seek(row.start)
                data = fh.read(row.end - row.start)
            entries = [e for e in iter_entries(data, path=row.path, base_offset=row.start) if isinstance(e, ParsedEntry)]
            if entries and entries[0].id == row.id:
                out.append((row, decode_entry(entries[0], store)))
            else:
                out.append((row, self.read_row(row)))
        return out

    def get(self, msg_id: str) -> tuple[MessageRow, Message]:
        row = self.catalog.get(msg_id)
        if row is None:
            for conv in self.layout.conversations():
                self.sync(conv)
            row = self.catalog.get(msg_id)
        if row is None:
            raise NotFoundError(f"no message with id {msg_id!r}; list ids with `vaultlcm export -c CONV` or `vaultlcm grep`")
        return row, self.read_row(row)

    def read_conversation(self, conv: str) -> list[tuple[MessageRow, Message]]:
        """Every message of ``conv`` in order, reading each log file once."""
        self.sync(conv)
        rows = self.catalog.rows(conv)
        by_path: dict[str, dict[int, ParsedEntry]] = {}
        store = FileStore(self.layout.files_dir(conv))
        out = []
        for row in rows:
            if row.path not in by_path:
                data = (self.layout.root / row.path).read_bytes()
                by_path[row.path] = {
                    e.start: e for e in iter_entries(data, path=row.path) if isinstance(e, ParsedEntry)
                }
            entry = by_path[row.path].get(row.start)
            if entry is None or entry.id != row.id:
                raise CorruptVaultError(f"message {row.id} is not where the catalog says", path=row.path)
            out.append((row, decode_entry(entry, store)))
        return out
