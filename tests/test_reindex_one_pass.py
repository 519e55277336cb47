"""``reindex`` reads each log once, for the catalog and the index: the documents are those the catalog's rows give.

The one-pass rebuild (:meth:`IndexKeeper.rebuild` with ``logs_read=False``) makes each
message's document from the entry the catalog just stored, at the position its writer
gave it; when the catalog then restores another order (appends made on two machines,
merged), it indexes from the catalog's rows instead. Either way the index must hold
exactly what the catalog says: every message once, with its row's hash, time, role and
position, and the text read back from the log.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from vaultlcm import Settings, Vault
from vaultlcm.catalog import entry_hash
from vaultlcm.indexing import entry_doc, message_doc
from vaultlcm.logcodec import ParsedEntry, iter_entries
from vaultlcm.msglog import FileStore

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
BACKENDS = ["whoosh", "tantivy"]


def _open(root: Path, backend: str) -> Vault:
    return Vault(root, settings=Settings(index_backend=backend))


def _turns(side: str, count: int, start: datetime) -> list[dict]:
    return [{"role": "user" if n % 2 == 0 else "assistant",
             "timestamp": (start + timedelta(minutes=n)).strftime("%Y-%m-%dT%H:%M:%SZ"),
             "content": f"{side} step {n}: job {side}{n} ran deploy_{side}_{n} in src/{side}.py"}
            for n in range(count)]


def _index_matches_catalog(v: Vault) -> int:
    """Every message of the catalog is in the index once, at its row's position, with its row's hash and text."""
    index = v.indexer.ready()
    rows = {r[0]: r for r in v.catalog.execute("SELECT id, seq, hash, role FROM messages")}
    hits = index.search("step", kind="message", limit=10_000, sort="oldest", snippets=False)
    assert {h.id for h in hits} == set(rows)
    for h in hits:
        _id, seq, _hash, role = rows[h.id]
        assert (h.seq, h.role) == (seq, role), h.id
    stored = index.stored_hashes()
    assert {i: stored[i] for i in rows} == {i: r[2] for i, r in rows.items()}
    assert v.indexer.drift() == {"missing": [], "extra": []}
    # The one pass and the catalog's path make the same documents (text included).
    conv = "chat"
    want = {row.id: message_doc(row, msg) for row, msg in v.log.iter_conversation(conv)}
    got = {}
    store = FileStore(v.layout, v.layout.files_dir(conv))
    for log in sorted(v.layout.logs_dir(conv).glob("*.md")):
        for e in iter_entries(log.read_bytes(), path=log.name):
            if isinstance(e, ParsedEntry) and e.id in rows and rows[e.id][1] == int(e.meta.get("seq") or 0):
                got[e.id] = entry_doc(conv, e, entry_hash(e.raw), store)
    assert got == {i: d for i, d in want.items() if i in got}
    return len(hits)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reindex_in_one_pass_indexes_what_the_catalog_holds(tmp_path: Path, backend: str) -> None:
    root = tmp_path / "v"
    with Vault.init(root, settings=Settings(index_backend=backend)) as v:
        v.ingest("chat", _turns("a", 30, T0))
        v.ingest("chat", _turns("b", 30, T0 + timedelta(days=1)))  # a second daily log
        v.compact("chat", force=True)
        before = sorted((h.id, h.seq) for h in v.indexer.ready().search("step", limit=1000, sort="oldest"))
    with _open(root, backend) as v:
        out = v.reindex()
        assert out["messages"] == 60 and v.catalog.at_writer_positions("chat", 60)
        assert _index_matches_catalog(v) == 60
        after = sorted((h.id, h.seq) for h in v.indexer.ready().search("step", limit=1000, sort="oldest"))
        assert after == before
        assert v.catalog.execute("SELECT COUNT(*) FROM reindex_queue")[0][0] == 0
        # The summaries are indexed too (drift above compares them by hash).
        assert out["summaries"] > 0 and v.indexer.counts_match()


@pytest.mark.parametrize("backend", BACKENDS)
def test_reindex_of_merged_appends_indexes_the_restored_order(tmp_path: Path, backend: str) -> None:
    """Two machines appended to the same log and git merged both sides: the catalog restores the order,
    which moves positions after the logs were read, so the rebuild indexes from the catalog."""
    a, b = tmp_path / "a", tmp_path / "b"
    with Vault.init(a, settings=Settings(index_backend=backend)) as v:
        v.ingest("chat", _turns("base", 6, T0))
    shutil.copytree(a, b)
    with _open(a, backend) as v:
        v.ingest("chat", _turns("left", 4, T0 + timedelta(hours=1)))
    with _open(b, backend) as v:
        v.ingest("chat", _turns("right", 4, T0 + timedelta(hours=2)))
    log = next((a / "conversations/chat/logs").glob("*.md"))
    left, right = log.read_bytes(), (b / log.relative_to(a)).read_bytes()
    common = next(i for i, (x, y) in enumerate(zip(left, right, strict=False)) if x != y)
    common = left.rfind(b"\n<!-- lcm:", 0, common) + 1  # the first entry the two sides wrote apart
    log.write_bytes(left + right[common:])  # what merge=union leaves: both sides' entries
    with _open(a, backend) as v:
        out = v.reindex()
        assert out["messages"] == 14
        # Both sides' first entries follow the same one: the writers' positions clash.
        assert not v.catalog.at_writer_positions("chat", 14)
        assert _index_matches_catalog(v) == 14
        seqs = [r[0] for r in v.catalog.execute("SELECT seq FROM messages WHERE conv='chat' ORDER BY seq")]
        assert seqs == list(range(1, 15))


text_any = st.text(st.characters(exclude_categories=("Cs",)), max_size=120)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(contents=st.lists(text_any, min_size=1, max_size=12), tool=st.booleans())
def test_one_pass_documents_equal_the_catalog_paths_for_any_text(tmp_path_factory: pytest.TempPathFactory,
                                                                 contents: list[str], tool: bool) -> None:
    root = tmp_path_factory.mktemp("v")
    records: list[dict] = []
    for n, text in enumerate(contents):
        at = (T0 + timedelta(hours=7 * n)).strftime("%Y-%m-%dT%H:%M:%SZ")  # several daily logs
        if tool and n % 3 == 1:
            records.append({"role": "assistant", "timestamp": at, "content": [
                {"type": "text", "text": "step " + text},
                {"type": "tool_call", "id": f"call_{n}", "name": "run", "arguments": {"q": text}}]})
        else:
            records.append({"role": "user", "timestamp": at, "content": "step " + text})
    with Vault.init(root, settings=Settings(index_backend="tantivy")) as v:
        v.ingest("chat", records)
    with _open(root, "tantivy") as v:
        v.reindex()
        assert _index_matches_catalog(v) == len(records)
