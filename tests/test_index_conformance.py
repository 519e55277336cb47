"""Conformance suite for the full-text index: every backend must pass all of it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vaultlcm.errors import IndexError_, UsageError
from vaultlcm.index import open_index
from vaultlcm.index.base import IndexDoc, IndexLocked, IndexOtherBackend, IndexUnavailable, SearchIndex
from vaultlcm.index.buffered import VERSION_FILE
from vaultlcm.index.query import parse_query, related_forms

BACKENDS = ["whoosh", "tantivy"]
ROOT = Path(__file__).resolve().parents[1]


def msg(i: str, text: str, at: float = 1000.0, conv: str = "c1", role: str = "user") -> IndexDoc:
    return IndexDoc(id=i, kind="message", conversation=conv, text=text, at=at, role=role, content_hash=f"h-{i}")


def summ(i: str, text: str, at: float = 1000.0, conv: str = "c1", depth: int = 0) -> IndexDoc:
    return IndexDoc(id=i, kind="summary", conversation=conv, text=text, at=at, depth=depth, content_hash=f"h-{i}")


CORPUS = [
    msg("m-0001", "The deploy failed because the disk is full on the build server.", 1000.0),
    msg("m-0002", "Full disk? No: the disk was full yesterday, deployment is fine now.", 2000.0, role="assistant"),
    msg("m-0003", "Open src/app.py and rename snake_case_name to CamelCase in the HTTPServer class.", 3000.0),
    msg("m-0004", "tool call_01 returned port 8443 for message m-3f2a (see docs/README.md)", 4000.0, conv="c2"),
    msg("m-0005", "Unrelated chatter about lunch and coffee.", 5000.0, conv="c2"),
    summ("sum_a1", "Summary: the user fixed the deploy; disk cleanup script added in tools/cleanup.sh", 6000.0),
    summ("sum_b2", "Summary of conversation two: port 8443 and call_01", 7000.0, conv="c2", depth=1),
]


def ids(hits: list) -> list[str]:
    return [h.id for h in hits]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "tantivy":
        pytest.importorskip("tantivy")
    return request.param


@pytest.fixture
def make(tmp_path: Path, backend: str) -> Iterator:
    opened: list[SearchIndex] = []

    def _make(name: str = "ix", **kw: object) -> SearchIndex:
        ix = open_index(backend, tmp_path / name, **kw)  # type: ignore[arg-type]
        opened.append(ix)
        return ix

    yield _make
    for ix in opened:
        ix.close()


@pytest.fixture
def ix(make) -> SearchIndex:
    index = make()
    index.add(CORPUS)
    return index


# ------------------------------------------------------------------ query language


def test_words_are_anded_and_case_insensitive(ix: SearchIndex) -> None:
    assert set(ids(ix.search("DISK full"))) == {"m-0001", "m-0002"}
    assert ids(ix.search("disk lunch")) == []
    assert set(ids(ix.search("deploy"))) == {"m-0001", "m-0002", "sum_a1"}  # "deployment" shares the stem


def test_phrases(ix: SearchIndex) -> None:
    assert ids(ix.search('"disk is full"')) == ["m-0001"]
    assert ids(ix.search('"full disk"')) == ["m-0002"]
    assert ids(ix.search('"is disk full"')) == []
    assert ids(ix.search('"disk is full" build')) == ["m-0001"]


def test_prefixes(ix: SearchIndex) -> None:
    assert set(ids(ix.search("deplo*"))) == {"m-0001", "m-0002", "sum_a1"}
    assert set(ids(ix.search("DEPLOYM*"))) == {"m-0002"}
    assert ids(ix.search("src/ap*")) == ["m-0003"]
    assert ids(ix.search("snake_ca*")) == ["m-0003"]
    assert ids(ix.search('"rename snake*"')) == ["m-0003"]
    assert ids(ix.search("zzz*")) == []


@pytest.mark.parametrize(
    "query, expected",
    [
        ("src/app.py", {"m-0003"}),
        ("app.py", {"m-0003"}),
        ("app", {"m-0003"}),
        ("snake_case_name", {"m-0003"}),
        ("case_name", {"m-0003"}),
        ("snake", {"m-0003"}),
        ("CamelCase", {"m-0003"}),
        ("camelcase", {"m-0003"}),
        ("camel", {"m-0003"}),
        ("HTTPServer", {"m-0003"}),
        ("server", {"m-0001", "m-0003"}),
        ("m-3f2a", {"m-0004"}),
        ("3f2a", {"m-0004"}),
        ("call_01", {"m-0004", "sum_b2"}),
        ("8443", {"m-0004", "sum_b2"}),
        ("docs/README.md", {"m-0004"}),
        ("readme", {"m-0004"}),
        ("tools/cleanup.sh", {"sum_a1"}),
        ("m-0004", set()),  # ids are not text
    ],
)
def test_identifiers_whole_and_parts(ix: SearchIndex, query: str, expected: set[str]) -> None:
    assert set(ids(ix.search(query))) == expected


@pytest.mark.parametrize("query", ["foo(", '"unterminated', "***", "", "   ", '""', "*", "a:b\"c", "(((", "AND OR NOT", "-", "^~\\"])
def test_special_characters_never_raise(ix: SearchIndex, query: str) -> None:
    assert isinstance(ix.search(query), list)


def test_unterminated_quote_is_a_phrase(ix: SearchIndex) -> None:
    assert ids(ix.search('"disk is full')) == ["m-0001"]
    assert ids(ix.search("disk(")) != []


def test_parse_query_is_backend_neutral() -> None:
    assert parse_query("***").clauses == ()
    pq = parse_query('src/app.py "a b" x*')
    assert len(pq.clauses) == 3
    assert "src/app.py" in pq.terms and "x" in pq.prefixes


@pytest.mark.parametrize("query, forms", [
    ("formatter", "format*"), ("parsers", "pars*"), ("logger", "log*"), ("Validator", "validat*"),
    ("which formatter do we use", "which format* do we use"),
    ("user", None), ("after", None), ('"formatter"', None), ("src/app.py", None), ("format*", None), ("x", None),
])
def test_related_forms_turn_a_doer_into_its_root(query: str, forms: str | None) -> None:
    assert related_forms(query) == forms


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_related_forms_of_any_text(query: str) -> None:
    forms = related_forms(query)
    if forms is not None:  # only words change: the query keeps its clauses, and a second pass changes nothing
        assert len(parse_query(forms).clauses) == len(parse_query(query).clauses)
        assert related_forms(forms) is None


# ------------------------------------------------------------------------ analysis
# One test per rule of the analyzer (see vaultlcm.index.query); every backend must
# give exactly these hits, so both backends give the same ones.

ANALYSIS = [
    msg("m-pin1", "We pinned the numpy version last week.", 1000.0),
    msg("m-pin2", "Always pin dependencies; pins keep builds repeatable.", 1100.0),
    msg("m-ret1", "The client retries three times, then gives up.", 1200.0),
    msg("m-ret2", "Set retry to 5 and add max_retries to the config.", 1300.0),
    msg("m-dep1", "Two deploys of routing-api failed today.", 1400.0),
    msg("m-dep2", "We deployed it again; the deploy went fine.", 1500.0),
    msg("m-tk1", "Ticket LEDG-482 tracks the rounding bug in compute_due_date.", 1600.0),
    msg("m-tk2", "LEDG-4821 is a different ticket about compute_due_dates in src/app.py.", 1700.0),
    msg("m-ver", "Released v2.14.1 on port 8443; v2.14.10 comes next, then port 84430.", 1800.0),
    msg("m-call", "tool call_0042 returned ok; call_00420 was another one", 1900.0),
    msg("m-path", "Edit src/app.py and src/apps/main.py, not docs/app.md", 2000.0),
    msg("m-cjk1", "日本語のテキストを検索します", 2100.0),
    msg("m-cjk2", "東京サーバーにデプロイした", 2200.0),
    msg("m-ko", "서울에서 배포했습니다", 2300.0),
    msg("m-mix", "deploy完了: v3.0.0をリリース、сервер перезапущен, Ελληνικά κείμενο", 2400.0),
]


@pytest.fixture
def ax(make) -> SearchIndex:
    index = make("analysis")
    index.add(ANALYSIS)
    return index


@pytest.mark.parametrize(
    "query, expected",
    [
        ("pinned", {"m-pin1", "m-pin2"}),  # pinned ~ pin ~ pins
        ("pin", {"m-pin1", "m-pin2"}),
        ("retry", {"m-ret1", "m-ret2"}),  # retry ~ retries (and the part of max_retries)
        ("retries", {"m-ret1", "m-ret2"}),
        ("deploys", {"m-dep1", "m-dep2", "m-mix"}),  # deploys ~ deployed ~ deploy
        ("Deploying", {"m-dep1", "m-dep2", "m-mix"}),
        ("deploys failed", {"m-dep1"}),
        ("gives", {"m-ret1"}),
        ('"pinned"', {"m-pin1"}),  # quotes: this form only
        ('"deploys"', {"m-dep1"}),
        ('"deploy went"', {"m-dep2"}),
        ('"deploys fail"', set()),
        ("pinn*", {"m-pin1"}),  # prefixes match written forms, not stems
    ],
)
def test_stemmed_words(ax: SearchIndex, query: str, expected: set[str]) -> None:
    assert set(ids(ax.search(query))) == expected


@pytest.mark.parametrize(
    "query, expected",
    [
        ("LEDG-482", {"m-tk1"}),
        ("LEDG-4821", {"m-tk2"}),
        ("ledg", {"m-tk1", "m-tk2"}),
        ("compute_due_date", {"m-tk1"}),  # identifiers are never stemmed
        ("compute_due_dates", {"m-tk2"}),
        ("due_date", {"m-tk1"}),
        ("call_0042", {"m-call"}),
        ("call_00420", {"m-call"}),
        ("0042", {"m-call"}),
        ("LEDG-482 rounding", {"m-tk1"}),
    ],
)
def test_identifiers_match_exactly(ax: SearchIndex, query: str, expected: set[str]) -> None:
    assert set(ids(ax.search(query))) == expected


@pytest.mark.parametrize(
    "query, expected",
    [
        ("8443", {"m-ver"}),
        ("844", set()),
        ("84430", {"m-ver"}),
        ("v2.14.1", {"m-ver"}),
        ("v2.14.10", {"m-ver"}),
        ("v2.14.2", set()),
        ("14", {"m-ver"}),
        ("v3.0.0", {"m-mix"}),
        ("482", {"m-tk1"}),
    ],
)
def test_numbers_and_versions(ax: SearchIndex, query: str, expected: set[str]) -> None:
    assert set(ids(ax.search(query))) == expected
    assert set(ids(ax.search("v2.14.1"))) == set(ids(ax.search("v2.14.10")))  # both in one message


@pytest.mark.parametrize(
    "query, expected",
    [
        ("src/app.py", {"m-tk2", "m-path"}),
        ("src/apps/main.py", {"m-path"}),
        ("docs/app.md", {"m-path"}),
        ("app.py", {"m-tk2", "m-path"}),
        ("apps", {"m-tk2", "m-path"}),  # a plain word is stemmed: apps finds the part app
        ('"apps"', {"m-path"}),
        ("src/ap*", {"m-tk2", "m-path"}),
        ("src/app.md", set()),
    ],
)
def test_paths(ax: SearchIndex, query: str, expected: set[str]) -> None:
    assert set(ids(ax.search(query))) == expected


@pytest.mark.parametrize(
    "query, expected",
    [
        ("日本", {"m-cjk1"}),  # a word inside unspaced text
        ("テキスト", {"m-cjk1"}),
        ("本語のテ", {"m-cjk1"}),
        ("日本語のテキストを検索します", {"m-cjk1"}),
        ("本日", set()),  # characters in the wrong order
        ("デプロイ", {"m-cjk2"}),
        ("サーバー", {"m-cjk2"}),  # the prolonged sound mark is part of the word
        ("서울", {"m-ko"}),
        ("배포", {"m-ko"}),
    ],
)
def test_cjk_text(ax: SearchIndex, query: str, expected: set[str]) -> None:
    assert set(ids(ax.search(query))) == expected


@pytest.mark.parametrize(
    "query, expected",
    [
        ("完了", {"m-mix"}),
        ("deploy完了", {"m-mix"}),
        ("リリース v3.0.0", {"m-mix"}),
        ("сервер", {"m-mix"}),
        ("СЕРВЕР", {"m-mix"}),
        ("ελληνικά", {"m-mix"}),
        ("перезапущен сервер", {"m-mix"}),
    ],
)
def test_mixed_scripts(ax: SearchIndex, query: str, expected: set[str]) -> None:
    assert set(ids(ax.search(query))) == expected


def test_snippets_show_stemmed_matches(ax: SearchIndex) -> None:
    (hit,) = ax.search("gives")
    assert "gives up" in hit.snippet
    hits = {h.id: h.snippet for h in ax.search("retry")}
    assert "retries" in hits["m-ret1"] and "retry" in hits["m-ret2"]


_ANALYSIS_CASES = [
    (q, e) for test in (test_stemmed_words, test_identifiers_match_exactly, test_numbers_and_versions, test_paths,
                        test_cjk_text, test_mixed_scripts)
    for mark in test.pytestmark if mark.name == "parametrize" for q, e in mark.args[1]
]


def test_stemmer_agrees_with_tantivy_en_stem() -> None:
    """The stem tokens are Tantivy's English stemmer's: the same algorithm, word for word."""
    tantivy = pytest.importorskip("tantivy")
    from vaultlcm.index.query import word_stem

    words = sorted({w.lower() for w in (ROOT / "docs").joinpath("FORMAT.md").read_text(encoding="utf-8").split()
                    if w.isascii() and w.isalpha()} | {
        "pinned", "pin", "retries", "retry", "deploys", "deployed", "deployment", "added", "happily", "dying",
        "generously", "international", "skies", "news", "running", "hoping", "relational", "conditional",
    })
    en_stem = (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace())
               .filter(tantivy.Filter.lowercase()).filter(tantivy.Filter.stemmer("english")).build())
    theirs = en_stem.analyze(" ".join(words))
    assert len(theirs) == len(words) > 100
    assert [word_stem(w) for w in words] == theirs


# Identifier-heavy text: joiners, underscores, camelCase, digits, CJK, case folding oddities.
_TOKEN_TEXT = st.one_of(
    st.text(),
    st.text(alphabet=st.sampled_from(list("aBcZ9_-./:@\\ \t\r\n日本語한é\u200bİßΣ")), max_size=120),
)


@settings(max_examples=400, deadline=None)
@given(_TOKEN_TEXT)
def test_index_terms_are_the_tokens_without_offsets(text: str) -> None:
    """The indexing path (cached per chunk, no offsets) yields exactly what the snippet path sees."""
    from vaultlcm.index.query import _chunk_tokens, _chunks, index_terms, iter_tokens

    full = list(iter_tokens(text))
    assert index_terms(text) == [(tok, pos) for tok, pos, _s, _e in full]
    assert list(iter_tokens(text)) == full  # the second call comes from the cache
    for tok, pos, start, end in full:
        assert 0 <= start < end <= len(text) and pos >= 0 and tok
    # A chunk tokenizes the same alone as inside the text (what makes caching by chunk sound).
    for m in _chunks(text):
        tokens, _width = _chunk_tokens(m.group())
        assert [(t, s + m.start()) for t, _p, s, _e in tokens] == [
            (t, s) for t, _p, s, _e in full if m.start() <= s < m.end()][: len(tokens)]



@settings(max_examples=300, deadline=None)
@given(st.lists(_TOKEN_TEXT, min_size=1, max_size=6))
def test_token_maker_makes_the_index_terms_whatever_it_remembers(texts: list[str]) -> None:
    """The bulk path's tokens (made straight into objects, chunks remembered across texts, its tables
    cleared when full) are :func:`index_terms`, token for token, position for position."""
    from vaultlcm.index import query
    from vaultlcm.index.query import TokenMaker, index_terms

    for cache in (query.CHUNK_CACHE, 2):  # 2: the tables fill and are cleared within a text
        maker = TokenMaker(lambda tok, pos, _start, _end: (tok, pos))
        old, query.CHUNK_CACHE = query.CHUNK_CACHE, cache
        try:
            for text in texts + texts:  # the second round comes from what it remembered
                assert maker.tokens(text) == index_terms(text)
        finally:
            query.CHUNK_CACHE = old


def test_tantivy_documents_carry_the_index_terms() -> None:
    tantivy = pytest.importorskip("tantivy")
    from vaultlcm.index.query import index_terms
    from vaultlcm.index.tantivy_backend import _TOKENS

    text = "Deployed src/app.py HTTPServer retries 日本 call_0042 deployed"
    assert [(t.text, t.position) for t in _TOKENS.tokens(text)] == index_terms(text)
    assert all(isinstance(t, tantivy.Token) for t in _TOKENS.tokens(text))


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(alphabet=st.characters(max_codepoint=127)), _TOKEN_TEXT,
                 st.text(alphabet=st.sampled_from(list("aZ9_-./ \n–—…·↗→“”«»×日é")), max_size=80)))
def test_chunks_are_the_full_patterns_whichever_pattern_runs(text: str) -> None:
    """ASCII text (and text whose only other characters are common separators) is chunked by ``re``
    (faster): the same chunks, at the same offsets, as the full ``regex`` pattern."""
    import regex

    from vaultlcm.index.query import _CHUNK, _CHUNK_CJK, _chunks, chunk_tokens, iter_tokens, text_chunks

    assert [m.span() for m in _chunks(text)] == [m.span() for m in _CHUNK_CJK.finditer(text)]
    assert [m.group() for m in _chunks(text)] == _CHUNK_CJK.findall(text) == text_chunks(text)
    if text.isascii():
        reference = regex.compile(_CHUNK.pattern)
        assert [m.span() for m in _CHUNK.finditer(text)] == [m.span() for m in reference.finditer(text)]
    # text_chunks and chunk_tokens group iter_tokens by chunk
    grouped = [tok for chunk in text_chunks(text) for tok in chunk_tokens(chunk)]
    assert grouped == [tok for tok, _p, _s, _e in iter_tokens(text)]

# --------------------------------------------------------- sorting, counting, paging

DAY = 86400.0
TIMELINE = [
    # the same words everywhere, so all relevance scores tie
    msg("m-t1", "deadline moved to October 3", 10 * DAY + 100, role="user"),
    msg("m-t2", "deadline moved to October 4", 11 * DAY + 100, role="assistant"),
    msg("m-t3", "deadline moved to October 5", 11 * DAY + 100, role="user"),  # same time as m-t2
    msg("m-t4", "deadline moved to October 6", 13 * DAY + 5, conv="c2"),
    summ("sum_t", "deadline moved to October 3, then 4, then 5", 12 * DAY),
]
# m-t3 comes after m-t2 in its conversation
TIMELINE = [d if d.id != "m-t3" else IndexDoc(**{**d.__dict__, "seq": 3}) for d in TIMELINE]
TIMELINE = [d if d.id != "m-t2" else IndexDoc(**{**d.__dict__, "seq": 2}) for d in TIMELINE]


@pytest.fixture
def tx(make) -> SearchIndex:
    index = make("timeline")
    index.add(TIMELINE)
    return index


def test_sort_newest_and_oldest(tx: SearchIndex) -> None:
    assert ids(tx.search("deadline", sort="newest")) == ["m-t4", "sum_t", "m-t3", "m-t2", "m-t1"]
    assert ids(tx.search("deadline", sort="oldest")) == ["m-t1", "m-t2", "m-t3", "sum_t", "m-t4"]
    assert ids(tx.search("deadline", sort="newest", kind="message", conversations=["c1"])) == ["m-t3", "m-t2", "m-t1"]
    assert ids(tx.search("deadline", sort="oldest", since=11 * DAY, before=13 * DAY)) == ["m-t2", "m-t3", "sum_t"]
    assert ids(tx.search("deadline", sort="newest", since=11 * DAY, before=13 * DAY, limit=1)) == ["sum_t"]
    assert all(h.score == 0.0 for h in tx.search("deadline", sort="newest"))
    with pytest.raises(UsageError):
        tx.search("deadline", sort="best")


def test_relevance_ties_are_newest_first(tx: SearchIndex) -> None:
    msgs = tx.search("deadline moved", kind="message")
    assert ids(msgs) == ["m-t4", "m-t3", "m-t2", "m-t1"]  # equal scores: newest first, then later seq
    better = tx.search("october 4")  # m-t2 (and the summary) hold "4"
    assert set(ids(better)) == {"m-t2", "sum_t"}


def test_hits_carry_role_depth_and_seq(tx: SearchIndex) -> None:
    hits = {h.id: h for h in tx.search("deadline", limit=10)}
    assert hits["m-t2"].role == "assistant" and hits["m-t2"].depth == -1 and hits["m-t2"].seq == 2
    assert hits["m-t1"].role == "user"
    assert hits["sum_t"].role == "" and hits["sum_t"].depth == 0
    assert hits["m-t4"].at == 13 * DAY + 5


@pytest.mark.parametrize("sort", ["relevance", "newest", "oldest"])
def test_paging_walks_every_hit_once(make, sort: str) -> None:
    ix = make()
    # ties in score and in time, across several commits (segments)
    for b in range(3):
        ix.add([msg(f"m-{b}-{i:02d}", f"routing-api deploy failed {'again ' * (i % 3)}",
                    at=1000.0 + (i // 4) * 60, conv=f"c{i % 2}") for i in range(b * 20, b * 20 + 20)])
        ix.flush()
    everything = ids(ix.search("deploy failed", limit=200, sort=sort))
    assert len(everything) == 60 == len(set(everything))
    pages = [ids(ix.search("deploy failed", limit=7, offset=o, sort=sort)) for o in range(0, 70, 7)]
    assert [i for page in pages for i in page] == everything
    assert ix.search("deploy failed", offset=60, sort=sort) == []
    with pytest.raises(UsageError):
        ix.search("deploy failed", offset=-1)


def test_count_matches(tx: SearchIndex) -> None:
    c = tx.count_matches("deadline", per_day=True)
    assert c.total == 5 and c.by_kind == {"message": 4, "summary": 1}
    assert c.per_day == {
        "1970-01-11": {"message": 1},
        "1970-01-12": {"message": 2},
        "1970-01-13": {"summary": 1},
        "1970-01-14": {"message": 1},
    }
    assert list(c.per_day) == sorted(c.per_day)
    assert tx.count_matches("deadline").per_day == {}  # only when asked
    assert tx.count_matches("october 4").total == 2
    assert tx.count_matches("deadline", kind="message", conversations=["c1"]).total == 3
    assert tx.count_matches("deadline", since=11 * DAY, before=13 * DAY).total == 3
    assert tx.count_matches("nothing here").total == 0
    assert tx.count_matches("***").total == 0 and tx.count_matches("deadline", conversations=[]).total == 0


def test_count_matches_equals_search(make) -> None:
    ix = make()
    ix.add([msg(f"m-{i}", f"event {'deploy failed' if i % 3 == 0 else 'deploy ok'} run {i}",
                at=1000.0 + i * 7000, conv=f"c{i % 4}") for i in range(300)])
    for query, kw in [("deploy failed", {}), ("deploy", {"conversations": ["c1", "c2"]}),
                      ("failed", {"since": 100_000.0, "before": 900_000.0}), ("run", {"kind": "summary"})]:
        found = ix.search(query, limit=1000, **kw)
        counted = ix.count_matches(query, per_day=True, **kw)
        assert counted.total == len(found) == sum(counted.by_kind.values())
        assert sum(n for day in counted.per_day.values() for n in day.values()) == len(found)
    ix.remove(["m-0", "m-3"])
    assert ix.count_matches("deploy failed").total == 98


def test_relevance_bands_order_newest_first() -> None:
    from vaultlcm.index.buffered import RELEVANCE_BAND, order_rows

    # 0.1234565 and 0.12345649999 round differently at 6 digits; they are one tie.
    rows = [(0.12345649999, 1.0, 0, 0, "old"), (0.1234565, 2.0, 0, 0, "new"), (0.2, 0.0, 0, 0, "best"),
            (0.05, 9.0, 0, 0, "worst")]
    assert [r[4] for r in order_rows(rows, "relevance")] == ["best", "new", "old", "worst"]
    # comparable scores (within the band) come newest first; a clearly better one stays first
    assert RELEVANCE_BAND == 0.3
    band = [(21.2, 100.0, 0, 0, "stale"), (15.3, 200.0, 0, 0, "latest"), (40.0, 50.0, 0, 0, "much better")]
    assert [r[4] for r in order_rows(band, "relevance")] == ["much better", "latest", "stale"]
    # bands do not chain: each score is compared with its band's first score
    chain = [(1.0, 1.0, 0, 0, "a"), (0.75, 2.0, 0, 0, "b"), (0.55, 3.0, 0, 0, "c"), (0.5, 4.0, 0, 0, "d")]
    assert [r[4] for r in order_rows(chain, "relevance")] == ["b", "a", "d", "c"]
    # a band holds at most BAND_SIZE hits, so settling a page's end costs one bounded re-fetch
    from vaultlcm.index.buffered import BAND_SIZE

    # (where equal scores fill more than a band, the newest of them are the first band, whatever order
    # the backend listed them in)
    many = [(1.0, float(k), 0, 0, k) for k in range(BAND_SIZE + 5)]
    assert [r[4] for r in order_rows(many, "relevance")][:BAND_SIZE] == list(range(BAND_SIZE + 4, 4, -1))
    assert order_rows(many[::-1], "relevance") == order_rows(many, "relevance")
    assert order_rows(many[1::2] + many[::2], "relevance") == order_rows(many, "relevance")
    # full ties (score, time, seq) are ordered by the tie key, the same on every backend
    ties = [(1.0, 5.0, 2, key, key) for key in (9, -3, 4)]
    assert [r[4] for r in order_rows(ties, "relevance")] == [-3, 4, 9]
    assert [r[4] for r in order_rows(ties, "newest")] == [-3, 4, 9]


VOCAB = ("deploy deploys deployed failed fail failing retry retries pin pinned pins server servers ok again the "
         "routing-api LEDG-1 LEDG-12 src/app.py call_0042 v2.14.1 8443 日本 語 сервер").split()


def _random_docs(seed: int, batches: int = 5, size: int = 40) -> list[list[IndexDoc]]:
    import random

    rng = random.Random(seed)
    return [[msg(f"m-{b}-{i}", " ".join(rng.choice(VOCAB) for _ in range(rng.randint(2, 12))),
                 at=float(rng.randint(0, 40)), conv=rng.choice(["c1", "c2"])) for i in range(size)]
            for b in range(batches)]


def _random_queries(seed: int, n: int) -> list[str]:
    import random

    rng = random.Random(seed)
    return [" ".join(rng.choice(VOCAB + ['"deploy failed"', "deplo*", '"pins"']) for _ in range(rng.randint(1, 3)))
            for _ in range(n)]


def test_top_k_is_the_head_of_the_full_ranking(make) -> None:
    """Early termination never drops a better document (several segments, words OR stems)."""
    ix = make()
    for batch in _random_docs(3):
        ix.add(batch)
        ix.flush()  # one segment per batch
    for q in _random_queries(4, 25):
        for sort in ("relevance", "newest", "oldest"):
            full = ids(ix.search(q, limit=1000, sort=sort))
            assert ix.count_matches(q).total == len(full), q
            for k in (1, 3, 7):
                assert ids(ix.search(q, limit=k, sort=sort)) == full[:k], (q, sort, k)


def test_pages_after_a_count_are_those_of_a_fresh_search(make) -> None:
    """grep counts by kind, then pages each kind: what a count keeps for the pages must be what a search gives.

    Both kinds, several segments, pages past what a count keeps (tantivy keeps 128 a kind),
    compared with an index of the same documents that is never counted.
    """
    batches = _random_docs(5, batches=4, size=120)
    for b, batch in enumerate(batches):  # a third of them summaries
        batch[::3] = [summ(d.id.replace("m-", "s-"), d.text, at=d.at, conv=d.conversation) for d in batch[::3]]
    counted, fresh = make("counted"), make("fresh")
    for batch in batches:
        for index in (counted, fresh):
            index.add(batch)
            index.flush()
    for q in _random_queries(6, 20) + ["deploy", "pin", '"deploy failed"']:
        c = counted.count_matches(q)
        assert (c.total, c.by_kind) == (lambda f: (f.total, f.by_kind))(fresh.count_matches(q, per_day=True)), q
        for kind in ("message", "summary"):
            for offset, limit in ((0, 20), (0, 1), (20, 20), (100, 40), (0, 200)):
                got = counted.search(q, kind=kind, offset=offset, limit=limit)
                want = fresh.search(q, kind=kind, offset=offset, limit=limit)
                assert [(h.id, round(h.score, 9)) for h in got] == [(h.id, round(h.score, 9)) for h in want], \
                    (q, kind, offset, limit)


def test_a_commit_between_count_and_page_is_seen(make) -> None:
    ix = make()
    ix.add([msg(f"m-{i}", f"deploy step {i}", at=1000.0 + i) for i in range(50)])
    assert ix.count_matches("deploy").by_kind["message"] == 50
    ix.add([msg("m-new", "deploy deploy deploy", at=9000.0)])  # the best match, committed by the next search
    assert ids(ix.search("deploy", kind="message", limit=1)) == ["m-new"]
    assert ix.count_matches("deploy").by_kind["message"] == 51
    ix.remove(["m-new"])
    assert "m-new" not in ids(ix.search("deploy", kind="message", limit=5))


def test_both_backends_give_the_same_hits(tmp_path: Path) -> None:
    pytest.importorskip("tantivy")
    indexes = {b: open_index(b, tmp_path / b) for b in BACKENDS}
    try:
        for batch in _random_docs(5):
            for ix in indexes.values():
                ix.add(batch)
                ix.flush()
        for ix in indexes.values():
            ix.add(ANALYSIS + TIMELINE)
        queries = _random_queries(6, 25) + [q for q, _ in _ANALYSIS_CASES]
        for q in queries:
            w, t = (indexes[b] for b in BACKENDS)
            assert set(ids(w.search(q, limit=1000))) == set(ids(t.search(q, limit=1000))), q
            for sort in ("newest", "oldest"):  # the same order, to the last tie
                assert ids(w.search(q, limit=1000, sort=sort)) == ids(t.search(q, limit=1000, sort=sort)), (q, sort)
            assert w.count_matches(q, per_day=True) == t.count_matches(q, per_day=True), q
            anyw, anyt = (ix.search(q, limit=1000, match="any") for ix in (w, t))
            assert {(h.id, h.matched) for h in anyw} == {(h.id, h.matched) for h in anyt}, q
            assert [len(h.matched or ()) for h in anyw] == [len(h.matched or ()) for h in anyt], q
            assert w.count_matches(q, match="any") == t.count_matches(q, match="any"), q
    finally:
        for ix in indexes.values():
            ix.close()


# ------------------------------------------------------------- some of the words

SOME = [
    msg("m-s1", "The routing-api deploy failed: disk full on build-7.", 1000.0),
    msg("m-s2", "The deploy went fine after the cleanup.", 2000.0),
    msg("m-s3", "Disk usage alert on build-9, nothing failed.", 3000.0),
    msg("m-s4", "Lunch order: two coffees.", 4000.0),
    msg("m-s5", "LEDG-482: refunds post twice; deploy held.", 5000.0),
    summ("sum_s", "deploy failed twice, disk full, then fixed", 6000.0),
]


@pytest.fixture
def sx(make) -> SearchIndex:
    index = make("some")
    index.add(SOME)
    return index


def test_match_any_ranks_by_words_matched(sx: SearchIndex) -> None:
    """match="any": one plain word is enough, more words first, each hit says which words it has."""
    hits = sx.search("deploy failed disk", match="any", limit=50)
    assert set(ids(hits)) == {"m-s1", "m-s2", "m-s3", "m-s5", "sum_s"}
    tiers = [len(h.matched or ()) for h in hits]
    assert tiers == sorted(tiers, reverse=True) and tiers[0] == 3
    assert {h.id for h in hits if len(h.matched or ()) == 3} == {"m-s1", "sum_s"} == set(ids(sx.search("deploy failed disk")))
    by_id = {h.id: h for h in hits}
    assert by_id["m-s3"].matched == ("failed", "disk") and by_id["m-s2"].matched == ("deploy",)
    assert all(h.matched is None for h in sx.search("deploy failed disk"))  # only under match="any"
    assert sx.count_matches("deploy failed disk", match="any").total == len(hits)
    assert sx.count_matches("deploy failed disk", match="any", kind="message").by_kind == {"message": 4, "summary": 0}
    with pytest.raises(UsageError):
        sx.search("deploy", match="some")


def test_match_any_keeps_identifiers_and_phrases_required(sx: SearchIndex) -> None:
    assert ids(sx.search("LEDG-482 deploy failed", match="any")) == ["m-s5"]
    assert set(ids(sx.search('"disk full" deploy lunch', match="any", limit=50))) == {"m-s1", "sum_s"}
    assert ids(sx.search("build-9 disk deploy", match="any")) == ["m-s3"]


def test_some_words_docs_estimates_from_document_frequencies(sx: SearchIndex) -> None:
    """The cost guard of match="any": per plain word, the documents holding its commonest form."""
    assert sx.some_words_docs("deploy failed disk") == 4 + 3 + 3
    assert sx.some_words_docs("LEDG-482 deploy") == 4  # identifiers are required, not scored as options
    assert sx.some_words_docs("LEDG-482") == 0 and sx.some_words_docs("zebra") == 0 and sx.some_words_docs("") == 0


def test_match_any_pages_like_it_ranks(sx: SearchIndex) -> None:
    whole = ids(sx.search("deploy failed disk", match="any", limit=50))
    pages = [ids(sx.search("deploy failed disk", match="any", limit=2, offset=o)) for o in range(0, 6, 2)]
    assert [i for page in pages for i in page] == whole


ROOTS = [
    msg("m-r1", "Run the formatter before committing.", 1000.0),
    msg("m-r2", "The format of the export file changed.", 1100.0),
    msg("m-r3", "deployment of routing-api finished; deployctl status is green", 1200.0),
    msg("m-r4", "The routing table was rebuilt.", 1300.0),
    msg("m-r5", "A routine check found nothing.", 1400.0),
    msg("m-r6", "See the configuration in config/app.toml", 1500.0),
    msg("m-r7", "Configure it later.", 1600.0),
]


@pytest.mark.parametrize(
    "query, expected",
    [
        ("formatter", {"m-r1"}),  # a stem, not a prefix: formatt
        ("format", {"m-r2"}),
        ("deploy", {"m-r3"}),  # deployment stems to deploy; deployctl is another word
        ("deploy*", {"m-r3"}),  # a prefix asks for every word starting with it
        ("routine", {"m-r5"}),  # routin: routing (rout) is another word
        ("routing", {"m-r3", "m-r4"}),
        ("config", {"m-r6"}),  # the part of config/app.toml (configuration stems to configur)
        ("configurations", {"m-r6", "m-r7"}),  # configuration, configure: one stem
        ('"format"', {"m-r2"}),
    ],
)
def test_stems_are_forms_not_prefixes(make, query: str, expected: set[str]) -> None:
    ix = make("roots")
    ix.add(ROOTS)
    assert set(ids(ix.search(query))) == expected


# ------------------------------------------------------------------------- filters


def test_kind_filter(ix: SearchIndex) -> None:
    assert ids(ix.search("deploy", kind="summary")) == ["sum_a1"]
    assert ids(ix.search('"deploy"', kind="message")) == ["m-0001"]
    with pytest.raises(UsageError):
        ix.search("deploy", kind="note")


def test_conversation_filter(ix: SearchIndex) -> None:
    assert set(ids(ix.search("8443", conversations=["c2"]))) == {"m-0004", "sum_b2"}
    assert ids(ix.search("8443", conversations=["c1"])) == []
    assert set(ids(ix.search("disk", conversations=["c1", "c2"]))) == {"m-0001", "m-0002", "sum_a1"}
    assert ids(ix.search("disk", conversations=[])) == []


def test_time_filters(ix: SearchIndex) -> None:
    assert set(ids(ix.search("disk", since=2000.0))) == {"m-0002", "sum_a1"}  # since is inclusive
    assert ids(ix.search("disk", before=2000.0)) == ["m-0001"]  # before is exclusive
    assert ids(ix.search("disk", since=1500.0, before=2500.0)) == ["m-0002"]
    assert ids(ix.search("disk", since=9000.0)) == []


def test_limit_and_ties_newest_first(make) -> None:
    ix = make()
    ix.add([msg(f"m-{i:04d}", "same words here", at=float(i)) for i in range(30)])
    hits = ix.search("same words", limit=5)
    assert ids(hits) == [f"m-{i:04d}" for i in (29, 28, 27, 26, 25)]
    assert len(ix.search("same", limit=100)) == 30
    assert ix.search("same", limit=0) == []


def test_ranking_prefers_better_matches(ix: SearchIndex) -> None:
    hits = ix.search("disk")
    assert hits[0].score >= hits[-1].score
    assert all(h.score > 0 for h in hits)


# ----------------------------------------------------------------------- snippets


def test_snippets_contain_the_match(make) -> None:
    ix = make()
    long_text = ("filler words go here. " * 40) + "the needle_in_haystack\nis here\n\n" + ("more filler. " * 40)
    ix.add([msg("m-1", long_text), msg("m-2", "short text with Needle")])
    (hit,) = ix.search("needle_in_haystack")
    assert "needle_in_haystack" in hit.snippet
    assert "\n" not in hit.snippet
    assert len(hit.snippet) <= 210
    assert hit.snippet.startswith("…")
    assert "Needle" in ix.search("needle")[0].snippet
    assert "needle_in_haystack" in ix.search("needle_in*")[0].snippet
    assert hit.kind == "message" and hit.conversation == "c1" and hit.at == 1000.0


# ------------------------------------------------------------------ write semantics


def test_upsert_replaces(ix: SearchIndex) -> None:
    ix.add([msg("m-0001", "completely different words", 1000.0)])
    assert ids(ix.search('"disk is full"')) == []
    assert ids(ix.search("completely different")) == ["m-0001"]
    assert ix.count() == len(CORPUS)
    ix.flush()
    ix.add([msg("m-0001", "third version", 1000.0)])
    assert ids(ix.search("completely")) == []
    assert ix.count() == len(CORPUS)


def test_remove(ix: SearchIndex) -> None:
    ix.remove(["m-0001", "does-not-exist"])
    assert ids(ix.search('"disk is full"')) == []
    assert ix.count() == len(CORPUS) - 1
    assert "m-0001" not in ix.stored_hashes()
    ix.add([msg("m-0001", "back again")])
    assert ids(ix.search("back again")) == ["m-0001"]


def test_search_sees_adds_without_explicit_flush(make) -> None:
    ix = make(commit_interval=60.0)  # the background thread would wait a minute
    ix.add([msg("m-1", "visible immediately")])
    assert ids(ix.search("visible")) == ["m-1"]
    ix.remove(["m-1"])
    assert ids(ix.search("visible")) == []


def test_background_thread_commits_batches(make) -> None:
    writer = make("shared", commit_interval=0.05)
    reader = make("shared")  # the writer lock is taken: this one is read-only
    assert writer.writable and not reader.writable
    writer.add([msg("m-1", "committed in the background")])
    deadline = time.monotonic() + 10
    while not reader.search("background") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ids(reader.search("background")) == ["m-1"]


def test_concurrent_adds_from_threads(make) -> None:
    ix = make(commit_interval=0.01, batch_docs=50)

    def worker(t: int) -> None:
        for i in range(100):
            ix.add([msg(f"m-{t}-{i}", f"thread{t} item{i} common")])
            if i % 25 == 0:
                ix.search("common")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert ix.count() == 400
    assert len(ix.search("common", limit=1000)) == 400


def test_stored_hashes(ix: SearchIndex) -> None:
    assert ix.stored_hashes() == {d.id: d.content_hash for d in CORPUS}
    ix.add([IndexDoc("m-0001", "message", "c1", "changed", 1000.0, content_hash="new")])
    assert ix.stored_hashes()["m-0001"] == "new"


def test_rebuild_equals_incremental(make) -> None:
    inc = make("inc")
    for d in CORPUS:
        inc.add([d])
        inc.flush()  # many small commits
    seen: list[int] = []
    bulk = make("bulk")
    bulk.add([msg("stale", "will be dropped by the rebuild")])
    dup = msg("m-0005", "an older version of m-0005 that the later one replaces")
    n = bulk.rebuild(iter([dup, *CORPUS]), progress=seen.append)
    assert n == len(CORPUS) and seen and seen[-1] == len(CORPUS)
    assert bulk.count() == inc.count() == len(CORPUS)
    assert bulk.stored_hashes() == inc.stored_hashes()
    for q in ["disk", '"disk is full"', "deplo*", "src/app.py", "8443", "lunch", "older", "dropped"]:
        assert ids(bulk.search(q)) == ids(inc.search(q)), q


def test_seeding_random_does_not_corrupt_the_index(make) -> None:
    """A program that seeds the global random module (hypothesis does, per example) keeps a sound index."""
    import random

    ix = make(commit_interval=60.0)
    for i in range(12):
        random.seed(0)  # whoosh used to draw every segment's name from here: the same name each time
        ix.add([msg(f"m-{i}", f"entry number{i} seeded")])
        ix.flush()
    random.seed(0)
    assert ix.rebuild([msg(f"m-{i}", f"entry number{i} seeded") for i in range(12)] + CORPUS) == 12 + len(CORPUS)
    random.seed(0)
    ix.add([msg("m-last", "after the rebuild seeded")])
    assert len(ix.search("seeded", limit=100)) == 13 and ids(ix.search("number7")) == ["m-7"]


def test_rebuild_replaces_and_then_accepts_adds(ix: SearchIndex) -> None:
    assert ix.rebuild([msg("m-9", "only this one")]) == 1
    assert ix.count() == 1 and ids(ix.search("disk")) == []
    ix.add([msg("m-10", "added after the rebuild")])
    assert ids(ix.search("added")) == ["m-10"] and ix.count() == 2
    assert ix.rebuild([]) == 0 and ix.count() == 0


def test_reopen_after_close_keeps_docs(make, backend: str, tmp_path: Path) -> None:
    ix = make("keep", commit_interval=60.0)
    ix.add(CORPUS)
    ix.close()  # flushes the buffer
    ix.close()  # idempotent
    with pytest.raises(IndexError_):
        ix.search("disk")
    again = make("keep")
    assert again.count() == len(CORPUS)
    assert ids(again.search('"disk is full"')) == ["m-0001"]


def test_bad_documents_are_rejected(make) -> None:
    ix = make()
    with pytest.raises(UsageError):
        ix.add([IndexDoc("x", "note", "c", "t", 0.0)])
    with pytest.raises(UsageError):
        open_index("lucene", Path("/nonexistent"))


# --------------------------------------------------------------------- robustness


def _corrupt_wrong_version(p: Path) -> None:
    meta = json.loads((p / VERSION_FILE).read_text())
    meta["schema_version"] = 999
    (p / VERSION_FILE).write_text(json.dumps(meta))


def _corrupt_garbage(p: Path) -> None:
    for f in p.iterdir():
        if f.is_file() and f.name not in (VERSION_FILE, "writer.lock", "writer.pid"):
            f.write_bytes(b"\x00garbage\xff" * 7)


def _corrupt_missing(p: Path) -> None:
    for f in p.iterdir():
        if f.is_file() and f.name not in (VERSION_FILE, "writer.lock", "writer.pid"):
            f.unlink()


def _corrupt_no_version(p: Path) -> None:
    (p / VERSION_FILE).unlink()


def _corrupt_bad_json(p: Path) -> None:
    (p / VERSION_FILE).write_text("{not json")


@pytest.mark.parametrize(
    "corrupt", [_corrupt_wrong_version, _corrupt_garbage, _corrupt_missing, _corrupt_no_version, _corrupt_bad_json]
)
def test_corrupt_index_raises_index_unavailable(make, tmp_path: Path, corrupt) -> None:
    ix = make("bad")
    ix.add(CORPUS)
    ix.close()
    corrupt(tmp_path / "bad")
    with pytest.raises(IndexUnavailable) as err:
        make("bad")
    assert str(err.value).endswith("Rebuild it with `vaultlcm reindex`.")
    assert err.value.reason and "reindex" not in err.value.reason  # what is wrong, for a caller that rebuilds itself
    fresh = make("bad", reset=True)  # the way back: wipe, then rebuild
    assert fresh.count() == 0
    assert fresh.rebuild(CORPUS) == len(CORPUS)
    assert ids(fresh.search('"disk is full"')) == ["m-0001"]


def test_other_backends_index_is_unavailable(make, backend: str, tmp_path: Path) -> None:
    other = "tantivy" if backend == "whoosh" else "whoosh"
    if other == "tantivy":
        pytest.importorskip("tantivy")
    theirs = open_index(other, tmp_path / "x")
    theirs.add([IndexDoc("m-1", "message", "c", "kept as it was", 1.0)])
    theirs.close()
    with pytest.raises(IndexOtherBackend) as err:
        make("x")
    assert err.value.found == other and isinstance(err.value, IndexUnavailable)
    again = open_index(other, tmp_path / "x")  # refused, not touched: the other backend still opens it whole
    try:
        assert again.count() == 1 and [h.id for h in again.search("kept")] == ["m-1"]
    finally:
        again.close()


_CHILD = textwrap.dedent(
    """
    import json, sys
    from vaultlcm.index import open_index
    from vaultlcm.index.base import IndexDoc, IndexLocked
    ix = open_index(sys.argv[1], sys.argv[2], lock_timeout=0.3)
    out = {"writable": ix.writable, "hits": [h.id for h in ix.search("disk")]}
    try:
        ix.add([IndexDoc("child", "message", "c", "from the child", 1.0)])
        ix.flush()
        out["add"] = "ok"
    except IndexLocked as exc:
        out["add"] = "locked: " + str(exc)
    out["after"] = [h.id for h in ix.search("child")]
    ix.close()
    print(json.dumps(out))
    """
)


def _run_child(backend: str, path: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, backend, str(path)], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_second_process_can_search_but_not_write(make, backend: str, tmp_path: Path) -> None:
    ix = make("two")
    ix.add(CORPUS)
    ix.flush()
    child = _run_child(backend, tmp_path / "two")
    assert child["writable"] is False
    assert set(child["hits"]) == {"m-0001", "m-0002", "sum_a1"}
    assert child["add"].startswith("locked: ") and "another process" in child["add"]
    assert child["after"] == []
    with pytest.raises(IndexLocked):  # a second object in this process is a reader too
        make("two", lock_timeout=0.1).add([msg("x", "y")])
    ix.close()
    child = _run_child(backend, tmp_path / "two")  # the lock is free now
    assert child["add"] == "ok" and child["after"] == ["child"]
    assert ids(make("two").search("child")) == ["child"]


def test_reader_upgrades_to_writer_when_the_lock_frees(make) -> None:
    first = make("up")
    second = make("up")
    assert not second.writable
    first.close()
    second.add([msg("m-1", "written by the second")])
    assert second.writable and ids(second.search("second")) == ["m-1"]


# ---------------------------------------------------------------- query fuzzing


@pytest.fixture(scope="module", params=BACKENDS)
def shared_ix(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SearchIndex]:
    if request.param == "tantivy":
        pytest.importorskip("tantivy")
    ix = open_index(request.param, tmp_path_factory.mktemp(f"fuzz-{request.param}"))
    ix.add(CORPUS)
    ix.add([msg(f"m-x{i}", f"extra document {i} with unicode ünïcödé 日本語 and e\u0301 and \u200b zero width") for i in range(20)])
    yield ix
    ix.close()


_QUERY_CHARS = st.sampled_from(list('*"()[]{}:^~\\/-_.+!?&|@#$%\'` \t\n') + ["AND", "OR", "NOT", "disk", "src/app.py", "é", "日本", "\u200b", "\x00"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.one_of(st.text(max_size=40), st.lists(_QUERY_CHARS, max_size=12).map("".join)))
def test_arbitrary_queries_never_raise(shared_ix: SearchIndex, query: str) -> None:
    hits = shared_ix.search(query, limit=5)
    assert len(hits) <= 5
    for h in hits:
        assert isinstance(h.snippet, str) and "\n" not in h.snippet


# ------------------------------------------------------------------ whoosh merges


def test_whoosh_background_merge_keeps_results_exact(tmp_path: Path) -> None:
    from vaultlcm.index.whoosh_backend import WhooshIndex

    ix = WhooshIndex(tmp_path / "merge", commit_interval=0.02)
    ix.merge_threshold = 4

    def merging() -> bool:  # merges start and finish under the write lock
        with ix._write_lock:
            return ix._merge is not None

    try:
        for b in range(8):  # eight commits -> eight segments
            ix.add([msg(f"m-{b}-{i}", f"hello batch{b} doc{b}x{i}", at=float(b * 100 + i)) for i in range(20)])
            ix.flush()
        ix.add([msg("trigger", "wake the committer")])
        deadline = time.monotonic() + 20
        while not merging() and time.monotonic() < deadline:
            time.sleep(0.02)
        # Change documents of the segments being merged while the merge runs.
        ix.remove(["m-0-0", "m-1-1"])
        ix.add([msg("m-2-2", "replaced while merging")])
        ix.flush()
        while merging() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(list(ix._ix._segments())) < 8
        assert ix.count() == 8 * 20 - 2 + 1
        assert ids(ix.search("doc0x0")) == [] and ids(ix.search("doc1x1")) == []
        assert ids(ix.search("replaced")) == ["m-2-2"] and ids(ix.search("doc2x2")) == []
        assert len(ix.search("hello", limit=1000)) == 8 * 20 - 3
        with ix._write_lock:
            assert ix._merge is not None or not list((tmp_path / "merge").glob("merge-*"))
    finally:
        ix.close()


def test_tantivy_missing_gives_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tantivy", None)
    monkeypatch.delitem(sys.modules, "vaultlcm.index.tantivy_backend", raising=False)
    with pytest.raises(IndexError_, match=r"pip install 'vaultlcm\[tantivy\]'"):
        import vaultlcm.index.tantivy_backend  # noqa: F401


@pytest.fixture(scope="module", params=BACKENDS)
def prop_ix(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SearchIndex]:
    if request.param == "tantivy":
        pytest.importorskip("tantivy")
    ix = open_index(request.param, tmp_path_factory.mktemp(f"prop-{request.param}"))
    ix.add(CORPUS + ANALYSIS)
    yield ix
    ix.close()


_counter = iter(range(10**9))
_WORDY = st.lists(st.sampled_from(list("aeiouy rstdlnpgkx-_./:@\\") + ["ing", "ed", "ies", "日", "本", "サ", "ー", "д", "É", "ß", "3", "42"]),
                  max_size=40).map("".join)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.one_of(st.text(max_size=80), _WORDY))
def test_every_word_of_a_document_finds_it(prop_ix: SearchIndex, text: str) -> None:
    """Whatever the text: each whitespace-separated run of it, as a query, finds the document."""
    n = next(_counter)
    doc_id, conv = f"m-prop{n}", f"prop{n}"
    prop_ix.add([msg(doc_id, text, conv=conv)])
    for run in text.split()[:6]:
        query = run.replace('"', " ").replace("*", " ")
        if not parse_query(query).clauses:
            continue
        assert doc_id in ids(prop_ix.search(query, conversations=[conv])), (text, query)
        assert prop_ix.count_matches(query, conversations=[conv]).total == 1
