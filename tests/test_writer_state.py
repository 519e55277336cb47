"""The writer's memory between two ingest calls, and everything that must make it forget.

A ``Vault`` that just appended to a conversation remembers where it left it (the
newest position and id, the catalog's stamp, the stat of the logs folder and of
the day's log) and skips the catalog's sync and repair on its next call while all
of that is unchanged. These tests change each part under it between two calls
(another writer in the same process, another process, a crash between a log
append and its catalog commit, a new day's log, writes through the same catalog,
the state folder deleted) and check that ids, positions and the chain of ``prev``
links stay exactly what a catalog rebuilt from the Markdown says.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from vaultlcm import Vault
from vaultlcm import catalog as catalog_module
from vaultlcm.errors import StorageError

CONV = "agent"


def _msg(text: str, day: int = 1, second: int = 0) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": f"2026-11-{day:02d}T10:00:{second:02d}Z"}


def _rows(v: Vault) -> list[tuple[Any, ...]]:
    return v.catalog.execute(
        "SELECT id, seq, path, start, end, hash, wseq, prev FROM messages WHERE conv=? ORDER BY seq", (CONV,))


def _check_chain(v: Vault, expected_texts: list[str]) -> list[str]:
    """Positions 1..n, each message written after the one before it, the texts in that order, and
    exactly the rows a catalog rebuilt from the logs holds. Returns the ids in order."""
    rows = _rows(v)
    assert [r[1] for r in rows] == list(range(1, len(expected_texts) + 1))
    assert [r[6] for r in rows] == [r[1] for r in rows]  # written at the position it holds
    assert [r[7] for r in rows] == [None, *(r[0] for r in rows[:-1])]
    assert len({r[0] for r in rows}) == len(rows)
    assert [m.text for m in v.messages(CONV)] == expected_texts
    v.catalog.reset()
    v.log.sync(CONV)
    assert _rows(v) == rows
    return [r[0] for r in rows]


class _SyncCount:
    """Counts the catalog syncs of a writer (the real method still runs)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = catalog_module.Catalog.sync_logs

        def counting(cat: catalog_module.Catalog, *args: Any, **kwargs: Any) -> list[str]:
            self.calls += 1
            return real(cat, *args, **kwargs)

        monkeypatch.setattr(catalog_module.Catalog, "sync_logs", counting)


def test_consecutive_calls_skip_the_sync_and_stay_right(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    syncs = _SyncCount(monkeypatch)
    texts = [f"turn {i}" for i in range(6)]
    with Vault.init(tmp_path) as v:
        for t in texts:
            v.ingest(CONV, [_msg(t)])
        # the first call syncs; the next ones find the conversation as they left it
        assert syncs.calls == 1
        _check_chain(v, texts)


def test_another_vault_in_the_same_process_interleaving(tmp_path: Path) -> None:
    order = "AABABBBAAB"
    texts = [f"{who} {i}" for i, who in enumerate(order)]
    with Vault.init(tmp_path) as a, Vault(tmp_path) as b:
        for who, t in zip(order, texts):
            (a if who == "A" else b).ingest(CONV, [_msg(t)])
        _check_chain(a, texts)
    with Vault(tmp_path) as c:
        _check_chain(c, texts)


CRASHING_WRITER = textwrap.dedent(
    """
    import os, sys
    from vaultlcm import Vault
    from vaultlcm import catalog
    root, text, day = sys.argv[1], sys.argv[2], int(sys.argv[3])
    v = Vault(root)
    def crash(*args, **kwargs):
        os._exit(9)  # the log append is durable; the process dies before the catalog records it
    catalog.Catalog.record_append = crash
    v.ingest("agent", [{"role": "user", "content": text, "timestamp": f"2026-11-{day:02d}T11:00:00Z"}])
    """
)

APPENDING_WRITER = textwrap.dedent(
    """
    import sys
    from vaultlcm import Vault
    root, text, day = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with Vault(root) as v:
        v.ingest("agent", [{"role": "user", "content": text, "timestamp": f"2026-11-{day:02d}T11:00:00Z"}])
    """
)


@pytest.mark.parametrize("writer", ["crash", "clean"])
@pytest.mark.parametrize("day", [1, 2])
def test_another_process_appending_between_two_calls(tmp_path: Path, writer: str, day: int) -> None:
    """The other process's entry lands in the day's log (``day`` 1) or in a new log (2); after a crash
    the catalog never heard of the entry itself."""
    with Vault.init(tmp_path) as v:
        v.ingest(CONV, [_msg("first")])
        v.ingest(CONV, [_msg("second", second=1)])
        code = CRASHING_WRITER if writer == "crash" else APPENDING_WRITER
        proc = subprocess.run([sys.executable, "-c", code, str(tmp_path), "other process", str(day)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == (9 if writer == "crash" else 0), proc.stderr
        v.ingest(CONV, [_msg("third", day=day, second=2)])
        ids = _check_chain(v, ["first", "second", "other process", "third"])
    with Vault(tmp_path) as fresh:
        assert _check_chain(fresh, ["first", "second", "other process", "third"]) == ids


def test_a_failed_catalog_record_is_caught_up_by_the_next_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Vault.init(tmp_path) as v:
        v.ingest(CONV, [_msg("first")])
        real = catalog_module.Catalog.record_append

        def failing(*args: Any, **kwargs: Any) -> Any:
            raise StorageError("disk full (test)")

        monkeypatch.setattr(catalog_module.Catalog, "record_append", failing)
        v.ingest(CONV, [_msg("second", second=1)])  # durable in the log; the catalog missed it
        monkeypatch.setattr(catalog_module.Catalog, "record_append", real)
        v.ingest(CONV, [_msg("third", second=2)])
        _check_chain(v, ["first", "second", "third"])


def test_writes_through_the_same_catalog_are_noticed(tmp_path: Path) -> None:
    with Vault.init(tmp_path) as v:
        v.ingest(CONV, [_msg("first")])
        # the catalog emptied through the writer's own connection (no other connection's commit
        # to see, no file changed): the next call must rebuild it before it appends
        v.catalog.reset()
        v.ingest(CONV, [_msg("second", second=1)])
        assert [r[1] for r in _rows(v)] == [1, 2]
        # the same by another connection (``vaultlcm reindex`` in another process starts so)
        other = catalog_module.Catalog(v.root, v.layout.catalog_path)
        other.reset()
        other.close()
        v.ingest(CONV, [_msg("third", second=2)])
        assert [r[1] for r in _rows(v)] == [1, 2, 3]
        # the state folder deleted between two calls: the catalog is reopened and rebuilt
        shutil.rmtree(tmp_path / ".vaultlcm")
        v.ingest(CONV, [_msg("fourth", second=3)])
        _check_chain(v, ["first", "second", "third", "fourth"])


def test_a_hand_edited_log_and_a_day_change(tmp_path: Path) -> None:
    """A day's log changed by hand (git, an editor) between two calls is read before the next append;
    a call on a new day, then one back on an older day, keep the chain."""
    with Vault.init(tmp_path) as v:
        v.ingest(CONV, [_msg("first")])
        v.ingest(CONV, [_msg("second", day=2, second=1)])
        log = tmp_path / "conversations" / CONV / "logs" / "2026-11-02.md"
        with log.open("ab") as fh:
            fh.write(b"a person's note\n")
        v.ingest(CONV, [_msg("third", day=2, second=2)])
        problems = [r[0] for r in v.catalog.execute("SELECT detail FROM problems WHERE kind='log_text'")]
        assert any("a person's note" in p for p in problems)
        v.ingest(CONV, [_msg("fourth", day=1, second=3)])
        v.ingest(CONV, [_msg("fifth", day=3, second=4)])
        _check_chain(v, ["first", "second", "third", "fourth", "fifth"])


@pytest.mark.parametrize("day", [1, 2])
def test_another_machines_append_merged_by_git(tmp_path: Path, day: int) -> None:
    """Entries that arrive in the logs without any catalog commit (another machine's append, brought in
    by ``git pull``): only the stat of the day's log, or of the logs folder, tells the writer."""
    here, there = tmp_path / "here", tmp_path / "there"
    with Vault.init(here) as v:
        v.ingest(CONV, [_msg("first")])
        v.ingest(CONV, [_msg("second", second=1)])
        shutil.copytree(here, there, ignore=shutil.ignore_patterns(".vaultlcm"))
        with Vault(there) as other:
            other.ingest(CONV, [_msg("other machine", day=day, second=2)])
        before = v.catalog.data_version()
        for log in sorted((there / "conversations" / CONV / "logs").iterdir()):
            mine = here / "conversations" / CONV / "logs" / log.name
            theirs = log.read_bytes()
            old = mine.read_bytes() if mine.exists() else b""
            if theirs != old:
                with mine.open("ab") as fh:  # what a union merge of an append-only file does
                    fh.write(theirs[len(old):])
        assert v.catalog.data_version() == before  # nothing reached this catalog
        v.ingest(CONV, [_msg("third", day=day, second=3)])
        _check_chain(v, ["first", "second", "other machine", "third"])
