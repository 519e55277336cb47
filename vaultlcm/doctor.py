"""``doctor``: find (and, with ``--fix``, repair what is safe) every kind of damage.

Checks, per vault:

* broken links, cycles, sources claimed twice, notes that fail validation
  (bad YAML, unquoted wikilinks, wrong fields) -- named with file and field;
* orphans: payload files no message points to;
* summaries made by deterministic truncation or by a fallback summarizer;
* stale nodes, and stale nodes a person owns (which compaction cannot refresh);
* raw-log edits, torn log tails, duplicate message ids;
* index drift (documents missing from or extra in the full-text index);
* leftover temp files from interrupted writes and lock files of conversations
  that no longer exist.

``--fix`` rebuilds the derived state, re-summarizes fallbacks and stale nodes
nobody owns, truncates torn tails, removes temp files and dead locks, and catches
the index up. It never touches a person's edits or a log entry; what it leaves is
reported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .fsutil import TEMP_PREFIX, truncate

if TYPE_CHECKING:
    from .vault import Vault

_FILE_REF = re.compile(r"file_[0-9a-f]{16}\.[A-Za-z0-9]+")


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
    notes: list[Finding] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "clean": self.clean,
            "problems": [p.to_dict() for p in self.problems],
            "notes": [n.to_dict() for n in self.notes],
            "fixed": self.fixed,
        }


def _leftovers(vault: "Vault") -> tuple[list[Path], list[Path]]:
    """Temp files of interrupted writes, and lock files of conversations that no longer exist."""
    layout = vault.layout
    temps = sorted(layout.conversations_dir.rglob(f"{TEMP_PREFIX}*")) if layout.conversations_dir.is_dir() else []
    known = set(vault.conversations())
    locks = sorted(layout.locks_dir.glob("*.lock")) if layout.locks_dir.is_dir() else []
    dead = [lock for lock in locks if lock.name.removesuffix(".lock").removesuffix(".compact") not in known]
    return temps, dead


def examine(vault: "Vault", *, check_index: bool = True) -> DoctorReport:
    report = DoctorReport()
    layout = vault.layout
    for conv in vault.conversations():
        vault._fully_synced.discard(conv)
        vault.sync(conv)
    for path, _conv, kind, detail in vault.catalog.execute("SELECT path, conv, kind, detail FROM problems ORDER BY path"):
        if kind in ("merge", "log_text", "no_final_newline"):
            # Handled already (a merge put back in order) or harmless (a person's own text in a log).
            report.notes.append(Finding(kind, detail, path or None, fixable=kind == "no_final_newline"))
            continue
        label = {"invalid": "invalid_note", "dag": "broken_link", "log_edit": "log_edit"}.get(kind, kind)
        if "cycle" in detail or "not below" in detail:
            label = "cycle"
        elif "already covered by" in detail:
            label = "claimed_twice"
        report.problems.append(Finding(label, detail, path, fixable=label == "log_edit"))
    for msg_id, rel, _ in vault.catalog.duplicates():
        report.problems.append(Finding("duplicate_id", f"{rel}: message id {msg_id} appears more than once", rel))
    for rel, parsed in vault.catalog.torn_logs():
        # A crash mid-append: those bytes were never acknowledged and the next append cuts them.
        report.notes.append(Finding("torn_log", f"{rel}: an interrupted write left unacknowledged bytes after offset {parsed}", rel, fixable=True))
    for conv in vault.conversations():
        for r in vault.dag.all(conv):
            if r.parent == "!invalid":
                continue
            if r.level == "truncated" or "fallback" in r.summarizer:
                why = "deterministic truncation" if r.level == "truncated" else r.summarizer
                report.problems.append(Finding("fallback", f"{r.path}: summary {r.id} was made by {why}; re-summarize it", r.path, fixable=not r.human_owned))
            if r.stale and r.human_owned:
                report.problems.append(Finding(
                    "stale_human_owned",
                    f"{r.path}: summary {r.id} is stale (its sources changed) but a person edited it, so it is not regenerated; "
                    "update it by hand or run `vaultlcm resummarize {r.id} --force`", r.path))
            elif r.stale:
                report.problems.append(Finding("stale", f"{r.path}: summary {r.id} is stale (its sources changed)", r.path, fixable=True))
            elif r.human_owned:
                report.notes.append(Finding("human_owned", f"{r.path}: summary {r.id} was corrected by a person (kept as written)", r.path))
        # orphans: payload files no log entry points to
        files_dir = layout.files_dir(conv)
        if files_dir.is_dir():
            referenced: set[str] = set()
            logs_dir = layout.logs_dir(conv)
            for log in logs_dir.glob("*.md") if logs_dir.is_dir() else []:
                referenced.update(_FILE_REF.findall(log.read_text(encoding="utf-8", errors="replace")))
            for f in sorted(files_dir.iterdir()):
                if f.name.startswith(TEMP_PREFIX):
                    continue
                if f.name not in referenced:
                    report.problems.append(Finding("orphan_file", f"{layout.relative(f)}: no message refers to this payload file", layout.relative(f)))
        for (n,) in vault.catalog.execute("SELECT COUNT(*) FROM failures WHERE conv=?", (conv,)):
            if n:
                report.notes.append(Finding("provider_failure", f"{conv}: compaction failed {n} time(s) with the summarizer; the messages stay uncovered until it works", None))
    temps, dead_locks = _leftovers(vault)
    for tmp in temps:
        # Harmless (never read), but clutter: --fix removes them.
        report.notes.append(Finding("temp_file", f"{layout.relative(tmp)}: left by an interrupted write", layout.relative(tmp), fixable=True))
    for lock in dead_locks:
        report.problems.append(Finding("stale_lock", f"{layout.relative(lock)}: lock of a conversation that no longer exists", layout.relative(lock), fixable=True))
    if check_index:
        # The index is derived and catches up on every use; lag is reported as a note,
        # and only drift that survives a catch-up (index writes failing) is a problem.
        drift = vault.indexer.drift()
        if drift["missing"] or drift["extra"]:
            report.notes.append(Finding(
                "index_drift",
                f"the search index lacked {len(drift['missing'])} document(s) and had {len(drift['extra'])} extra; caught up",
                None, fixable=True))
            try:
                vault.indexer.catch_up()
                vault.indexer.open().flush()
                drift = vault.indexer.drift()
            except Exception as exc:  # noqa: BLE001 - any index failure is what we report
                drift = {"missing": ["?"], "extra": []}
                report.problems.append(Finding("index_drift", f"the search index cannot be updated ({exc}); run `vaultlcm reindex`", None, fixable=True))
            if drift["missing"] or drift["extra"]:
                report.problems.append(Finding(
                    "index_drift",
                    f"the search index still lacks {len(drift['missing'])} document(s) after catching up; run `vaultlcm reindex`",
                    None, fixable=True))
    return report


def fix(vault: "Vault") -> list[str]:
    """Repair what is safe; returns what was done."""
    done: list[str] = []
    layout = vault.layout
    for rel, parsed in vault.catalog.torn_logs():
        truncate(layout.inside(layout.root / rel), parsed)
        done.append(f"truncated the torn tail of {rel}")
    for (rel,) in vault.catalog.execute("SELECT DISTINCT path FROM problems WHERE kind='no_final_newline'"):
        if vault.log.fix_final_newline(rel):
            done.append(f"added the missing final newline of {rel}")
    temps, dead_locks = _leftovers(vault)
    for path in [*temps, *dead_locks]:
        path.unlink(missing_ok=True)
        done.append(f"removed {layout.relative(path)}")
    # derived state from scratch
    vault.catalog.reset()
    vault._fully_synced.clear()
    for conv in vault.conversations():
        vault.sync(conv)
    done.append("rebuilt the catalog from the files")
    for conv in vault.conversations():
        redo = [r.id for r in vault.dag.all(conv)
                if r.parent != "!invalid" and not r.human_owned and (r.level == "truncated" or "fallback" in r.summarizer)]
        if redo:
            try:
                rep = vault.compactor.resummarize(conv, redo)
                done.append(f"{conv}: re-summarized {len(rep.refreshed)} fallback summaries")
            except Exception as exc:  # noqa: BLE001 - reported, the rest of the fix goes on
                done.append(f"{conv}: could not re-summarize fallbacks ({exc})")
        report = vault.compactor.compact(conv, force=False, target_tokens=10**12)  # refreshes stale nodes only
        if report.refreshed:
            done.append(f"{conv}: regenerated {len(report.refreshed)} stale summaries")
        vault.catalog.execute("DELETE FROM problems WHERE conv=? AND kind='log_edit'", (conv,))
        vault.catalog.execute("DELETE FROM failures WHERE conv=?", (conv,))
        vault._on_new_day(conv)
    result = vault.indexer.ready()
    drift = vault.indexer.drift()
    if drift["missing"] or drift["extra"]:
        vault.indexer.catch_up()
    result.flush()
    done.append("caught the search index up with the files")
    return done
