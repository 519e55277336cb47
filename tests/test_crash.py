"""Crash safety: SIGKILL at random points loses nothing acknowledged; two repos merge in git."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from vaultlcm import Vault

WRITER = textwrap.dedent(
    """
    import sys
    from vaultlcm import Vault
    root = sys.argv[1]
    with Vault(root) as v:
        i = 0
        while True:
            big = "payload " * (4000 if i % 7 == 0 else 5)
            [mid] = v.ingest("crash", [{"role": "user", "content": f"message {i} " + big}])
            print(mid, i, flush=True)  # acknowledged: ingest returned
            if i % 25 == 24:
                v.compact("crash", force=True)
            i += 1
    """
)


@pytest.mark.parametrize("seed", range(4))
def test_sigkill_loses_nothing_acknowledged(tmp_path: Path, seed: int) -> None:
    Vault.init(tmp_path).close()
    acked: list[tuple[str, int]] = []
    rng = random.Random(seed)
    for _round in range(3):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)  # type: ignore[arg-type]
        reader.start()
        # Kill at a random point once the writer is working (start-up time varies on a loaded machine).
        deadline = time.monotonic() + 60
        while not lines and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.01)
        time.sleep(rng.uniform(0.05, 1.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        reader.join(timeout=10)
        for line in lines:
            if line.endswith("\n"):  # a line cut by the kill was never fully acknowledged
                mid, n = line.split()
                acked.append((mid, int(n)))
    assert acked, "the writer never acknowledged a message"
    with Vault(tmp_path) as v:
        for mid, n in acked:
            assert v.get_message(mid).text.startswith(f"message {n} ")
        stored = {m.id for m in v.messages("crash")}
        assert {mid for mid, _ in acked} <= stored
        v.grep("payload")  # any use catches the derived index up
        report = v.doctor()
        assert report["clean"], report["problems"]


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def test_two_machines_append_and_merge_with_git(tmp_path: Path) -> None:
    a = tmp_path / "a"
    with Vault.init(a) as v:
        v.ingest("shared", [{"role": "user", "timestamp": "2026-11-29T09:00:00Z", "content": "start"}])
    git(a, "init", "-q", "-b", "main")
    git(a, "add", "-A")
    git(a, "commit", "-qm", "start")
    b = tmp_path / "b"
    git(tmp_path, "clone", "-q", str(a), str(b))
    with Vault(a) as v:
        v.ingest("shared", [{"role": "user", "timestamp": "2026-11-29T10:00:00Z", "content": "from machine A"}])
    with Vault(b) as v:
        v.ingest("shared", [{"role": "user", "timestamp": "2026-11-29T10:00:05Z", "content": "from machine B"},
                            {"role": "assistant", "timestamp": "2026-11-29T10:00:06Z", "content": "reply on B"}])
    git(a, "add", "-A")
    git(a, "commit", "-qm", "A")
    git(b, "add", "-A")
    git(b, "commit", "-qm", "B")
    assert ".vaultlcm" not in git(b, "ls-files")
    git(b, "pull", "-q", "--no-rebase", "--no-edit", str(a), "main")  # merge=union: no conflict
    assert "<<<<<<<" not in (b / "conversations/shared/logs/2026-11-29.md").read_text()
    with Vault(b) as v:
        texts = [m.text for m in v.messages("shared")]
        # each machine's turns stay together, the side that started first comes first
        assert texts == ["start", "from machine A", "from machine B", "reply on B"]
        report = v.doctor()
        assert report["clean"], report["problems"]
        assert any(n["kind"] == "merge" for n in report["notes"])
    diff = git(b, "diff", "HEAD~1", "--stat")
    assert "logs/2026-11-29.md" in diff
