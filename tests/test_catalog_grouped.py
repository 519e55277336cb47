"""``Catalog.grouped``: a rebuild's small transactions commit a few hundred at a time, each still all or nothing."""

from __future__ import annotations

import sqlite3
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from vaultlcm.catalog import Catalog


class Boom(Exception):
    pass


def _rows(path: Path) -> list[tuple[str, str]]:
    """What another connection sees: only what was committed."""
    db = sqlite3.connect(path)
    try:
        return sorted(db.execute("SELECT key, value FROM meta WHERE key LIKE 'k%'").fetchall())
    finally:
        db.close()


def _write(cat: Catalog, key: str, fail: bool) -> None:
    """One transaction of two statements; ``fail`` raises after both ran (nothing of it may stay)."""
    try:
        with cat.transaction() as db:
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES(?, 'a')", (key,))
            db.execute("UPDATE meta SET value = value || 'b' WHERE key = ?", (key,))
            if fail:
                raise Boom(key)
    except Boom:
        pass


def _model(writes: list[tuple[int, bool]]) -> list[tuple[str, str]]:
    return sorted({f"k{n}": "ab" for n, fail in writes if not fail}.items())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.booleans()), max_size=40), st.integers(1, 7))
def test_grouped_transactions_leave_what_one_at_a_time_would(writes: list[tuple[int, bool]], every: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        alone, grouped = Path(tmp) / "alone.sqlite", Path(tmp) / "grouped.sqlite"
        one, many = Catalog(Path(tmp), alone), Catalog(Path(tmp), grouped)
        try:
            for n, fail in writes:
                _write(one, f"k{n}", fail)
            with many.grouped(every):
                for i, (n, fail) in enumerate(writes):
                    _write(many, f"k{n}", fail)
                    # Another connection sees whole groups (a failed transaction counts in its group), no more.
                    assert _rows(grouped) == _model(writes[: (i + 1) // every * every])
            assert _rows(grouped) == _rows(alone) == _model(writes)
        finally:
            one.close()
            many.close()


def test_a_group_commits_every_n_transactions_and_the_rest_at_the_end(tmp_path: Path) -> None:
    cat = Catalog(tmp_path, tmp_path / "c.sqlite")
    try:
        with cat.grouped(3):
            for n in range(7):
                _write(cat, f"k{n}", False)
                seen = len(_rows(tmp_path / "c.sqlite"))
                assert seen == (n + 1) // 3 * 3, n  # only whole groups are visible
        assert len(_rows(tmp_path / "c.sqlite")) == 7
    finally:
        cat.close()


def test_a_failure_out_of_the_group_rolls_back_its_open_part_only(tmp_path: Path) -> None:
    cat = Catalog(tmp_path, tmp_path / "c.sqlite")
    try:
        with pytest.raises(Boom), cat.grouped(2):
            for n in range(3):
                _write(cat, f"k{n}", False)
            raise Boom("stop")
        assert [k for k, _ in _rows(tmp_path / "c.sqlite")] == ["k0", "k1"]  # the first group was committed
        _write(cat, "k9", False)  # the catalog works on as before
        assert cat.get_meta("k9") == "ab"
    finally:
        cat.close()


def test_another_thread_waits_for_the_open_group(tmp_path: Path) -> None:
    cat = Catalog(tmp_path, tmp_path / "c.sqlite")
    seen: list[str | None] = []
    try:
        with cat.grouped(100):
            _write(cat, "k1", False)
            other = threading.Thread(target=lambda: seen.append(cat.get_meta("k1")))
            other.start()
            other.join(0.3)
            assert other.is_alive()  # it waits: the group's transaction holds the connection
        other.join(5)
        assert seen == ["ab"]
    finally:
        cat.close()
