"""The message log: appending messages to daily Markdown logs and reading them back.

An ingest call is all or nothing:

1. everything is validated and rendered before the first byte is written;
2. under the conversation's lock (a lock on its folder, see :mod:`vaultlcm.locks`)
   payload files are written atomically, then each day's entries are appended with
   one ``write`` and ``fdatasync`` per daily log;
3. a write that fails (a full disk) is cut off again, together with the days
   already written by the same call, and the error is raised: nothing of the call
   stays;
4. a call spanning several daily logs marks its entries with a batch (id, first
   position, size) and writes its last entry last: a crash between two files
   leaves a batch that readers ignore and the next writer cuts off;
5. once every byte is durable the call has succeeded, whatever happens to derived
   state afterwards (the catalog catches up on the next sync);
6. the last log's ``fdatasync`` runs on a sync thread while the catalog's rows are
   written, and the catalog commits only after it succeeded: a committed row never
   points at bytes that might not be on disk, and a failed sync rolls both back.

Re-imports are idempotent: an incoming message whose ``key`` is already stored in
the conversation is skipped, and the call reports how many were.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from .catalog import HEAD_BYTES, MESSAGE_COLUMNS, Catalog, MessageRow
from .errors import CorruptVaultError, NotFoundError, StorageError, VaultLCMError
from .formats import Incoming
from .just_written import JustWritten
from .fsutil import (
    NOFOLLOW,
    PendingSync,
    atomic_write,
    durable_append,
    fsync_dir,
    read_file,
    start_append,
    sync_in_background,
    truncate,
)
from .layout import VaultLayout
from .locks import dir_lock
from .logcodec import (
    ParsedEntry,
    StoredMessage,
    day_header,
    decode_entry,
    entry_from_render,
    iter_entries,
    render_entry_meta,
)
from .messages import Message, format_timestamp, make_message_id, parse_timestamp
from .tokens import count_tokens


class FileStore:
    """Externalized payloads of one conversation, named by the hash of their bytes."""

    def __init__(self, layout: VaultLayout, files_dir: Path) -> None:
        self.layout = layout
        self.files_dir = files_dir
        self.pending: dict[str, bytes] = {}

    def put(self, data: bytes, ext: str) -> str:
        name = f"file_{hashlib.sha256(data).hexdigest()[:16]}.{ext}"
        path = self.files_dir / name
        if not path.exists() or path.is_symlink():
            self.pending[name] = data
        return name

    def get(self, name: str) -> bytes:
        """A payload's bytes, checked against the hash its name carries (a cheap, exact check of losslessness)."""
        if name in self.pending:
            return self.pending[name]
        path = self.files_dir / name
        try:
            data = read_file(self.layout.inside(path))
        except FileNotFoundError:
            raise CorruptVaultError(
                f"payload file {name} is missing; restore it from git or a backup", path=self.files_dir / name
            ) from None
        except OSError as exc:
            raise CorruptVaultError(f"payload file {name} cannot be read ({exc})", path=path) from None
        if not name.startswith("file_" + hashlib.sha256(data).hexdigest()[:16] + "."):
            raise CorruptVaultError(
                f"payload file {name} no longer matches the hash in its name (changed by hand?); restore it from git",
                path=path)
        return data

    def commit(self) -> list[Path]:
        written = []
        for name, data in sorted(self.pending.items()):
            path = self.layout.inside(self.files_dir / name)
            if path.is_symlink():
                path.unlink()  # a planted symlink is replaced by the real payload, never written through
            atomic_write(path, data)
            written.append(path)
        self.pending.clear()
        return written


def message_tokens(message: Message) -> int:
    """Tokens a message costs in a model's context (text, thinking, tools, results)."""
    return count_tokens(message.searchable_text()) + 4


@dataclass(slots=True)
class _WriterState:
    """What a writer knew of a conversation right after its own last append had been recorded.

    While the catalog's stamp, the logs folder's mtime and the stat of each file below
    are unchanged, nobody else wrote to the conversation or its catalog since: the
    catalog needs no sync, there is nothing to repair, and the newest message is the
    one this writer wrote last.
    """

    #: :meth:`Catalog.data_version` and :meth:`Catalog.changes`.
    catalog: tuple[int, ...]
    logs_mtime: int
    #: The newest log the catalog knows and the logs last written (full paths): ``(inode, size, mtime_ns)``.
    files: dict[str, tuple[int, int, int]]
    #: The size of each log this writer appended to last (full paths): while the stamps hold, the
    #: file ends there with the newline its entry ended with.
    ends: dict[str, int]
    newest: str | None
    seq: int
    last_id: str | None


def _file_stamp(st: os.stat_result) -> tuple[int, int, int]:
    return (st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass
class AppendResult:
    """What an append stored, and how many incoming messages were already in the vault."""

    stored: list[StoredMessage]
    skipped: int = 0
    new_days: list[str] | None = None


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
        #: (folder, logs folder, fallback lock file, payload folder) per conversation: built once, checked on every use.
        self._paths: dict[str, tuple[Path, Path, Path, Path]] = {}
        #: Per conversation, what this writer left behind after its last append (see :class:`_WriterState`).
        self._states: dict[str, _WriterState] = {}
        #: The path of each day's log by (logs folder, day): built once (a path object costs more than its use).
        self._day_paths: dict[tuple[Path, str], Path] = {}
        #: What this process appended last, for its next compaction (see :mod:`vaultlcm.just_written`).
        self.just_written = JustWritten(layout, self._store)

    @contextmanager
    def lock(self, conv: str) -> Iterator[Path]:
        """The conversation's write lock (held across processes; released when a process dies).

        Yields the conversation's logs folder, checked to be a real folder inside the vault.
        """
        paths = self._paths.get(conv)
        if paths is None:
            folder = self.layout.conversation_dir(conv)
            paths = self._paths[conv] = (folder, folder / "logs", self.layout.lock_path(conv), folder / "files")
        folder, logs, fallback, _files = paths
        self.layout.inside(logs)  # every existing component, the conversation folder too, on every call
        if not os.path.isdir(logs):
            try:
                logs.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StorageError.from_os(exc, folder, "create the conversation folder") from None
        with dir_lock(folder, timeout=self.lock_timeout, what=f"conversation {conv!r}", fallback=fallback):
            yield logs

    def sync(self, conv: str, *, quick: bool = False, ids: bool = True) -> list[str]:
        """Catch the catalog up with the logs of ``conv``; returns ids of new or changed messages (see
        :meth:`Catalog.sync_logs` for ``quick`` and ``ids``)."""
        return self.catalog.sync_logs(conv, self.layout.inside(self.layout.logs_dir(conv)), quick=quick, ids=ids)

    def home_link(self, conv: str) -> str:
        return f"[[{self.layout.relative(self.layout.home_note(conv))[:-3]}|{conv}]]"

    # -- appending ---------------------------------------------------------------

    def append(self, conv: str, incoming: Sequence[Incoming], *, dedupe: bool = True,
               step: Callable[[], None] | None = None) -> AppendResult:
        """Store ``incoming`` (already validated) at the end of ``conv``; all or nothing.

        ``step`` (for a progress bar) is called twice per stored message: once prepared, once rendered.
        """
        if not incoming:
            return AppendResult([])
        with self.lock(conv) as logs:
            reopened = self.catalog.ensure_current()
            # Taken out now: it is put back only once this call's own write is recorded.
            state = self._states.pop(conv, None)
            # Read before anything below looks at the catalog: a commit by anyone else from here
            # on moves it, so a state built on it can only be found stale, never wrongly fresh.
            # The connection the version belongs to (a later query may reopen the catalog, see _remember).
            generation = self.catalog.changes()[0]
            version = self.catalog.data_version()
            logs_mtime: int | None = None
            if reopened or state is None or (logs_mtime := self._unchanged(state, logs, version)) is None:
                # quick: the state folder was not deleted (else rebuild this conversation from its files)
                self.catalog.sync_logs(conv, logs, quick=not reopened)
                self._repair(conv)
                last, newest = self.catalog.last(conv), self.catalog.newest_log(conv)
            else:
                last, newest = (state.seq, state.last_id), state.newest
            skipped = 0
            if dedupe:
                have = self.catalog.existing_keys(conv, [i.key for i in incoming if i.key])
                if have:
                    kept = [i for i in incoming if not (i.key and i.key in have)]
                    skipped = len(incoming) - len(kept)
                    incoming = kept
            if not incoming:
                if logs_mtime is not None and state is not None:
                    self._states[conv] = state  # nothing written, nothing learnt: still as true as before
                return AppendResult([], skipped)
            stored = self._prepare(conv, incoming, step, last=last)
            # Fresh state: the logs it wrote still end where its entries ended (no need to look).
            ends = state.ends if logs_mtime is not None and state is not None else {}
            new_days, recorded = self._write(conv, logs, stored, step, ends=ends)
            if recorded is not None and version is not None:
                self._remember(conv, logs, stored, newest, recorded, version, generation,
                               None if new_days else logs_mtime)
            return AppendResult(stored, skipped, new_days)

    def _unchanged(self, state: _WriterState, logs: Path, version: int | None) -> int | None:
        """The logs folder's mtime when nobody wrote to the conversation's logs or the catalog since
        ``state`` was taken (``version``: the catalog's :meth:`Catalog.data_version` now); else None.

        Costs what a quick sync's look costs, without its queries: one ``stat`` of the logs
        folder (a log created or renamed) and one of each file this writer knows (usually one:
        the day's log). Anything unexpected says None.
        """
        if version is None or (version, *self.catalog.changes()) != state.catalog:
            return None
        try:
            logs_mtime = os.stat(logs).st_mtime_ns
            if logs_mtime != state.logs_mtime:
                return None
            for path, stamp in state.files.items():
                if _file_stamp(os.lstat(path)) != stamp:
                    return None
        except OSError:
            return None
        return logs_mtime

    def _remember(self, conv: str, logs: Path, stored: list[StoredMessage], newest: str | None,
                  recorded: dict[str, os.stat_result], version: int, generation: int,
                  logs_mtime: int | None) -> None:
        """Keep what this call leaves behind, for the next call's :meth:`_unchanged`.

        ``version`` is the catalog's data version read before this call looked at the catalog, and
        ``logs_mtime`` the logs folder's mtime seen then (None: look again, this call created a log).
        """
        changes = self.catalog.changes()
        if changes[0] != generation:
            return  # the catalog was reopened during the call: the version read first was another file's
        root = os.fspath(self.layout.root)
        files = {f"{root}/{rel}": _file_stamp(st) for rel, st in recorded.items()}
        ends = {f"{root}/{rel}": st.st_size for rel, st in recorded.items()}
        try:
            if newest is not None and newest not in recorded:
                files[f"{root}/{newest}"] = _file_stamp(os.lstat(f"{root}/{newest}"))
            if logs_mtime is None:
                logs_mtime = os.stat(logs).st_mtime_ns
        except OSError:
            return
        newest = max([newest, *recorded] if newest is not None else recorded)
        self._states[conv] = _WriterState((version, *changes), logs_mtime, files, ends, newest, stored[-1].seq,
                                          stored[-1].id)

    def _repair(self, conv: str) -> None:
        """Cut off what crashed writers left: torn tails, and batches that never completed."""
        # Both by index (pending by conversation, logs marked torn): cheap when there is nothing to do.
        stranded, torn = self.catalog.stranded_batches(conv), self.catalog.torn_logs(conv)
        if not stranded and not torn:
            return
        if stranded:
            # Pending entries may only mean that a reader looked while a call was being
            # written; a full look at every file (we hold the lock) tells what really is stranded.
            self.sync(conv)
            stranded, torn = self.catalog.stranded_batches(conv), self.catalog.torn_logs(conv)
        cut: dict[str, int] = {rel: parsed for rel, parsed in torn}
        spans: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for rel, start, end in stranded:
            spans[rel].append((start, end))
        for rel, items in spans.items():
            path = self.layout.root / rel
            size = cut.get(rel, path.stat().st_size if path.exists() else 0)
            items.sort()
            # Only a run of stranded entries at the very end was never acknowledged by anyone.
            while items and items[-1][1] >= size:
                size = items.pop()[0]
            if size < cut.get(rel, path.stat().st_size):
                cut[rel] = size
        for rel, size in cut.items():
            truncate(self.layout.inside(self.layout.root / rel), size)
        if cut:
            self.sync(conv)

    def _prepare(self, conv: str, incoming: Sequence[Incoming], step: Callable[[], None] | None = None, *,
                 last: tuple[int, str | None] | None = None) -> list[StoredMessage]:
        """Number and identify ``incoming`` after ``last`` (``(seq, id)`` of the newest message; None: ask the catalog)."""
        seq, prev = self.catalog.last(conv) if last is None else last
        now = self.clock()
        out: list[StoredMessage] = []
        taken: set[str] = set()
        for inc in incoming:
            # The call's own object (ingest.py builds or copies one per record, the caller's are never
            # handed down): numbered in place, without a copy (a pydantic copy costs more than the id).
            msg = inc.message
            seq += 1
            at = inc.at
            if at is None and msg.timestamp is not None:
                at = parse_timestamp(msg.timestamp)
            if at is None:
                at = now
                msg.hints = {**msg.hints, "timestamp_assigned": True}
            salt = 0
            stamp = format_timestamp(at)
            new_id = make_message_id(conv, seq, msg, salt, stamp)
            while new_id in taken or self.catalog.has_id(new_id):
                salt += 1
                new_id = make_message_id(conv, seq, msg, salt, stamp)
            taken.add(new_id)
            msg.id = new_id
            out.append(StoredMessage(message=msg, conversation=conv, seq=seq, at=at, tokens=message_tokens(msg),
                                     prev=prev, key=inc.key, lane=inc.lane, thread=inc.thread, stamp=stamp))
            prev = new_id
            if step:
                step()
        days = {sm.day for sm in out}
        if len(days) > 1:
            batch_id = hashlib.sha256("\0".join(sm.id for sm in out).encode()).hexdigest()[:12]
            out = [replace(sm, batch=(batch_id, out[0].seq, len(out))) for sm in out]
        return out

    def _write(self, conv: str, logs: Path, stored: list[StoredMessage],
               step: Callable[[], None] | None = None, *,
               ends: dict[str, int] | None = None) -> tuple[list[str], dict[str, os.stat_result] | None]:
        """Append the entries; returns the days created and, when the catalog recorded the call, each
        written log's ``stat`` by vault path (None: the catalog catches up on the next sync).

        ``ends``: by full path, a size at which a log is known to end a line (see ``_WriterState.ends``).
        """
        store = FileStore(self.layout, self._paths[conv][3])
        by_day: dict[str, list[tuple[bytes, dict[str, Any]]]] = defaultdict(list)
        for sm in stored:
            by_day[sm.day].append(render_entry_meta(sm, store, count_tokens=count_tokens,
                                                    large_tokens=self.large_payload_tokens))
            if step:
                step()
        # The day holding the call's last message is written last: its presence completes a batch.
        last_day = stored[-1].day
        order = sorted(by_day, key=lambda d: (d == last_day, d))
        if store.pending:
            try:
                store.commit()
            except OSError as exc:
                raise StorageError.from_os(exc, store.files_dir, "write a payload file in") from None
        done: list[tuple[Path, int, bool]] = []  # (path, offset before, created) of each append, for rollback
        writes: list[tuple[str, Path, list[ParsedEntry], tuple[int, bytes] | None]] = []
        new_days: list[str] = []
        syncing: PendingSync | None = None
        rel_logs = self.layout.relative(logs)
        root = os.fspath(self.layout.root)
        for day in order:
            blobs = by_day[day]
            # The folder was checked under the lock; the file itself is opened with O_NOFOLLOW.
            path = self._day_paths.get((logs, day))
            if path is None:
                if len(self._day_paths) > 256:
                    self._day_paths.clear()
                path = self._day_paths[(logs, day)] = logs / f"{day}.md"
            try:
                st = os.lstat(path)
                size_before, created = st.st_size, False
                if stat.S_ISLNK(st.st_mode):
                    self.layout.inside(path)  # refuses it, saying why
            except FileNotFoundError:
                size_before, created = 0, True
            header = day_header(conv, day, self.home_link(conv)) if created else b""
            blob = header + b"".join(data for data, _meta in blobs)
            rel = f"{rel_logs}/{day}.md"
            clean_end = ends.get(f"{root}/{rel}") if ends else None
            try:
                if day != last_day:
                    # Durable before the next day is written: a batch is complete only with its last entry.
                    start = durable_append(path, blob, line_start=True, clean_end=clean_end)
                else:
                    append = start_append(path, blob, line_start=True, clean_end=clean_end)
                    start, syncing = append.offset, sync_in_background(append)
            except BaseException as exc:
                # The append cuts its own partial write; this also covers a write that failed
                # after the bytes landed (an fsync error), and the days this call wrote before.
                self._roll_back([*done, (path, size_before, created)])
                if isinstance(exc, OSError):
                    raise StorageError.from_os(exc, path, "append to") from None
                raise
            done.append((path, size_before, created))
            if created:
                new_days.append(day)
            # What parsing the blob back would find, without parsing it: each entry where it was written.
            entries, offset = [], start + len(header)
            for data, meta in blobs:
                entries.append(entry_from_render(data, meta, offset))
                offset += len(data)
            # The file now ends with this blob (we hold the lock): its last bytes need not be read back.
            tail = (start + len(blob), blob[-HEAD_BYTES:]) if len(blob) >= HEAD_BYTES else None
            writes.append((rel, path, entries, tail))
        # The last log syncs on the sync thread while the catalog's rows are written here; the catalog
        # commits only once the log is durable (``before_commit``), so a crash at any point leaves
        # no row whose bytes could be missing, exactly as when the sync came first.
        assert syncing is not None  # the last day is always written
        stats: dict[Path, os.stat_result] | None = None
        try:
            stats = self.catalog.record_append(conv, writes, {sm.id: sm.seq for sm in stored},
                                               batched=stored[0].batch is not None, new_files=bool(new_days),
                                               before_commit=syncing.wait)
        except (VaultLCMError, OSError):
            pass  # derived state: it catches up on the next sync (or the sync failed: see below)
        finally:
            try:
                syncing.wait()
            except BaseException as exc:
                # Not durable: the catalog rolled back (the wait ran before its commit, or it failed
                # first); the sync cut its own bytes off, this cuts the days written before.
                self._roll_back(done)
                if isinstance(exc, OSError):
                    raise StorageError.from_os(exc, syncing.append.path, "append to") from None
                raise
        # Durable: the call has succeeded.
        self.just_written.add(conv, writes)
        if stats is None:
            return new_days, None
        return new_days, {rel: stats[path] for rel, path, _entries, _tail in writes}

    def _roll_back(self, done: list[tuple[Path, int, bool]]) -> None:
        for path, start, created in reversed(done):
            try:
                if created:
                    path.unlink(missing_ok=True)
                    fsync_dir(path.parent)
                elif path.stat().st_size > start:
                    truncate(path, start)
            except OSError:
                pass  # what could not be cut is an incomplete batch: readers ignore it, the next writer cuts it

    # -- reading -----------------------------------------------------------------

    def _store(self, conv: str) -> FileStore:
        return FileStore(self.layout, self.layout.files_dir(conv))

    def read_row(self, row: MessageRow) -> Message:
        return self.read_rows([row])[0][1]

    def read_rows(self, rows: Sequence[MessageRow]) -> list[tuple[MessageRow, Message]]:
        """Several messages, each read by its byte span (one open per file; cost follows the rows)."""
        out: list[tuple[MessageRow, Message] | None] = [None] * len(rows)
        by_path: dict[str, list[int]] = defaultdict(list)
        for i, row in enumerate(rows):
            by_path[row.path].append(i)
        stores: dict[str, FileStore] = {}
        for rel, indexes in by_path.items():
            path = self.layout.inside(self.layout.root / rel)
            try:
                fd = os.open(path, os.O_RDONLY | NOFOLLOW)
            except OSError as exc:
                raise CorruptVaultError(f"cannot read the log ({exc.strerror})", path=rel) from None
            try:
                for i in indexes:
                    row = rows[i]
                    data = os.pread(fd, row.end - row.start, row.start)
                    entry = next((e for e in iter_entries(data, path=rel, base_offset=row.start)
                                  if isinstance(e, ParsedEntry)), None)
                    if entry is None or entry.id != row.id:
                        out[i] = (row, self._reread(row))
                        continue
                    store = stores.get(row.conv)
                    if store is None:
                        store = stores[row.conv] = self._store(row.conv)
                    out[i] = (row, decode_entry(entry, store))
            finally:
                os.close(fd)
        return [x for x in out if x is not None]

    def _reread(self, row: MessageRow) -> Message:
        """The file changed under the catalog: catch up and read the message where it is now."""
        self.sync(row.conv)
        fresh = self.catalog.get(row.id)
        if fresh is None or fresh == row:
            raise CorruptVaultError(f"message {row.id} is not where the catalog says; run `vaultlcm reindex`",
                                    path=row.path)
        return self.read_rows([fresh])[0][1]

    def get(self, msg_id: str) -> tuple[MessageRow, Message]:
        row = self.catalog.get(msg_id)
        if row is None:
            for conv in self.layout.conversations():
                self.sync(conv)
            row = self.catalog.get(msg_id)
        if row is None:
            raise NotFoundError(f"no message with id {msg_id!r}; find ids with `vaultlcm grep` or `vaultlcm export -c CONV`")
        return row, self.read_row(row)

    def iter_conversation(self, conv: str, *, batch: int = 2000) -> Iterator[tuple[MessageRow, Message]]:
        """Every message of ``conv`` in order, a batch of rows at a time (memory stays flat)."""
        self.sync(conv)
        after = 0
        while True:
            rows = self.catalog.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conv=? AND seq>? ORDER BY seq LIMIT ?",
                (conv, after, batch))
            if not rows:
                return
            chunk = [MessageRow(*r) for r in rows]
            yield from self.read_rows(chunk)
            after = chunk[-1].seq

    def read_conversation(self, conv: str) -> list[tuple[MessageRow, Message]]:
        """Every message of ``conv`` in order."""
        return list(self.iter_conversation(conv))

    def fix_final_newline(self, rel: str) -> bool:
        """Add the missing final newline of a hand-edited log (what ``doctor --fix`` may do); True if it did."""
        path = self.layout.inside(self.layout.root / rel)
        data = read_file(path)
        if not data or data.endswith(b"\n"):
            return False
        durable_append(path, b"\n")
        return True
