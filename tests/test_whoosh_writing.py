"""What a Whoosh writer holds (:mod:`vaultlcm.index.whoosh_writing`): its term table in arrays, written
byte for byte as Whoosh writes it; a rebuild's runs merged in one pass, the same postings in the same
order as Whoosh's own pool; a real rebuild through both."""

from __future__ import annotations

import sys
import tracemalloc
from io import BytesIO
from pathlib import Path

import pytest
import whoosh.writing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from whoosh.filedb.filestore import FileStorage, RamStorage
from whoosh.filedb.filetables import OrderedHashReader, OrderedHashWriter
from whoosh.filedb.structfile import StructFile
from whoosh.writing import PostingPool

import vaultlcm.index.whoosh_backend as whoosh_backend
from vaultlcm.index import open_index
from vaultlcm.index.base import IndexDoc
from vaultlcm.index.whoosh_backend import SecureIdCodec
from vaultlcm.index.whoosh_writing import (
    MAX_RUNS, WHOOSH_RUNS, PairBucket, WidePostingPool, compact_term_table, runs_merged_at_once, wide_merges,
)

# A posting as Whoosh's writer pools it: (field name, term bytes, document number, weight, value bytes).
posting_st = st.tuples(
    st.sampled_from(["text", "id", "kind"]),
    st.binary(max_size=12),
    st.integers(0, 10_000),
    st.floats(0.5, 8.0, allow_nan=False),
    st.one_of(st.none(), st.binary(max_size=8)),
)


def _filled(pool_cls: type, folder: Path, postings: list[tuple]) -> tuple[PostingPool, FileStorage]:  # type: ignore[type-arg]
    store = FileStorage(str(folder)).create()
    pool = pool_cls(store, None, limitmb=0)  # a limit of 0: nearly every posting goes to a run of its own
    for p in postings:
        pool.add(p)
    return pool, store


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(postings=st.lists(posting_st, min_size=WHOOSH_RUNS + 40, max_size=WHOOSH_RUNS + 200,
                         unique_by=lambda p: p[:3]))  # Whoosh pools one posting per (field, term, document)
def test_a_wide_pool_merges_every_run_at_once_in_whooshs_order(tmp_path_factory: pytest.TempPathFactory,
                                                                postings: list[tuple]) -> None:  # type: ignore[type-arg]
    wide, wide_store = _filled(WidePostingPool, tmp_path_factory.mktemp("wide"), postings)
    own, own_store = _filled(PostingPool, tmp_path_factory.mktemp("own"), postings)
    wide.maxfiles = MAX_RUNS
    assert len(wide.runs) > WHOOSH_RUNS
    merged = wide.iter_postings()
    # No run was merged into another before the final pass: every run file is still there, unread.
    assert len(list(wide_store.list())) == len(postings)
    control = own.iter_postings()
    # Whoosh's own pool, the control, first merged runs 128 at a time into new runs.
    assert len(list(own_store.list())) <= WHOOSH_RUNS
    assert list(merged) == list(control) == sorted(postings)
    assert list(wide_store.list()) == [] and list(own_store.list()) == []  # each run is removed once read


def test_wide_merges_swap_whooshs_pool_only_inside() -> None:
    assert whoosh.writing.PostingPool is PostingPool
    with wide_merges():
        assert whoosh.writing.PostingPool is WidePostingPool
        assert WidePostingPool.maxfiles == runs_merged_at_once()
    assert whoosh.writing.PostingPool is PostingPool
    with pytest.raises(RuntimeError), wide_merges():
        raise RuntimeError("a rebuild that fails")
    assert whoosh.writing.PostingPool is PostingPool


@pytest.mark.skipif(sys.platform == "win32", reason="no open-file limit to read")
def test_runs_merged_at_once_follow_the_open_file_limit() -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        for limit, want in [(2000, 500), (600, 150), (256, WHOOSH_RUNS), (64, WHOOSH_RUNS)]:
            if hard != resource.RLIM_INFINITY and limit > hard:
                continue
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
            assert runs_merged_at_once() == want, limit
        if hard == resource.RLIM_INFINITY or hard >= 8 * MAX_RUNS:
            resource.setrlimit(resource.RLIMIT_NOFILE, (8 * MAX_RUNS, hard))
            assert runs_merged_at_once() == MAX_RUNS
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _docs(n: int) -> list[IndexDoc]:
    words = ["deploy", "timeout", "retry", "cache", "schema", "latency"]
    return [IndexDoc(id=f"m-{i}", kind="message", conversation="c",
                     text=f"{words[i % len(words)]} {words[(i * 5) % len(words)]} w{i % 97} call_{i}",
                     at=float(i), seq=i) for i in range(n)]


def _answers(ix: object) -> list[set[str]]:
    # Every match of each query (which documents a worker indexed, and so ties' order, varies between runs).
    return [{h.id for h in ix.search(q, limit=2000, snippets=False)}  # type: ignore[attr-defined]
            for q in ("deploy", "retry schema", "w13", "call_7", "w5*", '"timeout latency"')]


def test_a_rebuild_with_hundreds_of_runs_a_worker_answers_as_one_with_few(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = _docs(1500)
    normal = open_index("whoosh", tmp_path / "normal", reset=True)
    try:
        assert normal.rebuild(docs) == len(docs)
        expected = _answers(normal)
    finally:
        normal.close()
    # A pool of a few kB: each worker (two on a machine of two cores or more) writes hundreds of runs.
    monkeypatch.setattr(whoosh_backend, "POOL_MB", 0.004)
    small = open_index("whoosh", tmp_path / "small", reset=True)
    try:
        assert small.rebuild(docs) == len(docs)
        assert small.count() == len(docs)
        assert _answers(small) == expected
        assert all(expected)  # each query finds something: the comparison is not of empty lists
    finally:
        small.close()
    assert whoosh.writing.PostingPool is PostingPool


class _Kept(BytesIO):
    """A file whose bytes outlive its close (Whoosh's hash writer closes the file it wrote)."""

    def close(self) -> None:
        self.kept = self.getvalue()
        super().close()


def _table(entries: dict[bytes, bytes], compact: bool) -> bytes:
    raw = _Kept()
    writer = OrderedHashWriter(StructFile(raw))
    if compact:
        writer.buckets = [PairBucket() for _ in writer.buckets]
    for key in sorted(entries):
        writer.add(key, entries[key])
    writer.close()
    return raw.kept


@settings(max_examples=150, deadline=None)
@given(entries=st.dictionaries(st.binary(min_size=1, max_size=40), st.binary(max_size=60), max_size=600))
def test_a_compact_term_table_is_written_byte_for_byte_as_whooshs(entries: dict[bytes, bytes]) -> None:
    compact = _table(entries, compact=True)
    assert compact == _table(entries, compact=False)
    reader = OrderedHashReader(StructFile(BytesIO(compact)), len(compact))
    assert {k: reader[k] for k in entries} == entries  # and it reads back


def test_a_compact_term_table_holds_a_fraction_of_whooshs_memory(tmp_path: Path) -> None:
    def held(compact: bool) -> int:
        writer = OrderedHashWriter(StructFile(open(tmp_path / f"terms-{compact}", "wb")))  # noqa: SIM115 - the writer closes it
        if compact:
            writer.buckets = [PairBucket() for _ in writer.buckets]
        tracemalloc.start()
        try:
            for i in range(60_000):
                writer.add(b"call_%09d" % i, b"")
            current, _peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        writer.close()
        return current

    ours, whooshs = held(True), held(False)
    # Whoosh's own entries (the control): a tuple and two ints each, over 100 bytes; ours 16 bytes
    # (plus the writer's position index, 4-8 bytes an entry, in both).
    assert whooshs > 60_000 * 100
    assert ours * 4 < whooshs, (ours, whooshs)


def test_the_codecs_field_writers_keep_compact_term_tables() -> None:
    storage = RamStorage()
    codec = SecureIdCodec()
    segment = codec.new_segment(storage, "MAIN")
    writer = codec.field_writer(storage, segment)
    assert all(isinstance(b, PairBucket) for b in writer._tindex.buckets)
    with pytest.raises(RuntimeError, match="already holds terms"):
        writer._tindex.add(b"deploy", b"x")
        compact_term_table(writer)
