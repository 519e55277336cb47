"""Compaction with LLM summarizers through the real SDKs against the fake server.

A provider failure must lose nothing: soft compaction stops and leaves the
messages uncovered for a later run; assemble (the hard threshold) falls back to
the digest summarizer and the note records the fallback.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fakellm import FakeLLM

from vaultlcm import Settings, Vault
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
        # the hard threshold cannot wait: it falls back to the digest summarizer
        ctx = v.assemble("c", 900)
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
