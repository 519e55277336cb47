"""Text that cannot be written as UTF-8 (a lone surrogate), handed over in code: a typed error naming
the message, and nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vaultlcm import Engine, InputFormatError, Message, Vault


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".vaultlcm" not in p.parts}


# Where a producer that cut a UTF-16 string mid-pair leaves half of it: any field of the message.
PLACES = [
    {"role": "user", "content": "tail of an emoji \ud83d"},
    {"role": "assistant", "content": [{"type": "text", "text": "ok"}, {"type": "text", "text": "\udc00 cut"}]},
    {"role": "user", "content": "fine", "extra": {"meta": ["\ud800"]}},
]


@pytest.mark.parametrize("bad", PLACES)
def test_vault_ingest_names_the_message_and_writes_nothing(tmp_path: Path, bad: dict) -> None:
    root = tmp_path / "v"
    with Vault.init(root) as v:
        v.ingest("c", [{"role": "user", "content": "before"}])
        before = _files(root)
        with pytest.raises(InputFormatError) as err:
            v.ingest("c", [{"role": "user", "content": "good"}, bad])
        assert "message 2 of the batch for 'c'" in str(err.value) and "surrogate" in str(err.value)
        assert _files(root) == before
        assert v.catalog.count("c") == 1
        # The vault goes on: the next good call is stored right after the first message.
        v.ingest("c", [{"role": "user", "content": "after"}])
        assert [m.text for m in v.messages("c")] == ["before", "after"]


def test_engine_ingest_raises_the_same_typed_error(tmp_path: Path) -> None:
    root = tmp_path / "v"
    Vault.init(root).close()
    with Engine(root, "agent") as engine:
        with pytest.raises(InputFormatError, match="message 1 of the batch"):
            engine.ingest(Message(role="tool", content=[{"type": "text", "text": "output cut at \ud83d"}]))
        engine.ingest({"role": "user", "content": "still works"})
        assert engine.vault.catalog.count("agent") == 1


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(alphabet=st.characters(codec=None), min_size=0, max_size=40))
def test_any_text_is_stored_or_refused_whole(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    root = tmp_path_factory.mktemp("v") / "v"
    with Vault.init(root) as v:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            with pytest.raises(InputFormatError, match="surrogate"):
                v.ingest("c", [{"role": "user", "content": text}])
            assert v.catalog.count("c") == 0
        else:
            v.ingest("c", [{"role": "user", "content": text}])
            assert [m.text for m in v.messages("c")] == [text]
