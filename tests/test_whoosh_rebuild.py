"""A Whoosh rebuild that fails half way ends its worker processes: the process exits, quietly.

Run in a true subprocess: the failure this guards against is a process that never exits
(multiprocessing joins a worker still waiting on Whoosh's job queue at interpreter exit).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent("""
    import multiprocessing, sys, time
    from vaultlcm.index import open_index
    from vaultlcm.index.base import IndexDoc, IndexUnavailable

    def docs():
        for i in range(2000):
            if i == 1500:
                time.sleep(float(sys.argv[2]))  # the workers take every queued job and wait for more
                raise RuntimeError("a log that cannot be read")
            yield IndexDoc(id=f"m-{i}", kind="message", conversation="c", text=f"deploy word{i}", at=float(i), seq=i)

    ix = open_index("whoosh", sys.argv[1], reset=True)
    try:
        ix.rebuild(docs())
    except IndexUnavailable as exc:
        print("failed:", exc, flush=True)
    print("children:", len(multiprocessing.active_children()), flush=True)
    ix.close()
""")


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="Whoosh rebuilds in worker processes on 2 cores or more")
@pytest.mark.parametrize("pause", [0.0, 1.5])  # with jobs still queued; with the workers waiting on the queue
def test_a_failed_rebuild_leaves_no_worker_behind(tmp_path: Path, pause: float) -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "ix"), str(pause)],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "failed to rebuild (RuntimeError: a log that cannot be read)" in out.stdout
    assert "children: 0" in out.stdout
    assert "Traceback" not in out.stderr, out.stderr[-2000:]  # no worker printed its own failure
