"""Tantivy lets go of the pages its searches mapped in once its searcher sits unused, and loses nothing by it."""

from __future__ import annotations

import random
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("tantivy")

from vaultlcm.index import tantivy_backend  # noqa: E402
from vaultlcm.index import open_index  # noqa: E402
from vaultlcm.index.base import IndexDoc  # noqa: E402


def _doc(i: int, word: str = "") -> IndexDoc:
    return IndexDoc(id=f"m-{i:016x}", kind="message", conversation="c", text=f"entry {i} marker{i:05d} {word}",
                    at=float(i), seq=i + 1)


def _mapped_by_file(path: Path) -> dict[str, int]:
    """Resident pages of each file under ``path`` mapped into this process (Linux smaps), in KiB."""
    out: dict[str, int] = {}
    current: str | None = None
    prefix = str(path.resolve())
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split(None, 1)
        if head and "-" in head[0] and not head[0].endswith(":"):
            fields = line.split(None, 5)
            current = fields[5] if len(fields) > 5 and fields[5].startswith(prefix) else None
        elif current is not None and line.startswith("Rss:"):
            out[current] = out.get(current, 0) + int(line.split()[1])
    return out


def _mapped_kib(path: Path, only: set[str] | None = None) -> int:
    """Resident pages of files under ``path`` (or of the files in ``only``) mapped into this process, in KiB."""
    return sum(kib for name, kib in _mapped_by_file(path).items() if only is None or name in only)


@pytest.fixture
def quick_release(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setattr(tantivy_backend, "RELEASE_IDLE", 0.2)
    return 0.2


def _wait_released(ix: tantivy_backend.TantivyIndex, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while ix._used_at is not None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert ix._used_at is None, "the idle writer thread did not let the searcher go"


def _wordy_doc(i: int, rng: random.Random, vocab: list[str]) -> IndexDoc:
    words = " ".join(rng.choice(vocab) for _ in range(40))
    return IndexDoc(id=f"m-{i:016x}", kind="message", conversation="c", text=f"entry {i} marker{i:05d} {words}",
                    at=float(i), seq=i + 1)


#: Documents of the index whose pages are watched: enough that searching it touches several times what opening it does.
DOCS = 40_000


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps")
def test_an_idle_searcher_unmaps_what_a_search_touched(tmp_path: Path, quick_release: float) -> None:
    # Opening an index maps every segment and touches about a MiB of it (the kernel maps
    # neighbouring cached pages on each fault; 2.2 MiB was seen on a loaded host), and tantivy may
    # keep one or two such sets of maps a while after its index object is dropped. The searches
    # below touch the whole index (about 13 MiB across the postings, the term dictionary and the
    # store), so what a release must let go of dwarfs those. (With 20,000 documents the index
    # was 7 MiB and a slow host's open alone came within 4x of it.)
    rng = random.Random(0)
    vocab = [f"w{n:04d}" for n in range(3000)]
    built = open_index("tantivy", tmp_path / "ix", commit_interval=0.0)
    built.add(_wordy_doc(i, rng, vocab) for i in range(DOCS))
    built.close()  # waits for the writer's merges: none runs (mapping files of its own) during the test
    ix = open_index("tantivy", tmp_path / "ix", commit_interval=0.0)
    assert isinstance(ix, tantivy_backend.TantivyIndex)
    try:
        opened = _mapped_kib(tmp_path / "ix")
        for word in vocab[::10]:
            assert ix.count_matches(word).total > 0
        for i in range(0, DOCS, 100):
            assert ix.search(f"marker{i:05d}")[0].id == f"m-{i:016x}"
        searched = _mapped_by_file(tmp_path / "ix")
        touched = sum(searched.values())
        assert touched > 4 * opened
        _wait_released(ix)
        assert _mapped_kib(tmp_path / "ix", only=set(searched)) < touched / 2
    finally:
        ix.close()


def test_a_search_after_a_release_sees_every_commit_before_it(tmp_path: Path, quick_release: float) -> None:
    ix = open_index("tantivy", tmp_path / "ix", commit_interval=0.01)
    try:
        for round_ in range(4):
            ix.add(_doc(round_ * 100 + i) for i in range(100))
            hits = ix.search(f"marker{round_ * 100 + 99:05d}")
            assert [h.id for h in hits] == [_doc(round_ * 100 + 99).id]
            assert ix.count() == (round_ + 1) * 100
            _wait_released(ix)
        ix.remove([_doc(5).id])
        assert ix.search("marker00005") == []
        assert ix.count() == 399
    finally:
        ix.close()


def test_a_reader_process_lets_go_at_its_next_search(tmp_path: Path, quick_release: float) -> None:
    writer = open_index("tantivy", tmp_path / "ix", commit_interval=0.01)
    try:
        writer.add(_doc(i) for i in range(50))
        writer.flush()
        reader = open_index("tantivy", tmp_path / "ix", lock_timeout=0.1)
        assert isinstance(reader, tantivy_backend.TantivyIndex) and not reader.writable
        try:
            assert reader.count() == 50
            native = reader._ix
            time.sleep(quick_release * 2)
            writer.add([_doc(50)])
            writer.flush()
            assert [h.id for h in reader.search("marker00050")] == [_doc(50).id]
            assert reader._ix is not native  # replaced, with its maps, at the search after the pause
        finally:
            reader.close()
    finally:
        writer.close()


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(1, 30), st.booleans()), min_size=1, max_size=8))
def test_searches_racing_the_release_always_see_what_came_before(
        tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[int, bool]]) -> None:
    # The release runs in the writer's thread while searches run in this one, as in an Engine.
    old = tantivy_backend.RELEASE_IDLE
    tantivy_backend.RELEASE_IDLE = 0.0
    ix = open_index("tantivy", tmp_path_factory.mktemp("ix"), commit_interval=0.0)
    stop = threading.Event()

    def poke() -> None:  # keeps the idle thread waking up, so releases land between reads
        while not stop.is_set():
            with ix._cv:
                ix._cv.notify_all()
            time.sleep(0.001)

    poker = threading.Thread(target=poke, daemon=True)
    poker.start()
    try:
        n = 0
        for size, pause in steps:
            ix.add(_doc(n + k) for k in range(size))
            n += size
            if pause:
                time.sleep(0.01)
            assert ix.count() == n
            assert [h.id for h in ix.search(f"marker{n - 1:05d}")] == [_doc(n - 1).id]
            assert ix.count_matches("entry").total == n
    finally:
        stop.set()
        poker.join()
        ix.close()
        tantivy_backend.RELEASE_IDLE = old
