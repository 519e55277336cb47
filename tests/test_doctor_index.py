"""doctor's index check: routine cost follows what changed; a real mismatch is still found and repaired."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_traffic import numbered_steps
from people_vaults import BACKENDS, make_indexed_vault as make_vault
from vaultlcm import Vault
from vaultlcm.index import open_index



session = numbered_steps


@pytest.mark.parametrize("backend", BACKENDS)
def test_doctor_follows_a_lagging_index_without_comparing_every_document(
        tmp_path: Path, backend: str, full_compares: list[int]) -> None:
    make_vault(tmp_path, backend)
    # Another process appends and compacts without opening the index: the index lags.
    with Vault(tmp_path) as v:
        v.ingest("c", session(60, offset=90))
        v.compact("c", force=True)
    full_compares.clear()
    with Vault(tmp_path) as v:
        report = v.doctor()
        notes = {n["kind"]: n["detail"] for n in report["notes"]}
        assert report["clean"] and "index_caught_up" not in notes
        assert full_compares == []  # read from the marks: neither the history nor the lag is worked through
        # The marks account for the lag: reported, not worked off (that costs what is new, not the check).
        missing = v.indexer.drift()["missing"]
        assert missing and notes["index_behind"].startswith(f"{len(missing)} new document(s)")
    full_compares.clear()
    with Vault(tmp_path) as v:
        assert v.grep("step 140")["hits"]  # the next search follows from the marks
        assert full_compares == []
        assert v.indexer.drift() == {"missing": [], "extra": []}
    full_compares.clear()
    with Vault(tmp_path) as v:  # a fix works the lag off now
        v.ingest("c", session(5, offset=150))
    with Vault(tmp_path) as v:
        assert "index_behind" in {n["kind"] for n in v.doctor()["notes"]}
        v.doctor(fix=True)
        assert v.indexer.drift() == {"missing": [], "extra": []}
        assert full_compares
    full_compares.clear()
    with Vault(tmp_path) as v:  # nothing new: no note, no comparison
        report = v.doctor()
        assert report["clean"] and "index_caught_up" not in {n["kind"] for n in report["notes"]}
        assert full_compares == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_document_removed_behind_the_marks_is_still_found(tmp_path: Path, backend: str,
                                                             full_compares: list[int]) -> None:
    make_vault(tmp_path, backend)
    with Vault(tmp_path) as v:
        victim = v.grep("step 42")["hits"][0]["id"]
    index = open_index(backend, tmp_path / ".vaultlcm" / "index")
    index.remove([victim])
    index.close()
    with Vault(tmp_path) as v:
        report = v.doctor()
        assert "index_caught_up" in {n["kind"] for n in report["notes"]} and report["clean"]
        assert full_compares  # the marks no longer matched the index: everything was compared
        assert v.indexer.drift() == {"missing": [], "extra": []}
        assert victim in [h["id"] for h in v.grep("step 42")["hits"]]


@pytest.mark.parametrize("backend", BACKENDS)
def test_marks_that_lie_are_caught_by_the_counts(tmp_path: Path, backend: str, full_compares: list[int]) -> None:
    """Marks saved after a document went missing (the count they carry agrees with the index): following
    them adds nothing, the counts still disagree with the catalog, and the full comparison repairs it."""
    make_vault(tmp_path, backend)
    with Vault(tmp_path) as v:
        victim = v.grep("step 17")["hits"][0]["id"]
        v.indexer.open().remove([victim])  # behind the keeper's back: its marks stay and are saved at close
    with Vault(tmp_path) as v:
        report = v.doctor()
        assert "index_caught_up" in {n["kind"] for n in report["notes"]} and report["clean"]
        assert full_compares
        assert victim in [h["id"] for h in v.grep("step 17")["hits"]]


@pytest.mark.parametrize("backend", BACKENDS)
def test_lag_does_not_hide_a_document_lost_behind_the_marks(tmp_path: Path, backend: str,
                                                            full_compares: list[int]) -> None:
    """New messages the index has not seen plus one document lost: the marks no longer add up, so doctor
    catches up and compares instead of calling it lag."""
    make_vault(tmp_path, backend)
    with Vault(tmp_path) as v:
        victim = v.grep("step 33")["hits"][0]["id"]
        v.indexer.open().remove([victim])
    with Vault(tmp_path) as v:
        v.ingest("c", session(7, offset=90))
    with Vault(tmp_path) as v:
        report = v.doctor()
        kinds = {n["kind"] for n in report["notes"]}
        assert "index_behind" not in kinds and "index_caught_up" in kinds and report["clean"]
        assert full_compares
        assert v.indexer.drift() == {"missing": [], "extra": []}


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_keeper_holds_nothing_per_summary(tmp_path: Path, backend: str, full_compares: list[int]) -> None:
    """What the index holds of each summary is a catalog table, not a map in the process: a keeper that
    followed many compactions holds a few marks per conversation, and a summary edited, added or
    removed since is still followed (by a join in the catalog, not a full compare)."""
    make_vault(tmp_path, backend)
    full_compares.clear()
    with Vault(tmp_path) as v:
        v.indexer.ready()
        assert full_compares == []  # the marks saved by make_vault's close are trusted
        for k in range(3):
            v.ingest("c", session(40, offset=90 + 40 * k))
            v.compact("c", force=True)
            v.indexer.follow("c")
        summaries = {r.id for r in v.dag.all("c")}
        assert len(summaries) > 10
        held = [len(x) for x in vars(v.indexer).values() if isinstance(x, (dict, list, set))]
        assert sum(held) <= 2 * len(v.conversations())
        indexed = dict(v.catalog.execute("SELECT id, hash FROM index_summaries"))
        assert indexed == {r.id: r.body_hash for r in v.dag.all("c")}
        assert full_compares == []  # followed from the marks, never by comparing every document
        assert v.indexer.drift() == {"missing": [], "extra": []}


@pytest.mark.parametrize("backend", BACKENDS)
def test_marks_of_the_earlier_kind_are_compared_once_then_trusted(tmp_path: Path, backend: str,
                                                                  full_compares: list[int]) -> None:
    """Marks saved by a version that kept every summary's hash in the marks file: not trusted (the catalog
    table may not match them), one full compare rewrites both, the next process follows from the marks."""
    import json

    make_vault(tmp_path, backend)
    marks = tmp_path / ".vaultlcm" / "index" / "vaultlcm-marks.json"
    data = json.loads(marks.read_text())
    assert "sum_known" not in data
    data["sum_known"] = {"c": {}}
    marks.write_text(json.dumps(data))
    full_compares.clear()
    with Vault(tmp_path) as v:
        v.catalog.execute("DROP TABLE index_summaries")  # as an earlier version's catalog would be
        assert v.grep("step 42")["hits"]
        assert len(full_compares) == 1
        assert v.indexer.drift() == {"missing": [], "extra": []}
    full_compares.clear()
    with Vault(tmp_path) as v:
        assert v.grep("step 43")["hits"]
        assert full_compares == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_doctor_suggests_tantivy_only_for_a_large_whoosh_index(
        tmp_path: Path, backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import vaultlcm.doctor as doctor

    make_vault(tmp_path, backend)
    with Vault(tmp_path) as v:
        documents = v.indexer.open().count()
        assert "index_backend_slow" not in {n["kind"] for n in v.doctor()["notes"]}  # 90 messages: no advice
        # The threshold as a vault of this size would meet it (building 25,000 documents here costs minutes).
        monkeypatch.setattr(doctor, "WHOOSH_ADVISED_MAX", documents)
        report = v.doctor()
    notes = {n["kind"]: n["detail"] for n in report["notes"]}
    if backend == "tantivy":
        assert "index_backend_slow" not in notes
        return
    advice = notes["index_backend_slow"]
    assert f"holds {documents:,} documents" in advice and "`vaultlcm reindex --backend tantivy`" in advice
    # The install step is named only when tantivy is missing here.
    assert ("vaultlcm[tantivy]" in advice) is (not doctor.backend_installed("tantivy"))
    assert report["clean"], "advice is a note: doctor still exits 0"


def test_doctor_notes_an_index_in_the_older_block_format_until_a_reindex(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import vaultlcm.doctor as doctor
    from vaultlcm.index import whoosh_backend as wb

    with monkeypatch.context() as m:  # the index as an older vaultlcm wrote it: Whoosh's pickled blocks
        m.setattr(wb.WhooshIndex, "segment_codec", wb.SecureIdCodec)
        make_vault(tmp_path, "whoosh")
    # The threshold as a vault of this size would meet it (10,000 documents here would cost minutes).
    monkeypatch.setattr(doctor, "WHOOSH_OUTDATED_NOTED", 1)
    with Vault(tmp_path) as v:
        documents = v.indexer.open().count()
        assert v.indexer.open().outdated_docs() == documents > 0
        report = v.doctor()
        note = {n["kind"]: n["detail"] for n in report["notes"]}["index_blocks_outdated"]
        assert f"{documents:,} of the search index's {documents:,} documents" in note and "`vaultlcm reindex`" in note
        assert report["clean"]  # a note: doctor still exits 0
        before = v.grep("step 43")
        v.reindex()
        assert v.indexer.open().outdated_docs() == 0
        assert "index_blocks_outdated" not in {n["kind"] for n in v.doctor()["notes"]}
        after = v.grep("step 43")
    assert [h["id"] for h in after["hits"]] == [h["id"] for h in before["hits"]] and after["total"] == before["total"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_new_index_has_no_outdated_documents(tmp_path: Path, backend: str) -> None:
    make_vault(tmp_path, backend)
    with Vault(tmp_path) as v:
        assert v.indexer.open().count() > 0 and v.indexer.open().outdated_docs() == 0
        assert "index_blocks_outdated" not in {n["kind"] for n in v.doctor()["notes"]}
