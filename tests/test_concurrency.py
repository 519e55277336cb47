"""Two processes writing one vault: nothing lost, no bytes interleaved."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from vaultlcm.logcodec import ParsedEntry, iter_entries
from vaultlcm.vault import Vault

WRITER = textwrap.dedent(
    """
    import sys
    from vaultlcm.vault import Vault
    root, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with Vault(root) as v:
        for i in range(n):
            batch = [{"role": "user", "timestamp": "2026-11-29T10:00:00Z",
                      "content": f"{tag} {i} " + "x" * (i % 7) * 500}]
            if i % 5 == 0:
                batch.append({"role": "assistant", "timestamp": "2026-11-29T10:00:01Z", "content": f"{tag} {i} reply"})
            v.ingest("shared", batch)
    """
)


def test_two_processes_one_conversation(tmp_path: Path) -> None:
    Vault.init(tmp_path).close()
    n = 60
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), tag, str(n)], stderr=subprocess.PIPE)
        for tag in ("A", "B")
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    log = tmp_path / "conversations/shared/logs/2026-11-29.md"
    entries = [e for e in iter_entries(log.read_bytes(), path=str(log))]
    assert all(isinstance(e, ParsedEntry) for e in entries)
    per_writer = n + n // 5
    assert len(entries) == 2 * per_writer
    with Vault(tmp_path) as v:
        msgs = v.messages("shared")
    texts = [m.text for m in msgs]
    for tag in ("A", "B"):
        mine = [t for t in texts if t.startswith(tag + " ")]
        assert len(mine) == per_writer
        # each writer's messages keep their own order
        numbers = [int(t.split()[1]) for t in mine if not t.endswith("reply")]
        assert numbers == sorted(numbers) == list(range(n))
    seqs = sorted(e.meta["seq"] for e in entries)  # type: ignore[union-attr]
    assert seqs == list(range(1, 2 * per_writer + 1))
