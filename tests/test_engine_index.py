"""A long-running Engine indexes as it goes: small bounded batches, and every grep sees what came before it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vaultlcm import Engine, Settings
from vaultlcm.engine import INDEX_EVERY

QUIET = {"background_compaction": False}


def _indexed(engine: Engine) -> int:
    index = engine.vault.indexer.open()
    index.flush()
    return index.count()


def _msg(i: int) -> dict[str, str]:
    # A word of its own per message: a grep for it finds exactly that message.
    return {"role": "user" if i % 2 == 0 else "assistant", "content": f"note number {i}: marker{i:05d} in the logs"}


@pytest.mark.parametrize("backend", ["whoosh", "tantivy"])
def test_the_end_of_a_turn_indexes_it_without_a_search(tmp_path: Path, backend: str) -> None:
    if backend == "tantivy":
        pytest.importorskip("tantivy")
    with Engine(tmp_path / "v", "agent", settings=Settings(**QUIET, index_backend=backend)) as engine:
        engine.ingest_batch([_msg(0), _msg(1)])
        engine.after_turn()
        assert _indexed(engine) == 2
        engine.ingest(_msg(2))
        engine.ingest(_msg(3))
        assert _indexed(engine) == 2  # mid-turn: left for the turn's end
        engine.after_turn()
        assert _indexed(engine) == 4


def test_an_engine_that_never_ends_a_turn_indexes_every_few_messages(tmp_path: Path) -> None:
    with Engine(tmp_path / "v", "agent", settings=Settings(**QUIET)) as engine:
        for i in range(INDEX_EVERY * 2 + 5):
            engine.ingest(_msg(i))
            # What waits for the index is bounded by INDEX_EVERY, however long the run.
            assert i + 1 - _indexed(engine) < INDEX_EVERY


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(1, 12), st.booleans(), st.booleans()), min_size=1, max_size=12))
def test_a_grep_sees_every_message_ingested_before_it(tmp_path_factory: pytest.TempPathFactory,
                                                       steps: list[tuple[int, bool, bool]]) -> None:
    root = tmp_path_factory.mktemp("v")
    n = 0
    with Engine(root, "agent", settings=Settings(**QUIET)) as engine:
        for size, end_turn, one_by_one in steps:
            batch = [_msg(n + k) for k in range(size)]
            if one_by_one:
                for m in batch:
                    engine.ingest(m)
            else:
                engine.ingest_batch(batch)
            n += size
            if end_turn:
                engine.after_turn()
            # The newest message, the oldest and one in between: each found right away.
            for i in {0, n // 2, n - 1}:
                hits = engine.vault.grep(f"marker{i:05d}", conversation="agent", scope="messages")["hits"]
                assert [h["snippet"].count(f"marker{i:05d}") > 0 for h in hits] == [True], (i, hits)
            assert "marker" in engine.call_tool("lcm_grep", {"pattern": f"marker{n - 1:05d}"})


def test_a_long_running_engine_keeps_no_list_of_every_note_it_wrote(tmp_path: Path) -> None:
    small = dict(fresh_tail_count=4, leaf_min_messages=2, leaf_max_messages=4, leaf_target_tokens=60,
                 condensed_target_tokens=80, condensed_min_fanin=2, condensed_max_fanin=3, **QUIET)
    with Engine(tmp_path / "v", "agent", settings=Settings(**small), token_budget=400) as engine:
        for i in range(80):
            engine.ingest(_msg(i))
            engine.after_turn()
        assert engine.info()["summaries"] > 5  # compaction wrote notes, many times
        assert engine.vault.dag.journal == []


def test_an_engine_gives_freed_memory_back_every_few_thousand_messages(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import platform

    from vaultlcm import engine as engine_module

    calls: list[bool] = []
    real = engine_module.release_free_memory
    monkeypatch.setattr(engine_module, "release_free_memory", lambda: calls.append(real()) or calls[-1])
    monkeypatch.setattr(engine_module, "TRIM_EVERY", 10)
    with Engine(tmp_path / "v", "agent", settings=Settings(**QUIET)) as engine:
        for i in range(25):
            engine.ingest(_msg(i))
            engine.after_turn()
        assert engine.vault.grep("marker00024", conversation="agent")["hits"]  # nothing in use was let go
    assert len(calls) == 2  # at the ends of turns 10 and 20, not on every turn
    # glibc has malloc_trim; another C library (musl, macOS) keeps its own ways and the call is skipped.
    assert all(calls) == (platform.libc_ver()[0] == "glibc")
