"""Trust: nothing read or written outside the vault, all-or-nothing ingest calls, locks that survive
deleting the cache, hand-edited logs, read-only vaults, and one-line errors for every failure."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from vaultlcm import Vault
from vaultlcm import msglog as msglog_module
from vaultlcm.cli import cli
from vaultlcm.errors import InvalidNameError, OutsideVaultError, StorageError
from vaultlcm.formats import Incoming
from vaultlcm.logcodec import render_entry
from vaultlcm.messages import message_from_native
from vaultlcm.tokens import count_tokens


def run(*args: str, input: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), input=input)
    return result.exit_code, result.stdout, result.stderr


def days(n: int, per_day: int = 3, start: int = 1) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "timestamp": f"2026-11-{start + d:02d}T10:00:{i:02d}Z",
             "content": f"day {start + d} message {i}"} for d in range(n) for i in range(per_day)]


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    Vault.init(tmp_path / "v").close()
    return tmp_path / "v"


# -- the vault boundary ----------------------------------------------------------------


def test_a_symlinked_log_is_never_written_through(vault: Path, tmp_path: Path) -> None:
    with Vault(vault) as v:
        v.ingest("c", days(1))
    log = vault / "conversations/c/logs/2026-11-01.md"
    outside = tmp_path / "outside.md"
    outside.write_bytes(log.read_bytes())
    log.unlink()
    log.symlink_to(outside)
    before = outside.read_bytes()
    f = tmp_path / "more.jsonl"
    f.write_text(json.dumps({"role": "user", "timestamp": "2026-11-01T11:00:00Z", "content": "more"}) + "\n")
    code, _, err = run("--vault", str(vault), "ingest", str(f), "-c", "c")
    assert code == 1 and err.startswith("Error: ") and "symlink" in err and err.count("\n") == 1
    assert outside.read_bytes() == before
    report = json.loads(run("--vault", str(vault), "doctor", "--json")[1])
    assert any(p["kind"] == "unsafe_entry" and "2026-11-01.md" in p["detail"] for p in report["problems"])


def test_a_symlinked_conversation_folder_is_refused(vault: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (vault / "conversations/evil").symlink_to(elsewhere)
    with Vault(vault) as v, pytest.raises(OutsideVaultError, match="conversations/evil is a symlink"):
        v.ingest("evil", days(1))
    assert list(elsewhere.iterdir()) == []
    code, _, err = run("--vault", str(vault), "ingest", "-", "-c", "evil", input=json.dumps(days(1)))
    assert code == 1 and "symlink" in err


def test_symlinked_note_and_payload_are_not_read(vault: Path, tmp_path: Path) -> None:
    import base64

    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(200))).decode()
    with Vault(vault) as v:
        [mid] = v.ingest("c", [{"role": "user", "content": [{"type": "image", "media_type": "image/png", "data": png}]}])
        v.ingest("d", days(1))
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"outside the vault")
    (payload,) = (vault / "conversations/c/files").iterdir()
    payload.unlink()
    payload.symlink_to(secret)
    note = vault / "conversations/d/summaries/planted.md"
    note.parent.mkdir(exist_ok=True)
    fake = tmp_path / "fake-note.md"
    fake.write_text('---\nid: "sum_0000000000000000"\n---\nI am not yours\n')
    note.symlink_to(fake)
    code, out, err = run("--vault", str(vault), "show", mid, "--json")
    assert code == 1 and err.startswith("Error: ") and "outside the vault" not in out
    with Vault(vault) as v:
        assert "I am not yours" not in json.dumps(v.assemble("d", 10_000).messages)
        report = v.doctor()
    unsafe = [p["detail"] for p in report["problems"] if p["kind"] == "unsafe_entry"]
    assert any("planted.md" in d for d in unsafe) and any(payload.name in d for d in unsafe)


def test_a_tampered_payload_is_named_by_doctor(vault: Path) -> None:
    big = "\n".join(f"row {i}" for i in range(9000))
    with Vault(vault) as v:
        [mid] = v.ingest("c", [{"role": "tool", "content": [{"type": "tool_result", "call_id": "x", "content": big}]}])
    (payload,) = (vault / "conversations/c/files").iterdir()
    payload.write_text(big.replace("row 7", "row 8"))
    with Vault(vault) as v:
        report = v.doctor()
        assert any(p["kind"] == "payload_mismatch" and payload.name in p["detail"] for p in report["problems"])
        with pytest.raises(Exception, match="no longer matches the hash"):
            v.get_message(mid)


# -- all or nothing ----------------------------------------------------------------------


def test_a_full_disk_in_the_middle_of_a_multi_day_call_stores_nothing(vault: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    with Vault(vault) as v:
        v.ingest_bytes("c", "\n".join(json.dumps(r) for r in days(1)).encode(), source="x.jsonl")
    logs = vault / "conversations/c/logs"
    before = {p.name: p.read_bytes() for p in logs.iterdir()}
    calls = []

    def full_disk_on_second(real: Any) -> Any:
        def append(path: Path, data: bytes, **options: Any) -> Any:
            calls.append(path)
            if len(calls) == 2:
                real(path, data[: len(data) // 2], **options)  # half of it reached the disk, then the disk filled up
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(path, data, **options)
        return append

    # The days before the last are appended durably one by one, the last one synced while the catalog works.
    for name in ("durable_append", "start_append"):
        monkeypatch.setattr(msglog_module, name, full_disk_on_second(getattr(msglog_module, name)))
    with Vault(vault) as v, pytest.raises(StorageError, match="disk is full"):
        v.ingest_bytes("c", "\n".join(json.dumps(r) for r in days(3, start=1)).encode(), source="x.jsonl")
    assert len(calls) == 2
    assert {p.name: p.read_bytes() for p in logs.iterdir()} == before  # nothing of the call stayed
    monkeypatch.undo()
    with Vault(vault) as v:
        report = v.ingest_bytes("c", "\n".join(json.dumps(r) for r in days(3, start=1)).encode(), source="x.jsonl")
        assert report.new == 6 and report.already_stored == 3  # the first day's records were stored before
        assert len(v.messages("c")) == 9


def test_a_call_torn_between_two_daily_logs_is_invisible_and_cut_by_the_next_writer(vault: Path) -> None:
    with Vault(vault) as v:
        v.ingest("c", days(1))
        # Write the first two days of a three-day call, as a writer killed before the last file would.
        incoming = [Incoming(message_from_native(r), key=None) for r in days(3, start=2)]
        stored = v.log._prepare("c", incoming)
        assert stored[0].batch is not None
        for sm in stored:
            if sm.day != stored[-1].day:
                path = vault / f"conversations/c/logs/{sm.day}.md"
                data = render_entry(sm, msglog_module.FileStore(v.layout, v.layout.files_dir("c")),
                                    count_tokens=count_tokens, large_tokens=25_000)
                if not path.exists():
                    path.write_text("---\n---\n\n# c\n\n")
                with path.open("ab") as fh:
                    fh.write(data)
    with Vault(vault) as v:
        assert len(v.messages("c")) == 3  # the torn call is not visible
        v.ingest("c", [{"role": "user", "timestamp": "2026-11-09T10:00:00Z", "content": "next call"}])
        texts = [m.text for m in v.messages("c")]
        assert texts[-1] == "next call" and len(texts) == 4
        assert "day 2 message 0" not in (vault / "conversations/c/logs/2026-11-02.md").read_text()
        assert v.doctor()["clean"]


WRITER = textwrap.dedent("""
    import sys
    from vaultlcm import Vault
    root, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with Vault(root) as v:
        for i in range(n):
            v.ingest("shared", [{"role": "user", "content": f"{name} {i}"}])
""")


def test_deleting_the_state_folder_under_four_writers_keeps_order_and_seq(vault: Path) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(vault), f"w{k}", "60"]) for k in range(4)]
    deadline = time.monotonic() + 120
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        shutil.rmtree(vault / ".vaultlcm", ignore_errors=True)
        time.sleep(0.05)
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    shutil.rmtree(vault / ".vaultlcm", ignore_errors=True)
    with Vault(vault) as v:
        v.sync("shared")
        rows = v.catalog.rows("shared")
        assert [r.seq for r in rows] == list(range(1, 241))
        texts = [m.text for m in v.messages("shared")]
        for k in range(4):
            mine = [t for t in texts if t.startswith(f"w{k} ")]
            assert mine == [f"w{k} {i}" for i in range(60)]
        assert v.doctor()["clean"]


def test_the_state_folder_deleted_while_the_catalog_creates_it_is_retried(vault: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``mkdir(exist_ok=True)`` raises "File exists" when the folder it found is deleted before it checks."""
    from vaultlcm.catalog import Catalog

    real = Path.mkdir
    raced: list[Path] = []

    def racing(self: Path, *args: Any, **kwargs: Any) -> None:
        if self.name == ".vaultlcm" and not raced:
            raced.append(self)
            raise FileExistsError(errno.EEXIST, "File exists", str(self))
        real(self, *args, **kwargs)

    shutil.rmtree(vault / ".vaultlcm", ignore_errors=True)
    monkeypatch.setattr(Path, "mkdir", racing)
    catalog = Catalog(vault, vault / ".vaultlcm" / "catalog.sqlite")
    catalog.close()
    assert raced and (vault / ".vaultlcm" / "catalog.sqlite").is_file()


def test_a_busy_catalog_is_waited_for_never_deleted(vault: Path) -> None:
    import sqlite3

    with Vault(vault) as v:
        v.ingest("c", days(1))
        catalog_id = v.catalog.catalog_id
    holder = sqlite3.connect(vault / ".vaultlcm/catalog.sqlite", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        from vaultlcm.catalog import Catalog
        from vaultlcm.errors import LockTimeoutError

        with pytest.raises(LockTimeoutError, match="busy"):
            Catalog(vault, vault / ".vaultlcm/catalog.sqlite", busy_timeout=0.2)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with Vault(vault) as v:
        assert v.catalog.catalog_id == catalog_id


# -- hand-edited logs ------------------------------------------------------------------


def test_text_a_person_types_at_the_end_of_a_log_blocks_nothing(vault: Path) -> None:
    with Vault(vault) as v:
        v.ingest("c", days(1))
    log = vault / "conversations/c/logs/2026-11-01.md"
    with log.open("ab") as fh:
        fh.write(b"my own note, no newline")
    for args in (("export", "-c", "c"), ("grep", "message"), ("assemble", "-c", "c", "--budget", "2000")):
        code, _, err = run("--vault", str(vault), *args)
        assert code == 0, err
    report = json.loads(run("--vault", str(vault), "doctor", "--json")[1])
    assert report["clean"]
    (warning,) = [w for w in report["warnings"] if w["kind"] == "no_final_newline"]
    assert "2026-11-01.md:" in warning["detail"] and warning["fixable"]
    run("--vault", str(vault), "doctor", "--fix")
    assert log.read_bytes().endswith(b"my own note, no newline\n")
    with log.open("ab") as fh:
        fh.write(b"<!-- lcm: a person's comment")  # looks like ours, is not: never truncated
    with Vault(vault) as v:
        v.ingest("c", [{"role": "user", "timestamp": "2026-11-01T12:00:00Z", "content": "after"}])
        assert v.messages("c")[-1].text == "after"
    assert b"<!-- lcm: a person's comment" in log.read_bytes()


# -- read-only vaults -------------------------------------------------------------------


def _read_only_runner() -> list[str] | None:
    """A command prefix that runs its command with the vault mounted read-only, if this machine can."""
    if shutil.which("unshare") is None:
        return None
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True)
    return ["unshare", "--user", "--map-root-user", "--mount"] if probe.returncode == 0 else None


def test_every_reading_command_works_on_a_read_only_vault(vault: Path, tmp_path: Path) -> None:
    prefix = _read_only_runner()
    if prefix is None:
        if os.geteuid() == 0:
            pytest.skip("needs user namespaces (unshare) to mount the vault read-only as root")
        prefix = []
    with Vault(vault) as v:
        ids = v.ingest("c", days(2))
        v.compact("c", force=True)
    shutil.rmtree(vault / ".vaultlcm")  # no derived state either: it must be built elsewhere
    exe = [sys.executable, "-m", "vaultlcm", "--vault", str(vault)]
    commands = [["status"], ["grep", "message"], ["show", ids[0]], ["export", "-c", "c"], ["describe", ids[0]],
                ["expand", ids[0]], ["assemble", "-c", "c", "--budget", "4000"]]
    script = ["set -e"]
    if prefix:
        script.append(f"mount --bind {vault} {vault} && mount -o remount,bind,ro {vault}")
    else:
        script.append(f"chmod -R a-w {vault}")
    for c in commands:
        script.append(" ".join(map(repr, exe + c)) + " > /dev/null")
    (tmp_path / "in.jsonl").write_text(json.dumps(days(1)[0]) + "\n")
    script.append(" ".join(map(repr, exe + ["ingest", str(tmp_path / "in.jsonl"), "-c", "c"])) + " 2> "
                  + repr(str(tmp_path / "err")) + " && exit 7 || true")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    result = subprocess.run([*prefix, "sh", "-c", "\n".join(script)], capture_output=True, text=True, env=env)
    if not prefix:
        subprocess.run(["chmod", "-R", "u+w", str(vault)])
    assert result.returncode == 0, result.stderr
    err = (tmp_path / "err").read_text()
    assert err.startswith("Error: ") and "read-only" in err and err.count("\n") == 1
    assert not (vault / ".vaultlcm").exists()


# -- one line for every failure -------------------------------------------------------------


def test_deep_json_is_a_one_line_error(vault: Path, tmp_path: Path) -> None:
    f = tmp_path / "deep.jsonl"
    f.write_text(json.dumps({"role": "user", "content": "x", "meta": json.loads("[" * 700 + "]" * 700)}))
    code, _, err = run("--vault", str(vault), "ingest", str(f), "-c", "c")
    assert code == 1 and "nested more than 200 levels" in err and err.count("\n") == 1


def test_a_name_too_long_in_bytes_is_refused(vault: Path) -> None:
    with Vault(vault) as v, pytest.raises(InvalidNameError, match="bytes"):
        v.ingest("名" * 90, days(1))


def test_a_full_disk_is_one_line_from_the_cli(vault: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_space(path: Path, data: bytes, **options: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(msglog_module, "start_append", no_space)
    code, _, err = run("--vault", str(vault), "ingest", "-", "-c", "c", input=json.dumps(days(1)))
    assert code == 1 and err.startswith("Error: ") and "disk is full" in err and err.count("\n") == 1


# -- the watcher survives odd files ------------------------------------------------------


def test_watch_skips_a_fifo_and_a_symlink_loop_and_keeps_running(vault: Path) -> None:
    with Vault(vault) as v:
        v.ingest("c", [{"role": "user" if i % 2 == 0 else "assistant", "timestamp": f"2026-11-01T10:{i // 60:02d}:{i % 60:02d}Z",
                        "content": f"message {i} about the deploy of routing-api " * 8} for i in range(90)])
        v.compact("c", force=True)
        watcher = v.watch(debounce_ms=50)
        try:
            summaries = vault / "conversations/c/summaries"
            os.mkfifo(summaries / "pipe.md")
            (summaries / "loop.md").symlink_to(summaries / "loop.md")
            (summaries / "a").symlink_to(summaries)  # a folder loop
            assert watcher.wait_idle(15)
            leaf = next(s for s in v.dag.all("c") if s.kind == "leaf")
            path = vault / leaf.path
            path.write_text(path.read_text().rstrip("\n") + "\nA person's correction: port 9443.\n")
            assert watcher.wait_idle(15)
            assert v.dag.get(leaf.id).human_owned  # still syncing after the odd files
        finally:
            started = time.monotonic()
            watcher.stop()
            assert time.monotonic() - started < 20  # stopping never hangs on a pipe
        problems = {p["kind"] for p in v.doctor()["problems"]}
        assert "unsafe_entry" in problems


def test_a_persons_properties_survive_a_refresh(vault: Path) -> None:
    with Vault(vault) as v:
        v.ingest("c", [{"role": "user" if i % 2 == 0 else "assistant", "timestamp": f"2026-11-01T10:{i // 60:02d}:{i % 60:02d}Z",
                        "content": f"message {i} about the deploy of routing-api " * 8} for i in range(120)])
        v.compact("c", force=True)
        node = next(s for s in v.dag.all("c") if s.kind == "condensed")
        note = vault / node.path
        text = note.read_text()
        text = text.replace("tags:\n", "aliases:\n- Deploy saga\nstatus: reviewed\ntags:\n  - project/routing\n", 1)
        note.write_text(text)  # properties only: the body is untouched, so the note is not a person's yet
        v.refresh("c")
        child = next(s for s in v.dag.children(node.id))
        cpath = vault / child.path
        cpath.write_text(cpath.read_text().rstrip("\n") + "\nA person's correction: port 9443.\n")
        v.refresh("c")
        v.compact("c")
        refreshed = note.read_text()
        assert v.dag.get(node.id).body_hash != node.body_hash  # regenerated with the correction
        assert "aliases:\n- Deploy saga\nstatus: reviewed\n" in refreshed
        assert '  - "project/routing"' in refreshed or "  - project/routing" in refreshed


def test_an_unexpected_failure_is_one_line_unless_debug(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("something nobody expected")

    monkeypatch.setattr(Vault, "status", boom)
    code, _, err = run("--vault", str(vault), "status")
    assert code == 1 and err.startswith("Error: internal error: RuntimeError") and err.count("\n") == 1
    result = CliRunner().invoke(cli, ["--vault", str(vault), "--debug", "status"])
    assert isinstance(result.exception, RuntimeError)  # --debug lets the traceback through


REINDEXER = textwrap.dedent("""
    import sys
    from vaultlcm import Vault
    with Vault(sys.argv[1]) as v:
        print("start", flush=True)
        v.reindex()
""")


def _children_of(pid: int) -> set[int]:
    out: set[int] = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.add(int(entry.name))
    return out


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table from /proc")
def test_a_killed_reindex_leaves_no_process_and_the_next_grep_works(vault: Path) -> None:
    with Vault(vault) as v:
        for day in range(1, 16):
            v.ingest("c", [{"role": "user", "timestamp": f"2026-11-{day:02d}T10:{i // 60:02d}:{i % 60:02d}Z",
                            "content": f"message {i} on day {day} about routing deploys " * 4} for i in range(400)])
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-c", REINDEXER, str(vault)], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "start"
        deadline = time.monotonic() + 30
        children: set[int] = set()
        while time.monotonic() < deadline and proc.poll() is None:
            children |= _children_of(proc.pid)  # the writer's worker processes, once they exist
            if children:
                break
            time.sleep(0.02)
        time.sleep(0.3)
        proc.kill()
        proc.wait()
        end = time.monotonic() + 10
        while time.monotonic() < end and any(Path(f"/proc/{c}").exists() for c in children):
            time.sleep(0.05)
        alive = [c for c in children if Path(f"/proc/{c}").exists()
                 and "Z" not in (Path(f"/proc/{c}/stat").read_text().rsplit(")", 1)[1].split()[0])]
        assert not alive, f"reindex children outlived their parent: {alive}"
    with Vault(vault) as v:
        assert v.grep("routing")["hits"]
