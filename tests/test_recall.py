"""Recall: grep, describe, expand, ask, the agent tools, and the index being derived."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from fakellm import FakeLLM

from vaultlcm import Engine, Settings, Vault
from vaultlcm.cli import cli

FACT = "The staging database password rotation is tracked in ticket LEDG-9931 on host db-7.internal"
WORDS = "deploy config service retry timeout cache index build test failure patch review merge branch".split()
ROOT = Path(__file__).resolve().parents[1]


def long_conversation(n: int) -> list[dict]:
    msgs = []
    for i in range(n):
        ts = f"2026-11-{1 + i // 2000:02d}T{(i // 120) % 24:02d}:{(i // 2) % 60:02d}:{i % 60:02d}Z"
        text = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(12 + i % 9))
        if i == 37:
            text = FACT
        msgs.append({"role": "user" if i % 2 == 0 else "assistant", "timestamp": ts, "content": f"{text} (step {i})"})
    return msgs


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("big")
    with Vault.init(root) as v:
        ids = v.ingest("long", long_conversation(5000))
        v.ingest("other", [{"role": "user", "timestamp": "2026-11-01T00:00:00Z", "content": "unrelated LEDG-1 note"}])
        v.compact("long", force=True)
    return root, ids


def test_planted_fact_found_and_expanded_verbatim(big: tuple[Path, list[str]]) -> None:
    root, ids = big
    with Vault(root) as v:
        assert v.catalog.get(ids[37]).covered is not None, "message 37 must be long since compacted"
        hits = v.grep("LEDG-9931", conversation="long")["hits"]
        msg_hits = [h for h in hits if h["kind"] == "message"]
        assert msg_hits and msg_hits[0]["id"] == ids[37]
        assert msg_hits[0]["covered_by"] == v.catalog.get(ids[37]).covered  # the leaf
        top = msg_hits[0]["shown_as"]
        assert top and top.startswith("sum_")
        assert top in {s.id for s in v.dag.roots("long")}
        assert msg_hits[0]["shown_depth"] == v.dag.get(top).depth
        # drill down from the top: depth-limited steps, then the leaf, verbatim
        node = top
        while v.dag.get(node).kind != "leaf":
            step = v.expand(node, depth=1, max_tokens=100_000)
            node = next(s["id"] for s in step["summaries"] if ids[37] in _messages_under(v, s["id"]))
        leaf = v.expand(node)
        assert {"id": ids[37], "role": "assistant" if 37 % 2 else "user", "timestamp": leaf["messages"][[m["id"] for m in leaf["messages"]].index(ids[37])]["timestamp"], "content": FACT + " (step 37)"} in leaf["messages"]
        described = v.describe(top)
        assert described["kind"] == "summary" and described["sources"] and described["expand_cost_tokens"] > described["token_count"]


def _messages_under(v: Vault, sid: str) -> set[str]:
    row = v.dag.get(sid)
    if row.kind == "leaf":
        return set(row.sources)
    return set().union(*(_messages_under(v, c) for c in row.sources))


def test_reindex_from_markdown_gives_same_hits(big: tuple[Path, list[str]]) -> None:
    root, _ = big
    queries = ["LEDG-9931", '"password rotation"', "stag*", "db-7.internal", "merge branch"]

    def everything(v: Vault, q: str) -> set[str]:
        # Every hit, not the top ten: Whoosh's BM25 scores depend a little on how documents
        # are spread over segments, which a rebuild changes, so near-ties may swap places.
        return {h["id"] for h in v.grep(q, limit=10_000)["hits"]}

    with Vault(root) as v:
        before = [everything(v, q) for q in queries]
        first = v.grep("LEDG-9931", limit=1)["hits"][0]["id"]
    shutil.rmtree(root / ".vaultlcm")
    result = CliRunner().invoke(cli, ["--vault", str(root), "reindex", "--json"], catch_exceptions=False)
    assert result.exit_code == 0
    assert json.loads(result.stdout)["messages"] == 5001
    with Vault(root) as v:
        after = [everything(v, q) for q in queries]
        assert v.grep("LEDG-9931", limit=1)["hits"][0]["id"] == first
    assert after == before and all(before)


def test_grep_filters(big: tuple[Path, list[str]]) -> None:
    root, ids = big
    with Vault(root) as v:
        both = v.grep("LEDG*")["hits"]
        assert {h["conversation"] for h in both} == {"long", "other"}
        assert all(h["kind"] == "summary" for h in v.grep("LEDG-9931", scope="summaries")["hits"])
        assert all(h["kind"] == "message" for h in v.grep("LEDG-9931", scope="messages")["hits"])
        assert v.grep("LEDG-9931", since="2026-11-02")["hits"] == []
        assert v.grep("LEDG-9931", before="2026-11-01T00:00:01Z", scope="messages")["hits"] == []
        assert len(v.grep("deploy", limit=3)["hits"]) == 3
        rx = v.grep(r"LEDG-99\d\d", regex=True, scope="messages")["hits"]
        assert [h["id"] for h in rx] == [ids[37]]


def test_regex_cannot_hang(tmp_path: Path) -> None:
    with Vault.init(tmp_path, settings=Settings(regex_timeout_seconds=0.5)) as v:
        v.ingest("c", [{"role": "user", "content": "a" * 5000 + "!"} for _ in range(20)])
        import time

        t0 = time.monotonic()
        out = v.grep(r"(a+)+$", regex=True)
        assert time.monotonic() - t0 < 10
        assert out.get("partial") is True
        with pytest.raises(Exception, match="invalid regular expression"):
            v.grep("(unclosed", regex=True)


def test_expand_budget_and_message(big: tuple[Path, list[str]]) -> None:
    root, ids = big
    with Vault(root) as v:
        top = v.dag.roots("long")[0].id
        r = v.expand(top, max_tokens=500)
        assert r["truncated"] and r["tokens"] <= 500 and r["omitted"]
        one = v.expand(ids[37])  # an assistant message: its turn is the user message before it and itself
        assert [m["id"] for m in one["messages"]] == [ids[36], ids[37]] and one["mode"] == "turn"
        assert one["messages"][1]["content"] == FACT + " (step 37)" and not one["truncated"]


def test_ask_offline_returns_ranked_excerpts(big: tuple[Path, list[str]]) -> None:
    root, ids = big
    with Vault(root) as v:
        r = v.ask("Which ticket tracks the staging password rotation?", max_tokens=300)
        assert r["mode"] == "extractive"
        assert r["citations"][0] == ids[37] and "LEDG-9931" in r["answer"]
        assert r["tokens"] <= 300


def test_ask_with_llm_cites_ids(big: tuple[Path, list[str]], fake_llm: FakeLLM) -> None:
    root, ids = big
    s = Settings(summarizer="anthropic", anthropic_base_url=fake_llm.base_url, llm_max_retries=0)
    fake_llm.reply(f"The ticket is LEDG-9931 [{ids[37]}].")
    with Vault(root, settings=s, environ={"ANTHROPIC_API_KEY": "k"}) as v:
        r = v.ask("Which ticket tracks the staging password rotation?", conversation="long")
        assert r["mode"] == "llm" and r["citations"] == [ids[37]]
        prompt = json.dumps(fake_llm.requests[-1].json)
        assert "LEDG-9931" in prompt and ids[37] in prompt


def test_describe_message_and_file(tmp_path: Path) -> None:
    with Vault.init(tmp_path) as v:
        big_text = "\n".join(f"row {i}" for i in range(30_000))
        [mid] = v.ingest("c", [{"role": "tool", "content": [{"type": "tool_result", "call_id": "x", "content": big_text}]}])
        d = v.describe(mid)
        assert d["kind"] == "message" and d["sources"] == [] and d["token_count"] > 25_000
        name = next((tmp_path / "conversations/c/files").iterdir()).stem
        f = v.describe(name)
        assert f["kind"] == "file" and "30,000 lines" in f["exploration_summary"]


def test_agent_tools(big: tuple[Path, list[str]]) -> None:
    root, ids = big
    eng = Engine(root, "long")
    eng.bootstrap()
    try:
        anth = eng.tool_definitions("anthropic")
        oai = eng.tool_definitions("openai")
        assert [t["name"] for t in anth] == ["lcm_grep", "lcm_describe", "lcm_expand", "lcm_expand_query"]
        assert [t["function"]["name"] for t in oai] == [t["name"] for t in anth]
        out = eng.call_tool("lcm_grep", {"pattern": "LEDG-9931"})
        assert ids[37] in out
        assert "LEDG-9931" in eng.call_tool("lcm_expand", {"id": ids[37]})
        top = eng.vault.dag.roots("long")[0].id
        assert len(eng.call_tool("lcm_expand", {"id": top})) < 40_000
        assert '"kind": "summary"' in eng.call_tool("lcm_describe", {"id": top})
        assert ids[37] in eng.call_tool("lcm_expand_query", {"question": "staging password rotation ticket"})
        assert eng.call_tool("lcm_describe", {"id": "m-nope"}).startswith("Error:")
        assert eng.call_tool("nope", {}).startswith("Error: unknown tool")
        # a message ingested by a live engine is searchable at once
        eng.ingest({"role": "user", "content": "fresh fact QX-77712"})
        assert "QX-77712" in eng.call_tool("lcm_grep", {"pattern": "QX-77712"})
    finally:
        eng.dispose()


def test_cli_recall_commands(big: tuple[Path, list[str]]) -> None:
    root, ids = big
    r = CliRunner()
    out = r.invoke(cli, ["--vault", str(root), "grep", "LEDG-9931", "--json"])
    hits = json.loads(out.stdout)["hits"]
    assert {"id", "kind", "conversation", "snippet", "covered_by"} <= set(hits[0])
    out = r.invoke(cli, ["--vault", str(root), "describe", hits[0]["covered_by"], "--json"])
    d = json.loads(out.stdout)
    assert {"id", "kind", "depth", "sources", "token_count"} <= set(d)
    out = r.invoke(cli, ["--vault", str(root), "expand", d["sources"][0], "--max-tokens", "300", "--json"])
    e = json.loads(out.stdout)
    assert set(e) >= {"messages", "summaries", "truncated"}
    out = r.invoke(cli, ["--vault", str(root), "ask", "staging password ticket", "--json"])
    assert ids[37] in json.loads(out.stdout)["citations"]
    out = r.invoke(cli, ["--vault", str(root), "grep", "(", "--regex"])
    assert out.exit_code == 2 and "Error: invalid regular expression" in out.stderr


def test_example_agent_loop_against_fake_server(tmp_path: Path, fake_llm: FakeLLM) -> None:
    from fakellm import Reply

    fake_llm.script(
        Reply(kind="json", payload={
            "id": "msg_1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "tool_use",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "lcm_grep", "input": {"pattern": "retries"}}],
            "usage": {"input_tokens": 1, "output_tokens": 1}}),
        Reply(kind="text", text="We decided on 3 retries."),
    )
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_llm.base_url, "PATH": "/usr/bin:/bin"}
    p = subprocess.run(
        [sys.executable, str(ROOT / "examples/anthropic_agent.py"), "--vault", str(tmp_path / "v"), "What about retries?"],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert "3 retries" in p.stdout
    with Vault(tmp_path / "v") as v:
        msgs = v.export("demo")
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant"]
    assert msgs[2]["content"][0]["type"] == "tool_result"


def test_index_marks_skip_the_full_catch_up_and_miss_nothing(tmp_path: Path) -> None:
    from vaultlcm.indexing import MARKS_FILE

    with Vault.init(tmp_path) as v:
        [a] = v.ingest("c", [{"role": "user", "content": "first note ALPHA-1"}])
        assert v.grep("ALPHA-1")["hits"]
    marks = tmp_path / ".vaultlcm/index" / MARKS_FILE
    assert marks.exists(), "a clean close leaves marks"
    with Vault(tmp_path) as v:  # another process appends without touching the index
        v.ingest("c", [{"role": "user", "content": "second note BETA-2"}])
    log = next((tmp_path / "conversations/c/logs").iterdir())
    log.write_text(log.read_text().replace("first note ALPHA-1", "first note ALPHA-1 GAMMA-3"))  # a person edits the log
    with Vault(tmp_path) as v:
        assert v.indexer._load_marks(v.indexer.open()), "the marks of a clean close are trusted"
        assert [h["id"] for h in v.grep("BETA-2")["hits"]]
        assert [h["id"] for h in v.grep("GAMMA-3")["hits"]] == [a]
    # marks from another catalog are not trusted: delete the catalog, hits stay right
    (tmp_path / ".vaultlcm/catalog.sqlite").unlink()
    with Vault(tmp_path) as v:
        assert [h["id"] for h in v.grep("GAMMA-3")["hits"]] == [a]


def test_placing_a_page_in_a_few_queries_places_every_item_as_one_by_one(big: tuple[Path, list[str]]) -> None:
    """Placer.prefetch (what grep calls for its page) reads the DAG a level at a time: same placements."""
    from vaultlcm.recall import Placer

    root, _ids = big
    with Vault(root) as v:
        items = [(r[0], "message") for r in v.catalog.execute("SELECT id FROM messages ORDER BY seq")]
        items += [(r.id, "summary") for r in v.dag.all("long", bodies=False)]
        items += [("m-0000000000000000", "message"), ("sum_missing", "summary")]  # unknown ids place as nothing
        assert any(kind == "summary" for _i, kind in items) and any(
            r[0] for r in v.catalog.execute("SELECT covered FROM messages"))
        one_by_one = [Placer(v.history).place(i, kind) for i, kind in items]
        batched = Placer(v.history)
        batched.prefetch(items)
        assert [batched.place(i, kind) for i, kind in items] == one_by_one
        assert any(p.shown_depth and p.shown_depth > 0 for p in one_by_one)  # the DAG has levels above leaves
