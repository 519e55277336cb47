"""The catalog: a derived SQLite map of where every message lives.

It lives in ``.vaultlcm/catalog.sqlite`` and is never the source of truth: each
log file's size, mtime and the bytes just before the last parsed offset are
recorded, and :meth:`Catalog.sync_logs` re-reads only what changed (appends are
parsed from the last offset; anything else re-reads the whole file). Delete the
file and it is rebuilt from the Markdown on next use.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .logcodec import ParsedEntry, iter_entries

SCHEMA_VERSION = "3"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS logs(
    path TEXT PRIMARY KEY, conv TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    parsed INTEGER NOT NULL, head_hash TEXT NOT NULL, torn INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS messages(
    id TEXT PRIMARY KEY, conv TEXT NOT NULL, seq INTEGER NOT NULL, at TEXT NOT NULL, role TEXT NOT NULL,
    tokens INTEGER NOT NULL, path TEXT NOT NULL, start INTEGER NOT NULL, end INTEGER NOT NULL, hash TEXT NOT NULL,
    covered TEXT);
CREATE INDEX IF NOT EXISTS messages_conv_seq ON messages(conv, seq, at, id);
CREATE INDEX IF NOT EXISTS messages_uncovered ON messages(conv, seq, at, id) WHERE covered IS NULL;
CREATE INDEX IF NOT EXISTS messages_path ON messages(path);
CREATE TABLE IF NOT EXISTS duplicates(id TEXT NOT NULL, path TEXT NOT NULL, start INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS summaries(
    id TEXT PRIMARY KEY, conv TEXT NOT NULL, path TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    kind TEXT NOT NULL, depth INTEGER NOT NULL, earliest_at TEXT NOT NULL, latest_at TEXT NOT NULL,
    first_seq INTEGER, last_seq INTEGER, descendant_count INTEGER NOT NULL, source_tokens INTEGER NOT NULL,
    token_count INTEGER NOT NULL, summarizer TEXT NOT NULL, prompt TEXT NOT NULL, level TEXT NOT NULL,
    gen_hash TEXT NOT NULL, body_hash TEXT NOT NULL, sources_hash TEXT NOT NULL, sources TEXT NOT NULL,
    body TEXT NOT NULL, parent TEXT, stale INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS summaries_roots ON summaries(conv, first_seq) WHERE parent IS NULL;
CREATE INDEX IF NOT EXISTS summaries_parent ON summaries(parent);
CREATE TABLE IF NOT EXISTS coverage(msg_id TEXT PRIMARY KEY, conv TEXT NOT NULL, summary_id TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS coverage_summary ON coverage(summary_id);
CREATE TABLE IF NOT EXISTS note_files(path TEXT PRIMARY KEY, conv TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, summary_id TEXT);
CREATE TABLE IF NOT EXISTS problems(path TEXT NOT NULL, conv TEXT NOT NULL, kind TEXT NOT NULL, detail TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS reindex_queue(id TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS failures(conv TEXT NOT NULL, at TEXT NOT NULL, summarizer TEXT NOT NULL, detail TEXT NOT NULL);
"""
HEAD_BYTES = 256


@dataclass(frozen=True)
class MessageRow:
    id: str
    conv: str
    seq: int
    at: str
    role: str
    tokens: int
    path: str
    start: int
    end: int
    hash: str
    covered: str | None = None


def entry_hash(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()[:16]


_ENTRY_COLUMNS = "(id, conv, seq, at, role, tokens, path, start, end, hash) VALUES(?,?,?,?,?,?,?,?,?,?)"


def _entry_values(conv: str, rel: str, e: ParsedEntry) -> tuple[object, ...]:
    m = e.meta
    return (m["id"], conv, int(m["seq"]), m["at"], m["role"], int(m.get("tok", 0)), rel, e.start, e.end, entry_hash(e.raw))


def _head_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


class Catalog:
    """Thread-safe access to the catalog database of one vault."""

    def __init__(self, root: Path, db_path: Path) -> None:
        self.root = root
        self.db_path = db_path
        db_path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._db = self._connect()

    def _connect(self) -> sqlite3.Connection:
        try:
            db = sqlite3.connect(self.db_path, check_same_thread=False, isolation_level=None, timeout=30)
            db.execute("PRAGMA journal_mode=WAL")
            # Derived data: losing the last commits on power loss only costs a re-scan.
            db.execute("PRAGMA synchronous=NORMAL")
            version = None
            try:
                row = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
                version = row[0] if row else None
            except sqlite3.DatabaseError:
                version = None
            if version not in (None, SCHEMA_VERSION):
                db.close()
                raise sqlite3.DatabaseError("old schema")
            db.executescript(_SCHEMA)
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES('schema', ?)", (SCHEMA_VERSION,))
            db.execute("INSERT OR IGNORE INTO meta(key, value) VALUES('catalog_id', ?)", (uuid.uuid4().hex,))
            return db
        except sqlite3.DatabaseError:
            # A damaged or outdated catalog is just deleted: the Markdown is the truth.
            for suffix in ("", "-wal", "-shm"):
                Path(str(self.db_path) + suffix).unlink(missing_ok=True)
            db = sqlite3.connect(self.db_path, check_same_thread=False, isolation_level=None, timeout=30)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES('schema', ?)", (SCHEMA_VERSION,))
            db.execute("INSERT OR IGNORE INTO meta(key, value) VALUES('catalog_id', ?)", (uuid.uuid4().hex,))
            return db

    @property
    def catalog_id(self) -> str:
        """Changes whenever the catalog is rebuilt, so caches keyed on it know to start over."""
        rows = self.execute("SELECT value FROM meta WHERE key='catalog_id'")
        return str(rows[0][0]) if rows else ""

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def reset(self) -> None:
        """Forget everything derived (the next syncs re-read every file)."""
        with self.transaction() as db:
            for table in ("logs", "messages", "duplicates", "summaries", "coverage", "note_files", "problems", "reindex_queue"):
                db.execute(f"DELETE FROM {table}")
            db.execute("DELETE FROM meta WHERE key<>'schema'")
            db.execute("INSERT INTO meta(key, value) VALUES('catalog_id', ?)", (uuid.uuid4().hex,))

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    # -- logs --------------------------------------------------------------------

    def sync_logs(self, conv: str, logs_dir: Path) -> list[str]:
        """Bring the catalog up to date with ``logs_dir``; returns the ids of new or changed messages."""
        on_disk: dict[str, Path] = {}
        if logs_dir.is_dir():
            for p in logs_dir.iterdir():
                if p.suffix == ".md" and p.is_file():
                    on_disk[p.relative_to(self.root).as_posix()] = p
        read: list[str] = []
        with self._lock:
            known = {
                row[0]: row
                for row in self._db.execute(
                    "SELECT path, size, mtime_ns, parsed, head_hash FROM logs WHERE conv=?", (conv,)
                )
            }
            for rel in set(known) - set(on_disk):
                with self.transaction() as db:
                    db.execute("DELETE FROM messages WHERE path=?", (rel,))
                    db.execute("DELETE FROM logs WHERE path=?", (rel,))
            for rel, path in sorted(on_disk.items()):
                st = path.stat()
                row = known.get(rel)
                if row is not None and row[1] == st.st_size and row[2] == st.st_mtime_ns:
                    continue
                read += self._sync_file(conv, rel, path, row)
        return read

    def _sync_file(self, conv: str, rel: str, path: Path, row: tuple | None) -> list[str]:
        data = path.read_bytes()
        st = path.stat()
        start = 0
        if row is not None:
            parsed, head = row[3], row[4]
            if len(data) >= parsed and _head_hash(data[max(0, parsed - HEAD_BYTES) : parsed]) == head:
                start = parsed
        entries: list[ParsedEntry] = []
        torn_at: int | None = None
        line = data.count(b"\n", 0, start) + 1
        for item in iter_entries(data[start:], path=rel, base_offset=start, base_line=line):
            if isinstance(item, int):
                torn_at = item
            else:
                entries.append(item)
        parsed = torn_at if torn_at is not None else len(data)
        old: dict[str, str] = {}
        with self.transaction() as db:
            if start == 0:
                old = dict(db.execute("SELECT id, hash FROM messages WHERE path=?", (rel,)).fetchall())
                db.execute("DELETE FROM messages WHERE path=?", (rel,))
                db.execute("DELETE FROM duplicates WHERE path=?", (rel,))
            changed: list[str] = []
            for e in entries:
                h = entry_hash(e.raw)
                if old.get(e.id) != h:
                    changed.append(e.id)
                if e.id in old and old[e.id] != h:
                    db.execute("INSERT OR IGNORE INTO reindex_queue(id) VALUES(?)", (e.id,))
                    # Logs are append-only: a changed entry means a person edited the raw log.
                    detail = f"{rel}:{e.line}: message {e.id} was edited in the raw log (logs are append-only)"
                    if not db.execute("SELECT 1 FROM problems WHERE detail=?", (detail,)).fetchone():
                        db.execute("INSERT INTO problems(path, conv, kind, detail) VALUES(?,?,?,?)", (rel, conv, "log_edit", detail))
            for e in entries:
                m = e.meta
                cur = db.execute(f"INSERT OR IGNORE INTO messages{_ENTRY_COLUMNS}", _entry_values(conv, rel, e))
                if cur.rowcount == 0:
                    existing = db.execute("SELECT path, start FROM messages WHERE id=?", (m["id"],)).fetchone()
                    if existing != (rel, e.start):
                        db.execute("INSERT INTO duplicates(id, path, start) VALUES(?,?,?)", (m["id"], rel, e.start))
            # Re-read rows lose their derived coverage; restore it from the coverage table.
            db.execute(
                "UPDATE messages SET covered=(SELECT summary_id FROM coverage c WHERE c.msg_id=messages.id) WHERE path=?",
                (rel,),
            )
            db.execute(
                "INSERT OR REPLACE INTO logs(path, conv, size, mtime_ns, parsed, head_hash, torn) VALUES(?,?,?,?,?,?,?)",
                (rel, conv, st.st_size, st.st_mtime_ns, parsed, _head_hash(data[max(0, parsed - HEAD_BYTES) : parsed]), int(torn_at is not None)),
            )
        return changed

    def record_append(self, conv: str, rel: str, path: Path, entries: Iterable[ParsedEntry]) -> None:
        """Record entries this process just appended (skips re-reading its own write)."""
        st = path.stat()
        with path.open("rb") as fh:
            fh.seek(max(0, st.st_size - HEAD_BYTES))
            head = fh.read()
        with self.transaction() as db:
            db.executemany(f"INSERT OR REPLACE INTO messages{_ENTRY_COLUMNS}", [_entry_values(conv, rel, e) for e in entries])
            db.execute(
                "INSERT OR REPLACE INTO logs(path, conv, size, mtime_ns, parsed, head_hash, torn) VALUES(?,?,?,?,?,?,0)",
                (rel, conv, st.st_size, st.st_mtime_ns, st.st_size, _head_hash(head)),
            )

    def torn_logs(self, conv: str | None = None) -> list[tuple[str, int]]:
        with self._lock:
            sql = "SELECT path, parsed FROM logs WHERE torn=1" + (" AND conv=?" if conv else "")
            return list(self._db.execute(sql, (conv,) if conv else ()))

    # -- queries -----------------------------------------------------------------

    def last_seq(self, conv: str) -> int:
        with self._lock:
            row = self._db.execute("SELECT MAX(seq) FROM messages WHERE conv=?", (conv,)).fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def get(self, msg_id: str) -> MessageRow | None:
        with self._lock:
            row = self._db.execute("SELECT * FROM messages WHERE id=?", (msg_id,)).fetchone()
        return MessageRow(*row) if row else None

    def has_ids(self, ids: Iterable[str]) -> set[str]:
        ids = list(ids)
        found: set[str] = set()
        with self._lock:
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                q = f"SELECT id FROM messages WHERE id IN ({','.join('?' * len(chunk))})"
                found.update(r[0] for r in self._db.execute(q, chunk))
        return found

    def count(self, conv: str) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM messages WHERE conv=?", (conv,)).fetchone()[0])

    def rows(self, conv: str) -> list[MessageRow]:
        """All messages of ``conv`` in conversation order (seq, then time, then id)."""
        with self._lock:
            return [
                MessageRow(*r)
                for r in self._db.execute("SELECT * FROM messages WHERE conv=? ORDER BY seq, at, id", (conv,))
            ]

    def stats(self) -> list[tuple[str, int, int, int, str | None, str | None]]:
        """Per conversation: name, messages, tokens, days, first and last time."""
        with self._lock:
            return list(
                self._db.execute(
                    "SELECT conv, COUNT(*), COALESCE(SUM(tokens),0), COUNT(DISTINCT path), MIN(at), MAX(at) "
                    "FROM messages GROUP BY conv ORDER BY conv"
                )
            )

    def uncovered_rows(self, conv: str) -> list[MessageRow]:
        """Messages no summary covers, in order (served by a partial index: cost follows the active context)."""
        with self._lock:
            return [
                MessageRow(*r)
                for r in self._db.execute(
                    "SELECT * FROM messages INDEXED BY messages_uncovered WHERE conv=? AND covered IS NULL "
                    "ORDER BY seq, at, id",
                    (conv,),
                )
            ]

    def rows_by_ids(self, ids: list[str]) -> dict[str, MessageRow]:
        out: dict[str, MessageRow] = {}
        with self._lock:
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                q = f"SELECT * FROM messages WHERE id IN ({','.join('?' * len(chunk))})"
                out.update((r[0], MessageRow(*r)) for r in self._db.execute(q, chunk))
        return out

    def execute(self, sql: str, params: tuple = ()) -> list[tuple]:
        with self._lock:
            return list(self._db.execute(sql, params))

    def duplicates(self) -> list[tuple[str, str, int]]:
        with self._lock:
            return list(self._db.execute("SELECT id, path, start FROM duplicates"))
