"""The log's fdatasync overlapped with the catalog's transaction, and what may go wrong around it.

An agent-path ingest appends its entry, starts the log's ``fdatasync`` on the sync
thread and writes the catalog's rows meanwhile; the catalog commits only once the
sync succeeded. These tests check that order from outside (another connection
looking while the sync runs), a sync that fails (nothing of the call stays, in the
log or the catalog), and a catalog that holds rows whose bytes the log lost (what a
crash would leave if a row ever were committed first): the next writer and the
readers drop them and number on from what the log holds.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from vaultlcm import Vault
from vaultlcm.errors import StorageError
from vaultlcm.fsutil import durable_append, start_append, sync_in_background

CONV = "agent"



def _msg(text: str, day: int = 1, second: int = 0) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": f"2026-11-{day:02d}T10:00:{second:02d}Z"}


def _log(root: Path, day: int = 1) -> Path:
    return root / "conversations" / CONV / "logs" / f"2026-11-{day:02d}.md"


def _check(v: Vault, texts: list[str]) -> None:
    """The conversation holds exactly ``texts`` at positions 1..n, chained, as a rebuilt catalog says."""
    rows = v.catalog.execute("SELECT id, seq, wseq, prev FROM messages WHERE conv=? ORDER BY seq", (CONV,))
    assert [r[1] for r in rows] == list(range(1, len(texts) + 1))
    assert [r[2] for r in rows] == [r[1] for r in rows]
    assert [r[3] for r in rows] == [None, *(r[0] for r in rows[:-1])]
    assert [m.text for m in v.messages(CONV)] == texts
    v.catalog.reset()
    v.log.sync(CONV)
    assert v.catalog.execute("SELECT id, seq, wseq, prev FROM messages WHERE conv=? ORDER BY seq", (CONV,)) == rows


def test_the_catalog_commits_only_after_the_log_is_durable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[int, int]] = []  # (rows another connection sees while the sync runs, rows before the call)
    real = os.fdatasync
    with Vault.init(tmp_path) as v:
        v.ingest(CONV, [_msg("first")])
        catalog = v.layout.catalog_path

        def slow_sync(fd: int) -> None:
            time.sleep(0.05)  # long enough for a commit made without waiting to land first
            other = sqlite3.connect(catalog)
            try:
                seen.append((other.execute("SELECT COUNT(*) FROM messages").fetchone()[0], expected))
            finally:
                other.close()
            real(fd)

        monkeypatch.setattr(os, "fdatasync", slow_sync)
        for i, day in enumerate([1, 1, 2, 2, 1]):  # the same log, a new one, then an older one
            expected = 1 + i
            v.ingest(CONV, [_msg(f"turn {i}", day=day, second=i + 1)])
        # a call over two days: the first day is synced before the last is written
        expected = 6
        v.ingest(CONV, [_msg("late a", day=3, second=20), _msg("late b", day=4, second=21)])
        monkeypatch.undo()
        assert len(seen) == 7 and all(count == before for count, before in seen[:5]), seen
        assert seen[5:] == [(6, 6), (6, 6)]
        _check(v, ["first", *(f"turn {i}" for i in range(5)), "late a", "late b"])


@pytest.mark.parametrize("day", [1, 2], ids=["same log", "new log"])
def test_a_failed_sync_stores_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, day: int) -> None:
    """The disk reports an error on the log's fdatasync while the catalog transaction is open."""
    with Vault.init(tmp_path) as v:
        v.ingest(CONV, [_msg("first")])
        v.ingest(CONV, [_msg("second", second=1)])
        logs = _log(tmp_path).parent
        before = {p.name: p.read_bytes() for p in logs.iterdir()}
        rows_before = v.catalog.execute("SELECT * FROM messages ORDER BY seq")
        logs_before = v.catalog.execute("SELECT * FROM logs ORDER BY path")

        def failing(fd: int) -> None:
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(os, "fdatasync", failing)
        with pytest.raises(StorageError, match="2026-11-0"):
            v.ingest(CONV, [_msg("lost", day=day, second=2)])
        monkeypatch.undo()
        assert {p.name: p.read_bytes() for p in logs.iterdir()} == before  # cut off again, a new log removed
        assert v.catalog.execute("SELECT * FROM messages ORDER BY seq") == rows_before  # rolled back
        assert v.catalog.execute("SELECT * FROM logs ORDER BY path") == logs_before
        v.ingest(CONV, [_msg("third", day=day, second=3)])
        _check(v, ["first", "second", "third"])
    with Vault(tmp_path) as fresh:
        _check(fresh, ["first", "second", "third"])


@pytest.mark.parametrize("reopen", [False, True], ids=["same writer", "new process"])
@pytest.mark.parametrize("loss", ["truncated", "zeroed"])
def test_rows_whose_bytes_the_log_lost_are_dropped(tmp_path: Path, reopen: bool, loss: str) -> None:
    """A committed catalog row pointing past the log's end (or at bytes that are no longer its entry):
    no phantom message for readers, and the next append takes the position and ``prev`` the log says."""
    v = Vault.init(tmp_path)
    try:
        v.ingest(CONV, [_msg("first about the deploy")])
        v.ingest(CONV, [_msg("second about the deploy", second=1)])
        log = _log(tmp_path)
        size = log.stat().st_size
        [phantom] = v.ingest(CONV, [_msg("third names the zebra", second=2)])
        assert v.catalog.get(phantom) is not None
        lost = log.stat().st_size - size
        with log.open("r+b") as fh:
            if loss == "truncated":
                fh.truncate(size)
            else:  # what a file system that extended the file but never wrote its data shows
                fh.seek(size)
                fh.write(b"\0" * lost)
        if reopen:
            v.close()
            v = Vault(tmp_path)
        assert [m.text for m in v.messages(CONV)] == ["first about the deploy", "second about the deploy"]
        assert v.catalog.get(phantom) is None
        assert v.grep("zebra")["hits"] == []
        context = json.dumps(v.assemble(CONV, 4000).to_dict())
        assert "zebra" not in context and "second about the deploy" in context
        v.ingest(CONV, [_msg("fourth", second=3)])
        if loss == "zeroed":
            # the zeros stay (logs are never rewritten) and are named as text outside any message
            kinds = {k for (k,) in v.catalog.execute("SELECT kind FROM problems")}
            assert kinds and kinds <= {"no_final_newline", "log_text"}, kinds
        _check(v, ["first about the deploy", "second about the deploy", "fourth"])
    finally:
        v.close()


def test_start_append_and_background_sync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "sub" / "log.md"
    assert durable_append(path, b"one\n") == 0
    append = start_append(path, b"two\n")
    assert append.start == 4 and not append.created
    job = sync_in_background(append)
    job.wait()
    job.wait()  # asking again is harmless
    assert path.read_bytes() == b"one\ntwo\n"

    def failing(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", failing)
    job = sync_in_background(start_append(path, b"three\n"))
    for _ in range(2):  # the error is raised to every wait
        with pytest.raises(OSError, match="Input/output"):
            job.wait()
    assert path.read_bytes() == b"one\ntwo\n"  # the failed sync cut its bytes off
    with pytest.raises(OSError, match="Input/output"):
        durable_append(path, b"four\n")
    assert path.read_bytes() == b"one\ntwo\n"


def test_an_append_after_a_last_line_without_newline_starts_its_own_line(tmp_path: Path) -> None:
    path = tmp_path / "log.md"
    path.write_bytes(b"a person's note")
    assert durable_append(path, b"entry\n", line_start=True) == len(b"a person's note\n")
    append = start_append(path, b"next\n", line_start=True)
    assert (append.start, append.offset) == (22, 22)
    sync_in_background(append).wait()
    assert path.read_bytes() == b"a person's note\nentry\nnext\n"
    assert durable_append(path, b"raw") == 27 and path.read_bytes().endswith(b"next\nraw")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork only")
def test_a_forked_child_gets_its_own_sync_thread(tmp_path: Path) -> None:
    """The sync thread does not survive a fork: a child that ingests must start its own, not wait forever."""
    with Vault.init(tmp_path) as v:
        v.ingest(CONV, [_msg("parent before the fork")])  # the parent's sync thread is running
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit code
        code = 1
        try:
            with Vault(tmp_path) as child:
                child.ingest(CONV, [_msg("child", second=1)])
            code = 0
        finally:
            os._exit(code)
    deadline = time.monotonic() + 30
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    if done[0] == 0:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung waiting for a sync thread that does not exist in it")
    assert os.waitstatus_to_exitcode(done[1]) == 0
    with Vault(tmp_path) as v:
        v.ingest(CONV, [_msg("parent after", second=2)])
        _check(v, ["parent before the fork", "child", "parent after"])


def test_without_a_sync_thread_the_call_syncs_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that cannot start another thread still ingests, durably, in the call's own thread."""
    import threading

    from vaultlcm import fsutil

    def refused(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(fsutil, "_sync_thread", None)
    monkeypatch.setattr(threading.Thread, "start", refused)
    synced: list[int] = []
    real = os.fdatasync

    def counting(fd: int) -> None:
        synced.append(threading.get_ident())
        real(fd)

    monkeypatch.setattr(os, "fdatasync", counting)
    with Vault.init(tmp_path) as v:
        v.ingest(CONV, [_msg("first")])
        v.ingest(CONV, [_msg("second", second=1)])
        assert synced == [threading.get_ident()] * 2
        assert fsutil._sync_thread is None
        _check(v, ["first", "second"])


def test_a_known_clean_end_reads_nothing_and_a_moved_end_is_checked(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """``clean_end`` skips the look at the last byte only while the file still ends where the caller left it."""
    path = tmp_path / "log.md"
    path.write_bytes(b"entry\n")
    reads: list[int] = []
    real = os.pread

    def counting(fd: int, n: int, offset: int) -> bytes:
        reads.append(offset)
        return real(fd, n, offset)

    monkeypatch.setattr(os, "pread", counting)
    assert durable_append(path, b"two\n", line_start=True, clean_end=6) == 6
    assert reads == []
    with path.open("ab") as fh:
        fh.write(b"a person's note")  # the file grew past what the caller knew, without a final newline
    assert durable_append(path, b"three\n", line_start=True, clean_end=10) == 26
    assert reads == [24] and path.read_bytes() == b"entry\ntwo\na person's note\nthree\n"


def test_a_writer_knows_its_log_ends_a_line_until_someone_else_writes(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer's own last append ended the log: the next call reads nothing back; a hand edit
    that leaves the log without a final newline is seen, and the entry starts its own line."""
    reads: list[int] = []
    real = os.pread

    def counting(fd: int, n: int, offset: int) -> bytes:
        if n == 1:
            reads.append(offset)
        return real(fd, n, offset)

    with Vault.init(tmp_path) as v:
        v.ingest(CONV, [_msg("first")])
        monkeypatch.setattr(os, "pread", counting)
        v.ingest(CONV, [_msg("second", second=1)])
        assert reads == []
        with _log(tmp_path).open("ab") as fh:
            fh.write(b"typed in Obsidian, no newline")
        v.ingest(CONV, [_msg("third", second=2)])
        assert len(reads) == 1
        monkeypatch.undo()
        assert [m.text for m in v.messages(CONV)] == ["first", "second", "third"]
        assert b"no newline\n" in _log(tmp_path).read_bytes()
    with Vault(tmp_path) as fresh:
        fresh.catalog.reset()
        assert [m.text for m in fresh.messages(CONV)] == ["first", "second", "third"]
