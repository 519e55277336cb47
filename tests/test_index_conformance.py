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
from vaultlcm.index.base import IndexDoc, IndexLocked, IndexUnavailable, SearchIndex, open_index
from vaultlcm.index.buffered import VERSION_FILE
from vaultlcm.index.query import parse_query

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
    assert set(ids(ix.search("deploy"))) == {"m-0001", "sum_a1"}


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


# ------------------------------------------------------------------------- filters


def test_kind_filter(ix: SearchIndex) -> None:
    assert ids(ix.search("deploy", kind="summary")) == ["sum_a1"]
    assert ids(ix.search("deploy", kind="message")) == ["m-0001"]
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
    assert "reindex" in str(err.value)
    fresh = make("bad", reset=True)  # the way back: wipe, then rebuild
    assert fresh.count() == 0
    assert fresh.rebuild(CORPUS) == len(CORPUS)
    assert ids(fresh.search('"disk is full"')) == ["m-0001"]


def test_other_backends_index_is_unavailable(make, backend: str, tmp_path: Path) -> None:
    other = "tantivy" if backend == "whoosh" else "whoosh"
    if other == "tantivy":
        pytest.importorskip("tantivy")
    open_index(other, tmp_path / "x").close()
    with pytest.raises(IndexUnavailable):
        make("x")


_CHILD = textwrap.dedent(
    """
    import json, sys
    from vaultlcm.index.base import open_index, IndexDoc, IndexLocked
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
