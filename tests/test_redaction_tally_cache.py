"""The redaction tally's cache is written without fsync: whatever a crash leaves of it, counts stay right."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vaultlcm import Vault
from vaultlcm.redaction_tally import RedactionTally

#: A marker as redaction writes it (counted from the log whether or not redaction is on).
SECRET = "my key is [redacted: anthropic-key] now"


def _vault(root: Path) -> Vault:
    v = Vault.init(root)
    v.ingest("c", [{"role": "user", "content": SECRET}, {"role": "assistant", "content": "noted"},
                   {"role": "user", "content": "again " + SECRET}])
    return v


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_a_cache_cut_short_or_garbled_counts_the_same(tmp_path_factory, data) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("v")
    with _vault(root) as v:
        fresh = RedactionTally(v.layout).counts("c")
        assert sum(fresh.values()) == 2
        tally = RedactionTally(v.layout)
        tally.counts("c")
        tally.save()
        saved = tally.path.read_bytes()
        # What a crash may leave: a prefix of the file, or other bytes in its place.
        broken = data.draw(st.one_of(st.integers(0, len(saved)).map(lambda n: saved[:n]), st.binary(max_size=64)))
        tally.path.write_bytes(broken)
        assert RedactionTally(v.layout).counts("c") == fresh


def test_save_leaves_no_temporary_file_behind(tmp_path: Path) -> None:
    with _vault(tmp_path) as v:
        tally = RedactionTally(v.layout)
        tally.counts("c")
        tally.save()
        assert [p.name for p in tally.path.parent.iterdir() if "redactions" in p.name] == ["redactions.json"]
