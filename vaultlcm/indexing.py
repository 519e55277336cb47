"""Keeping the full-text index in step with the vault.

The index (``.vaultlcm/index``) is derived: messages are durable in their logs
first and the index catches up when someone searches. What to add is found
without scanning history: messages appended through the log are past a
per-conversation position mark (this process's, or the one saved at the last
clean close); messages found in files (a git pull, a person's edit, a merge that
reordered a conversation) are queued by id in the catalog's ``reindex_queue``;
summaries are followed through a per-conversation change counter. Any process
that opens an index without trusted marks compares it with the catalog by
content hash once. An index that cannot be opened is rebuilt, not fatal.

:class:`IndexKeeper` takes the parts it needs (layout, settings, catalog, log,
DAG and a way to sync a conversation), not the vault.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import IndexBackendError, IndexError_, VaultLCMError
from .fsutil import atomic_write
from .index import IndexDoc, IndexOtherBackend, IndexUnavailable, SearchIndex, open_index
from .messages import Message, epoch_seconds, parse_timestamp

if TYPE_CHECKING:
    from .catalog import Catalog, MessageRow
    from .dag import Dag, SummaryRow
    from .layout import VaultLayout
    from .logcodec import ParsedEntry
    from .logparts import PayloadStore
    from .msglog import MessageLog
    from .settings import Settings


MARKS_FILE = "vaultlcm-marks.json"
#: What the index holds of each summary (its body hash), kept in the catalog beside the summaries so a
#: follow-up finds what changed by a join in SQLite: a long-running process holds nothing per summary.
#: Trusted only together with the marks (a crash or a new catalog means a full compare, which rewrites it).
_INDEXED_SUMMARIES = (
    "CREATE TABLE IF NOT EXISTS index_summaries(id TEXT PRIMARY KEY, conv TEXT NOT NULL, hash TEXT NOT NULL)"
)
#: Summaries changed since the index last looked, queued by SQLite itself: triggers on ``summaries`` add the id
#: (with its conversation) in the same transaction as the change, whoever makes it (this process, another one,
#: a sync after a person edited a note in Obsidian). A follow-up takes the queue of its conversation, so it
#: costs what changed, never the conversation's summaries. Installed by the full compare that writes
#: :data:`_INDEXED_SUMMARIES`; marks are trusted only where both exist.
_SUMMARY_QUEUE = (
    "CREATE TABLE IF NOT EXISTS index_summary_queue(conv TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY(conv, id)) "
    "WITHOUT ROWID",
    "CREATE TRIGGER IF NOT EXISTS index_summary_queue_ins AFTER INSERT ON summaries BEGIN "
    "INSERT OR IGNORE INTO index_summary_queue(conv, id) VALUES(NEW.conv, NEW.id); END",
    "CREATE TRIGGER IF NOT EXISTS index_summary_queue_del AFTER DELETE ON summaries BEGIN "
    "INSERT OR IGNORE INTO index_summary_queue(conv, id) VALUES(OLD.conv, OLD.id); END",
    # Only what the index holds of a summary: its body, and whether it takes part in the DAG at all.
    "CREATE TRIGGER IF NOT EXISTS index_summary_queue_upd AFTER UPDATE OF id, conv, body_hash, parent ON summaries "
    "WHEN OLD.id IS NOT NEW.id OR OLD.conv IS NOT NEW.conv OR OLD.body_hash IS NOT NEW.body_hash "
    "OR (OLD.parent IS '!invalid') <> (NEW.parent IS '!invalid') BEGIN "
    "INSERT OR IGNORE INTO index_summary_queue(conv, id) VALUES(OLD.conv, OLD.id); "
    "INSERT OR IGNORE INTO index_summary_queue(conv, id) VALUES(NEW.conv, NEW.id); END",
)
_QUEUE_PARTS = ("index_summaries", "index_summary_queue", "index_summary_queue_ins", "index_summary_queue_del",
                "index_summary_queue_upd")
#: A catch-up missing at least this many documents, and at least half of the index, rebuilds it in bulk.
BULK_CATCH_UP = 2000


def message_doc(row: "MessageRow", msg: Message) -> IndexDoc:
    return _message_doc(row.id, row.conv, row.at, row.role, row.hash, row.seq, msg)


def _message_doc(msg_id: str, conv: str, at: str, role: str, content_hash: str, seq: int, msg: Message) -> IndexDoc:
    # Tool call ids are searchable too: an agent often has one in hand (call_0042, toolu_01…).
    ids = " ".join([*msg.tool_call_ids, *msg.tool_result_ids])
    text = msg.searchable_text() + ("\n" + ids if ids else "")
    return IndexDoc(
        id=msg_id, kind="message", conversation=conv, text=text, at=epoch_seconds(at),
        role=role, depth=-1, content_hash=content_hash, seq=seq,
    )


def entry_doc(conv: str, entry: "ParsedEntry", content_hash: str, store: "PayloadStore") -> IndexDoc:
    """The document of a message read from its log entry (``content_hash``: its hash in the catalog), as
    :func:`message_doc` makes it from its catalog row: the row holds what the entry's mark says, at the
    position its writer gave it. The entry is consumed (decoded in place: see
    :func:`~vaultlcm.logcodec.decode_skel_consuming`)."""
    from .logcodec import decode_skel_consuming, skel_message

    m = entry.meta
    return _message_doc(m["id"], conv, m["at"], m["role"], content_hash, int(m.get("seq") or 0),
                        skel_message(entry, decode_skel_consuming(entry, store)))


class _PositionsMoved(IndexError_):
    """A rebuild indexing messages as their logs were read found that their positions did not stand."""


def summary_doc(row: "SummaryRow") -> IndexDoc:
    return IndexDoc(
        id=row.id, kind="summary", conversation=row.conv, text=row.body, at=epoch_seconds(row.latest_at),
        role="", depth=row.depth, content_hash=row.body_hash, seq=row.last_seq or 0,
    )


class IndexKeeper:
    """Owns the vault's index: opening, catching up, incremental adds and rebuilds."""

    #: Backends whose index a reindex builds in a second process (see :mod:`vaultlcm.index_builder`).
    #: Not Whoosh: its writer already spreads a rebuild over worker processes of its own.
    build_beside: tuple[str, ...] = ("tantivy",)

    def __init__(
        self,
        layout: "VaultLayout",
        settings: "Settings",
        catalog: "Catalog",
        log: "MessageLog",
        dag: "Dag",
        *,
        conversations: Callable[[], list[str]],
        sync: Callable[[str], None],
        redact: Callable[[str], str] | None = None,
        notice: Callable[[str], None] | None = None,
    ) -> None:
        self.layout = layout
        self.settings = settings
        self.catalog = catalog
        self.log = log
        self.dag = dag
        self.conversations = conversations
        self.sync = sync
        #: Applied to summary text before it is indexed: a person may paste a secret into a note.
        self.redact = redact
        #: Told, in one line, before a rebuild nobody asked for (minutes at a million messages).
        self.notice = notice
        self._rebuild_told = False
        self._index: SearchIndex | None = None
        self._caught_up = False
        # What this process has put in the index, per conversation, so that writes made by
        # other processes (already in the shared catalog) can be followed cheaply: the last
        # message position indexed and the summaries' change counter last seen (what the index
        # holds of each summary is in the catalog: see _INDEXED_SUMMARIES).
        self._msg_mark: dict[str, int] = {}
        self._sum_print: dict[str, str] = {}
        self._marks_dropped = False

    @property
    def is_open(self) -> bool:
        return self._index is not None

    def open(self) -> SearchIndex:
        if self._index is None:
            path = self.layout.index_dir
            backend = self.settings.index_backend
            try:
                # A process that is not the index's writer searches what is there rather than
                # waiting long for another process (an agent, the MCP server) to let go.
                self._index = open_index(backend, path, lock_timeout=1.0)
            except IndexOtherBackend as exc:
                # Usable as it is by the other backend, and rebuilding it can take many minutes: the
                # person who changed the setting decides (`reindex --backend` shows progress).
                raise IndexBackendError(path, exc.found, backend) from None
            except IndexUnavailable as exc:
                # Derived state: a damaged index (or one an older version wrote) is simply rebuilt from
                # the files; the caller's person or log hears why the call takes long.
                why = " ".join(exc.reason.split()).rstrip(".")  # one line
                self._tell(f"{why}; rebuilding it from the files")
                shutil.rmtree(path, ignore_errors=True)
                self._index = open_index(backend, path, reset=True, lock_timeout=1.0)
                self._caught_up = False
        return self._index

    def _tell(self, line: str) -> None:
        """One notice per rebuild (the reason when the index was refused, else what is built)."""
        if self.notice is not None and not self._rebuild_told:
            self._rebuild_told = True
            self.notice(line)

    def ready(self) -> SearchIndex:
        """The index, caught up with every file of the vault."""
        index = self.open()
        if not self._caught_up:
            if self._load_marks(index):
                self.follow_all()  # only what is new since the last clean close
            else:
                self.catch_up()
        return index

    # -- marks: what the index holds, saved at a clean close --------------------------
    # A full catch-up compares every stored hash (1.6 s at 100k messages). When the last
    # writer closed cleanly it leaves marks behind; a new process trusts them only if the
    # catalog is the same one and the index holds exactly as many documents, and the
    # first write of a process deletes them, so a crash can never leave stale marks.

    @property
    def _marks_path(self) -> Path:
        return self.layout.index_dir / MARKS_FILE

    def _load_marks(self, index: SearchIndex) -> bool:
        try:
            data = json.loads(self._marks_path.read_text(encoding="utf-8"))
            if data.get("catalog_id") != self.catalog.catalog_id or data.get("count") != index.count():
                return False
            msg_mark = {str(k): int(v) for k, v in data["msg_mark"].items()}
            sum_print = {str(k): str(v) for k, v in data["sum_gen"].items()}
            # Marks written before the summaries' hashes moved to the catalog carry them here instead:
            # the table may not match them, so a full compare settles it once.
            # Marks written before the summary queue existed: the catalog's changes since were not queued.
            if "sum_known" in data or data.get("summary_queue") != 1 or not self._has_indexed_summaries():
                return False
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return False
        self._msg_mark, self._sum_print = msg_mark, sum_print
        self._caught_up = True
        return True

    def _save_marks(self) -> None:
        index = self._index
        if index is None or not self._caught_up or not getattr(index, "writable", False):
            return
        data = {
            "catalog_id": self.catalog.catalog_id,
            "count": index.count(),
            "msg_mark": self._msg_mark,
            "sum_gen": self._sum_print,
            "summary_queue": 1,
        }
        try:
            atomic_write(self._marks_path, json.dumps(data, sort_keys=True).encode("utf-8"))
        except OSError:
            pass

    def _dirty(self) -> None:
        if not self._marks_dropped:
            self._marks_path.unlink(missing_ok=True)
            self._marks_dropped = True

    def all_docs(self, progress: Callable[[int], None] | None = None) -> Iterator[IndexDoc]:
        """Every document of the vault, streamed (memory stays flat whatever the history)."""
        for conv in self.conversations():
            self.sync(conv)
            for row, msg in self.log.iter_conversation(conv):
                yield message_doc(row, msg)
                if progress:
                    progress(1)
            yield from self._summary_docs(conv, progress)

    def _rebuilt_docs(self) -> Iterator[IndexDoc]:
        """Every document of the vault while the (reset) catalog reads the files: each log is parsed once,
        for the catalog and for the index, instead of every message being read again from the catalog's
        rows. Raises :class:`_PositionsMoved` when a conversation's positions did not stand (see
        :meth:`Catalog.at_writer_positions`): the caller then indexes from the catalog."""
        from .msglog import FileStore

        for conv in self.conversations():
            store = FileStore(self.layout, self.layout.files_dir(conv))
            stored = 0
            for entries in self.catalog.rebuild_logs(conv, self.layout.inside(self.layout.logs_dir(conv))):
                for entry, content_hash in entries:
                    yield entry_doc(conv, entry, content_hash, store)
                stored += len(entries)
            if not self.catalog.at_writer_positions(conv, stored):
                raise _PositionsMoved(f"conversation {conv!r}: positions restored after its logs were read")
            with self.catalog.grouped():  # two transactions a note: committed a few hundred at a time
                self.sync(conv)
            yield from self._summary_docs(conv)

    def _summary_docs(self, conv: str, progress: Callable[[int], None] | None = None) -> Iterator[IndexDoc]:
        """The documents of ``conv``'s summaries in the DAG, a page at a time."""
        after = ""
        while True:
            batch = self.dag.page(conv, after=after, limit=500)
            if not batch:
                break
            for s in batch:
                if s.parent != "!invalid":
                    yield self._summary_doc(s)
                    if progress:
                        progress(1)
            after = batch[-1].id

    def _summary_doc(self, row: "SummaryRow") -> IndexDoc:
        doc = summary_doc(row)
        if self.redact is None:
            return doc
        from dataclasses import replace

        return replace(doc, text=self.redact(doc.text))

    def catch_up(self) -> dict[str, int]:
        """Index what the catalog has and the index lacks (by content hash); drop what is gone."""
        index = self.open()
        for conv in self.conversations():
            self.sync(conv)
        self.catalog.execute("DELETE FROM reindex_queue")  # the comparison below covers what it holds
        missing, gone = self._differences(index)
        if len(missing) >= BULK_CATCH_UP and 2 * len(missing) >= index.count() - len(gone) + len(missing):
            # Mostly empty (a new or switched backend, a deleted index folder): the bulk path
            # builds it several times faster than upserts, and readers keep the old one meanwhile.
            self._tell(f"building the search index from the files ({len(missing):,} messages and summaries)")
            count = index.rebuild(self.all_docs(), unique=True)
            self._caught_up = True
            self._rebuild_told = False
            self._set_marks()
            return {"added": count, "removed": len(gone)}
        if gone:
            index.remove(gone)
        added = 0
        if missing:
            msg_ids = [i for i in missing if not i.startswith("sum_")]
            rows = self.catalog.rows_by_ids(msg_ids)
            ordered = sorted(rows.values(), key=lambda r: (r.conv, r.path, r.start))
            for i in range(0, len(ordered), 2000):
                batch = ordered[i : i + 2000]
                index.add(message_doc(r, m) for r, m in self._readable(batch))
                added += len(batch)
            for sid in (i for i in missing if i.startswith("sum_")):
                row = self.dag.get(sid)
                if row is not None:
                    index.add([self._summary_doc(row)])
                    added += 1
        self._caught_up = True
        self._rebuild_told = False
        self._set_marks()
        return {"added": added, "removed": len(gone)}

    def _readable(self, rows: list["MessageRow"]) -> list[tuple["MessageRow", Message]]:
        """The messages of ``rows`` that can be read; a damaged one is skipped (``doctor`` names it)."""
        try:
            return self.log.read_rows(rows)
        except VaultLCMError:
            out = []
            for row in rows:
                try:
                    out.extend(self.log.read_rows([row]))
                except VaultLCMError:
                    continue
            return out

    def _set_marks(self) -> None:
        """After a full compare (or a rebuild) the index holds what the catalog has: mark it so."""
        self._sum_print = {}
        self._msg_mark = {c: int(n or 0) for c, n in self.catalog.execute(
            "SELECT conv, MAX(seq) FROM messages GROUP BY conv")}
        with self.catalog.transaction() as db:
            db.execute(_INDEXED_SUMMARIES)
            for sql in _SUMMARY_QUEUE:
                db.execute(sql)
            # The table now says what the index holds: what was queued before is settled by it.
            db.execute("DELETE FROM index_summary_queue")
            db.execute("DELETE FROM index_summaries")
            db.execute("INSERT INTO index_summaries(id, conv, hash) SELECT id, conv, body_hash FROM summaries "
                       "WHERE parent IS NOT '!invalid'")

    def _has_indexed_summaries(self) -> bool:
        """Whether the catalog holds what following summaries needs: the indexed hashes, the queue, its triggers."""
        names = {r[0] for r in self.catalog.execute(
            f"SELECT name FROM sqlite_master WHERE name IN ({','.join('?' * len(_QUEUE_PARTS))})", _QUEUE_PARTS)}
        return names == set(_QUEUE_PARTS)

    def _take_summary_changes(self, conv: str) -> tuple[list[str], list[str], list[str]] | None:
        """Take the queue of ``conv``: the summaries the index lacks or holds with another body, those it holds
        that are gone, and every id taken (to put back if the index cannot be written now).

        Read and emptied in one transaction, so a change another process queues meanwhile stays
        for the next follow-up. None when the catalog has no queue (it was replaced under this
        process): only a full compare can then tell what the index lacks.
        """
        import sqlite3

        try:
            if not self.catalog.execute("SELECT 1 FROM index_summary_queue WHERE conv=? LIMIT 1", (conv,)):
                return [], [], []
        except sqlite3.OperationalError:
            return None
        with self.catalog.transaction() as db:
            taken = [r[0] for r in db.execute("SELECT id FROM index_summary_queue WHERE conv=?", (conv,))]
            changed = [r[0] for r in db.execute(
                "SELECT s.id FROM index_summary_queue q JOIN summaries s ON s.id = q.id "
                "LEFT JOIN index_summaries k ON k.id = s.id WHERE q.conv = ? AND s.conv = q.conv "
                "AND s.parent IS NOT '!invalid' AND (k.hash IS NULL OR k.hash <> s.body_hash OR k.conv <> s.conv)",
                (conv,))]
            gone = [r[0] for r in db.execute(
                "SELECT k.id FROM index_summary_queue q JOIN index_summaries k ON k.id = q.id "
                "LEFT JOIN summaries s ON s.id = k.id WHERE q.conv = ? AND k.conv = q.conv "
                "AND (s.id IS NULL OR s.parent IS '!invalid' OR s.conv <> k.conv)", (conv,))]
            db.execute("DELETE FROM index_summary_queue WHERE conv=?", (conv,))
        return changed, gone, taken

    def _requeue(self, conv: str, ids: list[str]) -> None:
        """Put taken ids back (the index could not be written): the index's writer follows them later."""
        import sqlite3

        try:
            with self.catalog.transaction() as db:
                db.executemany("INSERT OR IGNORE INTO index_summary_queue(conv, id) VALUES(?, ?)",
                               [(conv, i) for i in ids])
        except (sqlite3.OperationalError, VaultLCMError):
            pass  # this process compares everything at its next catch-up anyway


    def follow(self, conv: str) -> int:
        """Index what reached the catalog for ``conv`` since this process last looked; returns docs added.

        Cost follows what is new: messages past the position mark (an index seek),
        the queue of messages found in files, and, when the summaries' change counter
        moved, the queue of summaries changed (see :data:`_SUMMARY_QUEUE`).
        """
        if self._index is None:
            return 0
        if not self._caught_up:
            return self.catch_up()["added"]
        from .catalog import MESSAGE_COLUMNS, MessageRow

        mark = self._msg_mark.get(conv, 0)
        rows = [MessageRow(*r) for r in self.catalog.execute(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conv=? AND seq>? ORDER BY seq", (conv, mark))]
        added = self._drain_queue()
        if rows:
            self.on_messages(self._readable(rows))
            self._msg_mark[conv] = max(r.seq for r in rows)
            added += len(rows)
        # A cheap check first: the catalog counts every change to a conversation's summaries.
        from .dag_rows import summaries_generation

        generation = summaries_generation(self.catalog, conv)
        if self._sum_print.get(conv) == generation:
            return added
        took = self._take_summary_changes(conv)
        if took is None:  # the catalog was replaced: its queue says nothing about what the index holds
            self._caught_up = False
            return added + self.catch_up()["added"]
        changed, gone, taken = took
        for sid in changed:
            row = self.dag.get(sid)
            if row is not None:
                self.on_summary(row)
                added += 1
        self.on_removed(gone)
        if self._caught_up:  # nothing failed: this generation is settled
            self._sum_print[conv] = generation
        elif taken:
            self._requeue(conv, taken)
        return added

    def _drain_queue(self) -> int:
        """Index the messages queued by id (found in files, edited, or moved by a merge)."""
        done = 0
        while True:
            ids = [r[0] for r in self.catalog.execute("SELECT id FROM reindex_queue LIMIT 2000")]
            if not ids:
                return done
            rows = self.catalog.rows_by_ids(ids)
            if rows:
                self.on_messages(self._readable(list(rows.values())))
            self.catalog.execute(f"DELETE FROM reindex_queue WHERE id IN ({','.join('?' * len(ids))})", tuple(ids))
            done += len(rows)

    def follow_all(self) -> int:
        return sum(self.follow(conv) for conv in self.conversations())

    def lag(self) -> int | None:
        """How many documents the next follow-up would add, read from the marks without writing anything.

        ``None`` when that cannot be told cheaply (no trusted marks, messages queued for
        re-indexing, or the index plus what is new does not add up to the catalog's count):
        only a catch-up and a comparison can then say where the index stands.
        """
        index = self.open()
        index.flush()
        if not self._caught_up and not self._load_marks(index):
            return None
        (queued,), = self.catalog.execute("SELECT COUNT(*) FROM reindex_queue")
        if queued or not self._has_indexed_summaries():
            return None
        new = 0
        for conv in self.conversations():
            (n,), = self.catalog.execute("SELECT COUNT(*) FROM messages WHERE conv=? AND seq>?",
                                         (conv, self._msg_mark.get(conv, 0)))
            new += int(n)
            # Only the queued summaries can differ from what the index holds; a changed body replaces
            # its document, so only new ones add to the count and gone ones take from it.
            (fresh,), = self.catalog.execute(
                "SELECT COUNT(*) FROM index_summary_queue q JOIN summaries s ON s.id = q.id "
                "LEFT JOIN index_summaries k ON k.id = q.id "
                "WHERE q.conv = ? AND s.conv = q.conv AND s.parent IS NOT '!invalid' AND k.id IS NULL", (conv,))
            (gone,), = self.catalog.execute(
                "SELECT COUNT(*) FROM index_summary_queue q JOIN index_summaries k ON k.id = q.id "
                "LEFT JOIN summaries s ON s.id = k.id WHERE q.conv = ? AND k.conv = q.conv "
                "AND (s.id IS NULL OR s.parent IS '!invalid' OR s.conv <> k.conv)", (conv,))
            new += int(fresh) - int(gone)
        return new if index.count() + new == self._documents_wanted() else None

    def counts_match(self) -> bool:
        """Whether the index holds as many documents as the catalog says it should (a cheap first check)."""
        index = self.open()
        index.flush()
        return index.count() == self._documents_wanted()

    def _documents_wanted(self) -> int:
        """How many documents the index should hold: every message, every summary in the DAG."""
        (messages,), = self.catalog.execute("SELECT COUNT(*) FROM messages")
        (summaries,), = self.catalog.execute("SELECT COUNT(*) FROM summaries WHERE parent IS NOT '!invalid'")
        return int(messages) + int(summaries)

    def drift(self) -> dict[str, list[str]]:
        """What differs between the index and the files, without changing anything."""
        missing, extra = self._differences(self.open())
        return {"missing": sorted(missing), "extra": sorted(extra)}

    def _differences(self, index: SearchIndex) -> tuple[list[str], list[str]]:
        """Ids the index lacks or holds stale (by content hash), and ids it holds that are gone."""
        stored = index.stored_hashes()
        wanted = {mid: h for mid, h in self.catalog.execute("SELECT id, hash FROM messages")}
        wanted.update({sid: h for sid, h, p in self.catalog.execute(
            "SELECT id, body_hash, parent FROM summaries") if p != "!invalid"})
        return [i for i, h in wanted.items() if stored.get(i) != h], [i for i in stored if i not in wanted]

    def rebuild(self, progress: Callable[[int], None] | None = None, *, backend: str | None = None,
                logs_read: bool = True) -> int:
        """Drop the index and build it again from the Markdown files (with ``backend``, default: the setting's).

        ``logs_read=False``: the catalog was just reset and has not read the logs yet; they
        are read for the catalog and the index in one pass (and every conversation synced),
        on the backends of :attr:`build_beside` with the index built by a second process
        from the documents this one sends as it reads.
        """
        backend = backend or self.settings.index_backend
        if self._index is not None:
            self._index.close()
            self._index = None
        shutil.rmtree(self.layout.index_dir, ignore_errors=True)
        count = None
        beside = not logs_read and backend in self.build_beside
        if beside:
            count = self._rebuild_beside(backend, progress)
        index = open_index(backend, self.layout.index_dir, reset=count is None)
        self._index = index
        if not logs_read and not beside:
            try:
                # Catalog primary keys (messages ``m-…``, summaries ``sum_…``): no id can repeat.
                count = index.rebuild(self._rebuilt_docs(), progress=progress, unique=True)
            except _PositionsMoved:
                # The catalog settled every conversation read so far: index from it. Every message of the
                # others is new, so their logs are read without listing the ids (one per message).
                for conv in self.conversations():
                    self.log.sync(conv, ids=False)
        if count is None:
            self.catalog.execute("DELETE FROM reindex_queue")
            count = index.rebuild(self.all_docs(), progress=progress, unique=True)
        self.catalog.execute("DELETE FROM reindex_queue")
        self._caught_up = True
        self._set_marks()
        return count

    def _rebuild_beside(self, backend: str, progress: Callable[[int], None] | None) -> int:
        """Rebuild the (reset) catalog here while a child process builds the index from the documents
        sent to it (see :mod:`vaultlcm.index_builder`); the number of documents.

        Each log is read once: the entries the catalog stored as messages are decoded here and
        their documents sent. When a conversation's positions did not stand after its last log
        (:meth:`Catalog.at_writer_positions`: an order restored after a merge, a batch released
        from ``pending``), the child forgets what it was sent of it and gets the catalog's rows.

        Raises :class:`~vaultlcm.errors.IndexBuildError` when the child fails; the child has
        ended whatever happens here (an error, Ctrl-C)."""
        from .index_builder import IndexBuilder
        from .msglog import FileStore

        with IndexBuilder(self.layout, backend) as builder:
            for conv in self.conversations():
                store = FileStore(self.layout, self.layout.files_dir(conv))
                stored = 0
                for entries in self.catalog.rebuild_logs(conv, self.layout.inside(self.layout.logs_dir(conv))):
                    builder.add((entry_doc(conv, entry, content_hash, store) for entry, content_hash in entries),
                                progress)
                    stored += len(entries)
                    builder.check(progress)
                if not self.catalog.at_writer_positions(conv, stored):
                    released = self.catalog.released_after_rebuild(conv, stored)
                    if released is None:
                        builder.forget(conv)
                        builder.add((message_doc(row, msg) for row, msg in self.log.iter_conversation(conv)),
                                    progress)
                    for start in range(0, len(released or ()), 2000):
                        rows = self.catalog.rows_by_ids((released or [])[start : start + 2000])
                        builder.add((message_doc(r, m) for r, m in self._readable(list(rows.values()))), progress)
                # The notes are read while the child still indexes the messages (they need none of
                # its work). The DAG's recompute holds the most memory here; the child's writer, the
                # most while it indexes messages: not both at once.
                builder.flush(progress)
                with self.catalog.grouped():  # two transactions a note: committed a few hundred at a time
                    changed = self.dag.sync(conv, full=True, recompute=False).changed
                builder.settle(progress)
                if changed:
                    self.dag.recompute(conv)
                self.sync(conv)  # finds nothing new now: the usual bookkeeping of a synced conversation
                builder.add(self._summary_docs(conv), progress)
                builder.check(progress)
            return builder.commit(progress)

    def on_messages(self, pairs: list[tuple["MessageRow", Message]]) -> None:
        if self._index is not None and pairs:
            self._dirty()
            for r, _ in pairs:
                if r.seq > self._msg_mark.get(r.conv, 0) and self._caught_up:
                    self._msg_mark[r.conv] = r.seq
            try:
                self._index.add(message_doc(r, m) for r, m in pairs)
            except IndexError_:
                # Another process holds the index; the message is durable in its log and
                # the next catch-up (by content hash) indexes it.
                self._caught_up = False

    def on_summary(self, row: "SummaryRow") -> None:
        if self._index is not None:
            self._dirty()
            try:
                self._index.add([self._summary_doc(row)])
            except IndexError_:
                self._caught_up = False
                return
            self._record_summaries([(row.id, row.conv, row.body_hash)], [])

    def on_removed(self, ids: list[str]) -> None:
        if self._index is not None and ids:
            self._dirty()
            try:
                self._index.remove(ids)
            except IndexError_:
                self._caught_up = False
                return
            self._record_summaries([], [i for i in ids if i.startswith("sum_")])

    def _record_summaries(self, indexed: list[tuple[str, str, str]], removed: list[str]) -> None:
        """Note in the catalog what the index now holds of these summaries (see :data:`_INDEXED_SUMMARIES`)."""
        if not self._caught_up:
            return  # not trusted until the next full compare, which rewrites the table
        with self.catalog.transaction() as db:
            db.execute(_INDEXED_SUMMARIES)  # the catalog may have been replaced under this process
            db.executemany("INSERT OR REPLACE INTO index_summaries(id, conv, hash) VALUES(?, ?, ?)", indexed)
            db.executemany("DELETE FROM index_summaries WHERE id = ?", [(i,) for i in removed])

    def close(self) -> None:
        if self._index is not None:
            try:
                self._save_marks()
            except Exception:  # noqa: BLE001 - marks are an optimization; without them the next open catches up
                self._marks_path.unlink(missing_ok=True)
            finally:
                self._index.close()
                self._index = None


def parse_when(text: str, now: datetime) -> float:
    """``--since``/``--before`` values: ISO-8601 dates or times, or ``30m``, ``12h``, ``7d``, ``2w`` ago."""
    import re

    from .errors import UsageError

    m = re.fullmatch(r"\s*(\d+)\s*([smhdw])\s*", text)
    if m:
        seconds = int(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[m.group(2)]
        return now.timestamp() - seconds
    try:
        return parse_timestamp(text).timestamp()
    except Exception:
        raise UsageError(
            f"cannot read the time {text!r}: use an ISO-8601 date or time (2026-11-29, 2026-11-29T10:00Z) "
            "or an age such as 30m, 12h, 7d, 2w"
        ) from None
