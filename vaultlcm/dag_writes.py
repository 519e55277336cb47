"""Writing summary notes: a note's file and its catalog rows, and a pass's new notes written together.

:class:`NoteWrites` is the writing half of :class:`vaultlcm.dag.Dag` (which mixes it in): it checks a
new or refreshed note against what is on disk (:meth:`NoteWrites.write_summary`), renders it, writes it
atomically (one by one, or staged by :meth:`NoteWrites.staged_notes` and written at a pass's end), and
stores the rows that mirror it (the summary, its note file, its coverage, its children's parent). The
reading half (the notes' sync), the relations and the queries stay in :mod:`vaultlcm.dag`.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .catalog import Catalog
from .dag_rows import SUMMARY_COLUMNS, SummaryRow, SyncReport, bump_generation
from .errors import ValidationProblem
from .fsutil import atomic_write, fsync_dir, read_file, write_new_files
from .layout import VaultLayout
from .links import VaultFiles
from .summary_notes import SummaryFrontmatter, body_hash, exact_body_hash, parse_note, render_note


#: Notes :meth:`NoteWrites.staged_notes` holds before it writes them (a pass at 100k messages writes 250).
STAGE_LIMIT = 256
#: The catalog's page cache while the staged notes' rows are stored (KiB): their transaction touches
#: about 2,100 pages (8 MB) at 100k messages, a leaf's coverage rows landing on random pages; with
#: SQLite's default 2 MB it would spill to the log mid-transaction and read pages back.
STAGED_CACHE_KIB = 32 * 1024


@dataclass
class _Staged:
    """A note :meth:`NoteWrites.write_summary` accepted inside :meth:`NoteWrites.staged_notes`, not written yet."""

    conv: str
    path: Path
    rel: str
    data: bytes
    fm: SummaryFrontmatter
    ids: list[str]
    #: Its summaries row (:meth:`NoteWrites._row_values`) with size and mtime left to the write.
    values: tuple[Any, ...]


class NoteWrites:
    """The writing half of :class:`vaultlcm.dag.Dag` (see the module docstring)."""

    layout: VaultLayout
    catalog: Catalog
    journal: list[str]
    _files: VaultFiles | None

    def __init__(self) -> None:
        #: Folders written into whose fsync waits for the end of a batch (see :meth:`batched_dir_syncs`).
        self._pending_dirs: set[Path] | None = None
        #: Conversations written into during the current batch (their folder stamps are carried forward at its end).
        self._batch_convs: set[str] = set()
        #: Inside :meth:`staged_notes`: the notes accepted and not written yet, in order (else None).
        self._staged: list[_Staged] | None = None
        #: Inside :meth:`staged_notes`: each conversation's gap names, read once (:meth:`_gaps`).
        self._gaps_seen: dict[str, set[str]] = {}

    if TYPE_CHECKING:  # what the reading half (vaultlcm.dag.Dag) provides
        def sync(self, conv: str, *, full: bool = False, recompute: bool = True) -> SyncReport: ...

        def recompute(self, conv: str) -> None: ...

        def get(self, summary_id: str) -> SummaryRow | None: ...

        def link_for(self, summary_id: str) -> str: ...

        def _read_note(self, conv: str, rel: str, path: Path, size: int, mtime_ns: int, *,
                       expected: bool = True) -> None: ...

        def _stamp_now(self, rel: str, seen: int | str) -> int | str: ...

    def _store(self, conv: str, rel: str, size: int, mtime_ns: int, fm: SummaryFrontmatter, body: str,
               ids: list[str] | None = None, *, relate: bool = False) -> None:
        """Mirror one note. ``ids`` are what its links name when the engine just wrote it (else a first guess).

        ``relate``: record the new node's relations too (:meth:`_relate`), in the same transaction.
        """
        ids = ids or fm.source_ids()
        with self.catalog.transaction() as db:
            # A new node's span is known before its row is written: one INSERT, not an INSERT and an
            # UPDATE of the same row (with its body) a moment later.
            self._store_rows(db, conv, rel, size, mtime_ns, fm, body, ids,
                             span=self._span(db, fm, ids) if relate else None)

    @staticmethod
    def _row_values(conv: str, rel: str, size: int, mtime_ns: int, fm: SummaryFrontmatter, body: str,
                    ids: list[str], first: int | None, last: int | None) -> tuple[Any, ...]:
        """The summaries row of a note just written, in :data:`SUMMARY_COLUMNS`' order (what :meth:`get` reads back)."""
        current = body_hash(body)
        # Notes written before link paths were left out of the hash carry the exact hash: same thing.
        # (When the note carries the current hash, gen is that either way: no second hash of the body.)
        gen = current if fm.body_sha256 == current or fm.body_sha256 == exact_body_hash(body) else fm.body_sha256
        pairs = [[link, sid, 1, 1] for link, sid in zip(fm.sources, ids)]
        return (fm.id, conv, rel, size, mtime_ns, fm.kind, fm.depth, fm.earliest_at, fm.latest_at, first, last,
                fm.descendant_count, fm.source_tokens, fm.token_count, fm.summarizer, fm.prompt, fm.level,
                gen, current, fm.sources_sha256, json.dumps(pairs), body, None, 0)

    def _store_rows(self, db: "sqlite3.Connection", conv: str, rel: str, size: int, mtime_ns: int,
                    fm: SummaryFrontmatter, body: str, ids: list[str], *,
                    span: tuple[int | None, int | None] | None) -> None:
        """:meth:`_store`'s writes, in ``db``'s transaction; ``span`` given: a new node, related too
        (:meth:`_relate`; :meth:`_store_staged` writes the same for a batch)."""
        db.execute("DELETE FROM summaries WHERE id=? AND path<>?", (fm.id, rel))
        bump_generation(db, conv)
        first, last = span if span is not None else (None, None)
        values = self._row_values(conv, rel, size, mtime_ns, fm, body, ids, first, last)
        db.execute(f"INSERT OR REPLACE INTO summaries({SUMMARY_COLUMNS}) VALUES({','.join('?' * 24)})", values)
        db.execute(
            "INSERT OR REPLACE INTO note_files(path, conv, size, mtime_ns, summary_id) VALUES(?,?,?,?,?)",
            (rel, conv, size, mtime_ns, fm.id),
        )
        if span is not None:
            self._relate(db, [(conv, fm, ids)])

    # -- writing -----------------------------------------------------------------

    def write_summary(self, conv: str, fm: SummaryFrontmatter, body: str, *, force: bool = False) -> SummaryRow:
        """Write a note atomically and fold it into the derived state.

        ``fm.sources`` name their targets by id (``[[sum_…]]``, message links); the
        note gets links Obsidian resolves: a link the note already had to the same
        source is kept exactly as written (a person's rename put it there), a new
        link to a renamed or moved note uses its current name (or path, when the
        name is not unique). A note a person moved or renamed is rewritten where it
        is. Refuses to overwrite a note a person edited unless ``force``.
        """
        path = self.layout.summary_path(conv, fm.id)
        if self._staged and self._touches_staged(fm):
            self.flush_staged()  # it names (or is) a note not written yet: the catalog must hold those first
        existing = self.get(fm.id)
        if existing is not None and not (self.layout.root / existing.path).exists():
            self.sync(conv, full=True)  # renamed or moved since the last sync: write it where it is now
            existing = self.get(fm.id)
        if existing is not None and existing.human_owned and not force:
            raise ValidationProblem(f"{existing.path}: summary {fm.id} is human-owned; refusing to overwrite it")
        on_disk = self.layout.root / existing.path if existing is not None else path
        old_text: str | None = None
        if on_disk.exists():
            # Check the file itself, not just the catalog: a person may have saved a
            # correction a moment ago and no sync has seen it yet.
            old_text = read_file(self.layout.inside(on_disk)).decode("utf-8", errors="replace")
            try:
                old_fm, old_body = parse_note(old_text, on_disk)
            except ValidationProblem:
                old_fm, old_body = None, ""
            if old_fm is None and not force:
                raise ValidationProblem(f"{self.layout.relative(on_disk)}: holds summary {fm.id} but cannot be read "
                                        "(`vaultlcm doctor` names the field); fix it by hand, compaction never "
                                        "writes over it")
            owned = old_fm is None or old_fm.body_sha256 not in (body_hash(old_body), exact_body_hash(old_body))
            if not force and owned:
                self._read_note(conv, self.layout.relative(on_disk), on_disk, on_disk.stat().st_size, on_disk.stat().st_mtime_ns)
                raise ValidationProblem(f"{self.layout.relative(on_disk)}: summary {fm.id} was edited by a person; refusing to overwrite it")
            if on_disk != path:
                path = on_disk  # the person moved or renamed it: keep it where they put it
        ids = fm.source_ids()
        kept = {s.id: s.link for s in existing.links if s.ok and s.link} if existing is not None else {}
        links = [kept.get(sid) or (link if fm.kind == "leaf" else self.link_for(sid)) for link, sid in zip(fm.sources, ids)]
        fm = fm.model_copy(update={"sources": links})
        # Properties a person added (tags, aliases, a status) are carried over as they wrote them.
        data = render_note(fm, body, keep_from=old_text).encode("utf-8")
        rel = self.layout.relative(path)
        # A note a parent lost (rebuilt from the same sources) must let that parent find it: a full
        # recompute. Any other note's relations are recorded with its row, in one transaction.
        regap = bool({fm.id, path.stem} & self._gaps(conv))
        batched = self._pending_dirs is not None
        if batched:
            self._batch_convs.add(conv)
        if self._staged is not None and old_text is None and not regap:
            return self._stage(conv, path, rel, data, fm, body, ids)
        self.flush_staged()  # this note is written now: the staged ones go first, in order
        if atomic_write(self.layout.inside(path), data, sync_dir=not batched) and self._pending_dirs is not None:
            self._pending_dirs.add(path.parent)
        st = path.stat()
        self._store(conv, rel, st.st_size, st.st_mtime_ns, fm, body, ids, relate=not regap)
        self.journal.append(rel)
        if self._files is not None:
            self._files.add(rel)
        if regap:
            self.recompute(conv)
        row = self.get(fm.id)
        assert row is not None
        return row

    def _gaps(self, conv: str) -> set[str]:
        """What the gap links of ``conv``'s valid nodes name (:meth:`recompute` records them); read once per
        :meth:`staged_notes` (a recompute, the only writer, forgets the copy)."""
        seen = self._gaps_seen.get(conv) if self._staged is not None else None
        if seen is None:
            seen = set(json.loads(self.catalog.get_meta(f"gaps:{conv}") or "[]"))
            if self._staged is not None:
                self._gaps_seen[conv] = seen
        return seen

    def _touches_staged(self, fm: SummaryFrontmatter) -> bool:
        """Whether ``fm`` is a note staged already, or a condensed node over one (its span reads their rows)."""
        staged = {n.fm.id for n in self._staged or ()}
        return fm.id in staged or (fm.kind != "leaf" and not staged.isdisjoint(fm.source_ids()))

    def _stage(self, conv: str, path: Path, rel: str, data: bytes, fm: SummaryFrontmatter, body: str,
               ids: list[str]) -> SummaryRow:
        """Accept a new note for :meth:`flush_staged`; its row as the catalog will hold it (``mtime_ns`` 0:
        the file is not written yet)."""
        assert self._staged is not None
        # The span reads only rows the catalog holds (messages, or sources written before the batch:
        # see _touches_staged), so it is what the flush's transaction would read.
        sql, params = self._span_sql(fm, ids)
        first, last = self.catalog.execute(sql, params)[0]
        values = self._row_values(conv, rel, len(data), 0, fm, body, ids, first, last)
        self._staged.append(_Staged(conv, path, rel, data, fm, ids, values))
        if self._files is not None:
            self._files.add(rel)  # later links in the batch see the name, as when each note was written at once
        row = SummaryRow(*values)
        if len(self._staged) >= STAGE_LIMIT:
            self.flush_staged()
        return row

    @contextmanager
    def staged_notes(self) -> Iterator[None]:
        """Within it, the new notes :meth:`write_summary` accepts are written together, at the end
        (or every :data:`STAGE_LIMIT` notes): files first, all fsynced, then renamed, then their
        catalog rows in one transaction (:meth:`flush_staged`).

        For a compaction pass, whose notes are all new: one pass over the disk and one commit for
        hundreds of notes instead of one each. The notes are held in memory until then, so a crash
        loses the batch (never half a note; derived state that the next compaction writes again)
        and the catalog never names a note that is not on disk yet (the next sync reads a note the
        catalog lacks). A note that replaces a file, or that the staged ones must be stored before,
        flushes them and is written at once. ``write_summary``'s rows carry ``mtime_ns`` 0 here.
        State of the Dag, as :meth:`batched_dir_syncs`: its writers run under the Vault's lock.
        """
        if self._staged is not None:
            yield  # already staging: the outer block writes
            return
        self._staged, self._gaps_seen = [], {}
        try:
            yield
        finally:
            try:
                self.flush_staged()
            finally:
                self._staged, self._gaps_seen = None, {}

    def flush_staged(self) -> None:
        """Write the staged notes (:meth:`staged_notes`): their files, then their catalog rows."""
        staged = self._staged
        if not staged:
            return
        self._staged = []
        try:
            folders = sorted({n.path.parent for n in staged})
            for folder in folders:
                # The notes are new names in these folders: checking each folder once is what inside() on
                # each note would check (no symlink on the way), and one mkdir each.
                self.layout.inside(folder)
                folder.mkdir(parents=True, exist_ok=True)
            batched = self._pending_dirs is not None
            stamps = write_new_files([(n.path, n.data) for n in staged], sync_dir=not batched)
        except BaseException:
            self._files = None  # it was told of names that may not be on disk: look again when needed
            raise
        if self._pending_dirs is not None:
            self._pending_dirs.update(folders)
        # One transaction for the batch, after the renames: a crash in between leaves notes the catalog
        # lacks (the next sync reads them), never a row naming a missing note.
        with self.catalog.transaction(cache_kib=STAGED_CACHE_KIB) as db:
            self._store_staged(db, staged, stamps)
        self.journal.extend(n.rel for n in staged)

    @classmethod
    def _store_staged(cls, db: "sqlite3.Connection", staged: list[_Staged], stamps: list[tuple[int, int]]) -> None:
        """What :meth:`_store_rows` writes for each staged note, a statement per kind of row for the batch.

        Each table sees its rows in the order the notes came (the same rowids as one note at a
        time); no staged note names another (:meth:`_touches_staged`), so no statement of one
        note reads or changes a row of another, and the tables have no triggers.
        """
        db.executemany("DELETE FROM summaries WHERE id=? AND path<>?", [(n.fm.id, n.rel) for n in staged])
        for conv, count in Counter(n.conv for n in staged).items():
            bump_generation(db, conv, count)
        db.executemany(f"INSERT OR REPLACE INTO summaries({SUMMARY_COLUMNS}) VALUES({','.join('?' * 24)})",
                       [n.values[:3] + stamp + n.values[5:] for n, stamp in zip(staged, stamps)])
        db.executemany("INSERT OR REPLACE INTO note_files(path, conv, size, mtime_ns, summary_id) VALUES(?,?,?,?,?)",
                       [(n.rel, n.conv, *stamp, n.fm.id) for n, stamp in zip(staged, stamps)])
        cls._relate(db, [(n.conv, n.fm, n.ids) for n in staged])

    @contextmanager
    def batched_dir_syncs(self) -> Iterator[None]:
        """Within it, each note written is fsynced itself but its folder only once, at the end.

        A compaction pass writes hundreds of notes into one folder: one folder fsync for
        all of them instead of one each. A crash before the end may lose the newest notes
        (never leave half of one): derived state, which the next compaction writes again.
        """
        if self._pending_dirs is not None:
            yield  # already batching: the outer batch syncs
            return
        self._pending_dirs = set()
        try:
            yield
        finally:
            pending, self._pending_dirs = self._pending_dirs, None
            convs, self._batch_convs = self._batch_convs, set()
            for folder in sorted(pending):
                fsync_dir(folder)
            for conv in sorted(convs):
                self._restamp(conv)

    def _restamp(self, conv: str) -> None:
        """After this process wrote notes, carry the folder stamps forward when nothing else changed them.

        A reader in the next process (:meth:`sync` trusting folders) then need not look at
        every note again because of our own writes: at 100k messages that look is 10,000
        stats. Checked by names, not stats: every note in a folder whose mtime moved must be
        one the catalog knows there and every note it knows there must still be there, so a
        note someone else added, removed or renamed meanwhile leaves the stamp stale and the
        next reader looks. (An edit saved in place never moved a stamp: readers check the
        notes they show, see :meth:`edited_since_read`.)
        """
        key = f"notes_dirs:{conv}"
        seen = self.catalog.get_meta(key)
        if not seen:
            return
        folders: dict[str, int | str] = json.loads(seen)
        known: dict[str, set[str]] = {}
        for (rel,) in self.catalog.execute("SELECT path FROM note_files WHERE conv=?", (conv,)):
            head, _, name = rel.rpartition("/")
            known.setdefault(head, set()).add(name)
        fresh: dict[str, int | str] = {}
        for rel, stamp in folders.items():
            try:
                now = self._stamp_now(rel, stamp)  # an mtime before the listing: a later change moves it past this
                if now != stamp and (isinstance(stamp, str) or not self._only_known_notes(
                        self.layout.root / rel, rel, known.get(rel, set()), folders)):
                    return
            except OSError:
                return
            fresh[rel] = now
        self.catalog.set_meta(key, json.dumps(fresh, sort_keys=True))

    @staticmethod
    def _only_known_notes(path: Path, rel: str, notes: set[str], folders: dict[str, int | str]) -> bool:
        """Whether ``path`` holds exactly the notes the catalog knows there and no folder not stamped yet."""
        names = {n for n in os.listdir(path) if not n.startswith(".")}
        if {n for n in names if n.endswith(".md")} != notes:
            return False
        others = names - notes
        return all(f"{rel}/{n}" in folders or not os.path.isdir(path / n) for n in others)
    @staticmethod
    def _span_sql(fm: SummaryFrontmatter, ids: list[str]) -> tuple[str, tuple[Any, ...]]:
        """The query of :meth:`_span` and its parameters."""
        marks = ",".join("?" * len(ids))
        if fm.kind == "leaf":
            return f"SELECT MIN(seq), MAX(seq) FROM messages WHERE id IN ({marks})", tuple(ids)
        return f"SELECT MIN(first_seq), MAX(last_seq) FROM summaries WHERE id IN ({marks}) AND id<>?", (*ids, fm.id)

    @classmethod
    def _span(cls, db: "sqlite3.Connection", fm: SummaryFrontmatter, ids: list[str]) -> tuple[int | None, int | None]:
        """The first and last message position a node just written covers (its sources' span)."""
        first, last = db.execute(*cls._span_sql(fm, ids)).fetchone()
        return first, last

    @staticmethod
    def _relate(db: "sqlite3.Connection", nodes: Sequence[tuple[str, SummaryFrontmatter, list[str]]]) -> None:
        """Incremental relation update for nodes just written (the common, fast path), ``(conv, fm, ids)``
        each, in ``db``'s transaction; their spans were written with their rows (:meth:`_span`)."""
        leaves = [(conv, fm, ids) for conv, fm, ids in nodes if fm.kind == "leaf"]
        db.executemany("INSERT OR REPLACE INTO coverage(msg_id, conv, summary_id) VALUES(?,?,?)",
                       [(i, conv, fm.id) for conv, fm, ids in leaves for i in ids])
        db.executemany("UPDATE messages SET covered=? WHERE id=?", [(fm.id, i) for _conv, fm, ids in leaves for i in ids])
        db.executemany("UPDATE summaries SET parent=? WHERE id=?",
                       [(fm.id, i) for _conv, fm, ids in nodes if fm.kind != "leaf" for i in ids])
