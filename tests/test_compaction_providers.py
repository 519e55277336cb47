"""Compaction with LLM summarizers through the real SDKs against the fake server.

A provider failure must lose nothing: soft compaction stops and leaves the
messages uncovered for a later run; assemble (the hard threshold) falls back to
the digest summarizer and the note records the fallback.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fakellm import FakeLLM

import re

from vaultlcm import Engine, Settings, Vault
from vaultlcm.summarizers import target_for
from vaultlcm.summarizers.base import output_cap
from vaultlcm.summarizers.prompts import BEGIN_MARK, END_MARK, NO_PREVIOUS
from vaultlcm.summary_notes import parse_note
from test_lcm import SMALL, conversation, reachable


def provider_settings(provider: str, fake: FakeLLM) -> Settings:
    common = {**SMALL, "llm_max_retries": 0, "llm_timeout_seconds": 2.0}
    if provider == "anthropic":
        return Settings(summarizer="anthropic", anthropic_base_url=fake.base_url, anthropic_model="claude-test", **common)
    return Settings(summarizer="openai", openai_base_url=fake.base_url + "/v1", openai_model="local-test", openai_api_key_env="FAKE_KEY", **common)


ENV = {"ANTHROPIC_API_KEY": "sk-test", "FAKE_KEY": "sk-test"}


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_llm_summaries_are_written(provider: str, fake_llm: FakeLLM, tmp_path: Path) -> None:
    fake_llm.reply("Decided to use zoneinfo in src/app.py. Expand for detail: m-1")
    with Vault.init(tmp_path, settings=provider_settings(provider, fake_llm), environ=ENV) as v:
        v.ingest("c", conversation([("u", 60), ("a", 80)] * 8))
        [report] = v.compact("c", force=True)
        assert report.error is None and report.created
        leaf = v.dag.get(report.created[0])
        assert leaf is not None and leaf.summarizer.startswith(provider)
        assert "zoneinfo" in leaf.body
        body = fake_llm.requests[0].json
        assert "untrusted" in str(body).lower()


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("failure", ["rate_limit", "overloaded", "bad_key", "server", "timeout", "malformed"])
def test_provider_failure_loses_nothing(provider: str, failure: str, fake_llm: FakeLLM, tmp_path: Path) -> None:
    if failure == "rate_limit":
        fake_llm.fail(429)
    elif failure == "overloaded":
        fake_llm.fail(529)
    elif failure == "bad_key":
        fake_llm.fail(401)
    elif failure == "server":
        fake_llm.fail(500)
    elif failure == "timeout":
        fake_llm.delay(5.0)
    else:
        fake_llm.raw(b"{not json")
    with Vault.init(tmp_path, settings=provider_settings(provider, fake_llm), environ=ENV) as v:
        ids = v.ingest("c", conversation([("u", 60), ("a", 80)] * 8))
        [report] = v.compact("c", force=True)
        assert report.error, "the failure must be reported"
        assert not report.created
        # nothing covered, nothing lost: every message is still active and readable
        assert [i.id for i in v.dag.active("c")] == ids
        assert len(v.messages("c")) == len(ids)
        assert v.catalog.execute("SELECT COUNT(*) FROM failures")[0][0] == 1
        # the engine's hard threshold cannot wait: it falls back to the digest summarizer
        ctx = Engine(v, "c").assemble(900)
        assert ctx.estimated_tokens <= 900 and ctx.complete
        assert reachable(v, ctx.summary_ids) | set(ctx.message_ids) == set(ids)
        notes = list((tmp_path / "conversations/c/summaries").iterdir())
        assert notes
        fm, _ = parse_note(notes[0].read_text(), notes[0])
        assert fm.summarizer.startswith("digest (fallback:")


def test_missing_key_is_reported_at_compaction(tmp_path: Path, fake_llm: FakeLLM) -> None:
    with Vault.init(tmp_path, settings=provider_settings("anthropic", fake_llm), environ={}) as v:
        ids = v.ingest("c", conversation([("u", 60), ("a", 80)] * 8))
        with pytest.raises(Exception, match="ANTHROPIC_API_KEY"):
            v.compact("c", force=True)
        assert [i.id for i in v.dag.active("c")] == ids


def _prompts(provider: str, body: dict) -> tuple[str, str]:
    if provider == "anthropic":
        return body["system"], body["messages"][0]["content"]
    return body["messages"][0]["content"], body["messages"][1]["content"]


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_llm_requests_are_incremental_bounded_and_marked(provider: str, fake_llm: FakeLLM, tmp_path: Path) -> None:
    """The exact requests compaction sends, as the fake server received them."""
    reply = "### Asked\n- fix the billing job\nExpand for details about: billing, timezones"
    fake_llm.reply(reply)
    settings = provider_settings(provider, fake_llm)
    with Vault.init(tmp_path, settings=settings, environ=ENV) as v:
        v.ingest("c", conversation([("u", 30), ("t", 20), ("a", 40)] * 6))
        [report] = v.compact("c", force=True)
        assert report.error is None and report.created
        leaves = [r for r in v.dag.all("c") if r.depth == 0]
    sent = [_prompts(provider, r.json) + (r.json,) for r in fake_llm.requests]
    leaf_prompts = [(sy, u, b) for sy, u, b in sent if "This is a leaf summary" in u]
    condensed = [(sy, u, b) for sy, u, b in sent if "### Timeline" in u]
    assert len(leaf_prompts) == len(leaves) >= 2 and condensed

    first_system, first, first_body = leaf_prompts[0]
    assert "untrusted data" in first_system.lower() and "Correction (by a person):" in first_system
    assert NO_PREVIOUS in first  # nothing before the first leaf
    assert first.count(BEGIN_MARK) == 1 and first.rstrip().endswith(END_MARK)
    for _, user, body in leaf_prompts[1:]:
        # The previous leaf, as context between the markers, with the instruction not to repeat it.
        assert "Do not\nrepeat what it says" in user or "Do not repeat what it says" in user.replace("\n", " ")
        assert f"{BEGIN_MARK}\n{reply}\n{END_MARK}" in user
        assert user.count(BEGIN_MARK) == 2 and user.count(END_MARK) == 2
    for _, user, body in leaf_prompts:
        m = re.search(r"Aim for about (\d+) tokens \(the messages are (\d+) tokens\)", user.replace("\n", " "))
        assert m, user
        target, source = int(m.group(1)), int(m.group(2))
        assert target == target_for(0, source, settings.leaf_target_tokens)  # the target follows the input
        assert body["max_tokens"] == output_cap(target)
        for section in ("### Asked", "### Done", "### Found / decided", "### Open", "Expand for details about:"):
            assert section in user
        assert "file operations" in user and "never raw JSON" in user
        assert re.search(r"--- id: m-[0-9a-f]{16} \(message, role=(user|assistant|tool), at=2026-11-01T", user)
    _, user, _ = condensed[0]
    assert "dated timeline" in user and "Nov 2, 09:14–11:30 ·" in user and "(was old value)" in user
    assert re.search(r"--- id: sum_[0-9a-f]{16} \(summary, depth=0, at=2026-11-01T\S+, until=2026-11-01T", user)
    assert "Copy every line that starts with \"Correction (by a person):\" verbatim" in user.replace("\n", " ")
