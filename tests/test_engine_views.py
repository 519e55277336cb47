"""A long-running Engine's per-turn work does not grow with history: the home note is rewritten at the
engine's pace (not after every compaction), and compaction counts a context at the engine's budget."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from test_lcm import SMALL, conversation
from vaultlcm import Engine, Settings
from vaultlcm import engine as engine_module
from vaultlcm.assembly import Assembler


def _home_summaries(eng: Engine) -> int | None:
    """The ``summaries`` property of the home note as written on disk (None before it exists)."""
    path = eng.vault.layout.home_note(eng.conversation)
    if not path.exists():
        return None
    found = re.search(r"^summaries: (\d+)$", path.read_text(), re.M)
    return int(found.group(1)) if found else None


def _summaries(eng: Engine) -> int:
    return eng.vault.dag.counts(eng.conversation)[0]


def _turns(eng: Engine, start: int, n: int, tag: str = "") -> None:
    """Turns ``start`` to ``start + n`` of one conversation (a user message, a tool call and result, a reply);
    ``tag`` makes the texts this test's own (the process's token-count cache is shared by every test)."""
    msgs = json.loads(json.dumps(conversation([("u", 30), ("t", 20), ("a", 40)] * (start + n)))
                      .replace("fact-", f"fact-{tag}"))
    for k in range(start, start + n):
        eng.ingest_batch(msgs[4 * k:4 * k + 4])  # "t" is a call and its result
        eng.after_turn()


def test_the_home_note_follows_compaction_at_the_engines_pace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_module, "VIEWS_EVERY", 3600.0)
    eng = Engine(tmp_path / "v", "agent", settings=Settings(**SMALL), token_budget=600)
    with eng:
        _turns(eng, 0, 12)
        first = _home_summaries(eng)
        assert first is not None and first > 0  # the first compaction's views are written at once
        _turns(eng, 12, 24)
        assert _summaries(eng) > first  # later compactions made more summaries...
        assert _home_summaries(eng) == first  # ...and the home note waits for its time
        now = _summaries(eng)
    assert _home_summaries(eng) == now  # what was owed is written when the engine is let go


def test_with_no_wait_every_compaction_rewrites_the_home_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_module, "VIEWS_EVERY", 0.0)
    with Engine(tmp_path / "v", "agent", settings=Settings(**SMALL), token_budget=600) as eng:
        for k in range(6):
            _turns(eng, 6 * k, 6)
            if eng.last_report is not None:
                assert _home_summaries(eng) == _summaries(eng)
        assert _summaries(eng) > 0


def test_an_idle_background_engine_writes_the_owed_views_when_due(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_module, "VIEWS_EVERY", 0.5)
    settings = Settings(**{**SMALL, "background_compaction": True})
    with Engine(tmp_path / "v", "agent", settings=settings, token_budget=600) as eng:
        for k in range(8):
            _turns(eng, 4 * k, 4)
            assert eng.wait_idle(60)
        # No further turn: the worker writes what the last compaction owes once it is due.
        deadline = time.monotonic() + 20
        while _home_summaries(eng) != _summaries(eng) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _home_summaries(eng) == _summaries(eng) > 0


def test_compaction_counts_a_context_at_the_engines_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Compaction counts the new summaries only (the engine's next assemble counts its context); a context at
    the engine's budget, never the vault's, is counted when summaries were written since the last one."""
    budgets: list[int | None] = []
    real = Assembler.prime

    def spy(self: Assembler, conv: str, summary_ids: list[str], budget: int | None, *args: Any) -> None:
        budgets.append(budget)
        real(self, conv, summary_ids, budget, *args)

    monkeypatch.setattr(Assembler, "prime", spy)
    settings = Settings(**{**SMALL, "context_budget_tokens": 100_000})
    with Engine(tmp_path / "v", "agent", settings=settings, token_budget=700) as eng:
        _turns(eng, 0, 16, tag="prime-")
        assert eng.last_report is not None and budgets and set(budgets) == {None}
        eng.assemble()
    assert set(budgets) == {None}  # the engine's own context came after the last compaction: nothing owed
    budgets.clear()
    with Engine(tmp_path / "v", "agent", settings=settings, token_budget=700) as eng:
        _turns(eng, 16, 8, tag="prime-")
        assert None in budgets
    # Not the vault's 100k: that context would be 140 times this engine's.
    assert budgets[-1] == 700 and set(budgets) == {None, 700}
    # What it counted is what the next process meets: it assembles with counts alone.
    out = subprocess.run([sys.executable, "-c", NEW_PROCESS, str(tmp_path / "v"), "700",
                          json.dumps({**SMALL, "context_budget_tokens": 100_000})], capture_output=True, text=True,
                         check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"loaded": False}


NEW_PROCESS = """
import json, sys
from vaultlcm import Settings, Vault, tokens
with Vault(sys.argv[1], settings=Settings(**json.loads(sys.argv[3]))) as v:
    v.assemble("agent", int(sys.argv[2]))
print(json.dumps({"loaded": tokens._encoding is not None}))
"""
