"""Whoosh queries evaluated on the postings give exactly Whoosh's own matches and scores."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vaultlcm.index import open_index
from vaultlcm.index.base import Filters, IndexDoc
from vaultlcm.index.query import parse_query
from vaultlcm.index.whoosh_postings import evaluate, supported

WORDS = ["deploy", "deploys", "deployed", "retry", "retries", "src/app.py", "app", "src", "py", "call_42",
         "cache", "index", "timeout", "CamelCase", "camel", "v2.1", "日本"]

docs_st = st.lists(
    st.tuples(st.lists(st.sampled_from(WORDS), min_size=1, max_size=12), st.sampled_from(["message", "summary"]),
              st.sampled_from(["a", "b"]), st.integers(0, 5)),
    min_size=1, max_size=40,
)
query_st = st.one_of(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
    st.lists(st.sampled_from(WORDS), min_size=2, max_size=3).map(lambda ws: '"' + " ".join(ws) + '"'),
)


def _index(path: Path, texts: list[str]) -> Any:
    """A Whoosh index of one message per text (``m-0``, ``m-1`` ...), in one segment."""
    ix = open_index("whoosh", path, reset=True)
    ix.add([IndexDoc(id=f"m-{i}", kind="message", conversation="a", text=t, at=0.0, seq=i)
            for i, t in enumerate(texts)])
    ix.flush()
    return ix


def _matched(ix: Any, query: str, filters: Filters | None = None) -> tuple[dict[int, float], dict[int, float]]:
    """``docnum -> score`` of ``query``'s matches by Whoosh's own matchers, and by :func:`evaluate`."""
    pq, filters = parse_query(query), filters or Filters()
    searcher = ix._searcher
    want = dict(searcher.search(ix._query(pq, filters), limit=None).items())
    return want, dict(evaluate(searcher, pq, filters, ix._column("at")))



@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docs=docs_st, query=query_st, kind=st.sampled_from([None, "message", "summary"]),
       convs=st.sampled_from([None, ("a",), ("a", "b")]), since=st.sampled_from([None, 2.0]),
       batches=st.integers(1, 3), rewrite=st.integers(0, 5))
def test_postings_evaluation_equals_whoosh_matchers(
    tmp_path_factory, docs, query, kind, convs, since, batches, rewrite,
) -> None:
    path: Path = tmp_path_factory.mktemp("ix")
    ix = open_index("whoosh", path, reset=True)
    try:
        made = [IndexDoc(id=f"m-{i}", kind=k, conversation=c, text=" ".join(ws), at=float(day), seq=i)
                for i, (ws, k, c, day) in enumerate(docs)]
        # Several segments, and deleted documents (an upsert deletes the old version).
        step = max(1, math.ceil(len(made) / batches))
        for i in range(0, len(made), step):
            ix.add(made[i : i + step])
            ix.flush()
        if rewrite < len(made):
            old = made[rewrite]
            ix.add([IndexDoc(**{**old.__dict__, "text": old.text + " retry"})])
            ix.flush()
        pq = parse_query(query)
        filters = Filters(kind, convs, since, None)
        if not supported(pq, filters):
            return
        searcher = ix._searcher  # type: ignore[attr-defined]
        want = {}
        at = ix._column("at")  # type: ignore[attr-defined]
        for d, score in searcher.search(ix._query(pq, filters), limit=None).items():  # type: ignore[attr-defined]
            if since is None or at[d] >= since:
                want[d] = score
        got = dict(evaluate(searcher, pq, filters, at))
        assert set(got) == set(want)
        for d, score in want.items():
            assert math.isclose(got[d], score, rel_tol=1e-9), (d, got[d], score)
        # Scored from the table of lengths or by a call per document and word: the very same floats.
        with patch("vaultlcm.index.whoosh_postings._scores_by_table", return_value=None):
            assert dict(evaluate(searcher, pq, filters, at)) == got
        # Counting takes the same evaluation; search and count agree.
        assert ix.count_matches(query, kind=kind, conversations=convs, since=since).total == len(want)
        hits = ix.search(query, kind=kind, conversations=convs, since=since, limit=len(want) + 5)
        assert len(hits) == len(want)
    finally:
        ix.close()


def test_deleted_documents_do_not_match(tmp_path: Path) -> None:
    ix = open_index("whoosh", tmp_path / "ix", reset=True)
    try:
        ix.add([IndexDoc(id=i, kind="message", conversation="c", text=f"deploy {i}", at=1.0) for i in "abc"])
        ix.flush()
        ix.add([IndexDoc(id="a", kind="message", conversation="c", text="retry", at=1.0)])  # deletes the old a
        ix.flush()
        ix.remove(["c"])
        ix.flush()
        found = evaluate(ix._searcher, parse_query("deploy"), Filters(), ix._column("at"))  # type: ignore[attr-defined]
        assert [ix._searcher.stored_fields(d)["id"] for d, _ in found] == ["b"]  # type: ignore[attr-defined]
        assert [h.id for h in ix.search("deploy")] == ["b"] and ix.count_matches("deploy").total == 1
    finally:
        ix.close()


def test_prefixes_and_match_any_go_through_whoosh() -> None:
    assert not supported(parse_query("deploy*"), Filters())
    assert not supported(parse_query("deploy timeout"), Filters(match="any"))
    assert supported(parse_query('src/app.py "cache index" retry'), Filters())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docs=st.lists(st.lists(st.sampled_from(["a", "b", "c", "d", "src/app.py", "call_42"]), min_size=1, max_size=14),
                     min_size=1, max_size=30),
       data=st.data())
def test_a_phrase_taken_from_a_document_matches_as_whoosh_says(tmp_path_factory, docs, data) -> None:
    """Phrases cut from the documents themselves (so most match somewhere), from a small vocabulary (so
    most documents hold every word of one, not always in order), with repeated and rare words anywhere
    in them: the word-by-word check, rarest word first, must keep exactly the documents Whoosh keeps."""
    path: Path = tmp_path_factory.mktemp("ix")
    ix = open_index("whoosh", path, reset=True)
    try:
        ix.add([IndexDoc(id=f"m-{i}", kind="message", conversation="a", text=" ".join(ws), at=0.0, seq=i)
                for i, ws in enumerate(docs)])
        ix.flush()
        source = data.draw(st.sampled_from(docs))
        start = data.draw(st.integers(0, len(source) - 1))
        words = source[start : start + data.draw(st.integers(1, 4))]
        if data.draw(st.booleans()):
            words = list(reversed(words))  # the same words, usually out of order
        query = '"' + " ".join(words) + '"'
        pq = parse_query(query)
        filters = Filters(None, None, None, None)
        if not supported(pq, filters):
            return
        searcher = ix._searcher  # type: ignore[attr-defined]
        want = searcher.search(ix._query(pq, filters), limit=None)  # type: ignore[attr-defined]
        got = dict(evaluate(searcher, pq, filters, ix._column("at")))  # type: ignore[attr-defined]
        assert set(got) == set(want.docs()), query
        for d, score in want.items():
            assert math.isclose(got[d], score, rel_tol=1e-9), (query, d)
    finally:
        ix.close()


@given(tf=st.floats(0.0, 1e6, allow_nan=False), fl=st.one_of(st.integers(0, 1 << 20), st.floats(0.0, 1e7)),
       idf=st.floats(0.0, 50.0), avgfl=st.floats(0.01, 1e6), b=st.floats(0.0, 1.0), k1=st.floats(0.0, 10.0))
def test_the_written_out_bm25_gives_whooshs_floats_exactly(tf, fl, idf, avgfl, b, k1) -> None:
    """The table of lengths scores with ``_length_norm`` in place of Whoosh's own ``bm25``."""
    from whoosh.scoring import bm25

    from vaultlcm.index.whoosh_postings import _length_norm

    try:
        want = bm25(idf, tf, fl, avgfl, b, k1)
    except ZeroDivisionError:
        return
    k1_plus_1 = k1 + 1  # computed once, as the table does
    got = idf * ((tf * k1_plus_1) / (tf + _length_norm(k1, b, avgfl, fl)))
    assert got == want  # equal floats, not close ones: the ranking must not move


def test_a_phrase_whose_word_was_read_before_as_a_plain_word(tmp_path: Path) -> None:
    """The word ``app`` is read first as a clause of its own (the rarer one), without the positions a
    phrase needs; the phrase of the identifier's parts then reads them: Whoosh's matches and scores."""
    texts = ["open src/app.py now", "app src py", "src app py", "src src app py py", "app", "py src app",
             "lib/src/app.py:42 and app", "src/app.py src/app.py", "deploy"] + [f"src py {i}" for i in range(20)]
    ix = _index(tmp_path / "ix", texts)
    try:
        want, got = _matched(ix, "app src/app.py")
        assert {ix._searcher.stored_fields(d)["id"] for d in got} == {"m-0", "m-2", "m-3", "m-6", "m-7"}  # type: ignore[attr-defined]
        assert set(got) == set(want)
        for d, score in want.items():
            assert math.isclose(got[d], score, rel_tol=1e-9), d
    finally:
        ix.close()


@pytest.mark.parametrize("texts", [["retry retry"] * 5, ["retry"] * 5, ["retry", "retry retry", "retry retry retry"]])
def test_a_block_of_one_weight_scores_as_whoosh(tmp_path: Path, texts: list[str]) -> None:
    """Whoosh stores a block whose postings share one weight as that number (None for 1.0), and an
    array otherwise: each reads back as Whoosh's own matcher reads it."""
    ix = _index(tmp_path / "ix", texts)
    try:
        want, got = _matched(ix, "retry")
        assert got == want and len(got) == len(texts)
    finally:
        ix.close()


COMMON = 1500  # documents holding the common word: a dozen blocks of 128


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rare=st.sets(st.integers(0, COMMON - 1), max_size=6), whole=st.sets(st.integers(0, COMMON - 1), max_size=6),
       without=st.sets(st.integers(0, COMMON - 1), max_size=30), summaries=st.sets(st.integers(0, COMMON - 1), max_size=40),
       query=st.sampled_from(["call_4242", "call call_4242", '"call 4242"', "4242 call", '"4242 call"', "call 4242 call_4242"]),
       kind=st.sampled_from([None, "message", "summary"]))
def test_a_rare_word_looked_up_in_a_common_words_blocks(tmp_path_factory, rare, whole, without, summaries, query,
                                                        kind) -> None:
    """A few documents of a rare word found in a common word's many blocks, the blocks without one of
    them skipped: the same matches and scores as Whoosh's, also when the common word is then asked for
    documents beyond those few (``call call_4242``: its own clause, after the phrase of the parts)."""
    ix = open_index("whoosh", tmp_path_factory.mktemp("ix"), reset=True)
    try:
        texts = []
        for i in range(COMMON):
            words = [] if i in without else ["call"]
            words += ["retry"] * (i % 3)
            if i in rare:
                words.insert(i % 2 and len(words), "4242")  # after call (a phrase) or before it
            if i in whole:
                words.append("call_4242")
            texts.append(" ".join(words) or "idle")
        ix.add([IndexDoc(id=f"m-{i}", kind="summary" if i in summaries else "message", conversation="a", text=t,
                         at=0.0, seq=i) for i, t in enumerate(texts)])
        ix.flush()
        filters = Filters(kind, None, None, None)
        assert supported(parse_query(query), filters)
        want, got = _matched(ix, query, filters)
        assert set(got) == set(want), query
        for d, score in want.items():
            assert math.isclose(got[d], score, rel_tol=1e-9), (query, d)
    finally:
        ix.close()


def test_a_sparse_read_covers_its_documents_and_no_more_blocks(tmp_path: Path) -> None:
    """The blocks around each wanted document are read (the first and last of a block too), the others
    skipped; a later read wanting documents the first did not cover reads them."""
    from vaultlcm.index.whoosh_postings import _Segment

    ix = open_index("whoosh", tmp_path / "ix", reset=True)
    try:
        ix.add([IndexDoc(id=f"m-{i}", kind="message", conversation="a", text="call " * (1 + i % 3), at=0.0, seq=i)
                for i in range(COMMON)])
        ix.flush()
        (sub, _offset), = ix._searcher.leaf_searchers()  # type: ignore[attr-defined]
        seg = _Segment(sub, sub.reader(), "text")
        wanted = {0, 127, 128, 255, 1023, COMMON - 1}
        got = seg.postings("call", within=wanted)
        assert wanted <= set(got) and all(got[d] == 1 + d % 3 for d in wanted)
        assert len(got) <= 128 * 5  # five blocks of the twelve hold the six documents
        assert seg.postings("call", within={0, 255}) is got  # covered by the first read
        more = seg.postings("call", within={600})
        assert 600 in more and more[600] == 1 + 600 % 3
        assert len(seg.postings("call")) == COMMON  # and all of them when no set is given
        # Positions kept by a read are dropped when a later read (without them) covers other documents.
        seg = _Segment(sub, sub.reader(), "text")
        seg.postings("call", values=True, within={0})
        seg.postings("call", within={600})
        assert {0, 600} <= set(seg.values("call", {0, 600}))
    finally:
        ix.close()


def test_a_document_with_the_whole_identifier_is_not_checked_for_its_parts(tmp_path: Path) -> None:
    """Only the documents without the whole token have their parts' positions checked. The one case
    where the two differ: a document with the whole token written otherwise (``github``, where the
    query's ``GitHub`` is ``git hub``) and the parts elsewhere, not in a row, matches as in Whoosh and
    is scored as holding the parts, a little above Whoosh's score for it; every other score is Whoosh's."""
    ix = _index(tmp_path / "ix", ["see GitHub now", "hub github git", "git hub", "hub git", "GitHub GitHub git", "see github"])
    try:
        want, got = _matched(ix, "GitHub")
        ids = {d: ix._searcher.stored_fields(d)["id"] for d in got}  # type: ignore[attr-defined]
        assert set(got) == set(want) and sorted(ids.values()) == ["m-0", "m-1", "m-2", "m-4", "m-5"]
        for d, score in want.items():
            if ids[d] == "m-1":
                assert got[d] > score
            else:
                assert math.isclose(got[d], score, rel_tol=1e-9), ids[d]
    finally:
        ix.close()


def test_documents_sharing_the_last_score_of_a_page_give_it_the_newest(tmp_path: Path) -> None:
    """More documents score alike than a search fetches (the page and a band past it): the newest of
    them make the page, whatever the order the segments hold them in."""
    import random

    days = list(range(150))
    random.Random(3).shuffle(days)
    ix = open_index("whoosh", tmp_path / "ix", reset=True)
    try:
        docs = [IndexDoc(id=f"m-{i}", kind="message", conversation="a", text="deploy now", at=float(day), seq=i)
                for i, day in enumerate(days)]
        for i in range(0, len(docs), 40):  # four segments
            ix.add(docs[i : i + 40])
            ix.flush()
        newest = sorted(docs, key=lambda d: d.at, reverse=True)[:5]
        assert [h.id for h in ix.search("deploy", limit=5)] == [d.id for d in newest]
    finally:
        ix.close()


@pytest.mark.parametrize("query", ["depl*", "deploy*", "dep* retry", "retr* deploy", "zzz*", "x*", "x1*"])
def test_a_prefix_is_evaluated_as_the_words_it_stands_for(tmp_path: Path, query: str) -> None:
    """A prefix clause of up to MAX_PREFIX_TERMS words goes through the postings as those words, with
    the matches and scores of Whoosh's own matchers for the same words; a prefix of more words (``x*``
    here, 600 of them) stays with Whoosh's matchers, as does a prefix inside an identifier."""
    from vaultlcm.index.whoosh_backend import MAX_PREFIX_TERMS

    texts = ["deploy now", "deploys retry", "deployed deployment", "dependency retry retry", "retries",
             "the deploy went fine", *(f"x{i} deploy" for i in range(MAX_PREFIX_TERMS + 88))]
    ix = _index(tmp_path / "ix", texts)
    try:
        pq = parse_query(query)
        found = ix._evaluated(pq, Filters())  # type: ignore[attr-defined]
        want = dict(ix._searcher.search(ix._query(pq, Filters()), limit=None).items())  # type: ignore[attr-defined]
        if query == "x*":
            assert found is None and len(want) == MAX_PREFIX_TERMS + 88
            return
        assert found is not None
        got = dict(found)
        assert set(got) == set(want) and (query == "zzz*") == (not got)
        for d, score in want.items():
            assert math.isclose(got[d], score, rel_tol=1e-9), (query, d)
        assert ix.count_matches(query).total == len(want)
    finally:
        ix.close()
