"""``reindex`` on tantivy builds the index in a second process while this one rebuilds the catalog.

Real processes throughout: the child is the same interpreter running
``vaultlcm.index_builder``; it is made to fail by a document it cannot index, killed or
frozen (SIGSTOP) from outside, or stopped by a SIGINT to the whole process group as a
terminal's Ctrl-C sends it.
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

import vaultlcm
from vaultlcm import Vault, index_builder
from vaultlcm.errors import CorruptVaultError, IndexBuildError
from vaultlcm.index.base import IndexDoc
from vaultlcm.index_builder import IndexBuilder
from vaultlcm.layout import VaultLayout
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


def test_a_log_entry_written_twice_is_indexed_once(vault: Path) -> None:
    """The catalog stores a repeated id once; only what it stored is sent to the child."""
    logs = sorted((vault / "conversations/c/logs").glob("*.md"))
    first = next(e for e in iter_entries(logs[0].read_bytes(), path=logs[0].name) if isinstance(e, ParsedEntry))
    with logs[-1].open("ab") as f:
        f.write(first.raw if first.raw.endswith(b"\n") else first.raw + b"\n")
    assert sum(log.read_bytes().count(first.raw) for log in logs) == 2
    with Vault(vault) as v:
        out = v.reindex()
        assert out["messages"] == 1100 + 41 and out["documents"] == out["messages"] + out["summaries"]
        _index_is_the_catalogs(v)


def test_a_batch_over_two_days_is_indexed_from_the_catalogs_rows(vault: Path) -> None:
    """A batch spanning midnight waits in ``pending`` until its last day is read: the conversation's
    positions do not stand after its logs, so the child forgets what it was sent of it and is sent
    the catalog's rows instead; every message once, at its settled position."""
    late = datetime(2026, 6, 1, 23, 50, tzinfo=UTC)
    steps = [{"role": "user" if i % 2 == 0 else "assistant",
              "timestamp": (late + timedelta(minutes=7 * i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "content": f"gamma night shift {i}"} for i in range(6)]
    with Vault(vault) as v:
        v.ingest("d", steps)
        assert len({h["at"][:10] for h in v.grep("gamma", limit=10)["hits"]}) == 2
    with Vault(vault) as v:  # the case under test: what the reindex sees after the conversation's logs
        v.catalog.reset()
        stored = sum(len(e) for e in v.catalog.rebuild_logs("d", vault / "conversations/d/logs"))
        assert not v.catalog.at_writer_positions("d", stored)
    with Vault(vault) as v:
        out = v.reindex()
        assert out["documents"] == out["messages"] + out["summaries"]
        _index_is_the_catalogs(v)
        assert v.grep("gamma", scope="messages", count=True)["total"] == 6
        assert [h["id"] for h in v.grep("gamma", limit=10, sort="oldest")["hits"]] == \
            [r.id for r, _m in v.log.iter_conversation("d") if "gamma" in _m.searchable_text()]


def test_a_missing_payload_fails_the_reindex_naming_it(vault: Path) -> None:
    [payload] = (vault / "conversations/d/files").iterdir()
    payload.unlink()  # the catalog does not read payloads; the index's documents do
    with Vault(vault) as v, pytest.raises(CorruptVaultError) as err:
        v.reindex()
    assert payload.name in str(err.value) and "missing" in str(err.value)
    if LINUX:
        assert _children(os.getpid()) == []
    assert not (vault / ".vaultlcm" / "index" / MARKS_FILE).exists()


def test_a_child_that_raises_fails_the_build_naming_why(tmp_path: Path) -> None:
    layout = VaultLayout(tmp_path)
    with IndexBuilder(layout, "tantivy") as builder:
        builder.add([IndexDoc(id="m-1", kind="message", conversation="c", text="fine", at=0.0)])
        builder.add([IndexDoc(id="m-2", kind="note", conversation="c", text="a kind it refuses", at=0.0)])
        with pytest.raises(IndexBuildError) as err:
            builder.commit()
    assert "building the search index" in str(err.value) and "UsageError" in str(err.value)
    assert "'note'" in str(err.value) and "vaultlcm reindex" in str(err.value)
    if LINUX:
        assert _children(os.getpid()) == []


@needs_proc
def test_a_hung_child_is_killed_and_fails_the_reindex(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_builder, "STALL_TIMEOUT_S", 2.0)
    frozen: list[int] = []

    def progress(_done: int, _expected: int) -> None:
        if not frozen:  # SIGSTOP: the process lives on and does nothing, as a hung one does
            [pid] = _children(os.getpid())
            os.kill(pid, signal.SIGSTOP)
            frozen.append(pid)

    started = time.monotonic()
    with Vault(vault) as v, pytest.raises(IndexBuildError) as err:
        v.reindex(progress=progress)
    assert frozen and f"pid {frozen[0]}" in str(err.value) and "made no progress" in str(err.value)
    assert time.monotonic() - started < 120
    assert not _alive(frozen[0])
    _not_current(vault)


def test_the_child_runs_on_the_parents_sys_path(tmp_path: Path) -> None:
    """A package found after the stdlib (as an installed one is, in site-packages) is run by a child
    that finds the stdlib first too: a module there named like a stdlib one does not shadow it."""
    site = tmp_path / "site"
    shutil.copytree(Path(vaultlcm.__file__).parent, site / "vaultlcm")
    (site / "pickle.py").write_text("raise ImportError('the site folder shadowed the stdlib')\n")
    root = tmp_path / "v"
    script = (
        "import sys; sys.path.remove(''); sys.path.append(sys.argv[1]); "
        "sys.modules.pop('vaultlcm', None); "
        "import vaultlcm; assert vaultlcm.__file__.startswith(sys.argv[1]), vaultlcm.__file__; "
        "from vaultlcm import Vault; "
        "Vault.init(sys.argv[2]).close(); "
        "open(sys.argv[2] + '/vaultlcm.toml', 'w').write('index_backend = \"tantivy\"\\n'); "
        "v = Vault(sys.argv[2]); v.ingest('c', [{'role': 'user', 'content': 'hello shadow'}]); "
        "out = v.reindex(); v.close(); print(out['documents'])")
    env = {k: val for k, val in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", script, str(site), str(root)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "1"


@needs_proc
def test_a_child_killed_mid_build_fails_the_reindex(vault: Path) -> None:
    killed: list[int] = []

    def progress(_done: int, _expected: int) -> None:
        if not killed:  # the child reports progress as it indexes: kill it then
            [pid] = _children(os.getpid())
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    with Vault(vault) as v, pytest.raises(IndexBuildError) as err:
        v.reindex(progress=progress)
    assert killed and f"pid {killed[0]}" in str(err.value) and "exit code -9" in str(err.value)
    assert _children(os.getpid()) == []
    _not_current(vault)


def _as_a_terminal_job() -> None:
    """Ctrl-C as a terminal's foreground job has it: a suite started in the background of a
    non-interactive shell (``cmd &``) runs with SIGINT ignored, which every child inherits."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start_cli(root: Path) -> tuple[subprocess.Popen[bytes], int]:
    """``vaultlcm reindex`` in its own session (as a shell runs a job); returns it and its child's pid."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    proc = subprocess.Popen([sys.executable, "-m", "vaultlcm", "--vault", str(root), "reindex", "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True, env=env,
                            preexec_fn=_as_a_terminal_job)
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
