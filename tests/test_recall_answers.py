"""Recall tools that answer an agent's question: hit lines, sorting, counting, paging,
the expand modes, the one-hop ask, id validation and regex limits (real vault, real index, real CLI)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from vaultlcm import Engine, Settings, Vault
from vaultlcm.cli import cli
from vaultlcm.errors import UsageError
from vaultlcm.expand import MESSAGE_OVERHEAD
from vaultlcm.tokens import count_tokens


def _ops_messages() -> list[dict[str, Any]]:
    """A multi-day session: a tool turn, a pinned version, a deadline that moves, deploys that fail, a fix."""
    out: list[dict[str, Any]] = []

    def add(day: int, hh: int, mm: int, role: str, content: Any) -> None:
        out.append({"role": role, "timestamp": f"2026-11-{day:02d}T{hh:02d}:{mm:02d}:00Z", "content": content})

    add(1, 9, 0, "user", "What port does the routing-api use?")
    add(1, 9, 1, "assistant", [{"type": "text", "text": "Let me check the config."},
                               {"type": "tool_call", "id": "call_0042", "name": "read_file",
                                "arguments": {"path": "config/routing.yaml"}}])
    add(1, 9, 2, "tool", [{"type": "tool_result", "call_id": "call_0042", "content": "listen:\n  port: 8443\n"}])
    add(1, 9, 3, "assistant", "The routing-api listens on port 8443.")
    add(1, 10, 0, "user", "We pinned numpy to 1.26 yesterday, remember that.")
    add(1, 10, 1, "assistant", "Noted: numpy stays pinned at 1.26.")
    add(1, 11, 0, "user", "The deadline for the LEDG-482 fix is October 3.")
    add(1, 11, 1, "assistant", "Got it: the LEDG-482 deadline is October 3.")
    for day, runs in ((2, 3), (3, 2)):
        for k in range(runs):
            add(day, 9 + k, 0, "user", "Deploy the routing-api again please.")
            add(day, 9 + k, 5, "assistant", f"The routing-api deploy failed: disk full on build-{k}.")
    add(2, 15, 0, "user", "We moved the deadline from October 3 to October 4.")
    add(2, 15, 1, "assistant", "Understood, the deadline is now October 4.")
    add(2, 16, 0, "user", "Ticket LEDG-482 is about the rounding bug in compute_due_date.")
    add(2, 16, 1, "assistant", "I will look at compute_due_date.")
    add(3, 14, 0, "assistant", "Commit a1b2c3d fixes the rounding in compute_due_date; tests pass.")
    for i in range(60):
        add(4, 8 + i // 30, (i * 2) % 60, "user" if i % 2 == 0 else "assistant",
            f"Routine check {i}: lint, format and type checks are green.")
    return out


MESSAGES = _ops_messages()
Q_PORT, CALL, RESULT, REPLY_PORT = 0, 1, 2, 3
PINNED = 4
DEADLINE_OLD, DEADLINE_NEW = 6, 18
TICKET, COMMIT = 20, 22


@pytest.fixture(scope="module")
def ops(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("ops")
    with Vault.init(root) as v:
        ids = v.ingest("ops", MESSAGES)
        v.compact("ops", force=True)
        assert v.catalog.get(ids[COMMIT]).covered, "the facts must be compacted away"
    return root, ids


def run(root: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--vault", str(root), *args], catch_exceptions=False)


# -- grep: hit lines ---------------------------------------------------------------------


def test_hits_carry_time_role_and_placement(ops: tuple[Path, list[str]]) -> None:
    root, ids = ops
    with Vault(root) as v:
        [hit] = v.grep("8443", scope="messages", conversation="ops")["hits"][:1]
        leaf = v.catalog.get(hit["id"]).covered
        top = v.dag.get(leaf).parent
        assert hit["at"].endswith("Z") and hit["at"].startswith("2026-11-01T09:0")
        assert hit["role"] in ("tool", "assistant")
        assert hit["covered_by"] == leaf and hit["shown_as"] == top and hit["shown_depth"] == v.dag.get(top).depth
        summary_hits = v.grep("8443", scope="summaries")["hits"]
        assert summary_hits, "the leaf summary keeps the port"
        s = summary_hits[0]
        assert "role" not in s and s["depth"] == v.dag.get(s["id"]).depth
        if s["id"] == top:  # the top node is shown as itself and covered by nothing
            assert "covered_by" not in s and s["shown_as"] == top
        else:
            assert s["covered_by"] == v.dag.get(s["id"]).parent


def test_stemmed_words_find_other_forms(ops: tuple[Path, list[str]]) -> None:
    root, ids = ops
    with Vault(root) as v:
        assert ids[PINNED] in [h["id"] for h in v.grep("pin numpy", scope="messages")["hits"]]
        deploys = {h["id"] for h in v.grep("deploys", scope="messages", limit=50)["hits"]}
        assert {ids[9], ids[11], ids[13]} <= deploys  # "deploy failed" messages of day 2
        assert v.grep("compute_due_dates")["total"] == 0  # identifiers stay exact


def test_newest_statement_first(ops: tuple[Path, list[str]]) -> None:
    """A changed value: sorting by time puts the latest statement first; relevance ties go newest first."""
    root, ids = ops
    with Vault(root) as v:
        newest = [h["id"] for h in v.grep("deadline", scope="messages", sort="newest")["hits"]]
        assert newest.index(ids[DEADLINE_NEW]) < newest.index(ids[DEADLINE_OLD])
        oldest = [h["id"] for h in v.grep("deadline", scope="messages", sort="oldest")["hits"]]
        assert oldest == list(reversed(newest))
        r = v.grep("routing-api deploy failed disk full", scope="messages")
        same = r["hits"][: r["total"]]  # the hits with every word (relaxed ones follow)
        assert len(same) == 5 and all(set(h["matched"]) == {"routing-api", "deploy", "failed", "disk", "full"}
                                      for h in same)
        assert [h["at"] for h in same] == sorted((h["at"] for h in same), reverse=True)


def test_few_matches_come_newest_first_then_summaries(ops: tuple[Path, list[str]]) -> None:
    """Few raw messages with every word: newest first (a short stale line must not lead), summaries after."""
    root, ids = ops
    with Vault(root) as v:
        r = v.grep("deadline October", conversation="ops")
        kinds = [h["kind"] for h in r["hits"]]
        assert kinds == sorted(kinds) and r["total"] == len(r["hits"])  # messages, then summaries; nothing relaxed
        msgs = [h["id"] for h in r["hits"] if h["kind"] == "message"]
        assert msgs == [ids[DEADLINE_NEW + 1], ids[DEADLINE_NEW], ids[DEADLINE_OLD + 1], ids[DEADLINE_OLD]]
        assert "relaxed" not in r and all("matched" not in h for h in r["hits"])


def test_some_of_the_words_follow_as_raw_messages(ops: tuple[Path, list[str]]) -> None:
    """One message has every word: after it and the summaries come the messages with some of them."""
    root, ids = ops
    with Vault(root) as v:
        r = v.grep("deadline moved", conversation="ops", limit=50)
        hits = r["hits"]
        assert r["relaxed"] and r["by_kind"]["messages"] == 1 and r["total"] == 1 + r["by_kind"]["summaries"]
        assert hits[0]["id"] == ids[DEADLINE_NEW] and hits[0]["matched"] == ["deadline", "moved"]
        rest = hits[r["total"]:]
        assert r["some_words"] == len(rest) == 3 and r["next_offset"] is None
        assert {h["id"] for h in rest} == {ids[DEADLINE_OLD], ids[DEADLINE_OLD + 1], ids[DEADLINE_NEW + 1]}
        assert all(h["kind"] == "message" and h["matched"] == ["deadline"] for h in rest)  # never a summary
        assert all(h["kind"] == "summary" for h in hits[1 : r["total"]])
        pages = [h["id"] for o in range(0, len(hits)) for h in v.grep("deadline moved", conversation="ops",
                                                                        limit=1, offset=o)["hits"]]
        assert pages == [h["id"] for h in hits]  # paging walks the same list, one hit at a time
        assert v.grep("deadline moved", conversation="ops", count=True)["total"] == r["total"]  # counts all words
        assert "relaxed" not in v.grep("deadline moved", conversation="ops", sort="newest")  # time sorts: all words
        assert "relaxed" not in v.grep("deadline moved", conversation="ops", scope="summaries")


def test_common_words_are_not_relaxed(ops: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranking every message with one of the words costs too much when they are common: all words only."""
    import vaultlcm.grep as grep_module

    root, ids = ops
    with Vault(root) as v:
        assert v.indexer.ready().some_words_docs("deadline moved") > 3
        monkeypatch.setattr(grep_module, "RELAX_MAX_DOCS", 3)
        r = v.grep("deadline moved", conversation="ops", limit=50)
        assert "relaxed" not in r and r["hits"][0]["id"] == ids[DEADLINE_NEW] and len(r["hits"]) == r["total"]


def test_all_words_but_one_join_when_few(ops: tuple[Path, list[str]]) -> None:
    """Three words or more: the few messages missing one of them join those with all, newest first."""
    root, ids = ops
    with Vault(root) as v:
        r = v.grep("deadline LEDG-482 fix", conversation="ops", scope="messages", limit=50)
        got = [(h["id"], h["matched"]) for h in r["hits"]]
        assert got[:2] == [(ids[DEADLINE_OLD + 1], ["deadline", "LEDG-482"]),  # newer, two of the three words
                           (ids[DEADLINE_OLD], ["deadline", "LEDG-482", "fix"])]
        assert got[2:] == [(ids[TICKET], ["LEDG-482"])]  # LEDG-482 is required: nothing without it
        assert r["total"] == 1 and r["some_words"] == 2


def test_cli_and_tool_say_which_hits_have_some_words(ops: tuple[Path, list[str]]) -> None:
    root, ids = ops
    out = run(root, "grep", "deadline moved", "-c", "ops", "--scope", "messages")
    assert out.exit_code == 0 and "1 hits have every word; the 3 others have some of them" in out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 4 and "has deadline, moved" in lines[0] and all("has deadline)" in x for x in lines[1:])
    data = json.loads(run(root, "grep", "deadline moved", "-c", "ops", "--json").stdout)
    assert data["relaxed"] is True and data["some_words"] == 3
    none = run(root, "grep", "nowhere-to-be-found deadline", "-c", "ops")
    assert none.exit_code == 1  # an identifier nobody wrote: no hit, whatever the other words
    eng = Engine(root, "ops")
    eng.bootstrap()
    try:
        text = eng.call_tool("lcm_grep", {"pattern": "deadline moved", "scope": "messages"})
        assert text.splitlines()[0] == "1 matches (sort relevance); 3 more hits have some of the words " \
            "(listed after, most words first); showing 1-4"
        grep_tool = next(t for t in eng.tool_definitions() if t["name"] == "lcm_grep")
        assert "say which they have" in grep_tool["description"]
    finally:
        eng.dispose()


def test_a_doer_s_name_finds_the_verb_the_text_uses(ops: tuple[Path, list[str]]) -> None:
    root, _ = ops
    with Vault(root) as v:
        r = v.grep("formatter", conversation="ops")
        assert r["related_forms"] == "format*" and r["total"] >= 1 and r["hits"]
        assert all("format" in h["snippet"].lower() for h in r["hits"])
        assert "related_forms" not in v.grep("format", conversation="ops")  # found as written: as before
        assert v.grep("formatter", conversation="ops", count=True)["total"] == 0  # a count counts what was asked
        nothing = v.grep("zyxwvutser", conversation="ops")  # its root matches nothing either
        assert nothing["total"] == 0 and "related_forms" not in nothing
    out = run(root, "grep", "formatter", "-c", "ops")
    assert out.exit_code == 0 and out.stdout.strip()
    assert "Nothing has the words as written; these hits match format* instead." in out.stderr
    assert run(root, "grep", "zyxwvutser", "-c", "ops").exit_code == 1
    eng = Engine(root, "ops")
    eng.bootstrap()
    try:
        first = eng.call_tool("lcm_grep", {"pattern": "formatter"}).splitlines()[0]
        assert first.startswith("nothing has the words as written; ") and " matches of format* " in first
    finally:
        eng.dispose()


# -- grep: counting and paging -------------------------------------------------------------


def test_count_reports_every_event_per_day(ops: tuple[Path, list[str]]) -> None:
    root, _ = ops
    with Vault(root) as v:
        c = v.grep("routing-api deploy failed", scope="messages", count=True)
        assert c == {"total": 5, "messages": 5, "summaries": 0,
                     "per_day": {"2026-11-02": {"messages": 3}, "2026-11-03": {"messages": 2}}}
        paged = v.grep("routing-api deploy failed", scope="messages", limit=2)
        assert paged["total"] == 5 and len(paged["hits"]) == 2 and paged["next_offset"] == 2
        assert paged["by_kind"] == {"messages": 5, "summaries": 0}
        both = v.grep("routing-api deploy failed", limit=2)
        assert both["by_kind"]["messages"] == 5 and both["total"] == 5 + both["by_kind"]["summaries"]
        last = v.grep("routing-api deploy failed", limit=50)
        assert last["by_kind"] == both["by_kind"] and last["next_offset"] is None
    out = run(root, "grep", "routing-api deploy failed", "--scope", "messages", "--count", "--json")
    assert out.exit_code == 0 and json.loads(out.stdout)["total"] == 5
    text = run(root, "grep", "routing-api deploy failed", "--scope", "messages", "--count")
    assert text.stdout.splitlines() == ["5 matches: 5 messages, 0 summaries, on 2 days",
                                        "2026-11-02: 3 messages", "2026-11-03: 2 messages"]
    none = run(root, "grep", "nothing-like-this", "--count")
    assert none.exit_code == 1 and none.stdout.startswith("0 matches")


@pytest.mark.parametrize("sort", ["relevance", "newest", "oldest"])
def test_offset_pages_through_every_hit(ops: tuple[Path, list[str]], sort: str) -> None:
    root, _ = ops
    with Vault(root) as v:
        whole = v.grep("routine check", scope="messages", limit=100, sort=sort)
        assert whole["total"] == 60 and whole["next_offset"] is None
        seen: list[str] = []
        offset: int | None = 0
        while offset is not None:
            page = v.grep("routine check", scope="messages", limit=7, offset=offset, sort=sort)
            assert page["total"] == 60
            seen += [h["id"] for h in page["hits"]]
            offset = page["next_offset"]
        assert seen == [h["id"] for h in whole["hits"]]
        with pytest.raises(UsageError):
            v.grep("routine", offset=-1)
        with pytest.raises(UsageError):
            v.grep("routine", sort="best")


def test_cli_grep_lines_and_exit_codes(ops: tuple[Path, list[str]]) -> None:
    root, ids = ops
    out = run(root, "grep", "numpy pinned", "--scope", "messages", "--sort", "oldest")
    assert out.exit_code == 0
    first = out.stdout.splitlines()[0]
    assert first.startswith("[2026-11-01 10:00:00Z] " + ids[PINNED] + " (user, in sum_") and "pinned" in first
    page = run(root, "grep", "routine check", "--scope", "messages", "--limit", "5", "--offset", "5", "--json")
    data = json.loads(page.stdout)
    assert data["offset"] == 5 and data["total"] == 60 and data["next_offset"] == 10 and len(data["hits"]) == 5
    assert "more with --offset 10" in run(root, "grep", "routine", "--limit", "5", "--offset", "5").stderr
    miss = run(root, "grep", "zebra-unicorn-nowhere")
    assert miss.exit_code == 1 and miss.stdout == "" and "No matches." in miss.stderr
    miss_json = run(root, "grep", "zebra-unicorn-nowhere", "--json")
    assert miss_json.exit_code == 1 and json.loads(miss_json.stdout)["hits"] == []


def test_tool_hit_lines_and_counts(ops: tuple[Path, list[str]]) -> None:
    root, ids = ops
    eng = Engine(root, "ops")
    eng.bootstrap()
    try:
        text = eng.call_tool("lcm_grep", {"pattern": "deadline", "sort": "newest", "scope": "messages", "limit": 2})
        lines = text.splitlines()
        assert lines[0] == "4 matches (sort newest); showing 1-2; more with offset=2"
        assert lines[1].startswith("[2026-11-02 15:01:00Z] " + ids[DEADLINE_NEW + 1] + " (assistant, in sum_")
        counted = eng.call_tool("lcm_grep", {"pattern": "deploy failed", "scope": "messages", "count": True})
        assert counted.splitlines() == ["5 matches: 5 messages, 0 summaries, on 2 days",
                                        "2026-11-02: 3 messages", "2026-11-03: 2 messages"]
        grep_tool = next(t for t in eng.tool_definitions() if t["name"] == "lcm_grep")
        assert "supersedes" in grep_tool["description"] and "time" in grep_tool["description"]
        assert {"sort", "offset", "count"} <= set(grep_tool["input_schema"]["properties"])
    finally:
        eng.dispose()


# -- expand: one test per mode --------------------------------------------------------------


def _ids(r: dict[str, Any]) -> list[str]:
    return [m["id"] for m in r["messages"]]


def _text(r: dict[str, Any]) -> str:
    return json.dumps(r["messages"], ensure_ascii=False)


def test_expand_turn_returns_the_answer_after_the_hit(ops: tuple[Path, list[str]]) -> None:
    root, ids = ops
    with Vault(root) as v:
        whole = v.expand(ids[CALL])
        assert whole["mode"] == "turn" and _ids(whole) == ids[Q_PORT:REPLY_PORT + 1]  # request, call, result, reply
        assert not whole["truncated"] and whole["first"] == ids[Q_PORT] and whole["last"] == ids[REPLY_PORT]
        assert all(m["id"].startswith("m-") for m in whole["messages"])
        # a tight cap keeps the hit and the message right after it (the tool result holding the answer)
        cap = v.catalog.get(ids[CALL]).tokens + v.catalog.get(ids[RESULT]).tokens + 2 * MESSAGE_OVERHEAD
        tight = v.expand(ids[CALL], max_tokens=cap)
        assert _ids(tight)[:2] == [ids[CALL], ids[RESULT]] and "8443" in _text(tight)
        assert tight["tokens"] <= cap and tight["truncated"]
        assert set(tight["omitted"]) == {ids[Q_PORT], ids[REPLY_PORT]} and tight["omitted_messages"] == 2


def test_expand_around_n(ops: tuple[Path, list[str]]) -> None:
    root, ids = ops
    with Vault(root) as v:
        r = v.expand(ids[DEADLINE_NEW], around=1)
        assert r["mode"] == "around" and _ids(r) == ids[DEADLINE_NEW - 1:DEADLINE_NEW + 2]
        assert "October 4" in _text(r)
        cap = v.catalog.get(ids[DEADLINE_NEW]).tokens + v.catalog.get(ids[DEADLINE_NEW + 1]).tokens + 2 * MESSAGE_OVERHEAD
        tight = v.expand(ids[DEADLINE_NEW], around=3, max_tokens=cap)
        assert _ids(tight) == [ids[DEADLINE_NEW], ids[DEADLINE_NEW + 1]]  # the hit and the reply after it
        assert "deadline is now October 4" in _text(tight) and tight["tokens"] <= cap
        assert len(tight["omitted"]) == 5 and tight["truncated"]
        with pytest.raises(UsageError):
            v.expand(ids[0], query="x")


def test_expand_summary_with_query_puts_matches_first(ops: tuple[Path, list[str]]) -> None:
    root, ids = ops
    with Vault(root) as v:
        top = v.dag.get(v.catalog.get(ids[TICKET]).covered).parent
        r = v.expand(top, query="rounding bug ticket", max_tokens=120)
        assert r["mode"] == "query" and r["tokens"] <= 120 and r["truncated"]
        assert _ids(r)[:2] == [ids[TICKET], ids[TICKET + 1]]  # the match, then the reply after it
        assert r["matched"][0] == ids[TICKET] and "compute_due_date" in _text(r)
        assert r["omitted"] and all(o.startswith("sum_") for o in r["omitted"])
        leveled = v.expand(top, query="commit a1b2c3d", depth=1, max_tokens=400)
        holder = v.catalog.get(ids[COMMIT]).covered
        assert leveled["summaries"][0]["id"] == holder


def test_expand_plain_summary_holds_the_cap(ops: tuple[Path, list[str]]) -> None:
    root, ids = ops
    with Vault(root) as v:
        leaf = v.dag.get(v.catalog.get(ids[DEADLINE_NEW]).covered)
        full = v.expand(leaf.id, max_tokens=100_000)
        assert _ids(full) == leaf.sources and not full["truncated"]
        top = leaf.parent
        under = len(v.expand(top, max_tokens=10**7)["messages"])
        for cap in (64, 300, 600):
            r = v.expand(top, max_tokens=cap)
            assert r["mode"] == "summary" and r["tokens"] <= cap and r["truncated"]
            kept = _ids(r)
            assert kept == ids[:len(kept)]  # conversation order, from the start
            assert r["omitted"] and r["omitted_messages"] == under - len(kept)
        with pytest.raises(UsageError):
            v.expand(top, around=2)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(k=st.integers(0, len(MESSAGES) - 1), around=st.one_of(st.none(), st.integers(0, 5)),
       cap=st.integers(1, 1500))
def test_expand_message_cap_and_next_message_hold(ops: tuple[Path, list[str]], k: int, around: int | None,
                                                  cap: int) -> None:
    """Any message, turn or around=N, any cap: the cap holds, the hit comes first in priority, and the
    message after it (where the answer to a question usually is) comes with it whenever both fit."""
    root, ids = ops
    with Vault(root) as v:
        r = v.expand(ids[k], max_tokens=cap, around=around)
        assert r["tokens"] <= cap and r["mode"] == ("turn" if around is None else "around")
        got = _ids(r)
        assert got == sorted(got, key=ids.index)  # conversation order
        assert not r["omitted"] or r["truncated"]
        hit = v.catalog.get(ids[k])
        if hit.tokens + MESSAGE_OVERHEAD <= cap:
            assert ids[k] in got
        window = v.expand(ids[k], max_tokens=10**6, around=around)
        after = _ids(window)[_ids(window).index(ids[k]) + 1 :][:1]
        if after and hit.tokens + v.catalog.get(after[0]).tokens + 2 * MESSAGE_OVERHEAD <= cap:
            assert after[0] in got
        assert set(got) | set(r["omitted"]) == set(_ids(window))  # what is left out is named


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(k=st.integers(0, len(MESSAGES) - 1), cap=st.integers(64, 1200), depth=st.one_of(st.none(), st.just(1)))
@example(k=23, cap=461, depth=1)  # a cut summary whose notice went past the cap
def test_expand_summary_query_cap_and_next_message_hold(ops: tuple[Path, list[str]], k: int, cap: int,
                                                        depth: int | None) -> None:
    """A summary expanded with the words of one of its messages: the cap holds and, when they fit, the
    matching message and the one after it are returned."""
    root, ids = ops
    with Vault(root) as v:
        leaf = v.catalog.get(ids[k]).covered
        assume(leaf is not None)  # the fresh tail is not summarized
        assert leaf is not None
        top = v.dag.get(leaf).parent or leaf
        words = " ".join(w for w in MESSAGES[k]["content"].split()[:4] if w.isalpha()) \
            if isinstance(MESSAGES[k]["content"], str) else "config"
        r = v.expand(top, query=words or "deadline", max_tokens=cap, depth=depth)
        assert r["mode"] == "query" and r["tokens"] <= cap
        plain = v.expand(top, max_tokens=cap, depth=depth)
        assert plain["tokens"] <= cap
        under = _ids(v.expand(top, max_tokens=10**7))
        assert set(_ids(r)) <= set(under) and set(_ids(plain)) <= set(under)
        if r["matched"]:
            first = r["matched"][0]
            pair = [first] + [m for m in under[under.index(first) + 1 :][:1]]
            if sum(v.catalog.get(m).tokens + MESSAGE_OVERHEAD for m in pair) <= cap:
                assert set(pair) <= set(_ids(r))  # the best match and the message after it


def test_cli_expand_options(ops: tuple[Path, list[str]]) -> None:
    root, ids = ops
    out = run(root, "expand", ids[DEADLINE_NEW], "--around", "1", "--json")
    assert [m["id"] for m in json.loads(out.stdout)["messages"]] == ids[DEADLINE_NEW - 1:DEADLINE_NEW + 2]
    text = run(root, "expand", ids[DEADLINE_NEW], "--around", "1")
    assert f"== {ids[DEADLINE_NEW]} · user · 2026-11-02T15:00:00Z <<" in text.stdout
    top = json.loads(run(root, "describe", ids[TICKET], "--json").stdout)["shown_as"]
    q = run(root, "expand", top, "--query", "rounding bug", "--max-tokens", "200")
    assert q.exit_code == 0 and q.stdout.startswith(f"== {ids[TICKET]} · user")


# -- ask: times and one hop -------------------------------------------------------------------


def test_ask_follows_one_hop_and_gives_times(ops: tuple[Path, list[str]]) -> None:
    root, ids = ops
    with Vault(root) as v:
        r = v.ask("Which commit fixed the bug from ticket LEDG-482?", max_tokens=600)
        assert r["mode"] == "extractive" and r["tokens"] <= 600
        assert ids[COMMIT] in r["citations"] and "a1b2c3d" in r["answer"]
        assert all(e["at"].startswith("2026-11-0") for e in r["excerpts"])
        message_excerpts = [e for e in r["excerpts"] if e["kind"] == "message"]
        assert message_excerpts and all(" at 2026-11-0" in e["text"] for e in message_excerpts)
        # without a word asking for something of another thing, no hop
        assert v.ask("Where does the routing-api listen?", max_tokens=300)["hopped"] is False


# -- ids and regexes ------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["file_*", "sum_*", "file_../../etc", "../x", "m-*", "sum_123", "", "a b"])
def test_bad_ids_are_one_line_usage_errors(ops: tuple[Path, list[str]], bad: str) -> None:
    root, _ = ops
    for command in ("describe", "expand"):
        out = run(root, command, bad)
        assert out.exit_code == 2, (command, bad, out.stdout)
        assert out.stderr.startswith("Error: ") and out.stderr.count("\n") == 1 and "is not an id" in out.stderr


def test_pathological_regex_is_a_one_line_error(ops: tuple[Path, list[str]]) -> None:
    root, _ = ops
    nested = "(" * 5000 + "a" + ")" * 5000
    out = run(root, "grep", "--regex", nested)
    assert out.exit_code == 2 and out.stderr.count("\n") == 1
    assert out.stderr.startswith("Error: regular expression") and "nested too deeply" in out.stderr
    assert len(out.stderr) < 300


def test_regex_time_limit_holds(tmp_path: Path) -> None:
    import time

    limit = 1.0
    with Vault.init(tmp_path, settings=Settings(regex_timeout_seconds=limit)) as v:
        v.ingest("c", [{"role": "user", "content": "a" * 4000 + "!"} for _ in range(40)])
        v.ingest("c", [{"role": "user", "content": "the last word"}])
        v.grep("warm", regex=True)  # opening and syncing are not the scan
        t0 = time.monotonic()
        out = v.grep(r"(a+)+$", regex=True)
        spent = time.monotonic() - t0
        assert out.get("partial") is True
        # Each of the 40 rows backtracks without end, so a limit applied per row (40 s) or only between
        # rows (never) overshoots by far more than this margin, which a loaded CI host needs.
        assert spent < limit + 10.0, f"the scan ran {spent:.2f} s past a {limit} s limit"
        done = v.grep("last word", regex=True)
        assert done["total"] == 1 and "partial" not in done
        assert v.grep("a{3}!", regex=True, count=True)["total"] == 40


def test_tool_output_stays_within_the_cap(ops: tuple[Path, list[str]]) -> None:
    root, ids = ops
    eng = Engine(root, "ops")
    eng.bootstrap()
    try:
        top = eng.vault.dag.get(eng.vault.catalog.get(ids[0]).covered).parent
        out = eng.call_tool("lcm_expand", {"id": top, "query": "deadline", "max_tokens": 200})
        assert count_tokens(out) <= 200 + 100 and ">> [" in out and "expand sum_" in out
        turn = eng.call_tool("lcm_expand", {"id": ids[CALL]})
        assert f">> [{ids[CALL]}]" in turn and "port: 8443" in turn
    finally:
        eng.dispose()
