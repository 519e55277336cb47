"""The regex scan reads whole files fast and still finds exactly what a message-by-message scan finds."""

from __future__ import annotations

import re

import pytest

from vaultlcm import Vault

TEXTS = [
    "deploy of routing-api failed: exit code 1",
    "line one\nline two\r\nline three",  # mixed line endings: stored with its CRs taken out of the lines
    "\x1b[31mFAILED\x1b[0m test_due_date",  # terminal codes: kept out of the visible text
    "nul\x00byte deploy",  # escaped: not in the callout as plain lines
    "plain words about the cache ttl of 300s",
    "^caret at the start",
    "ends with deploy",
    "Decided: move the deadline to October 4",
    "notes:\nSecond line starts here\nand a third",
]


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Vault:
    root = tmp_path_factory.mktemp("v")
    v = Vault.init(root)
    big = "word " * 30_000 + " deploy needle-in-a-payload"
    records = []
    for day in range(1, 6):
        for i, text in enumerate(TEXTS):
            records.append({"role": "user" if i % 2 else "assistant", "timestamp": f"2026-11-{day:02d}T10:00:{i:02d}Z",
                            "content": f"day {day}: {text}"})
        records.append({"role": "tool", "timestamp": f"2026-11-{day:02d}T11:00:00Z",
                        "content": [{"type": "tool_result", "call_id": f"c{day}", "content": big}]})
    v.ingest("c", records)
    yield v
    v.close()


def brute_force(v: Vault, pattern: str) -> set[str]:
    rx = re.compile(pattern, re.IGNORECASE | re.MULTILINE)
    return {row.id for row, msg in v.log.read_conversation("c") if rx.search(msg.searchable_text())}


@pytest.mark.parametrize("pattern", [
    "deploy", r"line two\r\nline", "^line three", "FAILED test_due", r"nul\x00byte", "needle-in-a-payload",
    r"\bttl of \d+s", "^Decided", r"deploy$", r"day \d: \^caret", "October [0-9]+", "zzz-nothing",
    r"line two\s+line three", "^Second line", r"here\nand a", r"here$",
])
def test_the_fast_scan_finds_what_a_full_decode_finds(vault: Vault, pattern: str) -> None:
    got = vault.grep(pattern, regex=True, scope="messages", count=True)
    assert got["messages"] == got["total"] == len(brute_force(vault, pattern))
    page = vault.grep(pattern, regex=True, scope="messages", limit=500)
    assert {h["id"] for h in page["hits"]} == brute_force(vault, pattern)


def test_a_full_page_stops_early_and_says_more_may_follow(vault: Vault) -> None:
    first = vault.grep("deploy", regex=True, scope="messages", limit=3)
    assert len(first["hits"]) == 3 and first["next_offset"] == 3
    ats = [h["at"] for h in first["hits"]]
    assert ats == sorted(ats, reverse=True) and ats[0].startswith("2026-11-05")  # the newest first
    every = vault.grep("deploy", regex=True, scope="messages", limit=500)
    assert [h["id"] for h in every["hits"][:3]] == [h["id"] for h in first["hits"]]
