"""The catalog's SQLite connection: opening it (and starting over when it is damaged), transactions,
grouped commits and the checkpoints of its write-ahead log.

:class:`~vaultlcm.catalog.Catalog` builds on :class:`CatalogDB`: what the catalog
knows lives there, how it is stored safely lives here. The file is derived state:
when SQLite says it is damaged (never merely busy) it is deleted and the next
syncs rebuild it from the Markdown.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .catalog_schema import SCHEMA, SCHEMA_VERSION
from .errors import LockTimeoutError, StorageError

#: What SQLite says when the file is damaged (the only case the catalog is deleted and rebuilt).
_CORRUPT = ("file is not a database", "malformed", "file is encrypted", "unsupported file format", "old schema")
#: Commits between two checkpoints by the background thread (each ingest call commits once, about
#: 12 pages). A checkpoint writes the pages back and syncs the database file, and an ingest call
#: whose log sync meets it waits for the disk: every 32 commits that was 3% of back-to-back calls and
#: a quiet machine's p99 (7-9 ms at 10k, against 3.5 ms every 256; fewer checkpoints, each longer).
CHECKPOINT_EVERY = 256
#: How long the catalog must have gone without a commit before the thread checkpoints. Under
#: back-to-back commits it waits, and SQLite's checkpoint at :data:`WAL_BACKSTOP_PAGES` (one slow
#: commit in ~385) does the work: a thread checkpointing beside the writer slowed the call whose
#: sync met its write-back, three or four calls in 1,000, and its checkpoint never caught up, so
#: the backstop came anyway. Waiting, paired runs of 3,000 calls: p99 2.3x -> 1.7x FTS5's at 10k,
#: 2.1x -> 1.2x at 100k. An agent's calls have gaps of seconds, where the thread's work costs no call.
QUIET_SECONDS = 0.05
#: SQLite's own checkpoint threshold (pages of WAL), above what CHECKPOINT_EVERY ingest commits write,
#: so that it only catches what the thread did not (a bulk import's large commits): at most 16 MB of WAL.
WAL_BACKSTOP_PAGES = 4000


def _is_corrupt(exc: sqlite3.DatabaseError) -> bool:
    return any(marker in str(exc).lower() for marker in _CORRUPT)


def _is_vanished(exc: sqlite3.DatabaseError) -> bool:
    """SQLite's way of saying its files were deleted under it (the state folder was removed)."""
    text = str(exc).lower()
    return "disk i/o error" in text or "unable to open database" in text or "no such table" in text or (
        "readonly database" in text)


class CatalogDB:
    """Thread-safe access to one catalog database: a connection, its lock, its transactions."""

    def __init__(self, root: Path, db_path: Path, *, busy_timeout: float = 30.0) -> None:
        self.root = root
        self.db_path = db_path
        self.busy_timeout = busy_timeout
        self._lock = threading.RLock()
        #: Moves each time the file is (re)opened: a writer's remembered state belongs to one connection.
        self._generation = 0
        #: Why the file found at opening was deleted to start over (None: it was used, or there was none):
        #: every row is then read again from the files, which takes minutes on a large vault.
        self.started_over: str | None = None
        self._old_schema: str | None = None
        existed = self.db_path.exists()
        self._db = self._open()
        #: No file was there at opening (a new vault, a fresh clone, a deleted state folder): every row
        #: will be read from the files.
        self.created = not existed
        self._commits = 0
        #: ``time.monotonic()`` of the last commit: the checkpointer waits for a quiet moment.
        self._last_commit = 0.0
        self._checkpointer: _Checkpointer | None = None
        #: While :meth:`grouped` runs: how many transactions commit together, the thread grouping them,
        #: and how many the open group holds (its open transaction holds :attr:`_lock`).
        self._group_every = 0
        self._group_owner: int | None = None
        self._group_open = 0

    # -- opening -----------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        attempts = 50
        for attempt in range(attempts):
            try:
                self.db_path.parent.mkdir(parents=True, exist_ok=True)
            except FileExistsError as exc:
                # mkdir found the folder, then it was gone when exist_ok checked (being deleted right now)
                if attempt < attempts - 1:
                    time.sleep(0.02)
                    continue
                raise StorageError.from_os(exc, self.db_path.parent, "create the state folder") from None
            except OSError as exc:
                raise StorageError.from_os(exc, self.db_path.parent, "create the state folder") from None
            try:
                return self._connect()
            except sqlite3.DatabaseError as exc:
                if _is_corrupt(exc):
                    break
                if _is_vanished(exc) and attempt < attempts - 1:
                    time.sleep(0.02)  # the state folder is being deleted right now: start over
                    continue
                raise self._busy_or_storage(exc) from None
        # Damaged or outdated: the Markdown is the truth; start over.
        self.started_over = (f"was made by another version of vaultlcm (schema {self._old_schema}, this one reads "
                             f"{SCHEMA_VERSION})" if self._old_schema is not None else "could not be read (damaged)")
        for suffix in ("", "-wal", "-shm"):
            Path(str(self.db_path) + suffix).unlink(missing_ok=True)
        try:
            return self._connect()
        except sqlite3.DatabaseError as exc:
            raise self._busy_or_storage(exc) from None

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.db_path, check_same_thread=False, isolation_level=None, timeout=self.busy_timeout)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            # Derived data: losing the last commits on power loss only costs a re-scan.
            db.execute("PRAGMA synchronous=NORMAL")
            # The checkpointer thread folds the WAL back every CHECKPOINT_EVERY commits; SQLite's own
            # checkpoint, inside the commit that crosses this threshold, is only the backstop.
            db.execute(f"PRAGMA wal_autocheckpoint={WAL_BACKSTOP_PAGES}")
            row = None
            try:
                row = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            except sqlite3.OperationalError as exc:
                if "no such table" not in str(exc):
                    raise
            if row is not None and row[0] != SCHEMA_VERSION:
                self._old_schema = str(row[0])
                raise sqlite3.DatabaseError("old schema")
            db.executescript(SCHEMA)
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES('schema', ?)", (SCHEMA_VERSION,))
            db.execute("INSERT OR IGNORE INTO meta(key, value) VALUES('catalog_id', ?)", (uuid.uuid4().hex,))
        except BaseException:
            db.close()
            raise
        self._ino = self._inode()
        self._generation += 1
        return db

    def _inode(self) -> int | None:
        try:
            return os.stat(self.db_path).st_ino
        except OSError:
            return None

    def _busy_or_storage(self, exc: sqlite3.DatabaseError) -> Exception:
        text = str(exc)
        if "locked" in text or "busy" in text:
            return LockTimeoutError(f"the catalog {self.db_path} is busy in another process ({text}); retry")
        return StorageError(f"cannot use the catalog {self.db_path} ({text}); check the disk, or delete the "
                            "state folder: `vaultlcm reindex` rebuilds it")

    def ensure_current(self) -> bool:
        """Reopen when the catalog file was deleted or replaced under us (``.vaultlcm/`` removed); True if so."""
        if self._inode() == self._ino and self._ino is not None:
            return False
        with self._lock:
            self._stop_checkpointer()  # its connection is to the old file; the next request starts another
            self._db.close()
            self._db = self._open()
        return True

    def data_version(self) -> int | None:
        """SQLite's ``data_version`` of this connection: it moves whenever another connection commits.

        Together with :meth:`changes` (this connection's own writes), what a writer compares to know
        the catalog holds exactly what it left there. ``None``: cannot tell.
        """
        with self._lock:
            try:
                return int(self._db.execute("PRAGMA data_version").fetchone()[0])
            except sqlite3.Error:
                return None

    def changes(self) -> tuple[int, int, int]:
        """What moves with every write through this catalog: the connection (reopened when the file was
        replaced), its count of changed rows and of committed transactions. Costs no query."""
        with self._lock:
            return (self._generation, self._db.total_changes, self._commits)

    @property
    def catalog_id(self) -> str:
        """Changes whenever the catalog is rebuilt, so caches keyed on it know to start over."""
        rows = self.execute("SELECT value FROM meta WHERE key='catalog_id'")
        return str(rows[0][0]) if rows else ""

    def close(self) -> None:
        with self._lock:
            self._stop_checkpointer()
            self._db.close()

    def _stop_checkpointer(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.stop()
            self._checkpointer = None

    def _committed(self) -> None:
        """Count a commit; every :data:`CHECKPOINT_EVERY`, ask the checkpointer thread to fold the WAL back.

        SQLite would otherwise checkpoint inside the commit that crosses its threshold (about
        every 80 ingest calls): writing pages back and two fsyncs, the slowest of the calls.
        """
        self._commits += 1
        self._last_commit = time.monotonic()
        if self._commits % CHECKPOINT_EVERY:
            return
        if self._checkpointer is None:
            self._checkpointer = _Checkpointer(self.db_path, lambda: self._last_commit)
        self._checkpointer.request()

    @contextmanager
    def grouped(self, every: int = 256) -> Iterator[None]:
        """Within it, this thread's transactions commit ``every`` at a time: each is still all or nothing
        (a savepoint in the group's transaction), but a commit costs one per group, not one each.

        For a rebuild's thousands of small writes (a note read is two transactions). Another thread's
        transaction waits for the open group to commit. When the block raises, the open group is
        rolled back with it, so its earlier transactions are lost too: use it only for what the next
        sync reads again from the files (derived state being rebuilt).
        """
        if self._group_every:
            yield  # already grouping: the outer group commits
            return
        self._group_every, self._group_owner, self._group_open = every, threading.get_ident(), 0
        try:
            yield
        except BaseException:
            if self._group_open:
                self._end_group(commit=False)
            raise
        else:
            if self._group_open:
                self._end_group(commit=True)
        finally:
            self._group_every, self._group_owner, self._group_open = 0, None, 0

    def _end_group(self, *, commit: bool) -> None:
        """Commit (or roll back) the open group's transaction and let other threads in."""
        self._group_open = 0
        try:
            if commit:
                self._commit()
            else:
                self._db.execute("ROLLBACK")
        finally:
            self._lock.release()

    @contextmanager
    def _in_group(self) -> Iterator[sqlite3.Connection]:
        """One transaction of :meth:`grouped`: a savepoint in the group's transaction (begun if none is open)."""
        if not self._group_open:
            self._lock.acquire()
            try:
                self._begin(reopen=False)
            except BaseException:
                self._lock.release()
                raise
        self._group_open += 1
        self._db.execute("SAVEPOINT grouped")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK TO grouped")
            raise
        finally:
            self._db.execute("RELEASE grouped")
            if self._group_open >= self._group_every:
                self._end_group(commit=True)

    @contextmanager
    def transaction(self, *, cache_kib: int = 0) -> Iterator[sqlite3.Connection]:
        """One transaction, all or nothing (a savepoint of the open group inside :meth:`grouped`).

        ``cache_kib``: SQLite's page cache is at least this large while the transaction runs, then
        back to what it was. For a transaction that changes more pages than the default cache
        (2 MB) holds: SQLite would write the overflow to the log mid-transaction and again at the
        commit, and read pages it just evicted back in.
        """
        if self._group_every and self._group_owner == threading.get_ident():
            with self._in_group() as db:
                yield db
            return
        with self._lock:
            restore = self._widen_cache(cache_kib) if cache_kib else None
            try:
                self._begin(reopen=True)
                try:
                    yield self._db
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._commit()
            finally:
                if restore is not None:
                    self._db.execute(f"PRAGMA cache_size={int(restore)}")

    def _widen_cache(self, kib: int) -> int | None:
        """Raise the page cache to ``kib`` KiB (the caller holds the lock); returns the setting to restore,
        None when it was large enough already."""
        before = int(self._db.execute("PRAGMA cache_size").fetchone()[0])
        pages = int(self._db.execute("PRAGMA page_size").fetchone()[0])
        if (-before if before < 0 else before * pages // 1024) >= kib:
            return None
        self._db.execute(f"PRAGMA cache_size={-int(kib)}")
        return before

    def _begin(self, *, reopen: bool) -> None:
        """``BEGIN IMMEDIATE`` (the caller holds the lock); ``reopen``: once more on a fresh connection when
        the file was deleted under this one. A busy or broken catalog raises a typed error."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if not (reopen and _is_vanished(exc) and self.ensure_current()):
                raise self._busy_or_storage(exc) from None
            self._db.execute("BEGIN IMMEDIATE")

    def _commit(self) -> None:
        """``COMMIT`` the open transaction (rolled back, with a typed error, when it cannot), and count it."""
        try:
            self._db.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            self._db.execute("ROLLBACK")
            raise self._busy_or_storage(exc) from None
        self._committed()

    def execute(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return list(self._db.execute(sql, params))
            except sqlite3.OperationalError as exc:
                if _is_vanished(exc) and self.ensure_current():
                    return list(self._db.execute(sql, params))  # the cache was deleted: it starts over
                if "locked" in str(exc) or "busy" in str(exc) or "disk" in str(exc) or "readonly" in str(exc):
                    raise self._busy_or_storage(exc) from None
                raise

    def get_meta(self, key: str) -> str | None:
        rows = self.execute("SELECT value FROM meta WHERE key=?", (key,))
        return str(rows[0][0]) if rows else None

    def set_meta(self, key: str, value: str) -> None:
        self.execute("INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", (key, value))


class _Checkpointer:
    """A thread with its own connection that checkpoints the WAL when asked, once no commit has come
    for :data:`QUIET_SECONDS` (``PASSIVE``: it never waits for, nor blocks, a writer). Started by the
    first request, so a short command never has one."""

    def __init__(self, db_path: Path, last_commit: Callable[[], float]) -> None:
        self.db_path = db_path
        self._last_commit = last_commit
        self._wake = threading.Event()
        self._stopping = False
        #: Checkpoints done (for tests and curiosity).
        self.runs = 0
        self._thread = threading.Thread(target=self._run, name="vaultlcm-checkpoint", daemon=True)
        self._thread.start()

    def request(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout=30)

    @staticmethod
    def _checkpoint(db: sqlite3.Connection) -> None:
        """One checkpoint (its own method so that benchmarks can time it: ``bench_ingest_ab --slowest``)."""
        db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def _wait_for_quiet(self) -> None:
        """Return once the writer has been idle for :data:`QUIET_SECONDS`, or when stopping."""
        while not self._stopping:
            idle = time.monotonic() - self._last_commit()
            if idle >= QUIET_SECONDS:
                return
            # A stop sets the event and ends the wait; a request meanwhile is this same checkpoint.
            self._wake.wait(QUIET_SECONDS - idle)
            self._wake.clear()

    def _run(self) -> None:
        db: sqlite3.Connection | None = None
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                self._wait_for_quiet()
                if self._stopping:
                    return
                try:
                    if db is None:
                        db = sqlite3.connect(self.db_path, isolation_level=None, timeout=0)
                    self._checkpoint(db)
                    self.runs += 1
                except sqlite3.Error:
                    # Only an optimization: SQLite still checkpoints by itself past its threshold.
                    if db is not None:
                        db.close()
                    db = None
        finally:
            if db is not None:
                db.close()
