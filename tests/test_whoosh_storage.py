"""Whoosh's segment files read through maps (:mod:`vaultlcm.index.whoosh_storage`): the same bytes as
Whoosh's own copy, and no copy of the files in the process's memory."""

from __future__ import annotations

import os
import pickle
import tracemalloc
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from whoosh import index as whoosh_index
from whoosh.filedb.structfile import BufferFile

from vaultlcm.index import open_index
from vaultlcm.index.base import IndexDoc
from vaultlcm.index.whoosh_backend import build_schema
from vaultlcm.index.whoosh_storage import MappedStorage, _MappedFile

# What Whoosh asks of a file: positioned reads, sequential reads after a seek (block headers are
# pickles), lines, and parts of a part (a compound file's members, then windows inside them).
op_st = st.one_of(
    st.tuples(st.just("get"), st.integers(0, 300), st.integers(0, 300)),
    st.tuples(st.just("seek"), st.integers(-20, 300), st.sampled_from([os.SEEK_SET, os.SEEK_CUR, os.SEEK_END])),
    st.tuples(st.just("read"), st.one_of(st.none(), st.integers(-1, 300)), st.just(0)),
    st.tuples(st.just("readline"), st.one_of(st.none(), st.integers(-1, 50)), st.just(0)),
    st.tuples(st.just("readinto"), st.integers(0, 64), st.just(0)),
    st.tuples(st.just("tell"), st.just(0), st.just(0)),
    st.tuples(st.just("int"), st.integers(0, 300), st.just(0)),
    st.tuples(st.just("array"), st.integers(0, 300), st.integers(0, 20)),
)


def _apply(f, op):  # noqa: ANN001, ANN202 - both file kinds
    name, a, b = op
    try:
        if name == "get":
            return f.get(a, b)
        if name == "seek":
            f.seek(max(a, 0) if b == os.SEEK_SET else a, b)
            return f.tell()
        if name == "read":
            return f.read() if a is None else f.read(a)
        if name == "readline":
            return f.readline() if a is None else f.readline(a)
        if name == "readinto":
            buf = bytearray(a)
            n = f.raw_file().readinto(buf)
            return n, bytes(buf[:n])
        if name == "tell":
            return f.tell()
        if name == "int":
            return f.get_int(a)
        return list(f.get_array(a, "H", b))
    except Exception as exc:  # the same failure (a short read) counts as the same answer
        return type(exc).__name__


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=400), lines=st.lists(st.sampled_from([b"\n", b"\r\n", b"\r", b"x"]), max_size=6),
       cut=st.tuples(st.integers(0, 450), st.integers(0, 450)), ops=st.lists(op_st, max_size=25))
def test_a_mapped_part_reads_as_whooshs_copy_does(tmp_path_factory, data, lines, cut, ops) -> None:
    content = data + b"".join(lines) + data[::-1]
    folder: Path = tmp_path_factory.mktemp("st")
    (folder / "f.seg").write_bytes(content)
    whole = MappedStorage(str(folder)).open_file("f.seg")
    try:
        assert isinstance(whole, _MappedFile)
        start = min(cut[0], len(content))
        length = min(cut[1], len(content) - start)
        mine = whole.subset(start, length)
        theirs = BufferFile(memoryview(content)[start : start + length])
        for op in ops:
            assert _apply(mine, op) == _apply(theirs, op), op
        # A pickle read where it starts, as a block header is.
        payload = {"n": len(ops), "blob": content[:17]}
        blob = content[:5] + pickle.dumps(payload)
        (folder / "p.seg").write_bytes(blob)
        pf = MappedStorage(str(folder)).open_file("p.seg")
        pf.seek(len(content[:5]))
        assert pf.read_pickle() == payload
        assert pf.tell() == len(blob)
        pf.close()
    finally:
        whole.close()


def test_only_segments_are_mapped(tmp_path: Path) -> None:
    # A new segment's own files are only copied into its compound file: read, not mapped, so
    # the copy does not count their pages in the writer's resident set.
    (tmp_path / "x.trm").write_bytes(b"abc")
    (tmp_path / "x.seg").write_bytes(b"abc")
    plain, mapped = (MappedStorage(str(tmp_path)).open_file(n) for n in ("x.trm", "x.seg"))
    assert not isinstance(plain, _MappedFile) and isinstance(mapped, _MappedFile)
    assert plain.read() == mapped.read() == b"abc"
    plain.close()
    mapped.close()


def test_an_empty_file_opens(tmp_path: Path) -> None:
    (tmp_path / "empty.seg").write_bytes(b"")
    f = MappedStorage(str(tmp_path)).open_file("empty.seg")
    assert f.read() == b""
    f.close()


def _docs(n: int) -> list[IndexDoc]:
    words = ["deploy", "timeout", "retry", "cache", "index", "migration", "schema", "latency", "error"]
    return [IndexDoc(id=f"m-{i}", kind="message", conversation="c",
                     text=" ".join(f"{words[(i * 7 + j) % len(words)]} w{(i * 31 + j) % 5000} call_{i}"
                                   for j in range(40)),
                     at=float(i), seq=i) for i in range(n)]


def _allocated_while_opening(opener, path: Path) -> int:  # noqa: ANN001
    tracemalloc.start()
    try:
        ix = opener(path)
        with ix.searcher() as s:
            assert s.doc_count() == 3000
            assert s.search(__import__("whoosh.query", fromlist=["Term"]).Term("text", "retry"), limit=5)
            _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak


def test_opening_an_index_does_not_copy_its_files(tmp_path: Path) -> None:
    ix = open_index("whoosh", tmp_path / "ix", reset=True)
    ix.add(_docs(3000))
    ix.flush()
    ix.close()
    size = sum(p.stat().st_size for p in (tmp_path / "ix").glob("*.seg"))
    assert size > 2_000_000  # the files are big enough for a copy to show
    mapped = _allocated_while_opening(lambda p: MappedStorage(str(p)).open_index(), tmp_path / "ix")
    copied = _allocated_while_opening(lambda p: whoosh_index.open_dir(str(p)), tmp_path / "ix")
    # Whoosh's own storage copies every file of the segment it opens (the control: the
    # measure sees a copy); the mapped one allocates a small part of the files' size.
    assert copied > size / 2
    assert mapped < size / 20, (mapped, copied, size)


def test_the_backend_reads_and_writes_through_maps(tmp_path: Path) -> None:
    ix = open_index("whoosh", tmp_path / "ix", reset=True)
    try:
        ix.add(_docs(50))
        ix.flush()
        assert isinstance(ix._ix.storage, MappedStorage)  # type: ignore[attr-defined]
        hits = ix.search("retry deploy", limit=3)
        assert len(hits) == 3 and all(h.id.startswith("m-") for h in hits)
        ix.remove(["m-1"])
        ix.flush()
        assert ix.count() == 49
    finally:
        ix.close()
    again = open_index("whoosh", tmp_path / "ix")
    try:
        assert again.count() == 49
        assert set(again.stored_hashes()) == {f"m-{i}" for i in range(50) if i != 1}
    finally:
        again.close()
    # The index is still Whoosh's own format: Whoosh opens it with its own storage.
    assert whoosh_index.open_dir(str(tmp_path / "ix")).doc_count() == 49
    assert build_schema().names() == whoosh_index.open_dir(str(tmp_path / "ix")).schema.names()


def test_read_pickle_of_a_window_stops_at_the_window(tmp_path: Path) -> None:
    blob = pickle.dumps([1, 2, 3]) + b"tail"
    (tmp_path / "f.seg").write_bytes(b"head" + blob)
    whole = MappedStorage(str(tmp_path)).open_file("f.seg")
    part = whole.subset(4, len(blob))
    assert part.read_pickle() == [1, 2, 3]
    assert part.read() == b"tail"
    assert part.read() == b""
    whole.close()


def test_a_long_pickle_and_a_damaged_one(tmp_path: Path) -> None:
    long = list(range(5000))  # far longer than the slice a header is read from
    blob = b"xx" + pickle.dumps(long) + pickle.dumps("next")
    (tmp_path / "f.seg").write_bytes(blob)
    f = MappedStorage(str(tmp_path)).open_file("f.seg")
    f.seek(2)
    assert f.read_pickle() == long
    assert f.read_pickle() == "next"
    f.seek(2 + 10)  # inside the first pickle: not a pickle there
    try:
        f.read_pickle()
    except Exception as exc:  # noqa: BLE001 - whatever pickle raises for damaged data
        assert not isinstance(exc, AssertionError)
    else:
        raise AssertionError("a damaged pickle was read")
    f.close()
