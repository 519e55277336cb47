"""The summary DAG and the active context, derived from the notes on disk.

The catalog mirrors every summary note (checked against the files by size and
mtime) and keeps the relations that are *derived*, never stored in notes:

* ``coverage``: which leaf covers each message (messages.covered mirrors it so
  the uncovered messages come from a partial index, at a cost that follows the
  active context, not the history);
* ``parent``: which node condensed a summary;
* ``stale``: a node whose sources changed since it was written (a person
  corrected a summary below it, or a raw log was edited);
* human-owned: the body no longer hashes to ``body_sha256``.

The active context is the summaries no other summary condenses plus the
messages no summary covers, in conversation order.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from .catalog import Catalog, MessageRow
from .errors import ValidationProblem
from .fsutil import atomic_write, read_file
from .layout import VaultLayout
from .summary_notes import SummaryFrontmatter, body_hash, parse_note, render_note, sources_hash

_COLUMNS = (
    "id, conv, path, size, mtime_ns, kind, depth, earliest_at, latest_at, first_seq, last_seq, descendant_count, "
    "source_tokens, token_count, summarizer, prompt, level, gen_hash, body_hash, sources_hash, sources, body, parent, stale"
)


def _bump(db: "sqlite3.Connection", conv: str) -> None:
    """Count changes to a conversation's summaries, so followers can tell cheaply that something changed."""
    db.execute(
        "INSERT INTO meta(key, value) VALUES(?, '1') ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1",
        (f"summaries_gen:{conv}",),
    )


def summaries_generation(catalog: Catalog, conv: str) -> str:
    rows = catalog.execute("SELECT value FROM meta WHERE key=?", (f"summaries_gen:{conv}",))
    return rows[0][0] if rows else "0"


@dataclass(frozen=True)
class SummaryRow:
    """A summary node as the catalog mirrors it."""

    id: str
    conv: str
    path: str
    size: int
    mtime_ns: int
    kind: str
    depth: int
    earliest_at: str
    latest_at: str
    first_seq: int | None
    last_seq: int | None
    descendant_count: int
    source_tokens: int
    token_count: int
    summarizer: str
    prompt: str
    level: str
    gen_hash: str
    body_hash: str
    sources_hash: str
    sources_json: str
    body: str
    parent: str | None
    stale: int

    @property
    def sources(self) -> list[str]:
        return list(json.loads(self.sources_json))

    @property
    def human_owned(self) -> bool:
        """A person changed the body: the engine must never regenerate or overwrite it."""
        return self.gen_hash != self.body_hash


@dataclass(frozen=True)
class ActiveItem:
    """One item of the active context: a root summary or an uncovered message."""

    kind: str  # "summary" | "message"
    position: int  # first seq covered
    summary: SummaryRow | None = None
    message: MessageRow | None = None

    @property
    def id(self) -> str:
        return self.summary.id if self.summary else self.message.id  # type: ignore[union-attr]


@dataclass
class DagProblem:
    path: str
    kind: str
    detail: str


@dataclass
class SyncReport:
    changed: int = 0
    problems: list[DagProblem] = field(default_factory=list)


def _walk_notes(folder: Path) -> list[Path]:
    """``*.md`` entries below ``folder`` without descending into symlinked or hidden folders."""
    import os

    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and not os.path.islink(os.path.join(dirpath, d))]
        out.extend(Path(dirpath) / f for f in filenames if f.endswith(".md") and not f.startswith("."))
    return sorted(out)


class Dag:
    """Derived DAG state of every conversation of a vault."""

    def __init__(self, layout: VaultLayout, catalog: Catalog) -> None:
        self.layout = layout
        self.catalog = catalog

    # -- reading the notes -------------------------------------------------------

    def sync(self, conv: str, *, full: bool = False) -> SyncReport:
        """Mirror the notes of ``conv`` into the catalog; recompute relations if anything changed.

        Without ``full``, an unchanged folder (same mtime) is trusted, so the cost of a
        sync does not grow with the number of notes.
        """
        report = SyncReport()
        folder = self.layout.summaries_dir(conv)
        key = f"notes_dir_mtime:{conv}"
        try:
            dir_mtime = str(folder.stat().st_mtime_ns)
        except FileNotFoundError:
            dir_mtime = "missing"
        if not full:
            seen = self.catalog.execute("SELECT value FROM meta WHERE key=?", (key,))
            if seen and seen[0][0] == dir_mtime:
                # No note was added, removed or renamed; in-place edits reach us through `watch`.
                report.problems = self.problems(conv)
                return report
        on_disk: dict[str, Path] = {}
        skipped: list[tuple[str, str]] = []
        if folder.is_dir() and not folder.is_symlink():
            # Subfolders count too: a person may file notes away inside summaries/. Symlinks are
            # never followed (they may lead outside the vault) and only regular files are notes.
            for p in _walk_notes(folder):
                rel = self.layout.relative(p)
                if p.is_symlink():
                    skipped.append((rel, f"{rel}: is a symlink; vaultlcm never reads through symlinks inside a vault "
                                    "(replace it with the note itself, or remove it)"))
                elif not p.is_file():
                    skipped.append((rel, f"{rel}: is not a regular file (a pipe or device?); it is ignored"))
                else:
                    on_disk[rel] = p
        with self.catalog.transaction() as db:
            db.execute("DELETE FROM problems WHERE conv=? AND kind='unsafe_note'", (conv,))
            db.executemany("INSERT INTO problems(path, conv, kind, detail) VALUES(?,?,'unsafe_note',?)",
                           [(rel, conv, detail) for rel, detail in skipped])
        known = {r[0]: r for r in self.catalog.execute("SELECT path, size, mtime_ns, summary_id FROM note_files WHERE conv=?", (conv,))}
        removed = set(known) - set(on_disk)
        for rel in removed:
            sid = known[rel][3]
            with self.catalog.transaction() as db:
                db.execute("DELETE FROM note_files WHERE path=?", (rel,))
                if sid:
                    db.execute("DELETE FROM summaries WHERE id=? AND path=?", (sid, rel))
                    _bump(db, conv)
            report.changed += 1
        for rel, path in sorted(on_disk.items()):
            st = path.stat()
            row = known.get(rel)
            if row is not None and row[1] == st.st_size and row[2] == st.st_mtime_ns:
                continue
            report.changed += 1
            self._read_note(conv, rel, path, st.st_size, st.st_mtime_ns)
        if report.changed:
            self.recompute(conv)
        self.catalog.execute("INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", (key, dir_mtime))
        report.problems = self.problems(conv)
        return report

    def _read_note(self, conv: str, rel: str, path: Path, size: int, mtime_ns: int) -> None:
        try:
            text = read_file(self.layout.inside(path)).decode("utf-8", errors="replace")
        except OSError:
            return  # gone or replaced between the listing and the read: the next sync sees it
        with self.catalog.transaction() as db:
            db.execute("DELETE FROM problems WHERE path=? AND kind='invalid'", (rel,))
        try:
            fm, body = parse_note(text, rel)
            if fm.conversation != conv:
                raise ValidationProblem(
                    f"{rel}: field 'conversation' says {fm.conversation!r} but the note is in conversation {conv!r}; "
                    "move the note back or fix the field"
                )
        except ValidationProblem as exc:
            # The last good state stays in force: keep the old row, just record the problem.
            with self.catalog.transaction() as db:
                db.execute("INSERT INTO problems(path, conv, kind, detail) VALUES(?,?,?,?)", (rel, conv, "invalid", str(exc)))
                db.execute(
                    "INSERT OR REPLACE INTO note_files(path, conv, size, mtime_ns, summary_id) VALUES(?,?,?,?, "
                    "(SELECT summary_id FROM note_files WHERE path=?))",
                    (rel, conv, size, mtime_ns, rel),
                )
            return
        old = self.get(fm.id)
        if old is not None and not old.human_owned and old.gen_hash == fm.body_sha256 != body_hash(body):
            # A person just edited a note the engine wrote: keep what the engine wrote, so the
            # nodes above can carry exactly what changed (see generated_body).
            self.catalog.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", (f"generated_body:{fm.id}", old.body)
            )
        self._store(conv, rel, size, mtime_ns, fm, body)

    def _store(self, conv: str, rel: str, size: int, mtime_ns: int, fm: SummaryFrontmatter, body: str) -> None:
        with self.catalog.transaction() as db:
            db.execute("DELETE FROM summaries WHERE id=? AND path<>?", (fm.id, rel))
            _bump(db, conv)
            db.execute(
                f"INSERT OR REPLACE INTO summaries({_COLUMNS}) VALUES({','.join('?' * 24)})",
                (
                    fm.id, conv, rel, size, mtime_ns, fm.kind, fm.depth, fm.earliest_at, fm.latest_at, None, None,
                    fm.descendant_count, fm.source_tokens, fm.token_count, fm.summarizer, fm.prompt, fm.level,
                    fm.body_sha256, body_hash(body), fm.sources_sha256, json.dumps(fm.source_ids()), body, None, 0,
                ),
            )
            db.execute(
                "INSERT OR REPLACE INTO note_files(path, conv, size, mtime_ns, summary_id) VALUES(?,?,?,?,?)",
                (rel, conv, size, mtime_ns, fm.id),
            )

    # -- writing -----------------------------------------------------------------

    def write_summary(self, conv: str, fm: SummaryFrontmatter, body: str, *, force: bool = False) -> SummaryRow:
        """Write a new note atomically and fold it into the derived state.

        Refuses to overwrite a note a person edited unless ``force``.
        """
        path = self.layout.summary_path(conv, fm.id)
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
            if not force and (old_fm is None or body_hash(old_body) != old_fm.body_sha256):
                self._read_note(conv, self.layout.relative(on_disk), on_disk, on_disk.stat().st_size, on_disk.stat().st_mtime_ns)
                raise ValidationProblem(f"{self.layout.relative(on_disk)}: summary {fm.id} was edited by a person; refusing to overwrite it")
            if on_disk != path:
                path = on_disk  # the person moved or renamed it: keep it where they put it
        # Properties a person added (tags, aliases, a status) are carried over as they wrote them.
        atomic_write(self.layout.inside(path), render_note(fm, body, keep_from=old_text).encode("utf-8"))
        st = path.stat()
        rel = self.layout.relative(path)
        self._store(conv, rel, st.st_size, st.st_mtime_ns, fm, body)
        self._link(conv, fm)
        row = self.get(fm.id)
        assert row is not None
        return row

    def _link(self, conv: str, fm: SummaryFrontmatter) -> None:
        """Incremental relation update for a node just written (the common, fast path)."""
        ids = fm.source_ids()
        with self.catalog.transaction() as db:
            if fm.kind == "leaf":
                rows = db.execute(
                    f"SELECT MIN(seq), MAX(seq) FROM messages WHERE id IN ({','.join('?' * len(ids))})", ids
                ).fetchone()
                db.executemany("INSERT OR REPLACE INTO coverage(msg_id, conv, summary_id) VALUES(?,?,?)", [(i, conv, fm.id) for i in ids])
                db.executemany("UPDATE messages SET covered=? WHERE id=?", [(fm.id, i) for i in ids])
            else:
                rows = db.execute(
                    f"SELECT MIN(first_seq), MAX(last_seq) FROM summaries WHERE id IN ({','.join('?' * len(ids))})", ids
                ).fetchone()
                db.executemany("UPDATE summaries SET parent=? WHERE id=?", [(fm.id, i) for i in ids])
            db.execute("UPDATE summaries SET first_seq=?, last_seq=? WHERE id=?", (rows[0], rows[1], fm.id))

    # -- relations ---------------------------------------------------------------

    def recompute(self, conv: str) -> None:
        """Rebuild coverage, parents, positions and staleness of ``conv`` from the mirrored notes."""
        rows = {r.id: r for r in self.all(conv)}
        msg_ids = [mid for r in rows.values() if r.kind == "leaf" for mid in r.sources]
        messages = self.catalog.rows_by_ids(msg_ids)
        problems: list[tuple[str, str, str]] = []
        claimed: dict[str, str] = {}
        parent: dict[str, str] = {}
        valid: set[str] = set()
        # Lower depths first, so a node's children are settled before it.
        for r in sorted(rows.values(), key=lambda r: (r.depth, r.id)):
            bad = None
            for sid in r.sources:
                if r.kind == "leaf":
                    if sid not in messages:
                        bad = f"source {sid} is not a message of this vault"
                    elif messages[sid].conv != conv:
                        bad = f"source {sid} belongs to conversation {messages[sid].conv!r}"
                else:
                    child = rows.get(sid)
                    if child is None:
                        bad = f"source {sid} is not a summary of this conversation"
                    elif child.depth >= r.depth:
                        bad = f"source {sid} has depth {child.depth}, not below this node's depth {r.depth} (a cycle or a wrong depth)"
                    elif sid not in valid:
                        bad = f"source {sid} is itself invalid"
                if bad:
                    break
                if sid in claimed:
                    bad = f"source {sid} is already covered by {claimed[sid]}"
                    break
            if bad:
                problems.append((r.path, "dag", f"{r.path}: field 'sources': {bad}; fix the link or delete the note"))
                continue
            valid.add(r.id)
            for sid in r.sources:
                claimed[sid] = r.id
                if r.kind != "leaf":
                    parent[sid] = r.id
        first: dict[str, int | None] = {}
        last: dict[str, int | None] = {}
        stale: dict[str, int] = {}
        for r in sorted(rows.values(), key=lambda r: r.depth):
            if r.id not in valid:
                continue
            if r.kind == "leaf":
                seqs = [messages[s].seq for s in r.sources]
                digest = sources_hash([messages[s].hash for s in r.sources])
            else:
                seqs = [x for s in r.sources for x in (first.get(s), last.get(s)) if x is not None]
                digest = sources_hash([rows[s].body_hash for s in r.sources])
            first[r.id] = min(seqs) if seqs else None
            last[r.id] = max(seqs) if seqs else None
            stale[r.id] = int(digest != r.sources_hash)
        with self.catalog.transaction() as db:
            _bump(db, conv)
            db.execute("DELETE FROM coverage WHERE conv=?", (conv,))
            db.execute("UPDATE messages SET covered=NULL WHERE conv=? AND covered IS NOT NULL", (conv,))
            db.execute("DELETE FROM problems WHERE conv=? AND kind='dag'", (conv,))
            db.executemany("INSERT INTO problems(path, conv, kind, detail) VALUES(?,?,?,?)", [(p, conv, k, d) for p, k, d in problems])
            cover = [(mid, conv, leaf) for mid, leaf in claimed.items() if rows[leaf].kind == "leaf"]
            db.executemany("INSERT OR REPLACE INTO coverage(msg_id, conv, summary_id) VALUES(?,?,?)", cover)
            db.executemany("UPDATE messages SET covered=? WHERE id=?", [(leaf, mid) for mid, _, leaf in cover])
            for r in rows.values():
                if r.id in valid:
                    db.execute(
                        "UPDATE summaries SET parent=?, first_seq=?, last_seq=?, stale=? WHERE id=?",
                        (parent.get(r.id), first[r.id], last[r.id], stale[r.id], r.id),
                    )
                else:
                    # An invalid node takes no part in the DAG; its sources go back to the active context.
                    db.execute("UPDATE summaries SET parent='!invalid', first_seq=NULL, last_seq=NULL WHERE id=?", (r.id,))

    # -- queries -----------------------------------------------------------------

    def generated_body(self, summary_id: str) -> str | None:
        """The body the engine wrote for a note a person has since edited, if the catalog saw it.

        Derived state like the rest of the catalog: None after a rebuild, or when
        it no longer matches the note's ``body_sha256``.
        """
        row = self.get(summary_id)
        found = self.catalog.execute("SELECT value FROM meta WHERE key=?", (f"generated_body:{summary_id}",))
        if row is None or not found or body_hash(found[0][0]) != row.gen_hash:
            return None
        return str(found[0][0])

    def _rows(self, where: str, params: tuple) -> list[SummaryRow]:
        return [SummaryRow(*r) for r in self.catalog.execute(f"SELECT {_COLUMNS} FROM summaries WHERE {where}", params)]

    def get(self, summary_id: str) -> SummaryRow | None:
        rows = self._rows("id=?", (summary_id,))
        return rows[0] if rows else None

    def all(self, conv: str, *, bodies: bool = True) -> list[SummaryRow]:
        """Every summary of ``conv``; ``bodies=False`` leaves ``body`` empty (cheap over many notes)."""
        if bodies:
            return self._rows("conv=? ORDER BY depth, first_seq, id", (conv,))
        cols = _COLUMNS.replace(", body,", ", '' AS body,")
        return [SummaryRow(*r) for r in self.catalog.execute(
            f"SELECT {cols} FROM summaries WHERE conv=? ORDER BY depth, first_seq, id", (conv,))]

    def page(self, conv: str, *, after: str = "", limit: int = 500) -> list[SummaryRow]:
        """Summaries of ``conv`` by id, ``limit`` at a time after ``after`` (for streaming through them)."""
        return self._rows("conv=? AND id>? ORDER BY id LIMIT ?", (conv, after, limit))

    def roots(self, conv: str) -> list[SummaryRow]:
        return self._rows("conv=? AND parent IS NULL ORDER BY first_seq, id", (conv,))

    def children(self, summary_id: str) -> list[SummaryRow]:
        row = self.get(summary_id)
        if row is None or row.kind == "leaf":
            return []
        by_id = {r.id: r for r in self._rows(f"id IN ({','.join('?' * len(row.sources))})", tuple(row.sources))}
        return [by_id[s] for s in row.sources if s in by_id]

    def sources_of(self, row: SummaryRow) -> list[SummaryRow]:
        """The child summaries of a condensed node, in its order (one query; read-only)."""
        if row.kind == "leaf" or not row.sources:
            return []
        ids = row.sources
        by_id = {r.id: r for r in self._rows(f"id IN ({','.join('?' * len(ids))})", tuple(ids))}
        return [by_id[s] for s in ids if s in by_id]

    def messages_under(self, summary_id: str) -> tuple[list[str], int]:
        """Ids of the messages below a summary, in conversation order, and their catalog tokens (read-only)."""
        rows = self.catalog.execute(
            "WITH RECURSIVE sub(id) AS (SELECT ? UNION ALL SELECT s.id FROM summaries s JOIN sub ON s.parent = sub.id) "
            "SELECT m.id, m.tokens FROM coverage c JOIN messages m ON m.id = c.msg_id "
            "WHERE c.summary_id IN (SELECT id FROM sub) ORDER BY m.seq",
            (summary_id,),
        )
        return [r[0] for r in rows], sum(int(r[1]) for r in rows)

    def problems(self, conv: str | None = None) -> list[DagProblem]:
        sql = "SELECT path, kind, detail FROM problems" + (" WHERE conv=?" if conv else "") + " ORDER BY path"
        return [DagProblem(*r) for r in self.catalog.execute(sql, (conv,) if conv else ())]

    def active(self, conv: str) -> list[ActiveItem]:
        """The active context of ``conv``: root summaries and uncovered messages, in order."""
        items = [ActiveItem("summary", r.first_seq if r.first_seq is not None else 0, summary=r) for r in self.roots(conv)]
        items.extend(ActiveItem("message", m.seq, message=m) for m in self.catalog.uncovered_rows(conv))
        items.sort(key=lambda it: (it.position, 0 if it.kind == "summary" else 1))
        return items

    def ancestors_top(self, item_id: str, cache: dict[str, str | None] | None = None) -> str | None:
        """The top-level summary covering a message or summary (None if it is itself active).

        ``cache`` (parent of each summary id) lets a caller resolving many hits share the walk.
        """
        cache = {} if cache is None else cache

        def parent_of(sid: str) -> str | None:
            if sid not in cache:
                rows = self.catalog.execute("SELECT parent FROM summaries WHERE id=?", (sid,))
                cache[sid] = rows[0][0] if rows else None
            return cache[sid]

        if item_id.startswith("sum_"):
            current = parent_of(item_id)
        else:
            rows = self.catalog.execute("SELECT covered FROM messages WHERE id=?", (item_id,))
            current = rows[0][0] if rows else None
        top = None
        seen: set[str] = set()
        while current and current not in seen and current != "!invalid":
            seen.add(current)
            top = current
            current = parent_of(current)
        return top
