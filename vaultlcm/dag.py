"""The summary DAG and the active context, derived from the notes on disk.

The catalog mirrors every summary note of a conversation's folder, wherever a
person filed it and whatever its name (checked against the files by size and
mtime), and keeps the relations that are *derived*, never stored in notes:

* each source link, resolved as Obsidian resolves it (:mod:`vaultlcm.links`),
  with its state: covered, a gap a deleted note left, or waiting for a person;
* ``coverage``: which leaf covers each message (messages.covered mirrors it so
  the uncovered messages come from a partial index, at a cost that follows the
  active context, not the history);
* ``parent``: which node condensed a summary;
* ``stale``: a node whose sources changed since it was written (a person
  corrected a summary below it, deleted one, or edited a raw log);
* human-owned: the body no longer hashes to ``body_sha256``.

The rules that settle them are :func:`vaultlcm.relations.derive`; writing notes
links them the way Obsidian would (:meth:`Dag.write_summary`).

The active context is the summaries no other summary condenses plus the
messages no summary covers, in conversation order.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import time
from collections.abc import Iterator, Sequence
from typing import Any
from pathlib import Path, PurePosixPath

from .catalog import Catalog
from .dag_rows import (
    SUMMARY_COLUMNS,
    SUMMARY_COLUMNS_NO_BODY,
    ActiveItem,
    DagProblem,
    SummaryRow,
    SyncReport,
    bump_generation,
)
from .dag_writes import NoteWrites
from .errors import ValidationProblem
from .fsutil import read_file
from .layout import VaultLayout
from .links import VaultFiles
from .relations import GAP, Derived, Link, Msg, Node, derive_in_parts, missing_sources
from .summary_notes import (
    SUMMARY_ID_RE,
    body_hash,
    exact_body_hash,
    parse_note,
    parse_wikilink,
    summary_link,
)

#: Leaves :meth:`Dag.recompute` settles at a time (with their messages): what it holds of the history.
_LEAF_PAGE = 1000

#: Problem kinds the DAG records (recomputed together); doctor sorts them by severity.
DAG_KINDS = ("dag", "superseded", "emptied", "outdated_link", "duplicate_note")


class _Resolver:
    """Resolves the source links of one conversation's notes as Obsidian does (see :mod:`vaultlcm.links`).

    A summary link is looked up among the conversation's own notes first (cheap),
    then in the whole vault; a link Obsidian cannot resolve still names the note
    whose id it spells (``[[sum_…]]`` after a plain ``mv``), marked as outdated so a
    writer can rewrite it. A message link names its block id, wherever the log is.
    """

    def __init__(self, dag: "Dag", conv: str) -> None:
        self.dag = dag
        self.conv = conv
        #: ``{message id: (conv, seq, hash, log path)}`` (:meth:`Catalog.message_places`) of the leaves being settled.
        self.places: dict[str, tuple[str, int, str, str]] = {}
        self.sid_at = {str(p): s for p, s in dag.catalog.execute("SELECT path, summary_id FROM note_files WHERE conv=?", (conv,))}
        self.local = VaultFiles(self.sid_at)
        self.unreadable = {str(p) for (p,) in dag.catalog.execute(
            "SELECT path FROM problems WHERE conv=? AND kind='invalid'", (conv,))}
        self.prefix = dag.layout.relative(dag.layout.conversation_dir(conv)) + "/"

    def __call__(self, node: Node, link: str) -> Link:
        p = parse_wikilink(link)
        if p is None:
            return Link(link, None, False, "is not a wikilink")
        if node.kind == "leaf":
            if p.block is None:
                return Link(link, None, False, "does not name a message block (…#^m-…)")
            place = self.places.get(p.block)
            if place is None:
                return Link(link, p.block)
            log = place[3]
            ok = p.path + ".md" == log or self.dag.vault_files().resolve(p.path, node.path) == log
            return Link(link, p.block, ok, "" if ok else f"the message is in {log}")
        target = self.local.resolve(p.path, node.path) or self.dag.vault_files().resolve(p.path, node.path)
        if target is not None:
            sid = self.sid_at.get(target)
            if sid:
                return Link(link, sid)
            if target in self.unreadable:
                return Link(link, None, True, f"names {target}, which cannot be read", waiting=True)
            where = "which is not a summary note" if target.startswith(self.prefix) else "outside the conversation"
            return Link(link, None, True, f"names {target}, {where}")
        now = self.dag.catalog.execute("SELECT path FROM summaries WHERE id=? AND conv=?", (p.stem, self.conv)) \
            if SUMMARY_ID_RE.match(p.stem) else None
        if now:
            return Link(link, p.stem, False, f"the note is now {now[0][0]}")
        return Link(link, None, False, "names no note (deleted)")


def _stem(link: str) -> str:
    parsed = parse_wikilink(link)
    return parsed.stem if parsed else link


def _block_of(link: str) -> str | None:
    parsed = parse_wikilink(link)
    return parsed.block if parsed else None


def _node(r: SummaryRow) -> Node:
    """What :func:`derive` needs of a summary (the exact body hash only where asked: see ``_add_exact_hashes``)."""
    return Node(r.id, r.path, r.kind, r.depth, tuple(s.link or s.id or "" for s in r.links), r.human_owned,
                r.body_hash, r.sources_hash)


#: Folders of a conversation that never hold summary notes.
_NOT_NOTES = ("logs", "files")
#: A summary note's frontmatter names its id on a line of its own (cheap test for notes a person
#: filed outside summaries/, so their own notes there are left alone).
_ID_LINE = re.compile(r"^id:[ \t]*[\"']?sum_[0-9a-f]{16}[\"']?[ \t]*$", re.MULTILINE)


def _listing(folder: Path, home: str) -> str:
    """What a conversation folder holds besides its home note: compared instead of its mtime, which every
    rewrite of the home note changes (so a sync after a compaction stays quick)."""
    names = sorted(n for n in os.listdir(folder) if n != home and not n.startswith("."))
    return "ls:" + hashlib.sha256("\0".join(names).encode()).hexdigest()[:16]


def _looks_like_summary(text: str) -> bool:
    end = text.find("\n---", 3)
    return text.startswith("---") and end > 0 and bool(_ID_LINE.search(text[: end + 1]))


class _LeafParts:
    """The leaves of one conversation for :func:`~vaultlcm.relations.derive_in_parts`, in the catalog.

    A leaf's claims go straight into ``coverage`` (first claimant kept; a claim that finds
    the message taken names both leaves as sharing it); a page's rows, problems and
    ``messages.covered`` are written as it settles, all in the recompute's transaction.
    """

    def __init__(self, dag: "Dag", db: sqlite3.Connection, conv: str, resolve: _Resolver) -> None:
        self.dag = dag
        self.db = db
        self.conv = conv
        self.resolve = resolve
        self.again = False  # settling shared leaves again: their coverage is written by record, not claim
        #: What the gap links of valid nodes name (a note written under that name fills the gap).
        self.gaps: set[str] = set()

    def pages(self) -> Iterator[dict[str, Node]]:
        after = ""
        while True:
            page = self.dag._rows_no_body("conv=? AND kind='leaf' AND id>? ORDER BY id LIMIT ?",
                                          (self.conv, after, _LEAF_PAGE))
            if not page:
                return
            after = page[-1].id
            yield {r.id: _node(r) for r in page}

    def messages(self, leaves: dict[str, Node]) -> dict[str, Msg]:
        blocks = [b for n in leaves.values() for b in (_block_of(link) for link in n.links) if b]
        self.resolve.places = self.dag.catalog.message_places(blocks)  # for resolving these leaves' links
        return {i: Msg(c, seq, h) for i, (c, seq, h, _path) in self.resolve.places.items()}

    def record(self, leaves: dict[str, Node], derived: Derived) -> None:
        self.resolve.places = {}
        self.dag._write(self.db, self.conv, leaves, derived, self.gaps)
        self.db.executemany("UPDATE messages SET covered=? WHERE id=?",
                            ((leaf, mid) for mid, leaf in derived.coverage.items()))
        if self.again:
            self.db.executemany("INSERT OR REPLACE INTO coverage(msg_id, conv, summary_id) VALUES(?,?,?)",
                                ((mid, self.conv, leaf) for mid, leaf in derived.coverage.items()))

    def claim(self, claims: list[tuple[str, str]]) -> set[str]:
        before = self.db.total_changes
        self.db.executemany("INSERT OR IGNORE INTO coverage(msg_id, conv, summary_id) VALUES(?,?,?)",
                            ((mid, self.conv, nid) for mid, nid in claims))
        if self.db.total_changes - before == len(claims):
            return set()
        shared: set[str] = set()
        for i in range(0, len(claims), 500):
            chunk = claims[i : i + 500]
            owner = dict(self.db.execute(
                f"SELECT msg_id, summary_id FROM coverage WHERE msg_id IN ({','.join('?' * len(chunk))})",
                [mid for mid, _ in chunk]).fetchall())
            for mid, nid in chunk:
                if owner.get(mid, nid) != nid:
                    shared.update((nid, owner[mid]))
        return shared

    def leaves(self, ids: set[str]) -> dict[str, Node]:
        self.again = True
        ordered = sorted(ids)
        out: dict[str, Node] = {}
        for i in range(0, len(ordered), 500):
            chunk = ordered[i : i + 500]
            marks = ",".join("?" * len(chunk))
            rows = self.dag._rows_no_body(f"id IN ({marks})", tuple(chunk))
            out.update((r.id, _node(r)) for r in rows)
            # Every message a page settled under one of these leaves is claimed by one of them.
            self.db.execute(f"UPDATE messages SET covered=NULL WHERE id IN (SELECT msg_id FROM coverage WHERE "
                            f"summary_id IN ({marks}))", chunk)
            self.db.execute(f"DELETE FROM coverage WHERE summary_id IN ({marks})", chunk)
            self.db.execute(f"DELETE FROM problems WHERE conv=? AND kind IN ({','.join('?' * len(DAG_KINDS))}) AND "
                            f"path IN ({','.join('?' * len(rows))})", (self.conv, *DAG_KINDS, *(r.path for r in rows)))
        return out

    def exact_hashes(self, ids: list[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            out.update((sid, exact_body_hash(body)) for sid, body in self.db.execute(
                f"SELECT id, body FROM summaries WHERE id IN ({','.join('?' * len(chunk))})", chunk))
        return out


class Dag(NoteWrites):
    """Derived DAG state of every conversation of a vault."""

    def __init__(self, layout: VaultLayout, catalog: Catalog) -> None:
        self.layout = layout
        self.catalog = catalog
        self._files: VaultFiles | None = None
        #: Vault-relative paths of the notes this process wrote or removed, in order (what an auto-commit takes).
        self.journal: list[str] = []
        #: When each conversation's notes were last all checked (``sync(full=True)``), by ``time.monotonic``.
        self._full_sync_at: dict[str, float] = {}
        super().__init__()

    # -- reading the notes -------------------------------------------------------

    def _scan(self, conv: str) -> tuple[dict[str, tuple[int, int]], list[tuple[str, str]], dict[str, int | str]]:
        """Note files of a conversation's folder (summaries/ and anywhere else a person filed one).

        Returns the notes (vault-relative path: size, mtime), the entries refused (symlinks, special
        files) and the stamp of every folder looked at (taken before its listing, so a note added
        during the scan changes it). Logs, payloads, the home note, hidden entries and
        symlinked folders are never looked at.
        One ``scandir`` per folder, whose entries carry their own stat: a full
        check of 10,000 notes costs tens of milliseconds, not seconds.
        """
        root = self.layout.conversation_dir(conv)
        notes: dict[str, tuple[int, int]] = {}
        refused: list[tuple[str, str]] = []
        folders: dict[str, int | str] = {}
        if not root.is_dir() or root.is_symlink():
            return notes, refused, folders
        home = self.layout.home_note(conv).name
        stack = [(str(root), self.layout.relative(root), True)]
        while stack:
            here, rel_here, top = stack.pop()
            try:
                stamp = _listing(Path(here), home) if top else os.stat(here).st_mtime_ns
                it = os.scandir(here)
            except (FileNotFoundError, NotADirectoryError):
                continue
            folders[rel_here] = stamp
            subdirs: list[tuple[str, str, bool]] = []
            prefix = rel_here + "/"
            # Entries one at a time, not listed first: each keeps its stat once asked, and at 1M messages
            # summaries/ holds 97k of them.
            with it:
                self._scan_entries(it, prefix, top, home, notes, refused, subdirs)
            stack.extend(sorted(subdirs, reverse=True))  # folders in name order (notes are sorted by the caller)
        refused.sort()
        return notes, refused, folders

    @staticmethod
    def _scan_entries(it: Iterator[os.DirEntry[str]], prefix: str, top: bool, home: str,
                      notes: dict[str, tuple[int, int]], refused: list[tuple[str, str]],
                      subdirs: list[tuple[str, str, bool]]) -> None:
        """One folder's part of :meth:`_scan`."""
        for e in it:
            name = e.name
            if name.startswith("."):
                continue
            rel = prefix + name
            if not top and name.endswith(".md") and e.is_file(follow_symlinks=False):
                # The common case, a regular note (known from the listing's file type, no stat): what the
                # branches below would find, with a third of the calls (a full check at 1M messages
                # looks at 97k notes).
                try:
                    st = e.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                notes[rel] = (st.st_size, st.st_mtime_ns)
                continue
            try:
                is_dir = e.is_dir()  # follows a symlink, as os.walk does: a symlinked folder is skipped below
            except OSError:  # a symlink loop (ELOOP): not a folder, refused below like any symlink
                is_dir = False
            if is_dir:
                if not e.is_symlink() and not (top and name in _NOT_NOTES):
                    subdirs.append((e.path, rel, False))
                continue
            if not name.endswith(".md") or (top and name == home):
                continue
            if e.is_symlink():
                refused.append((rel, f"{rel}: is a symlink; vaultlcm never reads through symlinks inside a vault "
                                "(replace it with the note itself, or remove it)"))
            elif not e.is_file(follow_symlinks=False):
                refused.append((rel, f"{rel}: is not a regular file (a pipe or device?); it is ignored"))
            else:
                try:
                    st = e.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                notes[rel] = (st.st_size, st.st_mtime_ns)

    def sync(self, conv: str, *, full: bool = False, recompute: bool = True) -> SyncReport:
        """Mirror the notes of ``conv`` into the catalog; recompute relations if anything changed.

        Without ``full``, unchanged folders (same mtimes) are trusted, so the cost of a
        sync does not grow with the number of notes. ``recompute=False`` leaves the relations
        to the caller, who then calls :meth:`recompute` itself when ``changed`` (a reindex reads
        the notes while another process still indexes the messages, and recomputes once that
        process is idle).
        """
        report = SyncReport()
        key = f"notes_dirs:{conv}"
        if not full:
            seen = self.catalog.get_meta(key)
            if seen and self._folders_unchanged(json.loads(seen)):
                # No note was added, removed or renamed; in-place edits reach us through `watch`.
                report.problems = self.problems(conv)
                return report
        self._files = None  # names may have changed anywhere: look again when needed
        scanned_at = time.monotonic()
        # The listings are let go before the recompute, which needs as much again: at 1M messages the
        # process held 156 MB when the recompute began, 51-54 MB now.
        todo, folders = self._note_changes(conv, report)
        summaries_dir = self.layout.relative(self.layout.summaries_dir(conv)) + "/"
        for rel, size, mtime_ns in todo:
            report.changed += 1
            self._read_note(conv, rel, self.layout.root / rel, size, mtime_ns, expected=rel.startswith(summaries_dir))
        del todo
        if report.changed and recompute:
            self.recompute(conv)
        self.catalog.set_meta(key, json.dumps(folders, sort_keys=True))
        self._full_sync_at[conv] = scanned_at
        report.problems = self.problems(conv)
        return report

    def _note_changes(self, conv: str, report: SyncReport) -> tuple[list[tuple[str, int, int]], dict[str, int | str]]:
        """Compare the notes of ``conv`` on disk with the catalog's: record the entries refused, forget the
        notes removed (counted in ``report``), and return the notes to read (path, size, mtime; in path
        order) with the folders' stamps."""
        on_disk, refused, folders = self._scan(conv)
        with self.catalog.transaction() as db:
            db.execute("DELETE FROM problems WHERE conv=? AND kind='unsafe_note'", (conv,))
            db.executemany("INSERT INTO problems(path, conv, kind, detail) VALUES(?,?,'unsafe_note',?)",
                           [(rel, conv, detail) for rel, detail in refused])
        known = {r[0]: r for r in self.catalog.execute(
            "SELECT path, size, mtime_ns, summary_id FROM note_files WHERE conv=?", (conv,))}
        reread: set[str] = set()
        for rel in sorted(set(known) - set(on_disk)):
            sid = known[rel][3]
            with self.catalog.transaction() as db:
                db.execute("DELETE FROM note_files WHERE path=?", (rel,))
                db.execute("DELETE FROM problems WHERE path=? AND kind='invalid'", (rel,))
                if sid:
                    db.execute("DELETE FROM summaries WHERE id=? AND path=?", (sid, rel))
                    # Another file holding the same id (a copy) takes over.
                    reread.update(p for (p,) in db.execute("SELECT path FROM note_files WHERE summary_id=?", (sid,)))
                    bump_generation(db, conv)
            report.changed += 1
        # Only the notes whose size or mtime moved (or that a removed copy hands over) are looked at, in
        # path order: at 1M messages a full check compares 97k notes, nearly all unchanged.
        changed = [rel for rel, (size, mtime_ns) in on_disk.items()
                   if (row := known.get(rel)) is None or row[1] != size or row[2] != mtime_ns]
        return [(rel, *on_disk[rel]) for rel in sorted(reread.intersection(on_disk).union(changed))], folders

    def edited_since_read(self, summary_ids: list[str]) -> bool:
        """Whether the note of any of these summaries changed on disk since the catalog read it.

        One ``stat`` per note: what a reader checks for the notes it is about to show,
        instead of every note of the vault (an edit saved in place leaves its folder's
        mtime as it was). A summary without a recorded note counts as changed.
        """
        ids = list(dict.fromkeys(summary_ids))
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            rows = self.catalog.execute(
                f"SELECT summary_id, path, size, mtime_ns FROM note_files WHERE summary_id IN ({','.join('?' * len(chunk))})",
                tuple(chunk))
            if len({r[0] for r in rows}) < len(chunk):
                return True
            for _sid, rel, size, mtime_ns in rows:
                try:
                    st = os.stat(self.layout.root / rel)
                except OSError:
                    return True
                if st.st_size != size or st.st_mtime_ns != mtime_ns:
                    return True
        return False

    def full_sync_at(self, conv: str) -> float:
        """When this process last checked every note of ``conv`` (``time.monotonic``; -inf: never)."""
        return self._full_sync_at.get(conv, float("-inf"))

    def _stamp_now(self, rel: str, seen: int | str) -> int | str:
        """A folder's stamp as it is now, of the kind ``seen`` is: the conversation folder's listing, else its mtime."""
        path = self.layout.root / rel
        return _listing(path, path.name + ".md") if isinstance(seen, str) else path.stat().st_mtime_ns

    def _folders_unchanged(self, folders: dict[str, int | str]) -> bool:
        for rel, seen in folders.items():
            try:
                if self._stamp_now(rel, seen) != seen:
                    return False
            except OSError:
                return False
        return bool(folders)

    def _read_note(self, conv: str, rel: str, path: Path, size: int, mtime_ns: int, *, expected: bool = True) -> None:
        """Read one note; ``expected`` is False outside summaries/, where a person's own notes are left alone."""
        try:
            text = read_file(self.layout.inside(path)).decode("utf-8", errors="replace")
        except OSError:
            return  # gone or replaced between the listing and the read: the next sync sees it
        with self.catalog.transaction() as db:
            db.execute("DELETE FROM problems WHERE path=? AND kind='invalid'", (rel,))
        if not expected and not _looks_like_summary(text):
            with self.catalog.transaction() as db:
                old = db.execute("SELECT summary_id FROM note_files WHERE path=?", (rel,)).fetchone()
                if old and old[0]:
                    db.execute("DELETE FROM summaries WHERE id=? AND path=?", (old[0], rel))
                    bump_generation(db, conv)
                db.execute("INSERT OR REPLACE INTO note_files(path, conv, size, mtime_ns, summary_id) "
                           "VALUES(?,?,?,?,NULL)", (rel, conv, size, mtime_ns))
            return
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

    def link_for(self, summary_id: str) -> str:
        """A wikilink to a summary that Obsidian resolves: ``[[sum_…]]``, or the note's current name or path."""
        return f"[[{self.link_path(summary_id)}]]"

    def link_path(self, summary_id: str) -> str:
        """The path part of :meth:`link_for` (what goes between ``[[`` and ``]]``, or before a ``|``)."""
        found = self.catalog.execute("SELECT path FROM summaries WHERE id=?", (summary_id,))  # not the whole row
        if not found or PurePosixPath(found[0][0]).stem == summary_id:
            return summary_link(summary_id)[2:-2]
        return self.vault_files().link_path(found[0][0])

    def vault_files(self) -> VaultFiles:
        """Every file of the vault as Obsidian sees it (scanned once per sync, when a name must be checked)."""
        if self._files is None:
            self._files = VaultFiles.scan(self.layout.root)
        return self._files

    # -- relations ---------------------------------------------------------------

    def recompute(self, conv: str) -> None:
        """Rebuild coverage, parents, positions and staleness of ``conv`` from the mirrored notes.

        Settled in parts (:func:`~vaultlcm.relations.derive_in_parts`): the leaves a page at
        a time with their own messages, then the condensed nodes over them, so what is
        held does not grow with the history; the same notes give the same result as
        settling the whole DAG at once.
        """
        self._gaps_seen.pop(conv, None)  # this recompute records them again
        with self.catalog.transaction() as db:
            bump_generation(db, conv)
            db.execute("DELETE FROM coverage WHERE conv=?", (conv,))
            db.execute("UPDATE messages SET covered=NULL WHERE conv=? AND covered IS NOT NULL", (conv,))
            db.execute(f"DELETE FROM problems WHERE conv=? AND kind IN ({','.join('?' * len(DAG_KINDS))})",
                       (conv, *DAG_KINDS))
            resolve = _Resolver(self, conv)

            def count_between(a: int, b: int) -> int:
                return int(db.execute("SELECT COUNT(*) FROM messages WHERE conv=? AND lane=0 AND seq BETWEEN ? AND ?",
                                      (conv, a, b)).fetchone()[0])

            parts = _LeafParts(self, db, conv, resolve)
            upper = {r.id: _node(r) for r in self._rows_no_body("conv=? AND kind<>'leaf'", (conv,))}
            derived = derive_in_parts(conv, upper, resolve, count_between, parts)
            self._write(db, conv, upper, derived, parts.gaps)
            db.executemany("UPDATE summaries SET parent=? WHERE id=?",
                           ((parent, child) for child, parent in derived.parent.items() if child not in upper))
            dup = db.execute("SELECT summary_id, GROUP_CONCAT(path, ' and ') FROM note_files WHERE conv=? AND "
                             "summary_id IS NOT NULL GROUP BY summary_id HAVING COUNT(*) > 1", (conv,)).fetchall()
            for sid, paths in dup:
                at = db.execute("SELECT path FROM summaries WHERE id=? AND conv=?", (sid, conv)).fetchone()
                db.execute("INSERT INTO problems(path, conv, kind, detail) VALUES(?,?,?,?)",
                           (at[0] if at else "", conv, "duplicate_note",
                            f"{paths} both hold summary {sid} (a copy of a note keeps its id); delete one of them"))
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)",
                       (f"gaps:{conv}", json.dumps(sorted(parts.gaps))))

    def _write(self, db: "sqlite3.Connection", conv: str, nodes: dict[str, Node], derived: Derived,
               gaps: set[str]) -> None:
        """Record what ``nodes`` settled to: their rows, their problems and the gaps they leave."""
        problems = [p for p in derived.problems]
        for nid, resolved in derived.links.items():
            n = nodes[nid]
            outdated = [r for r in resolved if r.id is not None and not r.ok]
            if outdated:
                more = f", and {len(outdated) - 1} more" if len(outdated) > 1 else ""
                problems.append((n.path, "outdated_link", f"{n.path}: {outdated[0].link} in 'sources' no longer "
                                 f"resolves in Obsidian ({outdated[0].why}{more}); the next compaction or "
                                 "`doctor --fix` rewrites the link"))
            if nid in derived.valid:
                gaps.update(_stem(r.link) for r, st in zip(resolved, derived.states[nid]) if st == GAP)
        db.executemany("INSERT INTO problems(path, conv, kind, detail) VALUES(?,?,?,?)",
                       [(p, conv, k, d) for p, k, d in problems])
        for nid in nodes:
            pairs = json.dumps([[x.link, x.id, int(x.ok), st] for x, st in zip(derived.links[nid], derived.states[nid])])
            if nid in derived.valid:
                db.execute(
                    "UPDATE summaries SET parent=?, first_seq=?, last_seq=?, stale=?, sources=? WHERE id=?",
                    (derived.parent.get(nid), derived.first[nid], derived.last[nid], derived.stale[nid], pairs, nid),
                )
            else:
                # Set aside: no part in the DAG; its sources go back to the active context.
                db.execute("UPDATE summaries SET parent='!invalid', first_seq=NULL, last_seq=NULL, stale=0, "
                           "sources=? WHERE id=?", (pairs, nid))

    def _rows_no_body(self, where: str, params: tuple[Any, ...]) -> list[SummaryRow]:
        return [SummaryRow(*r) for r in self.catalog.execute(f"SELECT {SUMMARY_COLUMNS_NO_BODY} FROM summaries WHERE {where}",
                                                             params)]

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
        return [SummaryRow(*r) for r in self.catalog.execute(f"SELECT {SUMMARY_COLUMNS} FROM summaries WHERE {where}", params)]

    def get(self, summary_id: str) -> SummaryRow | None:
        rows = self._rows("id=?", (summary_id,))
        return rows[0] if rows else None

    def parents(self, ids: list[str]) -> dict[str, tuple[str | None, int]]:
        """``(parent, depth)`` of each summary of ``ids`` the catalog holds; the parent is None for a
        top-level node or an invalid note's."""
        out: dict[str, tuple[str | None, int]] = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            for sid, parent, depth in self.catalog.execute(
                    f"SELECT id, parent, depth FROM summaries WHERE id IN ({','.join('?' * len(chunk))})", chunk):
                out[str(sid)] = (None if parent in (None, "!invalid") else str(parent), int(depth))
        return out

    def bodies(self, ids: list[str]) -> dict[str, str]:
        """The body of each summary of ``ids`` the catalog holds."""
        out: dict[str, str] = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            out.update((str(sid), str(body)) for sid, body in self.catalog.execute(
                f"SELECT id, body FROM summaries WHERE id IN ({','.join('?' * len(chunk))})", chunk))
        return out

    def all(self, conv: str, *, bodies: bool = True) -> list[SummaryRow]:
        """Every summary of ``conv``; ``bodies=False`` leaves ``body`` empty (cheap over many notes)."""
        if bodies:
            return self._rows("conv=? ORDER BY depth, first_seq, id", (conv,))
        return [SummaryRow(*r) for r in self.catalog.execute(
            f"SELECT {SUMMARY_COLUMNS_NO_BODY} FROM summaries WHERE conv=? ORDER BY depth, first_seq, id", (conv,))]

    def stale(self, conv: str) -> list[SummaryRow]:
        """The stale nodes of ``conv`` that take part in the DAG, in :meth:`all`'s order (no other row is read)."""
        return self._rows("conv=? AND stale<>0 AND parent IS NOT '!invalid' ORDER BY depth, first_seq, id", (conv,))

    def top_condensed(self, conv: str, limit: int) -> tuple[list[SummaryRow], int]:
        """The ``limit`` highest condensed nodes of ``conv`` that take part in the DAG (deepest first, then
        oldest; bodies left empty) and how many there are in all: what a diagram of the upper DAG shows."""
        where = "conv=? AND depth>=1 AND parent IS NOT '!invalid'"
        rows = [SummaryRow(*r) for r in self.catalog.execute(
            f"SELECT {SUMMARY_COLUMNS_NO_BODY} FROM summaries WHERE {where} ORDER BY depth DESC, first_seq, id LIMIT ?", (conv, limit))]
        [(total,)] = self.catalog.execute(f"SELECT COUNT(*) FROM summaries WHERE {where}", (conv,))
        return rows, int(total)

    def with_outdated_links(self, conv: str) -> list[SummaryRow]:
        """Nodes of ``conv`` with a source link Obsidian no longer resolves, in :meth:`all`'s order.

        :meth:`recompute` records each such note as an ``outdated_link`` problem in the same
        transaction that marks its links, so the problem list finds them without reading every row.
        """
        # Found from the problem rows (note file, then the summary by id): the `+` keeps SQLite off the
        # conversation's index, which would read every summary of the conversation (0.23 s at 1M messages).
        return self._rows("id IN (SELECT n.summary_id FROM problems p JOIN note_files n ON n.path=p.path "
                          "WHERE p.conv=? AND p.kind='outdated_link') AND +conv=? AND "
                          "path IN (SELECT path FROM problems WHERE conv=? AND kind='outdated_link') "
                          "ORDER BY depth, first_seq, id", (conv, conv, conv))

    def flagged(self, conv: str) -> list[SummaryRow]:
        """The summaries ``doctor`` has something to say about (stale, corrected by a person, made by a
        fallback), ``body`` left empty: one query, and Python sees only those rows, not the history."""
        return [SummaryRow(*r) for r in self.catalog.execute(
            f"SELECT {SUMMARY_COLUMNS_NO_BODY} FROM summaries WHERE conv=? AND parent IS NOT '!invalid' AND (stale<>0 OR "
            "gen_hash<>body_hash OR level='truncated' OR summarizer LIKE '%fallback%') ORDER BY depth, first_seq, id",
            (conv,))]

    def total(self) -> int:
        """How many summaries the catalog holds, in every conversation."""
        return int(self.catalog.execute("SELECT COUNT(*) FROM summaries")[0][0])

    def counts(self, conv: str) -> tuple[int, int | None]:
        """How many summaries ``conv`` has and the deepest one's depth (one aggregate query, no rows read)."""
        [(n, depth)] = self.catalog.execute("SELECT COUNT(*), MAX(depth) FROM summaries WHERE conv=?", (conv,))
        return int(n), None if depth is None else int(depth)

    def page(self, conv: str, *, after: str = "", limit: int = 500) -> list[SummaryRow]:
        """Summaries of ``conv`` by id, ``limit`` at a time after ``after`` (for streaming through them)."""
        return self._rows("conv=? AND id>? ORDER BY id LIMIT ?", (conv, after, limit))

    def by_time(self, conv: str, *, oldest_first: bool = False, after: tuple[str, str] | None = None,
                limit: int = 256) -> list[tuple[str, str, str, int, int | None]]:
        """``(id, body, latest_at, depth, last_seq)`` of the summaries of ``conv`` that take part in the DAG,
        newest (or oldest) ``latest_at`` first, ``limit`` at a time after the ``(latest_at, id)`` of the
        last one seen (a scan that stops early reads only what it needs). Only what a scan of the bodies
        needs: at 1M messages a scan reads 97k of them, and whole rows cost it more than the search."""
        op, order = (">", "ASC") if oldest_first else ("<", "DESC")
        where = "conv=? AND parent IS NOT '!invalid'" + (f" AND (latest_at, id) {op} (?, ?)" if after else "")
        return self.catalog.execute(
            f"SELECT id, body, latest_at, depth, last_seq FROM summaries WHERE {where} "
            f"ORDER BY latest_at {order}, id {order} LIMIT ?", (conv, *(after or ()), limit))

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
        """What the last syncs found wrong with ``conv``'s files (every conversation's, without one), by path."""
        sql = "SELECT path, kind, detail FROM problems" + (" WHERE conv=?" if conv else "") + " ORDER BY path, detail"
        return [DagProblem(*r) for r in self.catalog.execute(sql, (conv,) if conv else ())]

    def awaits_messages(self, conv: str, ids: Sequence[str]) -> bool:
        """Whether a link of ``conv`` recorded as broken names one of these messages as missing.

        Cheap when nothing is broken (no row to read): what a sync asks of the messages it just found.
        """
        rows = self.catalog.execute("SELECT detail FROM problems WHERE conv=? AND kind='dag'", (conv,))
        if not rows:
            return False
        wanted = set(ids)
        return any(not wanted.isdisjoint(missing_sources(detail)) for (detail,) in rows)

    def problem_paths(self, kind: str) -> set[str]:
        """Vault-relative paths with a problem of ``kind``, in every conversation."""
        return {str(p) for (p,) in self.catalog.execute("SELECT DISTINCT path FROM problems WHERE kind=?", (kind,))}

    def clear_problems(self, conv: str, kind: str) -> None:
        """Forget ``conv``'s problems of ``kind`` (a repair dealt with them)."""
        self.catalog.execute("DELETE FROM problems WHERE conv=? AND kind=?", (conv, kind))

    def edited_note_paths(self) -> set[str]:
        """Summary notes whose body is no longer the one the engine wrote (a person or a merge changed it)."""
        return {str(p) for (p,) in self.catalog.execute("SELECT path FROM summaries WHERE gen_hash<>body_hash")}

    def dropped_by_people(self, conv: str) -> list[tuple[str, str]]:
        """``(id, kind)`` of ``conv``'s summaries set aside as ``superseded`` or ``emptied`` by a person's edit."""
        return [(str(sid), str(kind)) for sid, kind in self.catalog.execute(
            "SELECT s.id, p.kind FROM problems p JOIN summaries s ON s.path = p.path "
            "WHERE p.conv=? AND p.kind IN ('superseded', 'emptied') AND s.parent='!invalid'", (conv,))]

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
