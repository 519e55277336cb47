"""The agent's write path and the catalog rebuild: cheaper, and the same results.

* the order check after a rebuild (``Catalog._settle``) streams the rows when the
  conversation is one chain, and its verdict always agrees with :func:`linear_order`;
* a rebuilt catalog inserts each daily log's rows in a few statements and ends up
  exactly where the per-row path (the ingest calls that wrote the vault) left it;
* WAL checkpoints run on a background thread, not inside an ingest call's commit.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
import time
from pathlib import Path

from hypothesis import given, settings, strategies as st

from vaultlcm import Vault
from vaultlcm import catalog_db as catalog_module
from vaultlcm.catalog import Catalog, linear_order

MUTATIONS = ("none", "swap_wseq", "wrong_prev", "seq_off", "fork", "first_prev_known", "legacy_prev", "gap")


def _catalog_with(rows: list[tuple[str, int, str | None, int, str]]) -> Catalog:
    """A catalog holding ``(id, wseq, prev, seq, at)`` rows of conversation ``c`` as messages."""
    folder = Path(tempfile.mkdtemp(prefix="vaultlcm-settle-"))
    cat = Catalog(folder, folder / "catalog.sqlite")
    with cat.transaction() as db:
        for rid, wseq, prev, seq, at in rows:
            db.execute("INSERT INTO messages(id, conv, seq, at, role, tokens, path, start, end, hash, wseq, prev) "
                       "VALUES(?, 'c', ?, ?, 'user', 1, 'p', 0, 1, 'h', ?, ?)", (rid, seq, at, wseq, prev))
    return cat


@settings(max_examples=80, deadline=None)
@given(n=st.integers(1, 12), mutation=st.sampled_from(MUTATIONS), at=st.integers(0, 11), other=st.integers(0, 11),
       times=st.lists(st.integers(0, 5), min_size=12, max_size=12))
def test_the_streamed_order_check_agrees_with_linear_order(n: int, mutation: str, at: int, other: int,
                                                           times: list[int]) -> None:
    k, j = at % n, other % n
    ids = [f"m-{i:02d}" for i in range(n)]
    rows = [[ids[i], i + 1, ids[i - 1] if i else None, i + 1, f"2026-11-01T10:00:0{times[i]}Z"] for i in range(n)]
    if mutation == "swap_wseq" and k != j:
        rows[k][1], rows[j][1] = rows[j][1], rows[k][1]
    elif mutation == "wrong_prev" and k:
        rows[k][2] = ids[j] if j != k - 1 else None
    elif mutation == "seq_off":
        rows[k][3] += 1
    elif mutation == "fork" and k:
        rows[k][1] = rows[k - 1][1]
    elif mutation == "first_prev_known":
        rows[0][2] = ids[j]
    elif mutation == "legacy_prev" and k:
        rows[k][2] = None
    elif mutation == "gap":
        for r in rows[k:]:
            r[1] += 1
            r[3] += 1
    cat = _catalog_with([tuple(r) for r in rows])  # type: ignore[misc]
    try:
        order = linear_order([(r[0], r[1], r[2], r[4]) for r in rows])
        nothing_moves = all(r[3] == order.index(r[0]) + 1 for r in rows)
        fast = cat._chain_in_order("c")
        if fast:
            assert nothing_moves  # the fast path never skips a needed reorder
        if mutation == "none":
            assert fast  # and it is taken for the usual case
        cat._settle("c")
        settled = dict(cat.execute("SELECT id, seq FROM messages WHERE conv='c'"))
        assert [rid for rid, _ in sorted(settled.items(), key=lambda x: x[1])] == order
    finally:
        cat.close()


def _snapshot(v: Vault) -> dict[str, list[tuple[object, ...]]]:
    return {
        "messages": v.catalog.execute("SELECT id, conv, seq, at, role, tokens, path, start, end, hash, covered, lane, "
                                      "key, wseq, prev, slane, thread FROM messages ORDER BY id"),
        "duplicates": v.catalog.execute("SELECT id, path, start FROM duplicates ORDER BY id, path, start"),
        "logs": v.catalog.execute("SELECT path, size, parsed, head_hash, torn FROM logs ORDER BY path"),
    }


def test_a_rebuilt_catalog_matches_what_the_ingest_calls_recorded(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    with Vault.init(vault) as v:
        for day in range(1, 4):
            v.ingest("c", [{"role": "user" if i % 2 == 0 else "assistant",
                            "timestamp": f"2026-11-0{day}T10:{i:02d}:00Z",
                            "content": f"day {day} message {i} about the routing-api deploy " * 6} for i in range(30)])
        v.ingest("c", [{"role": "user", "content": "one more, on the agent path"}])
        v.compact("c", force=True)
        before = _snapshot(v)
        assert any(row[10] for row in before["messages"])  # compaction covered some: ``covered`` is compared too
        v.reindex()
        assert _snapshot(v) == before


def test_a_catalog_an_older_version_made_is_read_again_from_the_files(tmp_path: Path) -> None:
    """An upgrade that changes the catalog's tables (schema 7 folded ``links`` into ``messages``) needs no
    migration: the first open drops the old catalog and the next sync reads the logs again."""
    from vaultlcm.catalog_schema import SCHEMA_VERSION

    vault = tmp_path / "v"
    with Vault.init(vault) as v:
        v.ingest("c", [{"role": "user" if i % 2 == 0 else "assistant", "timestamp": f"2026-11-01T10:{i:02d}:00Z",
                        "content": f"message {i} about the routing-api deploy"} for i in range(20)])
        v.ingest("c", [{"role": "user", "content": "one more, on the agent path"}])
        before = _snapshot(v)
        hits = v.grep("routing-api", limit=50)["total"]
    db = sqlite3.connect(vault / ".vaultlcm" / "catalog.sqlite")
    with db:  # what schema 6 held: its own version, and the writer's links in a table of their own
        db.execute("UPDATE meta SET value=? WHERE key='schema'", (str(int(SCHEMA_VERSION) - 1),))
        db.execute("CREATE TABLE links(id TEXT PRIMARY KEY, conv TEXT NOT NULL, wseq INTEGER NOT NULL, prev TEXT, "
                   "slane TEXT, thread TEXT)")
        db.execute("DELETE FROM messages")
    db.close()
    with Vault(vault) as v:
        assert v.grep("routing-api", limit=50)["total"] == hits == 20
        assert _snapshot(v) == before
        tables = {name for (name,) in v.catalog.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert "links" not in tables and v.catalog.execute("SELECT value FROM meta WHERE key='schema'") == [
            (SCHEMA_VERSION,)]


def test_the_command_line_says_once_that_the_catalog_is_read_again(tmp_path: Path) -> None:
    """After an upgrade the first command reads the whole catalog again (minutes at 1M messages): it says so
    first, in one line on stderr, and the next command says nothing."""
    import subprocess
    import sys

    from vaultlcm.catalog_schema import SCHEMA_VERSION

    vault = tmp_path / "v"
    with Vault.init(vault) as v:
        v.ingest("c", [{"role": "user", "content": f"message {i} about the routing-api deploy"} for i in range(5)])
    db = sqlite3.connect(vault / ".vaultlcm" / "catalog.sqlite")
    with db:
        db.execute("UPDATE meta SET value='6' WHERE key='schema'")
    db.close()

    def grep() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "vaultlcm", "--vault", str(vault), "grep", "routing-api", "--json"],
                              capture_output=True, text=True, timeout=120, check=False)

    first = grep()
    assert first.returncode == 0 and len(json.loads(first.stdout)["hits"]) == 5
    assert first.stderr == (f"Note: the catalog at {vault / '.vaultlcm' / 'catalog.sqlite'} was made by another "
                            f"version of vaultlcm (schema 6, this one reads {SCHEMA_VERSION}): reading it again from "
                            "the files, once (a few minutes at a million messages)\n"), first.stderr
    again = grep()
    assert again.returncode == 0 and again.stderr == "" and json.loads(again.stdout) == json.loads(first.stdout)


def test_the_first_command_in_a_fresh_clone_says_the_catalog_is_built_and_a_new_vault_says_nothing(
        tmp_path: Path) -> None:
    """A clone holds the Markdown but not ``.vaultlcm`` (git ignores it): its first command builds the
    catalog from every log and note, minutes at a million messages, so it says so first; a vault
    just made holds nothing to read and says nothing."""
    import subprocess
    import sys

    def run(vault: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "vaultlcm", "--vault", str(vault), *args], input=stdin,
                              capture_output=True, text=True, timeout=120, check=False)

    def git(cwd: Path, *args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=cwd, check=True,
                       capture_output=True)

    vault = tmp_path / "v"
    made = subprocess.run([sys.executable, "-m", "vaultlcm", "init", str(vault)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert made.returncode == 0 and "Note:" not in made.stderr, made.stderr
    first = run(vault, "ingest", "-", "-c", "c", stdin='{"role": "user", "content": "hello"}\n')  # nothing to announce
    assert first.returncode == 0 and first.stderr == "", first.stderr
    with Vault(vault) as v:
        v.ingest("c", [{"role": "user", "content": f"message {i} about the routing-api deploy"} for i in range(5)])
    git(vault, "init", "-q")
    git(vault, "add", "-A")
    git(vault, "commit", "-qm", "vault")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(vault), str(clone))
    assert not (clone / ".vaultlcm").exists()

    found = run(clone, "grep", "routing-api", "--json")
    assert found.returncode == 0 and len(json.loads(found.stdout)["hits"]) == 5, found.stderr
    assert found.stderr == (f"Note: there is no catalog at {clone / '.vaultlcm' / 'catalog.sqlite'} yet (a fresh "
                            "clone, or its folder was deleted): building it from the files, once (a few minutes at "
                            "a million messages)\n"), found.stderr
    again = run(clone, "grep", "routing-api", "--json")
    assert again.returncode == 0 and again.stderr == "" and json.loads(again.stdout) == json.loads(found.stdout)


def test_an_entry_copied_into_another_log_is_a_duplicate_after_a_rebuild(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    with Vault.init(vault) as v:
        for day in (1, 2):
            v.ingest("c", [{"role": "user", "timestamp": f"2026-11-0{day}T10:{i:02d}:00Z", "content": f"d{day} m{i}"}
                           for i in range(12)])
        row = v.catalog.execute("SELECT id, path, start, end FROM messages ORDER BY seq LIMIT 1")[0]
        first, second = vault / row[1], vault / "conversations/c/logs/2026-11-02.md"
        entry = first.read_bytes()[row[2]:row[3]]
        before = second.stat().st_size
        with second.open("ab") as fh:
            fh.write(entry)  # what a careless hand merge can leave
        v.reindex()
        dups = v.catalog.execute("SELECT id, path, start FROM duplicates")
        assert dups == [(row[0], "conversations/c/logs/2026-11-02.md", before)]
        assert v.catalog.execute("SELECT path, start FROM messages WHERE id=?", (row[0],)) == [(row[1], row[2])]
        assert v.catalog.count("c") == 24


def _commit(cat: Catalog, n: int) -> None:
    """``n`` commits, each one row of the meta table."""
    for i in range(n):
        with cat.transaction() as db:
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", (f"k{i}", json.dumps(i)))


def _wait_for_a_checkpoint(worker: "catalog_module._Checkpointer") -> None:
    deadline = time.monotonic() + 20
    while worker.runs == 0 and time.monotonic() < deadline:
        time.sleep(0.01)


def test_checkpoints_run_on_a_thread_and_stop_with_the_catalog(tmp_path: Path) -> None:
    cat = Catalog(tmp_path, tmp_path / "catalog.sqlite")
    assert cat._checkpointer is None  # a short command never starts one
    _commit(cat, catalog_module.CHECKPOINT_EVERY * 2)
    worker = cat._checkpointer
    assert worker is not None
    _wait_for_a_checkpoint(worker)
    assert worker.runs >= 1
    thread = worker._thread
    cat.close()
    assert not thread.is_alive() and cat._checkpointer is None
    again = Catalog(tmp_path, tmp_path / "catalog.sqlite")
    try:
        assert again.get_meta(f"k{catalog_module.CHECKPOINT_EVERY * 2 - 1}") == json.dumps(
            catalog_module.CHECKPOINT_EVERY * 2 - 1)
    finally:
        again.close()


def test_the_checkpointer_waits_for_the_writer_to_pause(tmp_path: Path, monkeypatch) -> None:
    """Beside back-to-back commits the thread does not checkpoint (the call whose sync met its
    write-back was the slowest of the run); once the writer pauses, it does."""
    quiet = 1.0
    monkeypatch.setattr(catalog_module, "QUIET_SECONDS", quiet)
    cat = Catalog(tmp_path, tmp_path / "catalog.sqlite")
    try:
        _commit(cat, catalog_module.CHECKPOINT_EVERY)
        worker = cat._checkpointer
        assert worker is not None  # asked for one with the last commit
        longest_gap, last, until = 0.0, time.monotonic(), time.monotonic() + 2 * quiet
        while time.monotonic() < until:  # the writer keeps going for twice the quiet time
            with cat.transaction() as db:
                db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES('busy', '1')")
            now = time.monotonic()
            longest_gap, last = max(longest_gap, now - last), now
            time.sleep(0.005)
        if longest_gap < quiet:  # a machine that froze this thread for a second proves nothing here
            assert worker.runs == 0
        _wait_for_a_checkpoint(worker)
        assert worker.runs >= 1
    finally:
        cat.close()


def test_a_replaced_catalog_gets_a_new_checkpointer(tmp_path: Path) -> None:
    cat = Catalog(tmp_path, tmp_path / "catalog.sqlite")
    try:
        _commit(cat, catalog_module.CHECKPOINT_EVERY)
        old = cat._checkpointer
        assert old is not None
        for suffix in ("", "-wal", "-shm"):
            Path(str(tmp_path / "catalog.sqlite") + suffix).unlink(missing_ok=True)  # the state folder was deleted
        assert cat.ensure_current()
        assert cat._checkpointer is None and not old._thread.is_alive()  # it held the old file
        _commit(cat, catalog_module.CHECKPOINT_EVERY)
        assert cat._checkpointer is not None and cat._checkpointer is not old
    finally:
        cat.close()
