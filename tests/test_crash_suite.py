"""The crash suite (benchmarks/crash_suite.py): a CI-sized run here, hundreds of trials with -m slow."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import crash_suite  # noqa: E402


def _check(out: crash_suite.Outcome) -> None:
    assert out.acknowledged_messages > 0, "the worker never acknowledged a call"
    assert out.lost == 0, out.details
    assert out.partial_calls == 0, out.details
    assert out.doctor_problems_after_fix == 0, out.details
    assert out.failed_restarts == 0, out.details


def test_a_few_sigkills_lose_nothing_acknowledged(tmp_path: Path) -> None:
    _check(crash_suite.run(4, seed=7, root=tmp_path / "v"))


@pytest.mark.slow
@pytest.mark.timeout(3600)  # 200 trials took 1,108 s on a quiet 2-core machine: far over the suite's 300 s per test
def test_two_hundred_sigkills_lose_nothing_acknowledged(tmp_path: Path) -> None:
    _check(crash_suite.run(200, seed=11, root=tmp_path / "v"))
