"""The lanes an append computes from the rows around it are those of the full recompute.

Random Claude Code and pi trees (forks of prompts and of API requests, parallel tool
calls, subagent and non-chat lines, duplicated uuids, children before their parents,
parents that never come, any string as a uuid) are appended in random batches
through the real append path (``Vault.ingest_bytes``: the log, then
``Catalog.record_append``); after every append the catalog's lanes must be
:func:`vaultlcm.threads.lanes` over all the rows. Realistic sessions must take the
fast path (:data:`vaultlcm.lanes_append.COUNTS`), so a fast path that always fell back
fails here.
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vaultlcm import Vault
from vaultlcm import lanes_append
from vaultlcm.lanes_append import FULL_SQL, full_lane_changes
from vaultlcm.threads import ABANDONED, LINE, MAIN, SIDE

FIX = Path(__file__).parent / "fixtures"


def _stamp(i: int) -> str:
    return f"2026-03-02T09:{i // 60 % 60:02d}:{i % 60:02d}.000Z"


def cc_record(i: int, kind: str, uuid: str, parent: str | None, *, side: bool = False,
              request: str | None = None) -> dict[str, Any]:
    """A Claude Code session line of ``kind`` (prompt, result, meta, asst, line)."""
    rec: dict[str, Any] = {"parentUuid": parent, "isSidechain": side, "uuid": uuid, "timestamp": _stamp(i),
                           "sessionId": "s1"}
    if kind == "line":
        return rec | {"type": "progress", "data": {"type": "bash_progress", "n": i}}
    if kind == "asst":
        inner: dict[str, Any] = {"role": "assistant", "content": [{"type": "text", "text": f"answer {i}"}]}
        if request:
            rec["requestId"] = request
        return rec | {"type": "assistant", "message": inner}
    content: Any = f"prompt {i}"
    if kind == "result":
        content = [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"out {i}"}]
    rec |= {"type": "user", "message": {"role": "user", "content": content}}
    if kind == "meta":
        rec["isMeta"] = True
    return rec


def pi_record(i: int, kind: str, uuid: str, parent: str | None) -> dict[str, Any]:
    """A pi / OpenClaw session entry of ``kind`` (user, assistant, toolResult, line, summary)."""
    rec: dict[str, Any] = {"id": uuid, "parentId": parent, "timestamp": _stamp(i)}
    if kind == "line":
        return rec | {"type": "model_change", "provider": "anthropic", "modelId": f"m{i}"}
    if kind == "summary":
        return rec | {"type": "message", "message": {"role": "compactionSummary", "summary": f"s{i}"}}
    message: dict[str, Any] = {"role": kind, "content": [{"type": "text", "text": f"{kind} {i}"}]}
    if kind == "toolResult":
        message["toolCallId"] = f"call_{i}"
    return rec | {"type": "message", "message": message}


def stored_lanes_are_the_full_recompute(v: Vault, conv: str) -> dict[str, int]:
    rows = v.catalog.execute(FULL_SQL, (conv,))
    assert full_lane_changes(rows) == []
    return {i: lane for i, lane in v.catalog.execute("SELECT id, lane FROM messages WHERE conv=?", (conv,))}


def ingest(v: Vault, conv: str, fmt: str, records: list[dict[str, Any]]) -> list[str]:
    data = "".join(json.dumps(r) + "\n" for r in records).encode()
    return v.ingest_bytes(conv, data, format=fmt, allow_duplicates=True, refresh_views=False).ids


# -- random trees ------------------------------------------------------------------------------

#: How a record's parent is drawn: mostly the line before it or an earlier one, sometimes a
#: later one (a child before its parent), none, one that never comes, or itself.
PARENTS = ["last"] * 5 + ["earlier"] * 5 + ["later", "none", "never", "self"]


@st.composite
def sessions(draw: st.DrawFn) -> list[tuple[str, list[dict[str, Any]]]]:
    """Batches ``(format, records)`` of one conversation."""
    n = draw(st.integers(1, 36))
    # mostly one uuid per record, some drawn again (duplicates), some any string
    names = [draw(st.sampled_from(["fresh"] * 8 + ["again", "text"])) for _ in range(n)]
    uuids: list[str] = []
    for i, how in enumerate(names):
        uuids.append(draw(st.text(min_size=1, max_size=4)) if how == "text"
                     else draw(st.sampled_from(uuids)) if how == "again" and uuids else f"u{i}")
    fmts = draw(st.sampled_from([("claude-code",), ("openclaw",), ("claude-code", "openclaw")]))
    records: list[tuple[str, dict[str, Any]]] = []
    for i, uuid in enumerate(uuids):
        fmt = draw(st.sampled_from(fmts))
        how = draw(st.sampled_from(PARENTS))
        parent = (uuids[i - 1] if how == "last" and i else draw(st.sampled_from(uuids[:i])) if how == "earlier" and i
                  else draw(st.sampled_from(uuids[i:])) if how == "later" else uuid if how == "self"
                  else "never-seen" if how == "never" else None)
        if fmt == "claude-code":
            kind = draw(st.sampled_from(["prompt", "result", "meta", "asst", "asst", "line"]))
            rec = cc_record(i, kind, uuid, parent, side=draw(st.integers(0, 5)) == 0,
                            request=draw(st.sampled_from([None, "r1", "r2", "r3"])))
        else:
            kind = draw(st.sampled_from(["user", "assistant", "toolResult", "line", "summary"]))
            rec = pi_record(i, kind, uuid, parent)
        records.append((fmt, rec))
    cuts = sorted(set(draw(st.lists(st.integers(1, n), max_size=6))) | {n})
    batches: list[tuple[str, list[dict[str, Any]]]] = []
    start = 0
    for cut in cuts:
        part = records[start:cut]
        start = cut
        while part:  # one format per ingest call
            same = next((j for j, (f, _r) in enumerate(part) if f != part[0][0]), len(part))
            batches.append((part[0][0], [r for _f, r in part[:same]]))
            part = part[same:]
    return batches


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
def test_after_every_append_the_lanes_are_the_full_recompute(batches: list[tuple[str, list[dict[str, Any]]]]) -> None:
    with tempfile.TemporaryDirectory(prefix="lanes10-") as tmp:
        with Vault.init(Path(tmp) / "v") as v:
            total = 0
            for fmt, records in batches:
                ids = ingest(v, "t", fmt, records)
                total += len(records)
                assert len(ids) == len(records)
                lanes = stored_lanes_are_the_full_recompute(v, "t")
                assert len(lanes) == total  # every row went through record_append


# -- the fast path is the one taken --------------------------------------------------------------

def linear_claude_code(start: int, turns: int, parent: str | None) -> list[dict[str, Any]]:
    """Turns of a real session's shape: a prompt, an API request streamed as several lines (two
    parallel tool calls), their results, progress and system lines; a subagent on the side."""
    out: list[dict[str, Any]] = []
    i = start
    for t in range(turns):
        u = f"t{start}-{t}"
        out.append(cc_record(i, "prompt", f"{u}-p", parent))
        out.append(cc_record(i + 1, "asst", f"{u}-a1", f"{u}-p", request=f"req-{u}-1"))
        out.append(cc_record(i + 2, "asst", f"{u}-a2", f"{u}-a1", request=f"req-{u}-1"))
        out.append(cc_record(i + 10, "asst", f"{u}-a2b", f"{u}-a1", request=f"req-{u}-1"))  # not an alternative
        out.append(cc_record(i + 3, "line", f"{u}-g", f"{u}-a2"))
        out.append(cc_record(i + 4, "result", f"{u}-r1", f"{u}-a2"))
        out.append(cc_record(i + 5, "result", f"{u}-r2", f"{u}-r1"))
        out.append(cc_record(i + 6, "prompt", f"{u}-s0", None, side=True))
        out.append(cc_record(i + 7, "asst", f"{u}-s1", f"{u}-s0", side=True, request=f"req-{u}-s"))
        out.append(cc_record(i + 8, "asst", f"{u}-a3", f"{u}-r2", request=f"req-{u}-2"))
        out.append(cc_record(i + 9, "line", f"{u}-sys", f"{u}-a3"))
        parent = f"{u}-sys"
        i += 11
    return out


def test_a_claude_code_session_appended_in_parts_takes_the_fast_path(tmp_path: Path) -> None:
    records = linear_claude_code(0, 6, None)
    before = Counter(lanes_append.COUNTS)
    with Vault.init(tmp_path / "v") as v:
        for k in range(0, len(records), 7):
            ingest(v, "cc", "claude-code", records[k : k + 7])
            stored_lanes_are_the_full_recompute(v, "cc")
        # a rewind: a new prompt after the fifth turn beats the sixth turn's prompt (and all below it)
        ids = ingest(v, "cc", "claude-code", [cc_record(900, "prompt", "again", "t0-4-sys"),
                                               cc_record(901, "asst", "again-a", "again", request="req-again")])
        lanes = stored_lanes_are_the_full_recompute(v, "cc")
        rows = {r.id: r for r in v.catalog.rows("cc")}
        assert [lanes[i] for i in ids] == [MAIN, MAIN]
        assert Counter(r.lane for r in rows.values()) == {MAIN: 7 * 5 + 2, SIDE: 12, LINE: 12, ABANDONED: 7}
        # an API request retried: the second request's line beats the first one's
        ingest(v, "cc", "claude-code", [cc_record(902, "asst", "retry", "again", request="req-retry")])
        lanes = stored_lanes_are_the_full_recompute(v, "cc")
        assert Counter(lanes.values())[ABANDONED] == 8
    after = Counter(lanes_append.COUNTS)
    after.subtract(before)
    assert +after == {"fast": len(range(0, len(records), 7)) + 2}


def test_a_pi_session_appended_in_parts_takes_the_fast_path(tmp_path: Path) -> None:
    records = [pi_record(0, "line", "m0", None), pi_record(1, "line", "m1", "m0")]
    kinds = ["user", "assistant", "toolResult", "assistant", "line", "assistant", "summary", "user"]
    for i in range(2, 60):
        records.append(pi_record(i, kinds[i % len(kinds)], f"e{i}", records[-1]["id"]))
    before = Counter(lanes_append.COUNTS)
    with Vault.init(tmp_path / "v") as v:
        for k in range(0, len(records), 5):
            ingest(v, "pi", "openclaw", records[k : k + 5])
            lanes = stored_lanes_are_the_full_recompute(v, "pi")
            assert ABANDONED not in lanes.values()
        fast = Counter(lanes_append.COUNTS)
        fast.subtract(before)
        assert +fast == {"fast": len(range(0, len(records), 5))}
        # pi's /tree: continuing from an older entry abandons the branch below it (recomputed)
        ingest(v, "pi", "openclaw", [pi_record(100, "user", "branch", "e30")])
        lanes = stored_lanes_are_the_full_recompute(v, "pi")
        assert Counter(lanes.values())[ABANDONED] > 20
    assert lanes_append.COUNTS["full:pi branch"] - before["full:pi branch"] == 1


def test_the_fixture_session_in_parts_gives_the_lanes_of_one_import(tmp_path: Path) -> None:
    lines = (FIX / "claude-code" / "session.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    with Vault.init(tmp_path / "v") as v:
        for k in range(0, len(lines), 3):
            v.ingest_bytes("parts", "".join(lines[k : k + 3]).encode(), format="claude-code", refresh_views=False)
            stored_lanes_are_the_full_recompute(v, "parts")
        v.ingest_bytes("whole", "".join(lines).encode(), format="claude-code", refresh_views=False)
        parts = [r.lane for r in v.catalog.rows("parts")]
        assert parts == [r.lane for r in v.catalog.rows("whole")] and ABANDONED in parts


def test_lines_that_arrive_below_an_abandoned_branch_are_abandoned(tmp_path: Path) -> None:
    before = Counter(lanes_append.COUNTS)
    with Vault.init(tmp_path / "v") as v:
        ingest(v, "cc", "claude-code", linear_claude_code(0, 3, None))
        ingest(v, "cc", "claude-code", [cc_record(900, "prompt", "again", "t0-1-sys")])  # the third turn loses
        ids = ingest(v, "cc", "claude-code", [
            cc_record(901, "result", "late", "t0-2-a3"),  # below an abandoned assistant line
            cc_record(902, "line", "late-g", "t0-2-sys"),  # below a non-chat line below it
            cc_record(903, "asst", "late-a", "late-g", request="req-late"),
            cc_record(904, "prompt", "late-s", "t0-2-a3", side=True),  # a subagent's line keeps its lane
            cc_record(905, "asst", "late-b", "late-s", request="req-late-b"),  # below that, abandoned
            cc_record(906, "asst", "ok", "again", request="req-ok"),
        ])
        lanes = stored_lanes_are_the_full_recompute(v, "cc")
        assert [lanes[i] for i in ids] == [ABANDONED, LINE, ABANDONED, SIDE, ABANDONED, MAIN]
    after = Counter(lanes_append.COUNTS)
    after.subtract(before)
    assert +after == {"fast": 3}


def _cc(i: int, kind: str, uuid: str, parent: str | None, **kw: Any) -> tuple[str, dict[str, Any]]:
    return "claude-code", cc_record(i, kind, uuid, parent, **kw)


def _pi(i: int, kind: str, uuid: str, parent: str | None) -> tuple[str, dict[str, Any]]:
    return "openclaw", pi_record(i, kind, uuid, parent)


#: Shapes random trees reach rarely, one append per inner list.
CASES: dict[str, list[list[tuple[str, dict[str, Any]]]]] = {
    # a later copy of a uuid beside its first copy's parent: ignored, it beats nothing
    "duplicate beside": [[_cc(0, "prompt", "a", None), _cc(1, "prompt", "b", "a")], [_cc(2, "prompt", "b", "a")],
                         [_cc(3, "asst", "c", "b", request="r")]],
    # a later copy under another parent is no child there: the new prompt beats nothing
    "duplicate elsewhere": [[_cc(0, "prompt", "a", None), _cc(1, "prompt", "q", None), _cc(2, "prompt", "x", "q"),
                             _cc(3, "asst", "y", "x", request="r")], [_cc(4, "prompt", "x", "a")],
                            [_cc(5, "prompt", "n", "a")]],
    # the line that loses at a fork is above the fork (a cycle): the new line is below the loser
    "cycle": [[_cc(0, "prompt", "a", "a")], [_cc(1, "prompt", "b", "a")]],
    "longer cycle": [[_cc(0, "prompt", "a", "c"), _cc(1, "asst", "c", "a", request="r")],
                     [_cc(2, "result", "d", "c")], [_cc(3, "asst", "e", "c", request="s")]],
    # pi: a child of a non-chat entry that is not the newest moves the active branch
    "pi line branch": [[_pi(0, "user", "m", None), _pi(1, "assistant", "a", "m"), _pi(2, "line", "l", "a"),
                        _pi(3, "user", "b", "a")], [_pi(4, "user", "n", "l")]],
    # pi: entries in a cycle have no root and are abandoned, and so is what hangs below them
    "pi cycle": [[_pi(0, "user", "x", "y")], [_pi(1, "assistant", "y", "x")], [_pi(2, "line", "l", "x")],
                 [_pi(3, "user", "n", "l")]],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_rare_shapes_give_the_lanes_of_the_full_recompute(tmp_path: Path, name: str) -> None:
    with Vault.init(tmp_path / "v") as v:
        for batch in CASES[name]:
            ingest(v, "t", batch[0][0], [r for _f, r in batch])
            stored_lanes_are_the_full_recompute(v, "t")
