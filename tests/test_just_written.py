"""The messages a process just appended, handed to its compaction instead of being read back from the logs."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_formats import native_record
from vaultlcm import Vault
from vaultlcm.catalog import MessageRow
from vaultlcm.just_written import JustWritten
from vaultlcm.messages import Message
from vaultlcm.settings import Settings

CONV = "c"


def _rows(v: Vault, conv: str = CONV) -> list[MessageRow]:
    v.log.sync(conv)
    found = v.catalog.rows_by_ids([r[0] for r in v.catalog.execute("SELECT id FROM messages WHERE conv=?", (conv,))])
    return sorted(found.values(), key=lambda r: r.seq)


def test_what_is_handed_over_is_what_the_log_reads_back() -> None:
    """Whatever the messages hold, a kept message equals the one decoded from its entry, and is dropped once taken."""
    with tempfile.TemporaryDirectory() as tmp, Vault.init(Path(tmp) / "v") as v:
        examples = iter(range(1_000_000))

        @settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(st.lists(st.lists(native_record(), min_size=1, max_size=4), min_size=1, max_size=3))
        def check(calls: list[list[dict[str, Any]]]) -> None:
            conv = f"c{next(examples)}"  # one vault for every example (opening one costs more than the check)
            for records in calls:
                v.ingest(conv, records)
            rows = _rows(v, conv)
            from_disk = dict(v.log.read_rows(rows))
            kept = len(v.log.just_written)
            taken = v.log.just_written.take(rows)
            assert len(taken) == kept
            for row in rows:
                if row.id in taken:
                    assert taken[row.id] == from_disk[row]
            assert len(v.log.just_written) == 0 and v.log.just_written.bytes == 0
            assert v.log.just_written.take(rows) == {}

        check()


def test_a_callers_later_change_to_its_message_is_not_seen(tmp_path: Path) -> None:
    """A caller may reuse and change its own records after ingest (a cache mark on the newest block, say)."""
    mine = Message(role="user", content=[{"type": "text", "text": "deploy the parser"}], extra={"n": [1]})
    with Vault.init(tmp_path / "v") as v:
        v.ingest(CONV, [mine])
        mine.content[0]["cache_control"] = {"type": "ephemeral"}
        mine.content[0]["text"] = "changed after the call"
        mine.extra["n"].append(2)  # type: ignore[union-attr]
        rows = _rows(v)
        taken = v.log.just_written.take(rows)
        assert taken[rows[0].id] == v.log.read_row(rows[0])
        assert taken[rows[0].id].text == "deploy the parser"


def test_a_log_edited_after_ingest_is_read_from_disk(tmp_path: Path) -> None:
    """A person's edit between ingest and compaction reaches the summary: the kept copy is not used."""
    words = ["Alpha", "Bravo", "Charlie", "Delta", "Echo", "Foxtrot", "Golf", "Hotel"]
    with Vault.init(tmp_path / "v", settings=Settings(fresh_tail_count=2)) as v:
        v.ingest(CONV, [{"role": "user" if i % 2 == 0 else "assistant",
                         "content": f"Step {i}: the {words[i % 8]} service listens on port {9000 + i} "
                                    f"and its owner is {words[(i + 3) % 8]} team." + " More detail." * 20}
                        for i in range(60)])
        assert len(v.log.just_written) == 60
        log = next((tmp_path / "v" / "conversations" / CONV / "logs").glob("*.md"))
        text = log.read_text(encoding="utf-8")
        assert text.count("port 9004") == 1
        log.write_text(text.replace("port 9004", "port 7777"), encoding="utf-8")
        v.compact(CONV, force=True)
        notes = "".join(p.read_text(encoding="utf-8")
                        for p in (tmp_path / "v" / "conversations" / CONV / "summaries").glob("*.md"))
        assert "port 7777" in notes and "port 9004" not in notes  # not bare digits: a hash may hold them
        assert "port 9006" in notes  # an unedited neighbour still made it in, from memory or disk alike
        assert len(v.log.just_written) < 60  # what compaction took is dropped


def test_the_store_is_bounded_by_messages_and_bytes(tmp_path: Path) -> None:
    with Vault.init(tmp_path / "v") as v:
        small = v.log.just_written = JustWritten(v.layout, v.log.just_written.payloads, max_messages=5, max_bytes=100_000)
        ids = v.ingest(CONV, [{"role": "user", "content": f"message {i}"} for i in range(12)])
        assert len(small) == 5
        assert set(small.take(_rows(v))) == set(ids[-5:])  # the newest are kept
        tight = v.log.just_written = JustWritten(v.layout, v.log.just_written.payloads, max_messages=1000, max_bytes=3_000)
        for i in range(30):
            v.ingest(CONV, [{"role": "assistant", "content": f"reply {i} " + "x" * 400}])
            assert tight.bytes <= 3_000
        assert 0 < len(tight) < 30
        tight.add(CONV, [("conversations/c/logs/x.md", None, [], None)])  # nothing written, nothing kept
        assert tight.bytes <= 3_000


def test_a_message_with_a_payload_file_reads_it_as_a_log_read_does(tmp_path: Path) -> None:
    """Externalized parts are read from their payload files (checked against their names) either way."""
    with Vault.init(tmp_path / "v") as v:
        ids = v.ingest(CONV, [{"role": "user", "content": [{"type": "image", "media_type": "image/png",
                                                             "data": "iVBORw0KGgo="}]},
                              {"role": "user", "content": "plain"}])
        rows = _rows(v)
        assert v.catalog.execute("SELECT COUNT(*) FROM payload_refs")[0][0] == 1  # the image went to files/
        taken = v.log.just_written.take(rows)
        assert list(taken) == ids and [taken[r.id] for r in rows] == [m for _, m in v.log.read_rows(rows)]
