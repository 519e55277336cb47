"""The recall benchmark (benchmarks/recall/): generator invariants, scoring rules, and a real end-to-end run."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vaultlcm import Message

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from recall import run, scoring, sessions
from recall.agent import content_words, word_sets
from recall.facts import KINDS, QA
from recall.scoring import answer_regex


@pytest.fixture(scope="module")
def tiny() -> sessions.Session:
    return sessions.generate("tiny", 7)


def test_same_seed_same_bytes_other_seed_other_bytes(tiny: sessions.Session) -> None:
    again = sessions.generate("tiny", 7)
    assert again.to_jsonl() == tiny.to_jsonl()
    assert [q.to_dict() for q in again.qas] == [q.to_dict() for q in tiny.qas]
    assert sessions.generate("tiny", 8).to_jsonl() != tiny.to_jsonl()


def test_messages_are_native_records_vaultlcm_counts_like_the_benchmark(tiny: sessions.Session) -> None:
    stamps = [m["timestamp"] for m in tiny.messages]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    calls: set[str] = set()
    for m in tiny.messages:
        assert set(m) == {"role", "content", "timestamp"}
        msg = Message(role=m["role"], timestamp=m["timestamp"], content=m["content"])
        assert msg.searchable_text() == sessions.message_text(m)
        for b in m["content"]:
            if b["type"] == "tool_call":
                calls.add(b["id"])
            elif b["type"] == "tool_result":
                assert b["call_id"] in calls, "a tool result before its call"
    assert abs(tiny.tokens - sessions.SIZES["tiny"][0]) <= sessions.SIZES["tiny"][0] * sessions.TOLERANCE


def test_answers_are_planted_where_recorded_and_never_in_the_question(tiny: sessions.Session) -> None:
    assert {q.kind for q in tiny.qas} == set(KINDS)
    texts = [sessions.message_text(m) for m in tiny.messages]
    for q in tiny.qas:
        assert q.positions, q.id
        planted = "\n".join(texts[i] for i in q.positions)
        assert scoring.present(q, planted), q.id
        for a in q.answers + ([q.stale] if q.stale else []):
            assert not answer_regex(a).search(q.question), (q.id, a)
        if q.kind == "counting":
            assert len(q.count_details) == int(q.answers[0]) == len(q.positions)
        if q.kind == "updated":
            first, last = q.positions[0], q.positions[-1]
            assert answer_regex(q.stale).search(texts[first]) and not answer_regex(q.answers[0]).search(texts[first])
            assert first < last and answer_regex(q.answers[0]).search(texts[last])
        others = "\n".join(t for i, t in enumerate(texts) if i not in q.positions)
        assert not scoring.present(q, others) or q.kind == "counting", f"{q.id}: answer also outside its plants"


def test_32k_session_hits_its_size_and_spreads_facts_over_the_days() -> None:
    s = sessions.generate("32k", 7)  # generate() runs check(): sizes, plants, questions
    _, days, questions, _ = sessions.SIZES["32k"]
    assert len(s.by_day()) == days
    assert abs(len(s.qas) - questions) <= 2
    spots = sorted(p.index / len(s.messages) for p in s.plants)
    assert spots[0] < 0.2 and spots[-1] > 0.8 and any(0.4 < x < 0.6 for x in spots)


@pytest.mark.slow
@pytest.mark.parametrize("size", ["128k", "512k"])
def test_large_sessions_keep_their_invariants(size: str) -> None:
    s = sessions.generate(size, 7)
    assert len(s.by_day()) == sessions.SIZES[size][1]


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=10_000))
def test_any_seed_gives_a_valid_session(seed: int) -> None:
    s = sessions.generate("tiny", seed)
    sessions.check(s)


# -- scoring ----------------------------------------------------------------------------


@given(st.text(min_size=1).filter(lambda a: a.split() != []), st.text(), st.text())
def test_an_answer_is_found_wherever_it_stands_apart(answer: str, before: str, after: str) -> None:
    assert answer_regex(answer).search(f"{before} {answer} {after}")


@given(st.from_regex(r"[A-Za-z0-9_]{1,12}", fullmatch=True))
def test_an_answer_glued_to_a_longer_word_does_not_count(answer: str) -> None:
    assert not answer_regex(answer).search(f"z{answer}z")
    assert answer_regex(answer).search(f"({answer.upper()})")


def test_scoring_rules() -> None:
    assert not answer_regex("750 ms").search("timeout 1750 ms")
    assert answer_regex("October 4").search("moved to\nOCTOBER   4.")
    q = QA("c", "counting", "x", "How many times did the routing-api deploy fail?", ["3"], [],
           count_details=["build 5101", "build 5202", "build 5303"], count_subject=["routing-api", "deploy"])
    assert scoring.present(q, "build 5101 … build 5202 … build 5303")
    assert not scoring.present(q, "build 5101 … build 5202 … build 53031")
    assert scoring.present(q, "the routing-api deploy failed 3 times this sprint")
    assert scoring.present(q, "routing-api: deploy failed three times")
    assert not scoring.present(q, "the notifier deploy failed 3 times")
    u = QA("u", "updated", "from-to", "When is the release?", ["October 4"], [], stale="October 3")
    assert scoring.latest_first(u, ["moved from October 3 to October 4", "October 3"]) is True
    assert scoring.latest_first(u, ["October 3", "now October 4"]) is False
    assert scoring.latest_first(u, ["nothing"]) is None
    assert scoring.context_text([{"role": "user", "content": [{"type": "tool_use", "id": "x1", "input": {"p": "a"}},
                                                             {"type": "text", "text": "b"}]}]) == "a\nb"


def test_agent_words_come_from_the_question() -> None:
    q = "How many times did the routing-api deploy fail?"
    assert content_words(q) == ["routing-api", "deploy", "fail"]
    assert content_words("When is code freeze?") == ["code", "freeze"]
    assert word_sets(["a", "b", "c"]) == [("a", "b", "c"), ("a", "b"), ("a", "c"), ("a",), ("b", "c"), ("b",), ("c",)]


# -- end to end ---------------------------------------------------------------------------


def test_quick_run_end_to_end_on_a_real_vault(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    out = tmp_path / "results.json"
    results = run.main(["--quick", "--workdir", str(tmp_path), "--json", str(out), "--write-docs", "--docs-dir", str(docs)])
    tiny = results["sizes"]["tiny"]
    cells = {c["strategy"]: c for c in tiny["contexts"]}
    assert set(cells) == {"vaultlcm", "window", "window+summary"}
    for c in cells.values():
        assert c["budget"] == 8000 and 0 <= c["score"] <= 1 and set(c["found"]) == set(tiny["kinds"])
        assert 0 < c["tokens"] <= 8000
    assert cells["window"]["score"] == 1.0  # the whole tiny history fits the window
    assert 0 < cells["vaultlcm"]["extra"]["budget_use"] <= 1
    assert cells["vaultlcm"]["extra"]["vault_changed"] in (True, False)
    agent = tiny["agent"]
    assert agent["questions"] == len(tiny["kinds"]) and 0 < agent["found"] <= agent["questions"]
    assert agent["calls"] >= agent["questions"]
    assert all(t["query"] and set(t["query"].split()) <= set(t["words"]) for t in agent["traces"])
    for name in ("session tiny", "sample transcript"):
        q = results["quality"][name]
        assert q["notes"] > 0 and 0 in q["by_depth"] and q["by_depth"][0]["ratio"]["n"] > 0
        assert 0 <= q["leaf_tool_share"] + q["leaf_user_share"] <= 1
    assert results["quality"]["session tiny"]["by_depth"][0]["facts_traced"] > 0
    assert json.loads(out.read_text())["sizes"]["tiny"]["questions"] == len(tiny["kinds"])
    md = (docs / "RECALL.md").read_text()
    assert "python benchmarks/recall/run.py --quick" in md and "| tiny | 8,000 |" in md and "recall.svg" in md
    svg = ET.parse(docs / "recall.svg").getroot()
    assert svg.tag.endswith("svg") and len(svg.findall(".//{http://www.w3.org/2000/svg}rect")) >= 4
    again = run.main(["--render", str(out)])
    assert again["sizes"]["tiny"]["contexts"] == json.loads(out.read_text())["sizes"]["tiny"]["contexts"]


def test_agent_uses_newer_recall_options_when_the_api_has_them(tmp_path: Path, tiny: sessions.Session) -> None:
    """Paging, totals, expand around a message and by query: picked up by signature, never required."""
    from recall.agent import RecallAgent, Trace
    from recall.context import build_vault

    from vaultlcm import Vault

    calls: list[dict] = []

    class NewerVault(Vault):
        def grep(self, pattern: str, *, offset: int = 0, limit: int = 20, **kw):  # type: ignore[override]
            calls.append({"grep": pattern, "offset": offset})
            every = super().grep(pattern, limit=1000, **kw)["hits"]
            return {"hits": every[offset : offset + limit], "total": len(every)}

        def expand(self, item_id: str, *, max_tokens=None, depth=None, around=None, query=None):  # type: ignore[override]
            calls.append({"expand": item_id, "around": around, "query": query})
            return super().expand(item_id, max_tokens=max_tokens, depth=depth)

    built = build_vault(tiny, tmp_path / "v")
    with NewerVault(built.root, environ={}) as vault:
        agent = RecallAgent(vault)
        assert agent.features == {"grep_offset": True, "expand_around": True, "expand_query": True}
        traces = [agent.ask(q) for q in tiny.qas]
        expands = [c for c in calls if "expand" in c]
        calls.clear()
        paged, total = agent.grep(Trace(tiny.qas[0], []), "pytest", 3)
        assert [c["offset"] for c in calls] == [0, 10, 20][: len(calls)] and len(calls) > 1
        assert len(paged) == min(total, 30) and len({h["id"] for h in paged}) == len(paged)
    assert all(isinstance(t.total, int) for t in traces if t.items)
    assert expands and all((c["around"] == 2) == str(c["expand"]).startswith("m-") for c in expands)
    assert all((c["query"] is not None) == str(c["expand"]).startswith("sum_") for c in expands)
    counting = next(t for t in traces if t.qa.kind == "counting")
    assert counting.found == (counting.total == int(counting.qa.answers[0]) or scoring.present(counting.qa, "\n".join(counting.items)))
    class OlderVault(Vault):  # the API before paging and expand-around existed
        def grep(self, pattern: str, *, limit: int = 20, **kw):  # type: ignore[override]
            return super().grep(pattern, limit=limit, **kw)

        def expand(self, item_id: str, *, max_tokens=None, depth=None):  # type: ignore[override]
            return super().expand(item_id, max_tokens=max_tokens, depth=depth)

    with OlderVault(built.root, environ={}) as older:
        assert RecallAgent(older).features == {"grep_offset": False, "expand_around": False, "expand_query": False}
        assert RecallAgent(older).ask(tiny.qas[0]).items is not None  # degrades, never fails
    with Vault(built.root, environ={}) as current:
        assert RecallAgent(current).features == {"grep_offset": True, "expand_around": True, "expand_query": True}
