"""The vault on disk: init, ingest, read back, determinism, names, bad input."""

from __future__ import annotations

import hashlib
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from vaultlcm.errors import (
    InputFormatError,
    InvalidNameError,
    NotAVaultError,
    NotFoundError,
    SettingsError,
)
from vaultlcm.vault import Vault

FIXED = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def tree_digest(root: Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and ".vaultlcm" not in p.parts:
            out[p.relative_to(root).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def sample(n: int = 5) -> list[dict]:
    msgs = []
    for i in range(n):
        msgs.append({"role": "user" if i % 2 == 0 else "assistant", "timestamp": f"2026-11-{28 + i // 3:02d}T10:00:{i:02d}Z",
                     "content": [{"type": "text", "text": f"message {i}\n```\ncode\n```"}]})
    return msgs


def test_init_creates_files_and_is_idempotent(tmp_path: Path) -> None:
    v = Vault.init(tmp_path / "v")
    v.close()
    root = tmp_path / "v"
    for name in ("vaultlcm.toml", ".gitignore", ".gitattributes"):
        assert (root / name).is_file()
    assert ".vaultlcm/" in (root / ".gitignore").read_text()
    assert "merge=union" in (root / ".gitattributes").read_text()
    before = tree_digest(root)
    (root / "vaultlcm.toml").write_text("fresh_tail_count = 7\n")
    Vault.init(root).close()
    assert (root / "vaultlcm.toml").read_text() == "fresh_tail_count = 7\n"
    assert set(tree_digest(root)) == set(before)


def test_not_a_vault(tmp_path: Path) -> None:
    with pytest.raises(NotAVaultError, match="vaultlcm init"):
        Vault(tmp_path)


def test_bad_setting_names_key_and_file(tmp_path: Path) -> None:
    Vault.init(tmp_path).close()
    (tmp_path / "vaultlcm.toml").write_text("fresh_tail_count = -3\n")
    with pytest.raises(SettingsError, match=r"vaultlcm.toml.*fresh_tail_count"):
        Vault(tmp_path)
    (tmp_path / "vaultlcm.toml").write_text("no_such_key = 1\n")
    with pytest.raises(SettingsError, match="no_such_key"):
        Vault(tmp_path)
    (tmp_path / "vaultlcm.toml").write_text("")
    with pytest.raises(SettingsError, match="VAULTLCM_CONTEXT_THRESHOLD"):
        Vault(tmp_path, environ={"VAULTLCM_CONTEXT_THRESHOLD": "lots"})


def test_ingest_and_read_back(tmp_path: Path) -> None:
    with Vault.init(tmp_path) as v:
        ids = v.ingest("demo", sample())
        assert len(ids) == 5 and len(set(ids)) == 5
        got = v.export("demo")
        assert got == sample()
        assert v.get_message(ids[3]).text.startswith("message 3")
        days = sorted(p.name for p in (tmp_path / "conversations/demo/logs").iterdir())
        assert days == ["2026-11-28.md", "2026-11-29.md"]
        st = v.status()["conversations"][0]
        assert st["messages"] == 5 and st["days"] == 2 and st["tokens"] > 0
        log = (tmp_path / "conversations/demo/logs/2026-11-28.md").read_text()
        assert f"^{ids[0]}" in log and "> [!user]" in log
        home = (tmp_path / "conversations/demo/demo.md").read_text()
        assert "[[conversations/demo/logs/2026-11-28|2026-11-28]]" in home


def test_same_input_same_bytes(tmp_path: Path) -> None:
    for name in ("a", "b"):
        with Vault.init(tmp_path / name, clock=lambda: FIXED) as v:
            v.ingest("demo", sample(7))
            v.ingest("demo", [{"role": "user", "content": "no timestamp"}])
    assert tree_digest(tmp_path / "a") == tree_digest(tmp_path / "b")


def test_reopen_after_catalog_deleted(tmp_path: Path) -> None:
    with Vault.init(tmp_path) as v:
        ids = v.ingest("demo", sample())
    import shutil

    shutil.rmtree(tmp_path / ".vaultlcm")
    with Vault(tmp_path) as v:
        assert v.get_message(ids[4]).role == "user"
        assert v.export("demo") == sample()
        more = v.ingest("demo", sample(2))
        assert len(set(ids + more)) == 7


@pytest.mark.parametrize("name", ["", " ", "../x", "/abs", "a/b", "a\\b", ".hidden", "a#b", "a|b", "a^b", "a:b", "a[b]", "x\x00", "x\ny", "CON"])
def test_bad_conversation_names_refused(tmp_path: Path, name: str) -> None:
    with Vault.init(tmp_path) as v, pytest.raises(InvalidNameError):
        v.ingest(name, sample(1))
    assert not any((tmp_path / "conversations").iterdir())


def test_good_names(tmp_path: Path) -> None:
    with Vault.init(tmp_path) as v:
        for name in ("support-bot", "2026 agent run", "é-ü_名前.v2"):
            v.ingest(name, sample(1))
        assert len(v.conversations()) == 3


def test_all_or_nothing_on_bad_message(tmp_path: Path) -> None:
    with Vault.init(tmp_path) as v:
        bad = sample(3) + [{"content": "no role"}]
        with pytest.raises(InputFormatError, match="message 4 of"):
            v.ingest("demo", bad)
        assert not (tmp_path / "conversations/demo").exists()


def test_a_records_own_id_is_data_and_never_the_vault_id(tmp_path: Path) -> None:
    with Vault.init(tmp_path) as v:
        [a] = v.ingest("demo", [{"id": "msg_013vAbc", "role": "user", "content": "hi"}])
        [b] = v.ingest("other", [{"id": "msg_013vAbc", "role": "user", "content": "again"}])
        assert a != b and a.startswith("m-") and b.startswith("m-")
        assert v.export("demo") == [{"id": "msg_013vAbc", "role": "user", "content": "hi"}]
        assert v.show(a)["id"] == a and v.show(a)["message"]["id"] == "msg_013vAbc"


def test_dedupe_stores_a_repeated_list_once(tmp_path: Path) -> None:
    with Vault.init(tmp_path) as v:
        first = v.ingest("demo", sample(3), dedupe=True)
        again = v.ingest("demo", sample(3) + sample(1), dedupe=True)
        assert again[:3] == first and len(v.messages("demo")) == 4
        v.ingest("demo", sample(1))  # without dedupe an agent may say the same thing twice
        assert len(v.messages("demo")) == 5


def test_unknown_id(tmp_path: Path) -> None:
    with Vault.init(tmp_path) as v, pytest.raises(NotFoundError, match="m-nope"):
        v.get_message("m-nope")


def test_torn_write_is_ignored_and_repaired(tmp_path: Path) -> None:
    with Vault.init(tmp_path) as v:
        ids = v.ingest("demo", sample(3))
    log = tmp_path / "conversations/demo/logs/2026-11-28.md"
    good = log.read_bytes()
    # simulate a crash in the middle of an append
    with log.open("ab") as fh:
        fh.write(good[good.index(b"<!-- lcm:"):][:50])
    with Vault(tmp_path) as v:
        assert [m.id for m in v.messages("demo")] == ids
        v.ingest("demo", [{"role": "user", "timestamp": "2026-11-28T11:00:00Z", "content": "after crash"}])
        assert len(v.messages("demo")) == 4
    assert log.read_bytes().startswith(good)


def test_externalized_payload_round_trip(tmp_path: Path) -> None:
    big = "\n".join(f"row {i}: value {i * 7}" for i in range(12_000))
    with Vault.init(tmp_path) as v:
        [mid] = v.ingest("demo", [{"role": "tool", "content": [{"type": "tool_result", "call_id": "c1", "content": big}]}])
        files = list((tmp_path / "conversations/demo/files").iterdir())
        assert len(files) == 1 and files[0].read_text() == big
        assert v.get_message(mid).content[0]["content"] == big
        assert os.path.getsize(next((tmp_path / "conversations/demo/logs").iterdir())) < 3000
