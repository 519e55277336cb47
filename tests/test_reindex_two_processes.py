"""``reindex`` on tantivy builds the index in a second process while this one rebuilds the catalog.

Real processes throughout: the child is ``python -m vaultlcm.index_builder``; it is
made to fail through the vault (a missing payload file), killed from outside, or
stopped by a SIGINT to the whole process group as a terminal's Ctrl-C sends it.
After any failure no process is left behind and the index is not taken as current
(no marks: the next process compares it with the catalog and rebuilds it).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from vaultlcm import Vault
from vaultlcm.errors import IndexBuildError
from vaultlcm.index_builder import hash_sum
from vaultlcm.indexing import MARKS_FILE
from vaultlcm.logcodec import ParsedEntry, iter_entries

pytest.importorskip("tantivy")
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
LINUX = sys.platform.startswith("linux")
needs_proc = pytest.mark.skipif(not LINUX, reason="finds the child process through /proc")


def _steps(n: int, word: str) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant",
             "timestamp": (T0 + timedelta(minutes=37 * i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
             "content": f"{word} step {i}: deploy of service-{i % 5} finished with code {(i * 7) % 97}"}
            for i in range(n)]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two conversations on tantivy (one compacted, one with an externalized payload), indexed."""
    root = tmp_path_factory.mktemp("built") / "v"
    Vault.init(root).close()
    (root / "vaultlcm.toml").write_text('index_backend = "tantivy"\nbackground_compaction = false\n')
    big = "\n".join(f"row {i}: value {i * 7}" for i in range(12_000))
    with Vault(root) as v:
        v.ingest("c", _steps(1100, "alpha"))
        v.compact("c", force=True)
        v.ingest("d", _steps(40, "beta"))
        v.ingest("d", [{"role": "tool", "content": [{"type": "tool_result", "call_id": "c1", "content": big}]}])
    return root


@pytest.fixture
def vault(built: Path, tmp_path: Path) -> Path:
    root = tmp_path / "v"
    shutil.copytree(built, root)
    return root


def _index_is_the_catalogs(v: Vault) -> None:
    assert v.indexer.drift() == {"missing": [], "extra": []}
    assert v.indexer.counts_match()
    assert v.grep("alpha", scope="messages", count=True)["total"] == 1100  # every message once
    assert v.catalog.execute("SELECT COUNT(*) FROM reindex_queue")[0][0] == 0


def _children(pid: int) -> list[int]:
    """Live (not zombie) processes whose parent is ``pid`` and which run the index builder."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()
            cmd = Path(f"/proc/{d}/cmdline").read_bytes()
        except OSError:
            continue
        if int(stat[1]) == pid and stat[0] != "Z" and b"vaultlcm.index_builder" in cmd:
            out.append(int(d))
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _not_current(root: Path) -> None:
    """What a failed reindex leaves: no marks, so the next process compares the index with the catalog."""
    assert not (root / ".vaultlcm" / "index" / MARKS_FILE).exists()
    with Vault(root) as v:
        assert v.indexer.lag() is None
        assert v.grep("alpha", scope="messages", count=True)["total"] == 1100  # the next process rebuilt what was missing


def test_reindex_in_two_processes_indexes_what_the_catalog_holds(vault: Path) -> None:
    with Vault(vault) as v:
        before = v.grep("deploy", limit=5000, sort="oldest")
        out = v.reindex()
        assert out["backend"] == "tantivy" and out["documents"] == out["messages"] + out["summaries"]
        _index_is_the_catalogs(v)
        after = v.grep("deploy", limit=5000, sort="oldest")
        assert [h["id"] for h in after["hits"]] == [h["id"] for h in before["hits"]] and after["hits"]
        assert v.grep("value 8393")["hits"]  # the externalized payload's text, read from its file
    assert (vault / ".vaultlcm" / "index" / MARKS_FILE).exists()  # closed cleanly: the index is current


def test_a_log_entry_written_twice_falls_back_to_the_catalogs_rows(vault: Path) -> None:
    """The child cannot see that an id repeats (the catalog stores it once): the tallies differ, the
    child's build is dropped and the index built from the catalog, every message once."""
    logs = sorted((vault / "conversations/c/logs").glob("*.md"))
    first = next(e for e in iter_entries(logs[0].read_bytes(), path=logs[0].name) if isinstance(e, ParsedEntry))
    with logs[-1].open("ab") as f:
        f.write(first.raw if first.raw.endswith(b"\n") else first.raw + b"\n")
    assert sum(log.read_bytes().count(first.raw) for log in logs) == 2
    with Vault(vault) as v:
        out = v.reindex()
        assert out["messages"] == 1100 + 41 and out["documents"] == out["messages"] + out["summaries"]
        _index_is_the_catalogs(v)  # the child's copy of the entry would be a document too many


def test_hash_sum_is_order_free_and_64_bit() -> None:
    hashes = [f"{n:016x}" for n in (0, 1, 2**64 - 1, 2**63, 12345678901234567)]
    assert hash_sum(hashes) == hash_sum(reversed(hashes)) == sum(int(h, 16) for h in hashes) % 2**64
    assert hash_sum(hashes[:-1]) != hash_sum(hashes)


def test_a_child_that_raises_fails_the_reindex_naming_why(vault: Path) -> None:
    [payload] = (vault / "conversations/d/files").iterdir()
    payload.unlink()  # the catalog does not read payloads; the index's documents do
    with Vault(vault) as v, pytest.raises(IndexBuildError) as err:
        v.reindex()
    assert "building the search index" in str(err.value) and payload.name in str(err.value)
    assert "missing" in str(err.value) and "vaultlcm reindex" in str(err.value)
    if LINUX:
        assert _children(os.getpid()) == []
    assert not (vault / ".vaultlcm" / "index" / MARKS_FILE).exists()


@needs_proc
def test_a_child_killed_mid_build_fails_the_reindex(vault: Path) -> None:
    killed: list[int] = []

    def progress(_n: int) -> None:
        if not killed:  # the child reports progress as it indexes: kill it then
            [pid] = _children(os.getpid())
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    with Vault(vault) as v, pytest.raises(IndexBuildError) as err:
        v.reindex(progress=progress)
    assert killed and f"pid {killed[0]}" in str(err.value) and "exit code -9" in str(err.value)
    assert _children(os.getpid()) == []
    _not_current(vault)


def _start_cli(root: Path) -> tuple[subprocess.Popen[bytes], int]:
    """``vaultlcm reindex`` in its own session (as a shell runs a job); returns it and its child's pid."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    proc = subprocess.Popen([sys.executable, "-m", "vaultlcm", "--vault", str(root), "reindex", "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        kids = _children(proc.pid)
        if kids:
            return proc, kids[0]
        time.sleep(0.005)
    proc.kill()
    raise AssertionError(f"the index builder never started: {proc.communicate()[1][-2000:]!r}")


def _gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.02)
    return False


@needs_proc
def test_ctrl_c_stops_both_processes(vault: Path) -> None:
    proc, child = _start_cli(vault)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    try:
        rc = proc.wait(timeout=60)
    finally:
        proc.kill()
    assert rc != 0
    assert _gone(child, 10), "the index builder outlived the reindex"
    _not_current(vault)


@needs_proc
def test_a_child_whose_parent_dies_stops_by_itself(vault: Path) -> None:
    proc, child = _start_cli(vault)
    proc.kill()  # SIGKILL: nothing of the parent runs, its pipes close
    proc.wait()
    assert _gone(child, 30), "the index builder went on without its parent"
    _not_current(vault)
