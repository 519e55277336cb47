"""A compaction pass writes its new notes together (``Dag.staged_notes``): the same notes and rows, fewer commits.

* the notes and the catalog rows equal those of notes written one at a time;
* a pass's rows are one transaction, not one per note;
* a crash while the staged notes are renamed leaves each note whole or absent, never a
  catalog row naming a missing note, and the next compaction ends where an uninterrupted one does;
* ``write_new_files`` and ``CatalogDB.transaction(cache_kib=)`` on their own.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from vaultlcm import Vault, fsutil
from vaultlcm.catalog_db import CatalogDB

CONV = "c"


def _messages(n: int = 400) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 else "assistant",
             "content": f"message {i} about the deploy of service {i % 13}: " + f"word{i} " * 60} for i in range(n)]


def _vaults(tmp: Path) -> tuple[Path, Path]:
    """Two copies of one vault holding the same 400 messages (ids follow the time they were stored)."""
    base, a, b = tmp / "base", tmp / "a", tmp / "b"
    Vault.init(base).close()
    with Vault(base) as v:
        v.ingest(CONV, _messages())
    for copy in (a, b):  # without the catalog: each its own (caches in this process are keyed by its id)
        shutil.copytree(base, copy, symlinks=True, ignore=shutil.ignore_patterns(".vaultlcm"))
    return a, b


def _notes(root: Path) -> dict[str, bytes]:
    folder = root / "conversations" / CONV / "summaries"
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())} if folder.is_dir() else {}


#: Meta rows that differ between two catalogs of the same vault: folder stamps (mtimes), each catalog's id.
IGNORED_META = ("notes_dirs:", "catalog_id")


def _tables(root: Path) -> dict[str, list[str]]:
    """Every catalog table, rows sorted; mtime_ns left out (the clock's), and :data:`IGNORED_META`."""
    [path] = (root / ".vaultlcm").rglob("catalog.sqlite")
    db = sqlite3.connect(path)
    out = {}
    for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"):
        cols = [r[1] for r in db.execute(f"PRAGMA table_info({table})") if r[1] != "mtime_ns"]
        rows = db.execute(f"SELECT {', '.join(cols)} FROM {table}").fetchall()
        out[table] = sorted(repr(r) for r in rows if not (table == "meta" and str(r[0]).startswith(IGNORED_META)))
    db.close()
    return out


def _missing_notes(root: Path) -> list[str]:
    """Notes the catalog names that are not on disk (must always be none)."""
    [path] = (root / ".vaultlcm").rglob("catalog.sqlite")
    db = sqlite3.connect(path)
    try:
        rows = db.execute("SELECT path FROM note_files UNION SELECT path FROM summaries").fetchall()
    finally:
        db.close()
    return [rel for (rel,) in rows if not (root / rel).is_file()]


COMPACT = textwrap.dedent(
    """
    import contextlib, sys
    from vaultlcm import Vault
    from vaultlcm.dag import Dag
    if sys.argv[2] == "one by one":
        Dag.staged_notes = contextlib.contextmanager(lambda self: iter([None]))  # each note written at once
    with Vault(sys.argv[1]) as v:
        print(" ".join(v.compact("c", force=True)[0].created))
    """
)


def test_staged_pass_writes_the_same_notes_and_rows(tmp_path: Path) -> None:
    staged, one_by_one = _vaults(tmp_path)
    # Each in a process of its own: the summary costs a process counted once it does not store again.
    created = [subprocess.run([sys.executable, "-c", COMPACT, str(root), how], capture_output=True, text=True,
                              check=True).stdout.split() for root, how in ((staged, "staged"), (one_by_one, "one by one"))]
    assert created[0] == created[1] and len(created[0]) > 10
    assert _notes(staged) == _notes(one_by_one)
    assert _tables(staged) == _tables(one_by_one)
    for root in (staged, one_by_one):
        assert not _missing_notes(root)
        with Vault(root) as v:
            for row in v.dag.all(CONV):  # the rows name the files as they are (a later sync reads none again)
                st = os.stat(root / row.path)
                assert (row.size, row.mtime_ns) == (st.st_size, st.st_mtime_ns)
                assert st.st_mode & 0o777 == 0o644
            assert v.dag.sync(CONV, full=True).changed == 0


def test_a_pass_commits_its_rows_once(tmp_path: Path) -> None:
    root, _ = _vaults(tmp_path)
    with Vault(root) as v:
        v.sync(CONV)
        before = v.catalog.changes()[2]
        created = v.compact(CONV, force=True)[0].created
        commits = v.catalog.changes()[2] - before
    # One commit per note before staging (32 notes here); now one per pass and a few around them.
    assert len(created) > 3 * commits, (len(created), commits)


CRASHER = textwrap.dedent(
    """
    import os, sys
    from vaultlcm import Vault
    root, after = sys.argv[1], int(sys.argv[2])
    real, done = os.replace, [0]

    def replace(src, dst):
        if os.path.basename(str(src)).startswith(".vaultlcm-tmp-") and str(dst).endswith(".md") and "/summaries/" in str(dst):
            if done[0] == after:
                os._exit(9)  # killed between two renames of a pass's staged notes
            done[0] += 1
        return real(src, dst)

    os.replace = replace
    with Vault(root) as v:
        v.compact("c", force=True)
    """
)


@pytest.mark.parametrize("after", [0, 5])
def test_a_crash_among_the_renames_leaves_whole_notes_and_recovers(tmp_path: Path, after: int) -> None:
    crashed, clean = _vaults(tmp_path)
    proc = subprocess.run([sys.executable, "-c", CRASHER, str(crashed), str(after)], capture_output=True, text=True)
    assert proc.returncode == 9, proc.stderr
    with Vault(clean) as v:
        v.compact(CONV, force=True)
    expected = _notes(clean)
    on_disk = _notes(crashed)
    temps = [n for n in on_disk if n.startswith(fsutil.TEMP_PREFIX)]
    notes = {n: b for n, b in on_disk.items() if not n.startswith(".")}
    assert len(notes) == after  # the notes renamed before the crash, no other
    assert all(expected[n] == b for n, b in notes.items())  # each whole
    assert temps  # the staged ones not renamed yet: temporary files, never a note cut short
    assert not _missing_notes(crashed)  # the catalog names no note that is not there
    with Vault(crashed) as v:
        assert {p["kind"] for p in v.doctor()["problems"]} <= {"temp_file"}
        v.compact(CONV, force=True)  # the next compaction reads the notes it lacks and writes the rest
        assert not v.doctor(fix=True)["problems"]
    assert {n: b for n, b in _notes(crashed).items() if not n.startswith(".")} == expected
    after, expected_rows = _tables(crashed), _tables(clean)
    for table in ("summaries", "note_files", "coverage", "messages"):
        assert after[table] == expected_rows[table], table
    assert not _missing_notes(crashed)


def test_write_new_files_renames_only_whole_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = [(tmp_path / f"n{i}.md", f"note {i}\n".encode() * (i + 1)) for i in range(70)]  # more than OPEN_AT_ONCE
    stamps = fsutil.write_new_files(files)
    for (path, data), (size, mtime_ns) in zip(files, stamps):
        st = os.stat(path)
        assert path.read_bytes() == data and (st.st_size, st.st_mtime_ns) == (size, mtime_ns)
        assert st.st_mode & 0o777 == 0o644
    real, calls = os.replace, [0]

    def failing(src: str, dst: Path) -> None:
        calls[0] += 1
        if calls[0] == 3:
            raise OSError(28, "No space left on device")
        real(src, dst)

    monkeypatch.setattr(fsutil.os, "replace", failing)
    more = [(tmp_path / "more" / f"m{i}.md", b"x") for i in range(5)]
    (tmp_path / "more").mkdir()
    with pytest.raises(OSError):
        fsutil.write_new_files(more)
    assert sorted(p.name for p in (tmp_path / "more").iterdir()) == ["m0.md", "m1.md"]  # no temporary file left


def test_transaction_widens_the_cache_and_restores_it(tmp_path: Path) -> None:
    db = CatalogDB(tmp_path, tmp_path / "c.sqlite")
    try:
        before = db.execute("PRAGMA cache_size")[0][0]
        with db.transaction(cache_kib=32 * 1024) as conn:
            assert conn.execute("PRAGMA cache_size").fetchone()[0] == -32 * 1024
        assert db.execute("PRAGMA cache_size")[0][0] == before
        with pytest.raises(RuntimeError), db.transaction(cache_kib=32 * 1024):
            raise RuntimeError
        assert db.execute("PRAGMA cache_size")[0][0] == before
    finally:
        db.close()
