"""Shared pytest fixtures for the vaultlcm test suite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fakellm import FakeLLM, running
from vaultlcm.indexing import IndexKeeper
from people_vaults import build_dag_vault, copy_vault


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    """A fake Anthropic/OpenAI HTTP server on 127.0.0.1 (see tests/fakellm.py)."""
    with running() as fake:
        yield fake


@pytest.fixture(scope="session")
def built_dag_vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A vault with a summary DAG three levels deep, built once (copy it with ``dag_vault``)."""
    return build_dag_vault(tmp_path_factory.mktemp("built") / "v", turns=14)


@pytest.fixture
def dag_vault(built_dag_vault: Path, tmp_path: Path) -> Path:
    """A fresh copy of ``built_dag_vault`` for one test, without derived state (as a new process finds it)."""
    return copy_vault(built_dag_vault, tmp_path / "v")


@pytest.fixture
def full_compares(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the per-document comparisons (each reads every id and hash of the index); still runs them."""
    calls: list[int] = []
    real = IndexKeeper._differences

    def spy(self: IndexKeeper, index: Any) -> Any:
        calls.append(1)
        return real(self, index)

    monkeypatch.setattr(IndexKeeper, "_differences", spy)
    return calls
