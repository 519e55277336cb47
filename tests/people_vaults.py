"""A vault with a summary DAG three levels deep, built once per test module and copied per test."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agent_traffic import numbered_steps
from test_lcm import SMALL, conversation
from vaultlcm import Settings, Vault

SETTINGS = {**SMALL, "condensed_min_fanin": 3, "condensed_max_fanin": 3}


def build_dag_vault(root: Path, turns: int) -> Path:
    """``turns`` exchanges (question, tool call and result, answer), fully compacted; settings in vaultlcm.toml."""
    with Vault.init(root, settings=Settings(**SETTINGS)) as v:
        v.ingest("c", conversation([("u", 30), ("t", 20), ("a", 40)] * turns))
        v.compact("c", force=True)
        assert max(s.depth for s in v.dag.all("c")) >= 2
    (root / "vaultlcm.toml").write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in SETTINGS.items()))
    return root


def copy_vault(built: Path, root: Path) -> Path:
    """A copy as another process (or a fresh clone) would find it: the files, no derived state."""
    shutil.copytree(built, root, ignore=shutil.ignore_patterns(".vaultlcm"))
    return root


#: Both index backends, for tests that run against each.
BACKENDS = ["whoosh", "tantivy"]


def make_indexed_vault(root: Path, backend: str) -> None:
    """A vault at ``root`` on ``backend`` with 90 messages compacted and indexed (marks saved at close)."""
    pytest.importorskip(backend)
    Vault.init(root).close()
    (root / "vaultlcm.toml").write_text(f'index_backend = "{backend}"\nbackground_compaction = false\n')
    with Vault(root) as v:
        v.ingest("c", numbered_steps(90))
        v.compact("c", force=True)
        assert v.grep("deploy")["hits"]
