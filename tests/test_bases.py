"""Obsidian, beyond links: the index note, the Bases tables and typed properties."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import frontmatter
import pytest
import yaml

from vaultlcm import Vault
from vaultlcm.bases import CONVERSATIONS_BASE, INDEX_NOTE, PROPERTY_TYPES, SUMMARIES_BASE, TYPES_FILE

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample-vault"


def base_properties(base: dict[str, Any]) -> set[str]:
    """Every note property a .base file names (in properties, order, sort, groupBy and filters)."""
    names: set[str] = set()

    def add(ref: str) -> None:
        if not ref.startswith(("file.", "formula.")):
            names.add(ref.removeprefix("note."))

    for key in base.get("properties", {}):
        add(key)
    filters = [base.get("filters")]
    for view in base["views"]:
        for ref in view.get("order", []):
            add(ref)
        for rule in view.get("sort", []):
            add(rule["property"])
        if "groupBy" in view:
            add(view["groupBy"]["property"])
        filters.append(view.get("filters"))
    text = json.dumps(filters)
    names.update(m for m in re.findall(r"note\.([a-z_]+)", text))
    return names


def notes_with_tag(root: Path, tag: str) -> list[dict[str, Any]]:
    out = []
    for path in root.rglob("*.md"):
        meta = frontmatter.loads(path.read_text(encoding="utf-8")).metadata
        if tag in (meta.get("tags") or []):
            out.append(meta)
    return out


@pytest.mark.parametrize(("name", "tag"), [(CONVERSATIONS_BASE, "lcm/conversation"), (SUMMARIES_BASE, "lcm/summary")])
def test_base_files_parse_and_name_properties_the_notes_have(name: str, tag: str) -> None:
    base = yaml.safe_load((SAMPLE / name).read_text(encoding="utf-8"))
    assert isinstance(base["views"], list) and base["views"], name
    assert all(view["type"] == "table" and view["name"] for view in base["views"])
    assert base["filters"] == {"and": [f'file.hasTag("{tag}")']}
    notes = notes_with_tag(SAMPLE, tag)
    assert notes, f"no note tagged {tag} in sample-vault"
    for prop in base_properties(base):
        assert all(prop in meta for meta in notes), f"{name} names {prop!r}, which a note tagged {tag} lacks"


def test_home_note_properties_are_typed_for_bases_and_dataview() -> None:
    meta = frontmatter.loads((SAMPLE / "conversations/ledgerly-agent/ledgerly-agent.md").read_text()).metadata
    assert all(isinstance(meta[k], int) for k in ("messages", "summaries", "max_depth", "days"))
    assert all(isinstance(meta[k], dt.datetime) for k in ("first_at", "last_at"))  # YAML timestamps, not text
    assert meta["first_at"] <= meta["last_at"]
    types = json.loads((SAMPLE / TYPES_FILE).read_text())["types"]
    assert {k: types[k] for k in PROPERTY_TYPES} == PROPERTY_TYPES


def test_index_note_lists_every_conversation_with_counts_and_dates() -> None:
    post = frontmatter.loads((SAMPLE / INDEX_NOTE).read_text(encoding="utf-8"))
    assert post.metadata["conversations"] == 1 and post.metadata["tags"] == ["lcm/index"]
    home = frontmatter.loads((SAMPLE / "conversations/ledgerly-agent/ledgerly-agent.md").read_text()).metadata
    line = next(x for x in post.content.splitlines() if x.startswith("- [[conversations/ledgerly-agent/"))
    assert f"{home['messages']} messages" in line and f"{home['summaries']} summaries" in line
    assert home["first_at"].strftime("%Y-%m-%d %H:%M") in line and home["last_at"].strftime("%Y-%m-%d %H:%M") in line


def mtimes(root: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in (root / INDEX_NOTE, root / CONVERSATIONS_BASE, root / SUMMARIES_BASE)}


def test_views_follow_the_vault_and_are_written_only_when_they_change(tmp_path: Path) -> None:
    root = tmp_path / "v"
    with Vault.init(root) as v:
        v.ingest_bytes("b-conv", b'{"role": "user", "content": "hi", "timestamp": "2026-05-01T10:00:00Z"}\n')
        v.ingest_bytes("a-conv", b'{"role": "user", "content": "yo", "timestamp": "2026-05-02T10:00:00Z"}\n')
        index = (root / INDEX_NOTE).read_text(encoding="utf-8")
        lines = [x for x in index.splitlines() if x.startswith("- [[")]
        assert [x.split("|")[1].split("]]")[0] for x in lines] == ["a-conv", "b-conv"]  # newest activity first
        before = mtimes(root)
        v.ingest_bytes("a-conv", b'{"role": "user", "content": "yo", "timestamp": "2026-05-02T10:00:00Z"}\n')
        assert mtimes(root) == before  # nothing new: nothing rewritten
        # a person's Bases view is theirs
        (root / CONVERSATIONS_BASE).write_text("views:\n  - type: cards\n    name: Mine\n", encoding="utf-8")
        types = root / TYPES_FILE
        types.write_text(json.dumps({"types": {"messages": "text", "mood": "text"}}), encoding="utf-8")
        v.ingest_bytes("a-conv", b'{"role": "user", "content": "more", "timestamp": "2026-05-03T10:00:00Z"}\n')
        assert "2 messages" in (root / INDEX_NOTE).read_text(encoding="utf-8")
        assert (root / CONVERSATIONS_BASE).read_text(encoding="utf-8").endswith("name: Mine\n")
        merged = json.loads(types.read_text(encoding="utf-8"))["types"]
        assert merged["messages"] == "text" and merged["mood"] == "text" and merged["depth"] == "number"
        home = frontmatter.loads((root / "conversations/a-conv/a-conv.md").read_text()).metadata
        assert home["messages"] == 2 and home["last_at"] == dt.datetime(2026, 5, 3, 10, 0, tzinfo=dt.UTC)


def test_the_index_survives_a_deleted_state_folder(tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "v"
    with Vault.init(root) as v:
        v.ingest_bytes("a", b'{"role": "user", "content": "one", "timestamp": "2026-05-01T10:00:00Z"}\n')
        v.ingest_bytes("b", b'{"role": "user", "content": "two", "timestamp": "2026-05-02T10:00:00Z"}\n')
    before = (root / INDEX_NOTE).read_text(encoding="utf-8")
    shutil.rmtree(root / ".vaultlcm")
    with Vault(root) as v:
        v.ingest_bytes("b", b'{"role": "user", "content": "three", "timestamp": "2026-05-02T11:00:00Z"}\n')
    after = (root / INDEX_NOTE).read_text(encoding="utf-8")
    assert "[[conversations/a/a|a]] · 1 message ·" in after and "[[conversations/b/b|b]] · 2 messages" in after
    assert "\nmessages: 2\n" in before and "\nmessages: 3\n" in after


def test_a_persons_note_named_like_the_index_is_left_alone(tmp_path: Path) -> None:
    root = tmp_path / "obsidian"
    root.mkdir()
    mine = root / INDEX_NOTE
    mine.write_text("# My conversations with people\n\n- Alice, Tuesday\n", encoding="utf-8")
    with Vault.init(root) as v:
        v.ingest_bytes("a", b'{"role": "user", "content": "hi"}\n')
    assert mine.read_text(encoding="utf-8") == "# My conversations with people\n\n- Alice, Tuesday\n"
    assert (root / CONVERSATIONS_BASE).is_file()
