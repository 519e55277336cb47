"""Shared pytest fixtures for the vaultlcm test suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fakellm import FakeLLM, running


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    """A fake Anthropic/OpenAI HTTP server on 127.0.0.1 (see tests/fakellm.py)."""
    with running() as fake:
        yield fake
