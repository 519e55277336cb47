"""``doctor``: tell the truth about a vault, and with ``--fix`` repair what is safe.

Findings come in three severities:

* **problems**: data at risk or answers that would be wrong: notes that fail
  validation, broken links, cycles, sources claimed twice, damaged log entries,
  payload files that no longer match their hash or are missing, symlinks and other
  unsafe entries inside the vault, conflict markers, an index that cannot catch up;
* **warnings**: things waiting for routine work: stale summaries (the next
  compaction refreshes them), summaries made by a fallback, a person's edit of a
  raw log, crash leftovers (torn tails, orphan payloads, temp files), a log a
  person left without a final newline;
* **notes**: information: a merge that was put back in order, a person's
  corrections, the index catching up, a Whoosh index large enough that tantivy
  would answer grep many times faster.

``doctor`` exits 1 only for problems (``--strict``: warnings too), so it can guard
a commit. ``--fix`` rebuilds the derived state, re-summarizes fallbacks and stale
nodes nobody owns, cuts torn tails, adds a missing final newline, removes crash
leftovers no acknowledged message refers to, regenerates derived notes holding
conflict markers, keeps one side of a summary two machines wrote for the same
sources when no person wrote either, relinks links a move outside Obsidian left
behind, removes notes a merge set aside, and catches the index up. It never touches a person's edits or
a log entry; what it leaves is reported, each finding marked when ``--fix``
repairs it.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import IndexBackendError
from .fsutil import TEMP_PREFIX, atomic_write, read_file, truncate
from .index import backend_installed
from .bases import INDEX_NOTE, INDEX_TAG
from .upkeep import resolve_note_conflict

if TYPE_CHECKING:
    from .catalog import Catalog
    from .compaction import Compactor
    from .dag import Dag
    from .indexing import IndexKeeper
    from .layout import VaultLayout
    from .msglog import MessageLog

_FILE_NAME = re.compile(r"^file_([0-9a-f]{16})\.[A-Za-z0-9]+$")
_CONFLICT = re.compile(r"^(<{7}|={7}|>{7})( |$)", re.MULTILINE)
#: Catalog problem kinds, by severity (anything else recorded there is a problem).
_WARNINGS = {"log_edit", "no_final_newline", "pending_batch", "superseded", "emptied", "outdated_link"}
#: Catalog kinds ``--fix`` repairs.
_FIXABLE = {"log_edit", "no_final_newline", "superseded", "emptied", "outdated_link"}
_NOTES = {"merge", "log_text"}
#: From this many documents on, a Whoosh index makes grep slow enough that doctor suggests tantivy.
WHOOSH_ADVISED_MAX = 25_000
#: From this many documents in Whoosh's older block format on, doctor suggests a rebuild.
WHOOSH_OUTDATED_NOTED = 10_000
_LABELS = {"invalid": "invalid_note", "dag": "broken_link", "unsafe_note": "unsafe_entry"}


@dataclass
class Finding:
    kind: str
    detail: str
    path: str | None = None
    fixable: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "detail": self.detail, "path": self.path, "fixable": self.fixable}


@dataclass
class DoctorReport:
    problems: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)
    notes: list[Finding] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "clean": self.clean,
            "problems": [p.to_dict() for p in self.problems],
            "warnings": [w.to_dict() for w in self.warnings],
            "notes": [n.to_dict() for n in self.notes],
            "fixed": self.fixed,
        }


class Doctor:
    """Examines (and repairs) one vault through its parts."""

    def __init__(
        self,
        layout: "VaultLayout",
        catalog: "Catalog",
        dag: "Dag",
        log: "MessageLog",
        indexer: "IndexKeeper",
        compactor: "Compactor",
        *,
        conversations: Callable[[], list[str]],
        resync: Callable[[str], None],
        refresh_views: Callable[[], list[str]],
    ) -> None:
        self.layout = layout
        self.catalog = catalog
        self.dag = dag
        self.log = log
        self.indexer = indexer
        self.compactor = compactor
        self.conversations = conversations
        self.resync = resync
        self.refresh_views = refresh_views
        self._walked: list[tuple[str, str]] | None = None

    # -- examining ---------------------------------------------------------------

    def examine(self, *, check_index: bool = True) -> DoctorReport:
        report = DoctorReport()
        self._walked = None  # files may have changed since the last look (a fix)
        for conv in self.conversations():
            self.resync(conv)
        for problem in self.dag.problems():
            path, kind, detail = problem.path, problem.kind, problem.detail
            label = _LABELS.get(kind, kind)
            if "cycle" in detail or "not below" in detail:
                label = "cycle"
            elif kind == "dag" and "already covered by" in detail:
                label = "claimed_twice"
            finding = Finding(label, detail, path or None, fixable=kind in _FIXABLE)
            (report.warnings if kind in _WARNINGS else report.notes if kind in _NOTES else report.problems).append(finding)
        for msg_id, rel, _ in self.catalog.duplicates():
            report.problems.append(Finding("duplicate_id", f"{rel}: message id {msg_id} appears more than once", rel))
        for rel, parsed in self.catalog.torn_logs():
            report.warnings.append(Finding(
                "torn_log", f"{rel}: an interrupted write left unacknowledged bytes after offset {parsed}", rel, True))
        for conv in self.conversations():
            self._summaries(conv, report)
            self._payloads(conv, report)
            home = self.layout.home_note(conv)
            if not home.exists() and self.layout.logs_dir(conv).is_dir():
                rel = self.layout.relative(home)
                report.notes.append(Finding(
                    "home_missing", f"{rel}: the home note is missing (it is derived and kept out of git, so a fresh "
                    "clone has none); `doctor --fix` or the next ingest or compaction writes it", rel, True))
            if n := self.catalog.failure_count(conv):
                report.warnings.append(Finding(
                    "provider_failure", f"{conv}: compaction failed {n} time(s) with the summarizer; "
                    "the messages stay uncovered until it works", None))
        self._unsafe_entries(report)
        self._conflicts(report)
        for tmp in self._temp_files():
            report.warnings.append(Finding("temp_file", f"{self.layout.relative(tmp)}: left by an interrupted write",
                                           self.layout.relative(tmp), True))
        if check_index:
            self._index(report)
            self._backend_advice(report)
        return report

    def _summaries(self, conv: str, report: DoctorReport) -> None:
        for r in self.dag.flagged(conv):
            if r.level == "truncated" or "fallback" in r.summarizer:
                why = "deterministic truncation" if r.level == "truncated" else r.summarizer
                report.warnings.append(Finding(
                    "fallback", f"{r.path}: summary {r.id} was made by {why}; `doctor --fix` re-summarizes it",
                    r.path, not r.human_owned))
            if r.stale and r.human_owned:
                report.warnings.append(Finding(
                    "stale_human_owned",
                    f"{r.path}: summary {r.id} is stale (its sources changed) but a person edited it, so it is kept; "
                    f"update it by hand or run `vaultlcm resummarize {r.id} --force`", r.path))
            elif r.stale:
                why = (f"a source was deleted ({', '.join(r.gaps)}); what it covered is back in the active context "
                       "and is summarized again under this node" if r.gaps else "its sources changed")
                report.warnings.append(Finding(
                    "stale", f"{r.path}: summary {r.id} waits for the next compaction ({why})", r.path, True))
            elif r.human_owned:
                report.notes.append(Finding("human_owned", f"{r.path}: summary {r.id} was corrected by a person "
                                            "(kept as written)", r.path))

    def _payloads(self, conv: str, report: DoctorReport) -> None:
        """Every payload checked against the hash its name carries; orphans and missing ones named."""
        files_dir = self.layout.files_dir(conv)
        referenced = self.catalog.payload_refs(conv)  # from the catalog: no need to read every log
        present: set[str] = set()
        if files_dir.is_dir() and not files_dir.is_symlink():
            for f in sorted(files_dir.iterdir()):
                rel = self.layout.relative(f)
                if f.name.startswith(TEMP_PREFIX):
                    continue
                present.add(f.name)
                mode = os.lstat(f).st_mode
                if stat.S_ISLNK(mode) or not stat.S_ISREG(mode):
                    continue  # reported with the other unsafe entries
                m = _FILE_NAME.match(f.name)
                if m and hashlib.sha256(read_file(f)).hexdigest()[:16] != m.group(1):
                    where = f" (used by a message in {referenced[f.name]})" if f.name in referenced else ""
                    report.problems.append(Finding(
                        "payload_mismatch", f"{rel}: the bytes no longer match the hash in the file's name{where}; "
                        "restore it from git", rel))
                if f.name not in referenced:
                    report.warnings.append(Finding(
                        "orphan_file", f"{rel}: no message refers to this payload (left by an interrupted write); "
                        "`doctor --fix` removes it", rel, True))
        for name, user in sorted(referenced.items()):
            if name not in present:
                report.problems.append(Finding(
                    "missing_payload", f"{user}: refers to {name}, which is missing from files/; restore it from git",
                    user))

    def _unsafe_entries(self, report: DoctorReport) -> None:
        """Symlinks and special files anywhere under conversations/ (never followed, never read)."""
        seen = self.dag.problem_paths("unsafe_note")
        for rel, kind in self._walk():
            if rel in seen:
                continue
            if kind == "link":
                report.problems.append(Finding(
                    "unsafe_entry", f"{rel}: is a symlink; vaultlcm never reads or writes through it (it may "
                    "lead outside the vault). Replace it with a real file or folder, or remove it", rel))
            elif kind == "special":
                report.problems.append(Finding(
                    "unsafe_entry", f"{rel}: is not a regular file (a pipe or device?); it is ignored", rel))

    def _walk(self) -> list[tuple[str, str]]:
        """Every entry under conversations/ as ``(vault-relative path, kind)``: ``file``, ``dir``, ``link`` or
        ``special``; symlinked folders are not entered.

        One ``scandir`` per folder, whose entries carry their type: no ``stat`` per file, so
        the walk costs tens of milliseconds for a year of notes.
        """
        if self._walked is not None:
            return self._walked
        root = self.layout.conversations_dir
        if not root.is_dir():
            return []
        prefix = str(self.layout.root) + os.sep
        out: list[tuple[str, str]] = []
        stack = [str(root)]
        while stack:
            here = stack.pop()
            rel_here = here[len(prefix):].replace(os.sep, "/")
            try:
                with os.scandir(here) as it:
                    entries = list(it)
            except (FileNotFoundError, NotADirectoryError):  # removed while we looked
                continue
            for e in entries:
                try:
                    if e.is_symlink():
                        kind = "link"
                    elif e.is_dir(follow_symlinks=False):
                        kind = "dir"
                        stack.append(e.path)
                    elif e.is_file(follow_symlinks=False):
                        kind = "file"
                    else:
                        kind = "special"
                except FileNotFoundError:
                    continue
                out.append((f"{rel_here}/{e.name}", kind))
        self._walked = sorted(out)
        return self._walked

    def _conflicts(self, report: DoctorReport) -> None:
        """Conflict markers in notes (logs report theirs while being read).

        Only notes git or a person can have changed are read: home notes, notes that
        fail validation and notes whose body no longer matches what the engine wrote
        (a conflict changes either). That keeps doctor's cost off the history.
        """
        candidates: set[str] = {self.layout.relative(self.layout.home_note(c)) for c in self.conversations()}
        candidates.add(INDEX_NOTE)
        candidates |= self.dag.problem_paths("invalid") | self.dag.edited_note_paths()
        for rel, path, text in self._conflicted(candidates):
            home = self._is_home(path)
            engine_only = not home and resolve_note_conflict(text) is not None
            hint = ("it is derived: `doctor --fix` regenerates it" if home else
                    "no person wrote either side (two machines summarized the same sources): `doctor --fix` keeps "
                    "one" if engine_only else "resolve the conflict by hand (pick one version of the note)")
            report.problems.append(Finding("conflict_markers", f"{rel}: holds git conflict markers; {hint}", rel,
                                           home or engine_only))

    def _conflicted(self, candidates: set[str]) -> list[tuple[str, Path, str]]:
        out = []
        for rel in sorted(candidates):
            path = self.layout.root / rel
            if path.is_symlink() or not path.is_file():
                continue
            text = read_file(path).decode("utf-8", errors="replace")
            if _CONFLICT.search(text):
                out.append((rel, path, text))
        return out

    def _resolve_conflicts(self) -> list[str]:
        """Keep one side of each summary note two machines wrote for the same sources (see upkeep)."""
        done = []
        for conv in self.conversations():
            self.resync(conv)  # a merge may have happened since the catalog last looked
        candidates = self.dag.problem_paths("invalid") | self.dag.edited_note_paths()
        for rel, path, text in self._conflicted(candidates):
            kept = None if self._is_home(path) else resolve_note_conflict(text)
            if kept is not None and atomic_write(self.layout.inside(path), kept.encode("utf-8")):
                done.append(f"resolved the git conflict in {rel} (kept one of two summaries the engine wrote)")
        return done

    def _is_home(self, path: Path) -> bool:
        """A derived note: a conversation's home note, or the vault's index note (when vaultlcm wrote it)."""
        if path == self.layout.root / INDEX_NOTE:
            return INDEX_TAG in read_file(path).decode("utf-8", errors="replace")
        return path.parent.parent == self.layout.conversations_dir and path.stem == path.parent.name

    def _temp_files(self) -> list[Path]:
        return [self.layout.root / rel for rel, kind in self._walk()
                if kind == "file" and rel.rsplit("/", 1)[-1].startswith(TEMP_PREFIX)]

    def _index(self, report: DoctorReport) -> None:
        # The index is derived and catches up on every use; lag is information, and only
        # drift that survives a catch-up (index writes failing) is a problem. The routine check
        # costs neither the history nor the lag: the counts first, then the marks its last
        # writer left (valid only for this catalog and the index's own count) must account
        # for every missing document. Only when they do not is the index caught up from the
        # marks, and when those are missing or the counts still disagree, every id and hash
        # of the index compared with the catalog.
        try:
            if self.indexer.counts_match():
                return
        except IndexBackendError as exc:
            report.problems.append(Finding("index_backend", f"{exc} (`vaultlcm doctor --fix` rebuilds it with "
                                           f"{exc.wanted})", self.layout.relative(exc.path), True))
            return
        behind = self.indexer.lag()
        if behind:
            # Plain lag (the marks account for every missing document) is normal between searches;
            # catching up costs what is new (seconds for thousands on Whoosh), so a check only says so.
            report.notes.append(Finding(
                "index_behind", f"{behind} new document(s) are not in the search index yet; the next search "
                "indexes them (or run `vaultlcm doctor --fix`)", None))
            return
        try:
            before = self.indexer.open().count()
            self.indexer.ready()  # from the marks when they hold (what is new), else a full comparison
            self.indexer.open().flush()
            if not self.indexer.counts_match():
                self.indexer.catch_up()  # the marks lied (the index changed under them): compare everything
                self.indexer.open().flush()
            after = self.indexer.open().count()
            report.notes.append(Finding(
                "index_caught_up", f"the search index held {before} document(s) where the vault has {after}; "
                "caught up", None))
            if self.indexer.counts_match():
                return
            drift = self.indexer.drift()
        except Exception as exc:  # noqa: BLE001 - any index failure is what we report
            report.problems.append(Finding(
                "index_drift", f"the search index cannot be updated ({exc}); run `vaultlcm reindex`", None, True))
            return
        if drift["missing"] or drift["extra"]:
            report.problems.append(Finding(
                "index_drift", f"the search index still lacks {len(drift['missing'])} document(s) after catching up; "
                "run `vaultlcm reindex`", None, True))

    def _backend_advice(self, report: DoctorReport) -> None:
        """Notes when the index is Whoosh and large enough that tantivy would answer many times faster,
        and when much of it is in the older block format a rebuild makes twice as fast to read.

        Whoosh scores every match in Python: grep's p95 grows with history (about 0.11 s at 100k
        messages, 1.0 s at 1M in docs/PERFORMANCE.md), tantivy's stays in tens of milliseconds.
        """
        if self.indexer.settings.index_backend != "whoosh":
            return
        try:
            index = self.indexer.open()
            documents, outdated = index.count(), index.outdated_docs()
        except Exception:  # noqa: BLE001 - an index that cannot open is reported by _index
            return
        if outdated >= WHOOSH_OUTDATED_NOTED:
            report.notes.append(Finding(
                "index_blocks_outdated", f"{outdated:,} of the search index's {documents:,} documents are stored in the "
                "block format of an older vaultlcm, which grep reads about half as fast: `vaultlcm reindex` rewrites "
                "them (about 10 minutes a million messages)", None))
        if documents < WHOOSH_ADVISED_MAX:
            return
        install = "" if backend_installed("tantivy") else "`pip install 'vaultlcm[tantivy]'`, then "
        report.notes.append(Finding(
            "index_backend_slow", f"the search index is Whoosh and holds {documents:,} documents: at this size a grep "
            "takes hundreds of milliseconds to seconds (p95 about 0.11 s at 100k messages, 1.0 s at 1M); "
            f"tantivy answers the same queries in tens of milliseconds: {install}`vaultlcm reindex --backend tantivy`",
            None))

    # -- repairing -----------------------------------------------------------------

    def fix(self) -> list[str]:
        """Repair what is safe; returns what was done."""
        done: list[str] = []
        layout = self.layout
        for rel, parsed in self.catalog.torn_logs():
            truncate(layout.inside(layout.root / rel), parsed)
            done.append(f"truncated the torn tail of {rel}")
        for rel in sorted(self.dag.problem_paths("no_final_newline")):
            if self.log.fix_final_newline(rel):
                done.append(f"added the missing final newline of {rel}")
        self._walked = None  # the repairs above may have moved files
        for path in self._temp_files():
            path.unlink(missing_ok=True)
            done.append(f"removed {layout.relative(path)}")
        report = DoctorReport()
        for conv in self.conversations():
            self._payloads(conv, report)
        for finding in report.warnings:
            if finding.kind == "orphan_file" and finding.path:
                (layout.root / finding.path).unlink(missing_ok=True)
                done.append(f"removed {finding.path} (no message refers to it)")
        done += self._resolve_conflicts()
        # derived state from scratch
        self.catalog.reset()
        for conv in self.conversations():
            self.resync(conv)
        done.append("rebuilt the catalog from the files")
        from .upkeep import tidy

        for conv in self.conversations():
            done += tidy(self.dag, conv)
            done += self._resummarize(conv)
            self.dag.clear_problems(conv, "log_edit")
            self.catalog.clear_failures(conv)
        done += [f"regenerated {rel}" for rel in self.refresh_views()]  # home notes and the index note
        try:
            index = self.indexer.ready()
        except IndexBackendError as exc:
            self.indexer.rebuild()  # the setting's backend: --fix is the person's word for it
            done.append(f"rebuilt the search index with {exc.wanted} (it was a {exc.found} index)")
            index = self.indexer.ready()
        drift = self.indexer.drift()
        if drift["missing"] or drift["extra"]:
            self.indexer.catch_up()
        index.flush()
        done.append("caught the search index up with the files")
        return done

    def _resummarize(self, conv: str) -> list[str]:
        done: list[str] = []
        redo = [r.id for r in self.dag.all(conv)
                if r.parent != "!invalid" and not r.human_owned and (r.level == "truncated" or "fallback" in r.summarizer)]
        if redo:
            try:
                rep = self.compactor.resummarize(conv, redo)
                done.append(f"{conv}: re-summarized {len(rep.refreshed)} fallback summaries")
            except Exception as exc:  # noqa: BLE001 - reported, the rest of the fix goes on
                done.append(f"{conv}: could not re-summarize fallbacks ({exc})")
        report = self.compactor.compact(conv, force=False, target_tokens=10**12)  # refreshes stale nodes only
        if report.refreshed:
            done.append(f"{conv}: regenerated {len(report.refreshed)} stale summaries")
        return done
