"""Postings blocks as arrays read back exactly what Whoosh's pickled blocks hold, old segments and new side by side."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vaultlcm.index import open_index
from vaultlcm.index.base import IndexDoc
from vaultlcm.index.whoosh_blocks import decode_head, decode_values, encode_block

float32 = st.floats(width=32, allow_nan=False, allow_infinity=False)


@st.composite
def blocks(draw: Any) -> tuple[list[int], list[float], list[bytes], int | None]:
    ids = sorted(draw(st.sets(st.integers(0, 2**32 - 1), min_size=1, max_size=128)))
    shape = draw(st.sampled_from(["ones", "same", "any"]))
    if shape == "ones":
        weights = [1.0] * len(ids)
    elif shape == "same":
        weights = [draw(float32)] * len(ids)
    else:
        weights = draw(st.lists(float32, min_size=len(ids), max_size=len(ids)))
    fixedsize = draw(st.sampled_from([None, -1, 0, 3]))
    if fixedsize == 0:
        values: list[bytes] = []
    elif fixedsize == 3:
        values = draw(st.lists(st.binary(min_size=3, max_size=3), min_size=len(ids), max_size=len(ids)))
    else:  # Whoosh keeps only the values that are not empty: fewer than the ids, or none
        values = draw(st.lists(st.binary(min_size=1, max_size=40), max_size=len(ids)))
    return ids, weights, values, fixedsize


@given(block=blocks(), level=st.integers(0, 9))
def test_a_block_reads_back_what_was_written(block: tuple[list[int], list[float], list[bytes], int | None],
                                              level: int) -> None:
    ids, weights, values, fixedsize = block
    data = encode_block(ids, weights, values, fixedsize, level)
    got_ids, got_weights = decode_head(data, len(ids))
    assert got_ids == tuple(ids)
    if got_weights is None:
        assert all(w == 1.0 for w in weights)
    elif isinstance(got_weights, float):  # equal numbers share one weight, as in Whoosh's blocks (0.0 and -0.0)
        assert all(w == got_weights for w in weights)
        assert struct.pack("<f", weights[0]) == struct.pack("<f", got_weights)
    else:
        assert [struct.pack("<f", w) for w in got_weights] == [struct.pack("<f", w) for w in weights]
    want_values: tuple[Any, ...] = (None,) * len(ids) if fixedsize == 0 else tuple(values)
    assert decode_values(data, len(ids), fixedsize) == want_values


def _postings(ix: Any) -> dict[tuple[str, Any], list[tuple[int, float, Any]]]:
    """Every posting of every term of every field of the index, by its document's id field."""
    out: dict[tuple[str, Any], list[tuple[int, float, Any]]] = {}
    searcher = ix._searcher
    for sub, offset in searcher.leaf_searchers():
        reader = sub.reader()
        ids = {d: reader.stored_fields(d)["id"] for d in reader.all_doc_ids()}
        for field, term in reader.all_terms():
            if field not in ("text", "kind", "conversation", "id"):
                continue
            m = reader.postings(field, term)
            while m.is_active():
                out.setdefault((field, term), []).append((ids[m.id()], m.weight(), m.value()))
                m.next()
    return {k: sorted(v) for k, v in out.items()}


words = st.sampled_from(["deploy", "retry", "src/app.py", "call_42", "日本", "cache", "x"])
texts = st.one_of(st.text(max_size=30), st.lists(words, min_size=1, max_size=8).map(" ".join))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docs=st.lists(texts, min_size=130, max_size=300), rewrite=st.integers(0, 129))
def test_new_blocks_hold_the_postings_whooshs_blocks_hold(tmp_path_factory: Any, docs: list[str],
                                                           rewrite: int) -> None:
    """The same documents indexed by Whoosh's codec and by the array codec, a term with more than one
    block of postings among them; and an index with segments of both codecs, then merged into one:
    every term's postings (document, weight, encoded positions) are the same in all of them."""
    from vaultlcm.index import whoosh_backend as wb

    made = [IndexDoc(id=f"m-{i}", kind="message", conversation="c", text=t, at=float(i), seq=i)
            for i, t in enumerate(docs)]
    seen = []
    for codec in ("old", "new", "mixed"):
        path: Path = tmp_path_factory.mktemp("ix")
        ix = open_index("whoosh", path, reset=True)
        try:
            if codec in ("old", "mixed"):
                ix.segment_codec = wb.SecureIdCodec  # type: ignore[attr-defined]
            ix.add(made[:rewrite] if codec == "mixed" else made)
            ix.flush()
            if codec == "mixed":  # the first part as an older version wrote it, the rest added since
                ix.segment_codec = wb.ArrayBlockCodec  # type: ignore[attr-defined]
                ix.add(made[rewrite:])
                ix.flush()
            codecs = {type(seg.codec()) for seg in ix._ix._segments()}  # type: ignore[attr-defined]
            assert codecs == {"old": {wb.SecureIdCodec}, "new": {wb.ArrayBlockCodec}}.get(
                codec, {wb.SecureIdCodec, wb.ArrayBlockCodec} if 0 < rewrite < len(made) else codecs)
            seen.append(_postings(ix))
            if codec == "mixed":
                w = ix._ix.writer(codec=wb.ArrayBlockCodec())  # type: ignore[attr-defined]
                w.commit(optimize=True)  # one segment, written in the array format
                ix._open_searcher()  # type: ignore[attr-defined]
                assert [type(seg.codec()) for seg in ix._ix._segments()] == [wb.ArrayBlockCodec]  # type: ignore[attr-defined]
                seen.append(_postings(ix))
        finally:
            ix.close()
    assert max(len(p) for _t, p in seen[1].items()) > 128  # a term in several blocks
    assert seen[0] == seen[1] == seen[2] == seen[3]
