"""The regex scan reads whole files fast and still finds exactly what a message-by-message scan finds,
and searches summary bodies joined a page at a time yet finds exactly what a body-by-body search finds."""

from __future__ import annotations

import bisect
from pathlib import Path

import pytest
import regex
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from vaultlcm import Settings, Vault
from vaultlcm import grep as grep_module

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
    """What grep must find: each message's text searched alone, compiled as grep compiles (the ``regex`` module)."""
    rx = regex.compile(pattern, regex.IGNORECASE | regex.MULTILINE)
    return {row.id for row, msg in v.log.read_conversation("c") if rx.search(msg.searchable_text())}


@pytest.mark.parametrize("pattern", [
    "deploy", r"line two\r\nline", "^line three", "FAILED test_due", r"nul\x00byte", "needle-in-a-payload",
    r"\bttl of \d+s", "^Decided", r"deploy$", r"day \d: \^caret", "October [0-9]+", "zzz-nothing",
    r"line two\s+line three", "^Second line", r"here\nand a", r"here$",
    # Where a text starts or ends, and what lies around it: a file shows other lines there.
    r"\Aday 2", r"deploy\Z", r"deploy\z", r"(?<![\s\S])day", r"deploy(?![\s\S])", r"(?<=\A)day 3",
    r"(?r)deploy", r"x*", r"(?s)deploy.*day 5", r"\Gday", r"^", r"$", r"(?=day 4)",
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


def brute_force_summaries(v: Vault, pattern: str) -> set[str]:
    rx = regex.compile(pattern, regex.IGNORECASE | regex.MULTILINE)
    return {r.id for r in v.dag.all("c") if r.parent != "!invalid" and rx.search(r.body)}


@pytest.fixture(scope="module")
def compacted(tmp_path_factory: pytest.TempPathFactory) -> Vault:
    """Many small summaries (so that a page of bodies joined holds dozens of them)."""
    root = tmp_path_factory.mktemp("s")
    v = Vault.init(root, settings=Settings(fresh_tail_count=4, leaf_min_messages=2, leaf_max_messages=3,
                                            leaf_target_tokens=60, condensed_min_fanin=2, condensed_max_fanin=3))
    records = []
    for i in range(240):
        day = 1 + i // 60
        text = [f"deploy {i} of routing-api failed: exit code {i % 7}", f"Decided: the ttl is {i}s",
                f"notes on item {i}\nSecond line {i}\nends with deploy"][i % 3]
        records.append({"role": ("user", "assistant")[i % 2], "timestamp": f"2026-11-{day:02d}T10:{i % 60:02d}:00Z",
                        "content": text})
    v.ingest("c", records)
    v.compact("c", force=True)
    assert len(v.dag.all("c")) >= 30
    yield v
    v.close()


SUMMARY_PATTERNS = [
    "deploy", r"exit code \d", "^- ", r"\Z", r"\A", r"\A#", r"(?<![\s\S])", r"(?![\s\S])", r"deploy\Z",
    r"x*", r"(?s)ttl.*deploy", r"\s+", r"$", r"^$", r"(?r)ttl", r"\Gdeploy", "zzz-nothing", r"ttl is 1\d\ds",
]


@pytest.mark.parametrize("pattern", SUMMARY_PATTERNS)
def test_the_joined_search_of_summaries_finds_what_a_body_by_body_search_finds(compacted: Vault, pattern: str) -> None:
    want = brute_force_summaries(compacted, pattern)
    got = compacted.grep(pattern, regex=True, scope="summaries", count=True)
    assert got["summaries"] == got["total"] == len(want)
    page = compacted.grep(pattern, regex=True, scope="summaries", limit=1000)
    assert {h["id"] for h in page["hits"]} == want
    # A page of a few stops early, newest first, and is the start of the whole list.
    first = compacted.grep(pattern, regex=True, scope="summaries", limit=3)
    assert [h["id"] for h in first["hits"]] == [h["id"] for h in page["hits"][:3]]


# Pieces of patterns, drawn in any order and nesting: literals of the vault's text, anchors of lines
# and of whole texts, lookarounds, classes, quantifiers, alternation, inline flags.
_ATOMS = st.sampled_from([
    "deploy", "day", "ttl", "line", "Second", "exit code", "\\d+", "\\s", "\\S", "\\w+", ".", "\\n", "^", "$",
    "\\A", "\\Z", "\\b", "[a-z]", "[^ ]", "-", ":", " ", "1", "7", "(?<=\\s)", "(?<![\\s\\S])", "(?=\\n)",
    "(?![\\s\\S])", "\\G",
])


def _patterns() -> st.SearchStrategy[str]:
    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.lists(inner, min_size=2, max_size=4).map("".join),
            st.tuples(inner, inner).map(lambda t: f"(?:{t[0]}|{t[1]})"),
            st.tuples(inner, st.sampled_from(["*", "+", "?", "{1,3}", "*?"])).map(lambda t: f"(?:{t[0]}){t[1]}"),
        )
    body = st.recursive(_ATOMS, extend, max_leaves=8)
    return st.tuples(st.sampled_from(["", "(?s)", "(?r)"]), body).map("".join)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=_patterns())
def test_any_pattern_finds_in_logs_and_summaries_what_each_text_alone_gives(
        vault: Vault, compacted: Vault, pattern: str) -> None:
    messages = vault.grep(pattern, regex=True, scope="messages", count=True)
    # A drawn pattern can backtrack without end on the 150 kB payload ("(?r)deploy(?:.)*(?:.)*" runs past the
    # 5 s limit): a partial count is then what grep says, and there is nothing whole to compare.
    assume(not messages.get("partial"))
    assert messages["messages"] == len(brute_force(vault, pattern))
    summaries = compacted.grep(pattern, regex=True, scope="summaries", count=True)
    assume(not summaries.get("partial"))
    assert summaries["summaries"] == len(brute_force_summaries(compacted, pattern))


_ENTRY = st.text(alphabet=st.characters(blacklist_characters='"'), min_size=1, max_size=6).map(
    lambda i: f"{grep_module._ENTRY_PREFIX}m-{i}\"}} -->")


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.one_of(st.text(), st.just("\n"), st.just("\r\n"), _ENTRY, _ENTRY.map("\n".__add__)),
                      max_size=12))
def test_the_entry_around_a_position_is_the_one_the_list_of_entry_starts_gives(parts: list[str]) -> None:
    """``_entry_at`` (the lines around one match) agrees with a bisect over every entry start, for any text
    and at every position of it (an entry's first character, the line break before it, the very end)."""
    view = "".join(parts)
    starts = grep_module._entry_starts(view)
    for pos in range(len(view) + 1):
        k = bisect.bisect_right(starts, pos) - 1
        start, end = grep_module._entry_at(view, pos)
        assert start == (starts[k] if k >= 0 else -1), pos
        assert end == next((s for s in starts if s > pos), len(view)), pos


def test_the_time_limit_is_the_scans_not_the_sync_before_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new process's first sync of a large vault (a stat of every note) is not taken out of the scan's limit."""
    import time

    with Vault.init(tmp_path / "v", settings=Settings(regex_timeout_seconds=2.0)) as v:
        v.ingest("c", [{"role": "user", "content": f"deploy {i} failed"} for i in range(20)])
        real = v.sync

        def slow_sync(conversation: str, **kw: object) -> None:
            time.sleep(2.5)  # longer than the whole limit
            real(conversation, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(v, "sync", slow_sync)
        got = v.grep(r"deploy \d+", regex=True, count=True)
        assert not got.get("partial") and got["total"] == 20


def test_a_count_over_many_days_holds_its_limit_on_every_thread(tmp_path: Path) -> None:
    # Counting, the logs are scanned by two threads (every other day each): a count that met the limit is
    # partial however the threads ended (the regex module's own timeout runs on the CPU time of every
    # thread, so a search could end before the wall deadline and the scan look done), and both stop.
    import threading
    import time

    with Vault.init(tmp_path / "v", settings=Settings(regex_timeout_seconds=1.0)) as v:
        v.ingest("c", [{"role": "user", "timestamp": f"2026-11-{day:02d}T10:00:{k:02d}Z",
                        "content": "a" * 3000 + "!" if k % 2 else f"day {day} ok"}
                       for day in range(1, 9) for k in range(6)])
        ok = v.grep(r"day \d ok", regex=True, count=True)  # eight logs, two threads: every match counted
        assert (ok["total"], ok["messages"], ok.get("partial")) == (24, 24, None)
        started = time.monotonic()
        got = v.grep(r"(a+)+$|day \d ok", regex=True, count=True)
        spent = time.monotonic() - started
        assert got.get("partial") is True and spent < 1.0 + 10.0
        deadline = time.monotonic() + 30
        while any(t.name == "vaultlcm-regex-scan-logs" for t in threading.enumerate()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(t.name == "vaultlcm-regex-scan-logs" for t in threading.enumerate()), "the helper thread ended"
