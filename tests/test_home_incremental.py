"""The home note after an ingest that starts a new day: patched, yet the same bytes as written whole."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st

from vaultlcm import Vault
from vaultlcm.home import render_home
from vaultlcm.settings import Settings

STEPS = st.lists(st.one_of(
    st.tuples(st.just("ingest"), st.integers(1, 28), st.integers(1, 6)),  # day of November, messages
    st.tuples(st.just("compact"), st.just(0), st.just(0)),
    st.tuples(st.just("rename"), st.just(0), st.just(0)),
), min_size=1, max_size=8)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_the_patched_home_note_is_the_rendered_one(tmp_path_factory, steps) -> None:
    root: Path = tmp_path_factory.mktemp("v")
    n = 0
    days: set[int] = set()
    with Vault.init(root, settings=Settings(leaf_target_tokens=60, fresh_tail_count=2,
                                            background_compaction=False)) as v:
        home = root / "conversations/c/c.md"
        for what, day, count in steps:
            if what == "ingest":
                v.ingest("c", [{"role": "user" if (n + i) % 2 == 0 else "assistant",
                                "timestamp": f"2026-11-{day:02d}T{(n + i) % 24:02d}:00:00Z",
                                "content": f"message {n + i}: port {8000 + n + i} is open"} for i in range(count)])
                n += count
                if day not in days:  # a new day refreshes the note (a known day leaves it for later)
                    days.add(day)
                    assert home.read_text(encoding="utf-8") == render_home(v.layout, v.catalog, v.dag, "c")
            elif what == "compact" and n:
                v.compact("c", force=True)
            elif what == "rename" and home.exists():
                # A stale home note in another shape is written whole on the next new day.
                home.write_text(home.read_text(encoding="utf-8").replace("## Daily logs", "## Logs"), encoding="utf-8")
        if n:
            v.ingest("c", [{"role": "user", "timestamp": "2026-12-01T00:00:00Z", "content": "a new day"}])
            assert home.read_text(encoding="utf-8") == render_home(v.layout, v.catalog, v.dag, "c")
            assert "[[conversations/c/logs/2026-12-01|2026-12-01]]" in home.read_text(encoding="utf-8")


def test_a_new_day_does_not_read_the_dag(tmp_path: Path, monkeypatch) -> None:
    """The agent's ingest path: a new day refreshes the properties and the day list, never lists the summaries."""
    with Vault.init(tmp_path, settings=Settings(leaf_target_tokens=60, fresh_tail_count=4, background_compaction=False)) as v:
        v.ingest("c", [{"role": "user" if i % 2 == 0 else "assistant", "timestamp": f"2026-11-01T10:{i:02d}:00Z",
                        "content": f"message {i}: port {8000 + i}"} for i in range(40)])
        v.compact("c", force=True)
        assert v.dag.all("c")
        calls: list[str] = []
        real_all = type(v.dag).all
        monkeypatch.setattr(type(v.dag), "all", lambda self, *a, **k: calls.append("all") or real_all(self, *a, **k))
        v.ingest("c", [{"role": "user", "timestamp": "2026-11-02T10:00:00Z", "content": "the next day"}])
        assert calls == []
        text = (tmp_path / "conversations/c/c.md").read_text(encoding="utf-8")
        assert "[[conversations/c/logs/2026-11-02|2026-11-02]]" in text and "messages: 41" in text
        assert "## Top-level summaries" in text
        monkeypatch.undo()
        assert text == render_home(v.layout, v.catalog, v.dag, "c")
