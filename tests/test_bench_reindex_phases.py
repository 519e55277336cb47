"""The reindex phase benchmark runs on a small build and two rebuilds of it digest the same.

It checks that the script works, not how fast anything is (numbers live in docs/PERFORMANCE.md).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "bench_reindex_phases.py"
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_scale import traffic  # noqa: E402

from vaultlcm import Settings, Vault  # noqa: E402

pytest.importorskip("tantivy")


def _run(copy: Path) -> dict[str, object]:
    out = subprocess.run([sys.executable, str(SCRIPT), str(copy), "--digest"], capture_output=True, text=True,
                         timeout=240, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def test_phases_of_a_reindex_and_the_same_digest_twice(tmp_path: Path) -> None:
    build = tmp_path / "build"
    with Vault.init(build, settings=Settings(index_backend="tantivy")) as v:
        for message in traffic(200):  # one call each: a call over several days is indexed from the catalog's rows
            v.ingest("agent", [message])
        v.compact("agent", force=True)
        summaries = v.catalog.execute("SELECT COUNT(*) FROM summaries")[0][0]
    results = []
    for n in range(2):
        copy = tmp_path / f"copy{n}"
        shutil.copytree(build, copy)
        results.append(_run(copy))
    first, second = results
    assert first["messages"] == 200 and first["parent_cpu_s"] > 0 and first["child_cpu_s"] > 0
    phases = first["phases"]
    assert isinstance(phases, dict)
    for phase in ("logs: parse", "logs: insert", "decode and document", "notes: read note", "recompute",
                  "summary documents", "commit/wait"):
        assert phase in phases, phases
    assert phases["notes: read note"]["calls"] == summaries and phases["decode and document"]["calls"] == 200
    digest = first["digest"]
    assert isinstance(digest, dict)
    assert digest["documents"][0] == 200 + summaries and digest["catalog.messages"][0] == 200
    assert digest == second["digest"]  # a rebuild builds the same documents, terms and catalog every time
