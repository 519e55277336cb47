"""The catalog: a derived SQLite map of where every message lives, and in what order.

It lives in the vault's state folder (``.vaultlcm/catalog.sqlite``) and is never
the source of truth: each log file's size, mtime and the bytes just before the
last parsed offset are recorded, and :meth:`Catalog.sync_logs` re-reads only
what changed (appends are parsed from the last offset; anything else re-reads
the whole file). Delete it and it is rebuilt from the Markdown on next use; it is
rebuilt by itself only when SQLite says the file is really damaged, never
because another process holds it busy.

Order. ``seq`` is a message's position in its conversation. Each entry records
the position its writer gave it (``wseq``) and the message before it (``prev``);
as long as entries extend one chain, ``seq`` is simply that position. After a
git merge of two machines' appends the chain forks; the catalog then orders the
conversation as a tree walk (:func:`linear_order`): each side's appends stay
together, sides ordered by time, then by id, and records the repair for
``doctor``.

Atomic ingest calls. A call written to several daily logs marks its entries
with a batch (id, first position, size). The writer writes the days in order
and the batch's last entry last, so the batch is complete once an entry at or
past its last position exists (the last entry itself, or anything written
after it); until then its entries wait in ``pending``, so a call torn by a
crash between two files is never half visible, while one damaged entry in the
middle of a complete batch hides nothing else.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .catalog_db import CatalogDB
from .errors import LockTimeoutError, StorageError
from .logcodec import Damaged, Foreign, ParsedEntry, TornTail, iter_entries
from .lanes_append import FULL_SQL, full_lane_changes, relane_after_append
from .threads import static_lane

#: A git conflict marker at the start of a line (never the start of a quoted log line).
CONFLICT_MARKER = re.compile(r"^(<{7}|={7}|>{7})( |$)")

HEAD_BYTES = 256
#: The columns of ``messages`` a :class:`MessageRow` holds, in its order.
MESSAGE_COLUMNS = "id, conv, seq, at, role, tokens, path, start, end, hash, covered, lane, key"
#: One message row, with what its writer recorded of its place and thread. ``covered``: a summary
#: synced before its sources (a rebuilt catalog) already covers it. An id already taken is ignored
#: (the caller looks at the row count); the rows of a rebuild, known to be new, use plain INSERT.
_INSERT_MESSAGE = (
    "INSERT OR IGNORE INTO messages(id, conv, seq, at, role, tokens, path, start, end, hash, lane, key, "
    "wseq, prev, slane, thread, covered) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,"
    "(SELECT summary_id FROM coverage WHERE msg_id=?))")
_INSERT_NEW_MESSAGE = _INSERT_MESSAGE.replace("INSERT OR IGNORE", "INSERT", 1)
#: Counts kept in ``token_counts`` (the newest; about 4 MB): several contexts' worth of texts.
TOKEN_COUNTS_KEPT = 100_000
#: Problems the log reader records (the DAG records its own kinds).
LOG_PROBLEMS = ("log_edit", "damaged_entry", "log_text", "no_final_newline", "merge", "pending_batch")



def log_files(logs_dir: Path) -> list[os.DirEntry[str]]:
    """The daily logs of a conversation's logs folder as the catalog reads them, in no order:
    plain ``<name>.md`` files (a symlink is not followed). Raises ``OSError`` as ``os.scandir``."""
    with os.scandir(logs_dir) as entries:
        return [entry for entry in entries
                if 0 < entry.name.rfind(".") == len(entry.name) - 3 and entry.name.endswith(".md")
                and entry.is_file(follow_symlinks=False)]


@dataclass(frozen=True)
class MessageRow:
    """A message's row as :data:`MESSAGE_COLUMNS` selects it (not the writer's ``wseq``, ``prev`` and thread)."""

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
    lane: int = 0
    key: str | None = None


def entry_hash(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()[:16]


def _head_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _payload_names(meta: dict[str, Any]) -> list[str]:
    """Payload files an entry refers to (externalized parts and large extra fields)."""
    names = [str(p[4]["f"]) for p in meta.get("parts", []) if len(p) > 4 and isinstance(p[4], dict) and "f" in p[4]]
    xf = meta.get("xf")
    if isinstance(xf, dict):
        names.extend(str(v) for v in xf.values())
    return names


class Catalog(CatalogDB):
    """The catalog of one vault: its logs, messages and their order (thread-safe)."""

    def reset(self) -> None:
        """Forget everything derived (the next syncs re-read every file)."""
        with self.transaction() as db:
            for table in ("logs", "messages", "pending", "duplicates", "payload_refs", "summaries", "coverage",
                          "note_files", "problems", "reindex_queue", "log_stats"):
                db.execute(f"DELETE FROM {table}")
            db.execute("DELETE FROM meta WHERE key<>'schema'")
            db.execute("INSERT INTO meta(key, value) VALUES('catalog_id', ?)", (uuid.uuid4().hex,))

    def forget_conversation(self, conv: str) -> None:
        """Forget what was derived from ``conv``'s messages and logs (its folder was removed)."""
        with self.transaction() as db:
            db.execute("DELETE FROM reindex_queue WHERE id IN (SELECT id FROM messages WHERE conv=?)", (conv,))
            for table in ("messages", "pending", "payload_refs", "logs", "log_stats"):
                db.execute(f"DELETE FROM {table} WHERE conv=?", (conv,))
            db.execute("DELETE FROM meta WHERE key=?", (f"logs_dir_mtime:{conv}",))

    # -- logs --------------------------------------------------------------------

    def sync_logs(self, conv: str, logs_dir: Path, *, quick: bool = False, ids: bool = True) -> list[str]:
        """Bring the catalog up to date with ``logs_dir``; returns the ids of new or changed messages.

        ``quick`` trusts files whose folder did not change, except the newest one (the
        cheap check before an append: other writers append under the same lock and
        record what they wrote here). ``ids=False`` returns none: a rebuild, where every
        message is new and a list of them would hold an id per message of the history.
        """
        changed: list[str] = []
        with self._lock:  # one sync at a time in this process, as a whole
            for got, _stored in self._sync_logs(conv, logs_dir, quick=quick):
                if ids:
                    changed += got
        return changed

    def rebuild_logs(self, conv: str, logs_dir: Path) -> Iterator[list[tuple[ParsedEntry, str]]]:
        """Read every log of ``conv`` into the (reset) catalog, yielding each log's entries stored as messages
        (with their hashes).

        What a rebuild of the index reads instead of reading every message again
        (one parse per log). An entry is yielded once its row is committed, at the
        position its writer gave it (``seq`` in its mark); the order is settled
        after the last log, so :meth:`at_writer_positions` tells whether those
        positions stood. Entries not stored as messages (duplicates, parts of an
        incomplete batch) are not yielded.
        """
        for _got, stored in self._sync_logs(conv, logs_dir, quick=False, queue=False):
            yield stored

    def at_writer_positions(self, conv: str, stored: int) -> bool:
        """Whether ``conv`` holds exactly ``stored`` messages, each at the position its writer gave it.

        After :meth:`rebuild_logs` yielded ``stored`` entries: true when they are the
        conversation's messages as the catalog has them (no batch released from
        ``pending``, no order restored by :meth:`_settle`).
        """
        return self.count(conv) == stored and self._positions_stand(conv)

    def released_after_rebuild(self, conv: str, stored: int) -> list[str] | None:
        """After :meth:`rebuild_logs` yielded ``stored`` entries of ``conv`` as they came: the ids of the
        messages stored after them (batches over several days, released from ``pending`` once their
        last day was read, and queued for the index), when those are the only difference; None when
        an order was also restored (every position is then in doubt)."""
        released = [i for (i,) in self.execute(
            "SELECT q.id FROM reindex_queue q JOIN messages m ON m.id = q.id WHERE m.conv=?", (conv,))]
        if stored + len(released) != self.count(conv) or not self._positions_stand(conv):
            return None
        return released

    def _positions_stand(self, conv: str) -> bool:
        """Whether every message of ``conv`` sits at the position its writer gave it."""
        return not self.execute("SELECT 1 FROM messages WHERE conv=? AND seq <> wseq LIMIT 1", (conv,))

    def _sync_logs(self, conv: str, logs_dir: Path, *, quick: bool,
                   queue: bool = True) -> Iterator[tuple[list[str], list[tuple[ParsedEntry, str]]]]:
        """:meth:`sync_logs`, one log at a time: the changed ids of each log synced, and its entries stored
        as messages. The catalog's lock is taken for each log, not held across the yields. ``queue=False``:
        new rows are not queued for the index (a rebuild, which indexes them all)."""
        key = f"logs_dir_mtime:{conv}"
        try:
            dir_mtime = str(logs_dir.stat().st_mtime_ns)
        except FileNotFoundError:
            dir_mtime = "missing"
        on_disk: dict[str, Path | os.DirEntry[str]]
        with self._lock:
            newest_row = None
            if quick and self.get_meta(key) == dir_mtime:
                newest_row = self._db.execute(
                    "SELECT path, size, mtime_ns, parsed, head_hash FROM logs WHERE conv=? ORDER BY path DESC LIMIT 1",
                    (conv,)).fetchone()
            if newest_row is not None:
                # Cost independent of history: one row and one stat.
                known = {newest_row[0]: newest_row}
                on_disk = {newest_row[0]: self.root / newest_row[0]}
            else:
                known = {row[0]: row for row in self._db.execute(
                    "SELECT path, size, mtime_ns, parsed, head_hash FROM logs WHERE conv=?", (conv,))}
                on_disk = {}
                if logs_dir.is_dir():
                    # One scandir: each entry knows whether it is a plain file and stats itself
                    # by its folder's handle (no path objects), and a grep checks every day's log each call.
                    base = logs_dir.relative_to(self.root).as_posix()
                    for entry in log_files(logs_dir):
                        on_disk[f"{base}/{entry.name}"] = entry
                gone = set(known) - set(on_disk)
                if gone:
                    with self.transaction() as db:
                        for rel in gone:
                            db.execute("DELETE FROM payload_refs WHERE path=?", (rel,))
                            db.execute("DELETE FROM messages WHERE path=?", (rel,))
                            db.execute("DELETE FROM pending WHERE path=?", (rel,))
                            db.execute("DELETE FROM logs WHERE path=?", (rel,))
                            db.execute("DELETE FROM problems WHERE path=?", (rel,))
        new_rows = False
        for rel, path in sorted(on_disk.items()):
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            row = known.get(rel)
            if row is not None and row[1] == st.st_size and row[2] == st.st_mtime_ns:
                continue
            with self._lock:
                got, fresh, stored = self._sync_file(conv, rel, Path(path), row, queue=queue)
            new_rows = new_rows or fresh
            yield got, stored
        with self._lock:
            if new_rows:
                self._settle(conv)
            if not quick:
                self.set_meta(key, dir_mtime)

    def _sync_file(self, conv: str, rel: str, path: Path, row: tuple[Any, ...] | None, *,
                   queue: bool = True) -> tuple[list[str], bool, list[tuple[ParsedEntry, str]]]:
        """Parse what changed in one log; returns changed ids, whether rows were added or removed, and the
        entries stored as new messages (with their hashes)."""
        try:
            data = path.read_bytes()
            st = path.stat()
        except OSError:
            return [], False, []
        start = 0
        if row is not None:
            parsed, head = row[3], row[4]
            if len(data) >= parsed and _head_hash(data[max(0, parsed - HEAD_BYTES) : parsed]) == head:
                start = parsed
        entries: list[ParsedEntry] = []
        problems: list[tuple[str, str]] = []
        torn_at: int | None = None
        line = data.count(b"\n", 0, start) + 1
        for item in iter_entries(data[start:], path=rel, base_offset=start, base_line=line):
            if isinstance(item, ParsedEntry):
                entries.append(item)
            elif isinstance(item, TornTail):
                torn_at = item.start
            elif isinstance(item, Damaged):
                problems.append(("damaged_entry", f"{rel}:{item.line}: {item.reason}; the entry is skipped "
                                 "(restore the log from git)"))
            elif isinstance(item, Foreign):
                if CONFLICT_MARKER.match(item.text):
                    problems.append(("conflict_markers", f"{rel}:{item.line}: holds a git conflict marker; logs merge "
                                     "by keeping both sides: remove the marker lines, keep every entry"))
                    continue
                kind = "log_text" if item.final_newline else "no_final_newline"
                what = ("text outside any message (kept as written; vaultlcm ignores it)" if item.final_newline
                        else "the file does not end with a newline (`vaultlcm doctor --fix` adds one)")
                problems.append((kind, f"{rel}:{item.line}: {what}: {item.text[:60]!r}"))
        parsed = torn_at if torn_at is not None else len(data)
        changed: list[str] = []
        with self.transaction() as db:
            old: dict[str, str] = {}
            if start == 0:
                old = dict(db.execute("SELECT id, hash FROM messages WHERE path=?", (rel,)).fetchall())
                db.execute("DELETE FROM messages WHERE path=?", (rel,))
                db.execute("DELETE FROM pending WHERE path=?", (rel,))
                db.execute("DELETE FROM duplicates WHERE path=?", (rel,))
                db.execute("DELETE FROM payload_refs WHERE path=?", (rel,))
                db.execute(f"DELETE FROM problems WHERE path=? AND kind IN ({','.join('?' * 6)})",
                           (rel, "damaged_entry", "log_text", "no_final_newline", "pending_batch", "log_edit",
                            "conflict_markers"))
            for kind, detail in problems:
                db.execute("INSERT INTO problems(path, conv, kind, detail) VALUES(?,?,?,?)", (rel, conv, kind, detail))
            if not old:  # new entries only (every file of a rebuild): hashed once, by _insert
                changed = [e.id for e in entries]
            for e in entries if old else ():
                h = entry_hash(e.raw)
                if old.get(e.id) != h:
                    changed.append(e.id)
                if e.id in old and old[e.id] != h:
                    db.execute("INSERT OR IGNORE INTO reindex_queue(id) VALUES(?)", (e.id,))
                    # Logs are append-only: a changed entry means a person edited the raw log.
                    detail = f"{rel}:{e.line}: message {e.id} was edited in the raw log (logs are append-only)"
                    db.execute("INSERT INTO problems(path, conv, kind, detail) VALUES(?,?,?,?)",
                               (rel, conv, "log_edit", detail))
            stored = self._insert(db, conv, rel, entries, known_ids=set(old), queue=queue)
            db.execute(
                "INSERT OR REPLACE INTO logs(path, conv, size, mtime_ns, parsed, head_hash, torn) VALUES(?,?,?,?,?,?,?)",
                (rel, conv, st.st_size, st.st_mtime_ns, parsed, _head_hash(data[max(0, parsed - HEAD_BYTES) : parsed]),
                 int(torn_at is not None)),
            )
        return changed, bool(entries) or bool(old), stored

    def _insert(self, db: sqlite3.Connection, conv: str, rel: str, entries: list[ParsedEntry], *,
                known_ids: set[str] = frozenset(), seqs: dict[str, int] | None = None,  # type: ignore[assignment]
                queue: bool = True) -> list[tuple[ParsedEntry, str]]:
        """Insert entries as messages (or as pending, for an incomplete batch); returns those stored as new
        messages with their hashes (not the pending ones, nor those whose id was taken)."""
        refs = [(name, conv, rel, e.meta["id"]) for e in entries for name in _payload_names(e.meta)]
        if refs:
            db.executemany("INSERT INTO payload_refs(name, conv, path, msg_id) VALUES(?,?,?,?)", refs)
        rows: list[tuple[ParsedEntry, str]] = []
        for e in entries:
            m = e.meta
            batch = m.get("batch")
            if isinstance(batch, list) and len(batch) == 3 and seqs is None:
                last = int(batch[1]) + int(batch[2]) - 1
                db.execute("INSERT OR REPLACE INTO pending(id, conv, path, start, end, batch, last, wseq, entry) "
                           "VALUES(?,?,?,?,?,?,?,?,?)",
                           (m["id"], conv, rel, e.start, e.end, str(batch[0]), last, int(m.get("seq") or 0),
                            json.dumps({"meta": {k: m.get(k) for k in ("id", "seq", "prev", "role", "at", "tok", "key",
                                                                       "lane", "thread")},
                                        "hash": entry_hash(e.raw)})))
                continue
            rows.append((e, entry_hash(e.raw)))
        stored = self._insert_rows(db, conv, rel, rows, known_ids=known_ids, seqs=seqs, queue=queue)
        if seqs is None:
            self._release_batches(db, conv)
        return stored

    def _insert_rows(self, db: sqlite3.Connection, conv: str, rel: str, rows: list[tuple[ParsedEntry, str]], *,
                     known_ids: set[str], seqs: dict[str, int] | None,
                     queue: bool = True) -> list[tuple[ParsedEntry, str]]:
        """Insert ``(entry, hash)`` rows as messages: new ids a statement per table for them all
        (a whole daily log during a rebuild), ids seen before one by one (:meth:`_insert_row`).
        Returns the rows stored (an id already taken is not)."""
        known_all = seqs is not None or not queue  # this process wrote them (record_append), or a rebuild
        seqs = seqs or {}
        if len(rows) < 8:  # an ingest call: no need for the look-up below
            return [(e, h) for e, h in rows
                    if self._insert_row(db, conv, rel, e.start, e.end, h, e.meta, seq=seqs.get(e.meta["id"]),
                                        known=known_all or e.meta["id"] in known_ids)]
        ids = [e.meta["id"] for e, _h in rows]
        taken = set(self._in("SELECT id FROM messages WHERE id IN ({})", ids, lambda r: r[0]))
        fresh: list[tuple[ParsedEntry, str]] = []
        again: list[tuple[ParsedEntry, str]] = []
        for e, h in rows:
            (again if e.meta["id"] in taken else fresh).append((e, h))
            taken.add(e.meta["id"])
        values, queued = [], []
        for e, h in fresh:
            m = e.meta
            mid = m["id"]
            wseq = int(m.get("seq") or 0)
            seq = seqs.get(mid)
            thread = m.get("thread")
            values.append((mid, conv, wseq if seq is None else seq, m["at"], m["role"], int(m.get("tok") or 0), rel,
                           e.start, e.end, h, static_lane(m.get("lane")), m.get("key"), wseq, m.get("prev"),
                           m.get("lane"), json.dumps(thread, sort_keys=True) if thread else None, mid))
            # Rows this process appended are indexed by position (IndexKeeper.follow); rows
            # found in files may sit anywhere in the order, so they are queued by id.
            if not (known_all or mid in known_ids):
                queued.append((mid,))
        if values:
            db.executemany(_INSERT_NEW_MESSAGE, values)
            db.executemany("INSERT OR IGNORE INTO reindex_queue(id) VALUES(?)", queued)
        stored = fresh
        for e, h in again:
            if self._insert_row(db, conv, rel, e.start, e.end, h, e.meta, seq=seqs.get(e.meta["id"]),
                                known=known_all or e.meta["id"] in known_ids):
                stored.append((e, h))
        return stored

    def _insert_row(self, db: sqlite3.Connection, conv: str, rel: str, start: int, end: int, h: str,
                    m: dict[str, Any], *, seq: int | None, known: bool) -> bool:
        """Insert one message row; False when its id is taken (a second copy is noted in ``duplicates``)."""
        wseq = int(m.get("seq") or 0)
        thread = m.get("thread")
        cur = db.execute(_INSERT_MESSAGE, (
            m["id"], conv, wseq if seq is None else seq, m["at"], m["role"], int(m.get("tok") or 0), rel, start, end,
            h, static_lane(m.get("lane")), m.get("key"), wseq, m.get("prev"), m.get("lane"),
            json.dumps(thread, sort_keys=True) if thread else None, m["id"]))
        if cur.rowcount == 0:
            existing = db.execute("SELECT path, start FROM messages WHERE id=?", (m["id"],)).fetchone()
            if existing != (rel, start):
                db.execute("INSERT INTO duplicates(id, path, start) VALUES(?,?,?)", (m["id"], rel, start))
            return False
        if not known:
            db.execute("INSERT OR IGNORE INTO reindex_queue(id) VALUES(?)", (m["id"],))
        return True

    def _release_batches(self, db: sqlite3.Connection, conv: str) -> None:
        """Move complete batches (see the module docstring) from ``pending`` into ``messages``."""
        if not db.execute("SELECT 1 FROM pending WHERE conv=? LIMIT 1", (conv,)).fetchone():
            return
        written = max(int(db.execute("SELECT COALESCE(MAX(wseq), 0) FROM messages WHERE conv=?", (conv,)).fetchone()[0]),
                      int(db.execute("SELECT COALESCE(MAX(wseq), 0) FROM pending WHERE conv=?", (conv,)).fetchone()[0]))
        for (batch,) in db.execute("SELECT DISTINCT batch FROM pending WHERE conv=? AND last<=?",
                                   (conv, written)).fetchall():
            rows = db.execute("SELECT path, start, end, entry FROM pending WHERE batch=?", (batch,)).fetchall()
            for rel, start, end, entry in rows:
                info = json.loads(entry)
                self._insert_row(db, conv, rel, start, end, info["hash"], info["meta"], seq=None, known=False)
            db.execute("DELETE FROM pending WHERE batch=?", (batch,))

    def record_append(self, conv: str, writes: list[tuple[str, Path, list[ParsedEntry], tuple[int, bytes] | None]],
                      seqs: dict[str, int], *, batched: bool = True, new_files: bool = True,
                      before_commit: Callable[[], None] | None = None) -> dict[Path, os.stat_result]:
        """Record entries this process just appended (skips re-reading its own write).

        Each write is ``(path in the vault, path, entries, tail)``: ``tail`` is ``(size, last
        HEAD_BYTES bytes)`` of the file as the writer left it (None: read them from the file).
        ``batched``: the entries carry a batch mark (a call over several days), so a reader
        may have parked some of them in ``pending``. ``new_files``: the call created a log,
        so the logs folder changed (its mtime is what a quick sync compares). ``before_commit``
        runs last inside the transaction: what it raises rolls the transaction back (the writer
        waits there for its log to be durable, so no row is ever committed before its bytes
        are). Returns each file's ``stat`` as recorded (what the writer compares on its next call).
        """
        stats: dict[Path, os.stat_result] = {}
        appended: list[str] = []
        with self.transaction() as db:
            if batched:
                # A reader may have seen the first files of this call while it was being written and
                # put those entries in pending: they are complete now.
                db.executemany("DELETE FROM pending WHERE id=?", [(i,) for i in seqs])
            for rel, path, entries, tail in writes:
                st = stats[path] = os.stat(path)
                head = tail[1] if tail is not None and tail[0] == st.st_size else None
                if head is None:
                    with path.open("rb") as fh:
                        fh.seek(max(0, st.st_size - HEAD_BYTES))
                        head = fh.read()
                appended.extend(e.meta["id"] for e, _h in self._insert(db, conv, rel, entries, seqs=seqs))
                # An update of unindexed columns touches one page; a replace rewrites every index entry.
                values = (st.st_size, st.st_mtime_ns, st.st_size, _head_hash(head), rel, conv)
                if not db.execute("UPDATE logs SET size=?, mtime_ns=?, parsed=?, head_hash=?, torn=0 "
                                  "WHERE path=? AND conv=?", values).rowcount:
                    db.execute("INSERT OR REPLACE INTO logs(size, mtime_ns, parsed, head_hash, path, conv, torn) "
                               "VALUES(?,?,?,?,?,?,0)", values)
            if writes and new_files:
                try:
                    dir_mtime = str(os.stat(writes[0][1].parent).st_mtime_ns)
                    db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", (f"logs_dir_mtime:{conv}", dir_mtime))
                except OSError:
                    pass
            if any(e.meta.get("thread") for _, _, entries, _ in writes for e in entries):
                # In this transaction: the next append's lanes build on these. An id already taken (a
                # reader synced it first) means rows this call did not insert: recomputed.
                whole = len(appended) == sum(len(entries) for _, _, entries, _ in writes)
                relane_after_append(db, conv, appended if whole else None)
            if before_commit is not None:
                before_commit()
        return stats

    # -- order -------------------------------------------------------------------

    def _settle(self, conv: str) -> None:
        """After rows arrived from files: restore the conversation order and the lanes."""
        if not self._chain_in_order(conv):
            self._reorder(conv)
        self.update_lanes(conv)

    def _chain_in_order(self, conv: str) -> bool:
        """True when the conversation is one unbroken chain already at its positions (the usual case).

        Then :func:`linear_order` would move nothing. Checked while streaming the rows in
        position order (the index's; a row must stand where its writer put it, so when the
        answer is True this is the writer order too), so a rebuild of a long history neither
        holds every row in memory nor sorts them.
        """
        with self._lock:
            cur = self._db.execute("SELECT id, wseq, prev, seq FROM messages WHERE conv=? ORDER BY seq", (conv,))
            last_id: str | None = None
            expected = 1
            for rid, wseq, prev, seq in cur:
                # each row extends the one before it, at the next position, and is stored there
                if wseq != expected or seq != expected or (expected > 1 and prev != last_id):
                    cur.close()
                    return False
                if expected == 1 and prev is not None and self._db.execute(
                        "SELECT 1 FROM messages WHERE id=? AND conv=?", (prev, conv)).fetchone():
                    cur.close()
                    return False
                last_id = rid
                expected += 1
        return True

    def _reorder(self, conv: str) -> None:
        """Put every message of ``conv`` at its place in :func:`linear_order`."""
        rows = self.execute("SELECT id, seq, at, wseq, prev FROM messages WHERE conv=?", (conv,))
        order = linear_order([(i, w, p, at) for i, _s, at, w, p in rows])
        current = {i: s for i, s, *_ in rows}
        moved = [(pos, i) for pos, i in enumerate(order, start=1) if current.get(i) != pos]
        if moved:
            forked = len({w for _i, _s, _at, w, _p in rows}) < len(rows)
            with self.transaction() as db:
                db.executemany("UPDATE messages SET seq=? WHERE id=?", moved)
                db.executemany("INSERT OR IGNORE INTO reindex_queue(id) VALUES(?)", [(i,) for _, i in moved])
                if forked:
                    detail = (f"conversation {conv!r}: appends made on two machines were merged; the order was "
                              "restored with each side's turns kept together (by time, then by id)")
                    if not db.execute("SELECT 1 FROM problems WHERE conv=? AND kind='merge'", (conv,)).fetchone():
                        db.execute("INSERT INTO problems(path, conv, kind, detail) VALUES('', ?, 'merge', ?)",
                                   (conv, detail))

    def update_lanes(self, conv: str) -> None:
        """Recompute which messages are on the main thread (branches, subagents, non-chat lines)."""
        changes = full_lane_changes(self.execute(FULL_SQL, (conv,)))
        if changes:
            with self.transaction() as db:
                db.executemany("UPDATE messages SET lane=? WHERE id=?", changes)

    # -- repair under the write lock ---------------------------------------------

    def torn_logs(self, conv: str | None = None) -> list[tuple[str, int]]:
        sql = "SELECT path, parsed FROM logs WHERE torn=1" + (" AND conv=?" if conv else "")
        return [(str(p), int(n)) for p, n in self.execute(sql, (conv,) if conv else ())]

    def stranded_batches(self, conv: str) -> list[tuple[str, int, int]]:
        """Pending entries of incomplete batches: ``(path, start, end)``, for the writer to cut off.

        Only meaningful under the conversation's write lock, right after a full sync:
        then no writer is half-way through a call, and a pending entry belongs to a
        call that a crash interrupted.
        """
        return [(str(p), int(s), int(e)) for p, s, e in
                self.execute("SELECT path, start, end FROM pending WHERE conv=? ORDER BY path, start", (conv,))]

    # -- queries -----------------------------------------------------------------

    def last(self, conv: str) -> tuple[int, str | None]:
        """``(seq, id)`` of the newest message of ``conv`` (``(0, None)`` when empty)."""
        row = self.execute("SELECT seq, id FROM messages WHERE conv=? ORDER BY seq DESC LIMIT 1", (conv,))
        return (int(row[0][0]), str(row[0][1])) if row else (0, None)

    def newest_log(self, conv: str) -> str | None:
        """The vault path of the newest daily log of ``conv`` the catalog knows (the one a quick sync checks)."""
        rows = self.execute("SELECT path FROM logs WHERE conv=? ORDER BY path DESC LIMIT 1", (conv,))
        return str(rows[0][0]) if rows else None

    def last_seq(self, conv: str) -> int:
        return self.last(conv)[0]

    def get(self, msg_id: str) -> MessageRow | None:
        rows = self.execute(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id=?", (msg_id,))
        return MessageRow(*rows[0]) if rows else None

    def has_id(self, msg_id: str) -> bool:
        return bool(self.execute("SELECT 1 FROM messages WHERE id=?", (msg_id,)))

    def has_ids(self, ids: Iterable[str]) -> set[str]:
        return set(self._in("SELECT id FROM messages WHERE id IN ({})", list(ids), lambda r: r[0]))

    def existing_keys(self, conv: str, keys: Iterable[str]) -> set[str]:
        """Which of ``keys`` are already stored in ``conv`` (or waiting in an incomplete batch)."""
        keys = [k for k in keys if k]
        found = set(self._in("SELECT key FROM messages WHERE conv=? AND key IN ({})", keys, lambda r: r[0], (conv,)))
        return found

    def _in(self, sql: str, values: list[Any], pick: Any, head: tuple[Any, ...] = ()) -> list[Any]:
        out: list[Any] = []
        for i in range(0, len(values), 500):
            chunk = values[i : i + 500]
            out.extend(pick(r) for r in self.execute(sql.format(",".join("?" * len(chunk))), (*head, *chunk)))
        return out

    def count(self, conv: str | None = None) -> int:
        """How many messages ``conv`` holds (every conversation's, without one)."""
        if conv is None:
            return int(self.execute("SELECT COUNT(*) FROM messages")[0][0])
        return int(self.execute("SELECT COUNT(*) FROM messages WHERE conv=?", (conv,))[0][0])

    def ids_between(self, conv: str, lo: int, hi: int) -> list[str]:
        """Ids of ``conv``'s messages at positions ``lo`` to ``hi`` (both included), in order."""
        return [str(i) for (i,) in self.execute(
            "SELECT id FROM messages WHERE conv=? AND seq BETWEEN ? AND ? ORDER BY seq", (conv, lo, hi))]

    def tokens_between(self, conv: str, lo: int, hi: int) -> int:
        """Tokens of ``conv``'s messages at positions ``lo`` to ``hi`` (both included)."""
        [(total,)] = self.execute("SELECT COALESCE(SUM(tokens), 0) FROM messages WHERE conv=? AND seq BETWEEN ? AND ?",
                                  (conv, lo, hi))
        return int(total)

    def covering(self, ids: list[str]) -> dict[str, str | None]:
        """The leaf summary covering each message of ``ids`` the catalog holds (None: not summarized yet)."""
        return dict(self._in("SELECT id, covered FROM messages WHERE id IN ({})", ids, lambda r: (r[0], r[1])))

    def log_paths(self, conv: str, *, newest_first: bool = False) -> list[str]:
        """Vault-relative paths of ``conv``'s daily logs the catalog knows, by day."""
        order = "DESC" if newest_first else "ASC"
        return [str(p) for (p,) in self.execute(f"SELECT path FROM logs WHERE conv=? ORDER BY path {order}", (conv,))]

    def rows(self, conv: str, *, after: int = 0) -> list[MessageRow]:
        """Messages of ``conv`` in conversation order (optionally only those past position ``after``)."""
        return [MessageRow(*r) for r in
                self.execute(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conv=? AND seq>? ORDER BY seq, id",
                             (conv, after))]

    def rows_in_path(self, rel: str) -> list[MessageRow]:
        """Messages stored in one log file, in file order."""
        return [MessageRow(*r) for r in self.execute(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE path=? ORDER BY start", (rel,))]

    def stats(self) -> list[tuple[str, int, int, int, str | None, str | None]]:
        """Per conversation: name, messages, tokens, days, first and last time.

        Summed from each daily log's own totals, kept in ``log_stats`` while the log's recorded
        size and mtime stay the same, so a call counts again only the logs that changed since
        (today's, usually): its cost follows the days, not the messages. A conversation with
        entries waiting in an incomplete batch is counted whole and not kept (releasing the
        batch adds rows to logs that did not change).
        """
        waiting = {c for (c,) in self.execute("SELECT DISTINCT conv FROM pending")}
        kept = {r[0]: r[1:] for r in self.execute(
            "SELECT path, size, mtime_ns, messages, tokens, first_at, last_at FROM log_stats")}
        totals: dict[str, list[Any]] = {}
        fresh: list[tuple[Any, ...]] = []
        seen: set[str] = set()
        for rel, conv, size, mtime_ns in self.execute("SELECT path, conv, size, mtime_ns FROM logs ORDER BY conv, path"):
            seen.add(rel)
            row = kept.get(rel)
            if row is None or row[0] != size or row[1] != mtime_ns or conv in waiting:
                n, tokens, first, last = self.execute(
                    "SELECT COUNT(*), COALESCE(SUM(tokens), 0), MIN(at), MAX(at) FROM messages WHERE path=?", (rel,))[0]
                row = (size, mtime_ns, n, tokens, first, last)
                if conv not in waiting:
                    fresh.append((rel, conv, *row))
            _, _, n, tokens, first, last = row
            if not n:
                continue
            t = totals.setdefault(conv, [0, 0, 0, first, last])
            t[0] += n
            t[1] += tokens
            t[2] += 1
            t[3], t[4] = min(t[3], first), max(t[4], last)
        gone = set(kept) - seen
        if fresh or gone:
            try:
                with self.transaction() as db:
                    db.executemany("INSERT OR REPLACE INTO log_stats(path, conv, size, mtime_ns, messages, tokens, "
                                   "first_at, last_at) VALUES(?,?,?,?,?,?,?,?)", fresh)
                    db.executemany("DELETE FROM log_stats WHERE path=?", [(p,) for p in gone])
            except (sqlite3.Error, StorageError, LockTimeoutError):
                pass  # only a cache: the next call counts again
        return [(conv, *t) for conv, t in sorted(totals.items())]  # type: ignore[misc]

    def uncovered_rows(self, conv: str) -> list[MessageRow]:
        """Main-thread messages no summary covers, in order (a partial index: cost follows the active context)."""
        return [MessageRow(*r) for r in self.execute(
            f"SELECT {MESSAGE_COLUMNS} FROM messages INDEXED BY messages_uncovered "
            "WHERE conv=? AND covered IS NULL AND lane=0 ORDER BY seq", (conv,))]

    def message_places(self, ids: list[str]) -> dict[str, tuple[str, int, str, str]]:
        """``{id: (conv, seq, hash, log path)}`` of these messages: what the DAG's coverage needs of each.

        Not whole rows: recomputing the DAG of a million messages holds one per covered
        message, and the conversation and log names are shared strings, not one per row.
        """
        shared: dict[str, str] = {}
        return dict(self._in("SELECT id, conv, seq, hash, path FROM messages WHERE id IN ({})", ids,
                             lambda r: (r[0], (shared.setdefault(r[1], r[1]), int(r[2]), r[3],
                                               shared.setdefault(r[4], r[4])))))

    def rows_by_ids(self, ids: list[str]) -> dict[str, MessageRow]:
        rows = self._in(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id IN ({{}})", ids, lambda r: MessageRow(*r))
        return {r.id: r for r in rows}

    def payload_refs(self, conv: str) -> dict[str, str]:
        """Payload file name -> a log that refers to it, for every payload ``conv``'s messages use."""
        return {str(n): str(p) for n, p in self.execute(
            "SELECT name, MIN(path) FROM payload_refs WHERE conv=? GROUP BY name", (conv,))}

    # -- summarizer failures (recorded by compaction, reported by doctor) ------------------

    def failure_count(self, conv: str) -> int:
        return int(self.execute("SELECT COUNT(*) FROM failures WHERE conv=?", (conv,))[0][0])

    def clear_failures(self, conv: str) -> None:
        self.execute("DELETE FROM failures WHERE conv=?", (conv,))

    # -- token costs of rendered summaries (a cache shared by every process) ----------------

    def summary_cost(self, summary_id: str, key: str) -> int | None:
        """Tokens of a summary as assembly renders it, if counted before for the rendering ``key`` names."""
        rows = self.execute("SELECT tokens FROM summary_costs WHERE id=? AND key=?", (summary_id, key))
        return int(rows[0][0]) if rows else None

    def save_summary_costs(self, costs: dict[str, tuple[str, int]]) -> None:
        """Remember ``{id: (key, tokens)}``; a catalog that cannot be written (read-only media) is left as is."""
        if not costs:
            return
        try:
            with self.transaction() as db:
                db.executemany("INSERT OR REPLACE INTO summary_costs(id, key, tokens) VALUES(?,?,?)",
                               [(i, k, n) for i, (k, n) in costs.items()])
        except (sqlite3.Error, StorageError, LockTimeoutError):
            pass  # only a cache: the next process counts again

    # -- token counts of texts (a cache shared by every process; see tokens.remembering) ----------

    def counts(self, keys: list[str]) -> dict[str, int]:
        """Known token counts of texts by :func:`vaultlcm.tokens.text_key` (a :class:`~vaultlcm.tokens.CountStore`)."""
        return dict(self._in("SELECT key, tokens FROM token_counts WHERE key IN ({})", keys, lambda r: (r[0], int(r[1]))))

    def save_counts(self, counts: dict[str, int]) -> None:
        """Keep ``{text_key: tokens}``, forgetting the oldest beyond :data:`TOKEN_COUNTS_KEPT`.

        Like :meth:`save_summary_costs`, a catalog that cannot be written is left as is.
        """
        if not counts:
            return
        try:
            with self.transaction() as db:
                db.executemany("INSERT OR REPLACE INTO token_counts(key, tokens) VALUES(?,?)", list(counts.items()))
                db.execute("DELETE FROM token_counts WHERE rowid <= (SELECT MAX(rowid) FROM token_counts) - ?",
                           (TOKEN_COUNTS_KEPT,))
        except (sqlite3.Error, StorageError, LockTimeoutError):
            pass  # only a cache: the next process counts again

    def duplicates(self) -> list[tuple[str, str, int]]:
        return [tuple(r) for r in self.execute("SELECT id, path, start FROM duplicates")]  # type: ignore[misc]


def linear_order(rows: list[tuple[str, int, str | None, str]]) -> list[str]:
    """Conversation order of ``(id, wseq, prev, at)`` rows: a walk of the tree ``prev`` links make.

    A chain (the usual case) comes back in its own order. Where the chain forks
    (two machines appended after the same message and git merged both), each
    branch is walked whole before the next, branches ordered by the time of their
    first message, then by id. Rows without ``prev`` (written by older versions)
    are chained in ``(wseq, at, id)`` order.
    """
    ids = {r[0] for r in rows}
    ordered = sorted(rows, key=lambda r: (r[1], r[3], r[0]))
    parent: dict[str, str | None] = {}
    last_legacy: str | None = None
    for rid, _w, prev, _at in ordered:
        if prev is None and last_legacy is not None and _w > 1:
            parent[rid] = last_legacy
        else:
            parent[rid] = prev if prev in ids else None
        if prev is None:
            last_legacy = rid
    children: dict[str | None, list[tuple[str, str]]] = defaultdict(list)
    for rid, _w, _p, at in ordered:
        children[parent[rid]].append((at, rid))
    out: list[str] = []
    stack = [rid for _at, rid in sorted(children[None], reverse=True)]
    seen: set[str] = set()
    while stack:
        rid = stack.pop()
        if rid in seen:
            continue
        seen.add(rid)
        out.append(rid)
        stack.extend(cid for _at, cid in sorted(children.get(rid, []), reverse=True))
    # A cycle of prev links (hand edits) leaves rows unreachable: keep them, in write order.
    out.extend(r[0] for r in ordered if r[0] not in seen)
    return out
