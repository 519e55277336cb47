"""Real transcript shapes: lossless export, idempotent re-imports, subagents, branches, ids, times.

The fixtures in tests/fixtures/ are written in each format's real record shapes
(Claude Code 2.1 session lines, pi/OpenClaw v3 session entries, Anthropic
Messages requests and responses, OpenAI chat, SWE-agent and mini-swe-agent
trajectories), with the cases that broke before: mixed line endings, subagent
lines, a rewound branch, lines without a timestamp, streamed lines sharing one
API message id, ANSI output, edits, large tool metadata.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vaultlcm import Vault
from vaultlcm import formats as fmts
from vaultlcm.cli import cli
from vaultlcm.errors import InputFormatError
from vaultlcm.threads import ABANDONED, LINE, MAIN, SIDE

FIX = Path(__file__).parent / "fixtures"
CLAUDE = FIX / "claude-code" / "session.jsonl"
PI = FIX / "openclaw" / "session.jsonl"


def records(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def run(*args: str, input: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), input=input)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    Vault.init(tmp_path / "v").close()
    return tmp_path / "v"


@pytest.mark.parametrize(("path", "fmt"), [
    (CLAUDE, "claude-code"), (PI, "openclaw"), (FIX / "anthropic" / "messages.jsonl", "anthropic"),
    (FIX / "openai" / "chat.jsonl", "openai"),
])
def test_export_in_the_files_own_format_gives_every_record_back(vault: Path, path: Path, fmt: str) -> None:
    code, out, err = run("--vault", str(vault), "ingest", str(path), "-c", "t", "--json")
    assert code == 0, err
    assert json.loads(out)["format"] == fmt
    code, out, err = run("--vault", str(vault), "export", "-c", "t", "--format", fmt)
    assert code == 0, err
    assert [json.loads(line) for line in out.splitlines()] == records(path)


@pytest.mark.parametrize(("name", "key"), [("swe-agent.traj", "history"), ("mini-swe-agent.traj.json", "messages")])
def test_a_single_object_trajectory_is_recognized(vault: Path, name: str, key: str) -> None:
    path = FIX / "openai" / name
    code, out, err = run("--vault", str(vault), "ingest", str(path), "-c", "t", "--json")
    assert code == 0, err
    code, out, _ = run("--vault", str(vault), "export", "-c", "t", "--format", "openai")
    doc = json.loads(path.read_text())
    assert [json.loads(line) for line in out.splitlines()] == doc[key]
    code, out, _ = run("--vault", str(vault), "export", "-c", "t")  # the object's other fields are kept too
    first = json.loads(out.splitlines()[0])
    assert first["role"] == "document" and all(first[k] == v for k, v in doc.items() if k != key)


def test_one_json_object_without_messages_is_named_as_such(vault: Path, tmp_path: Path) -> None:
    f = tmp_path / "config.json"
    f.write_text(json.dumps({"model": "x", "temperature": 0.2}, indent=2))
    code, _, err = run("--vault", str(vault), "ingest", str(f), "-c", "t")
    assert code == 1 and err.startswith("Error: ") and "one JSON object, not JSON Lines" in err and "config.json:1" in err


@pytest.mark.parametrize("path", [CLAUDE, PI, FIX / "anthropic" / "messages.jsonl", FIX / "openai" / "chat.jsonl"])
def test_reimporting_the_same_file_or_a_grown_one_stores_each_record_once(vault: Path, tmp_path: Path,
                                                                           path: Path) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    part = tmp_path / "part.jsonl"
    part.write_text("".join(lines[: len(lines) // 2]), encoding="utf-8")
    first = json.loads(run("--vault", str(vault), "ingest", str(part), "-c", "t", "--json")[1])
    assert first["new"] == len(lines) // 2
    grown = json.loads(run("--vault", str(vault), "ingest", str(path), "-c", "t", "--json")[1])
    assert grown["new"] == len(lines) - len(lines) // 2 and grown["already_stored"] == len(lines) // 2
    assert grown["ids"][: len(lines) // 2] == first["ids"]
    again = json.loads(run("--vault", str(vault), "ingest", str(path), "-c", "t", "--json")[1])
    assert again["new"] == 0 and again["ids"] == grown["ids"]
    code, out, _ = run("--vault", str(vault), "ingest", str(path), "-c", "t")
    assert f"0 new, {len(lines)} already stored" in out
    dup = json.loads(run("--vault", str(vault), "ingest", str(part), "-c", "t", "--allow-duplicates", "--json")[1])
    assert dup["new"] == len(lines) // 2  # deliberate duplicates stay possible


def test_subagent_and_abandoned_lines_are_kept_marked_and_out_of_the_context(vault: Path) -> None:
    with Vault(vault) as v:
        report = v.ingest_file("cc", CLAUDE)
        rows = {r.id: r for r in v.catalog.rows("cc")}
        lane = {i: rows[i].lane for i in report.ids}
        msgs = dict(zip(report.ids, records(CLAUDE)))
        side = [i for i, r in msgs.items() if r.get("isSidechain")]
        assert side and all(lane[i] == SIDE for i in side)
        dropped = [i for i, r in msgs.items() if r.get("uuid") in ("11111111-0000-4000-8000-000000000002",
                                                                   "22222222-0000-4000-8000-000000000008")]
        assert len(dropped) == 2 and all(lane[i] == ABANDONED for i in dropped)
        lines = [i for i, r in msgs.items() if r.get("type") not in ("user", "assistant")]
        assert all(lane[i] == LINE for i in lines)
        main = [i for i in report.ids if lane[i] == MAIN]
        assert len(main) == len(report.ids) - len(side) - len(dropped) - len(lines)
        text = json.dumps(v.assemble("cc", 100_000).messages)
        assert "Port reminders.py too" in text  # the active branch
        assert "delete the pytz dependency" not in text  # the rewound prompt
        assert "pytz is still used in src/ledgerly/billing/reminders.py (lines 3 and 41)" in text  # the Task result
        assert "toolu_01SideGrep00000000000005" not in text  # the subagent's own calls
        log = "".join(p.read_text() for p in (vault / "conversations/cc/logs").glob("*.md"))
        assert "[!subagent]- **assistant** · subagent a4e80a2 of Task `toolu_01TaskExplore00000000004`" in log


def test_pi_branches_follow_the_newest_entry(vault: Path) -> None:
    with Vault(vault) as v:
        report = v.ingest_file("pi", PI)
        lanes = {r.id: r.lane for r in v.catalog.rows("pi")}
        by_entry = {rec["id"]: mid for rec, mid in zip(records(PI), report.ids)}
        assert lanes[by_entry["b8c9d0e1"]] == ABANDONED and lanes[by_entry["c9d0e1f2"]] == ABANDONED
        assert lanes[by_entry["a7b8c9d0"]] == MAIN and lanes[by_entry["e7f8a9b0"]] == MAIN
        assert lanes[by_entry["a3b4c5d6"]] == LINE  # pi's own compaction summary


def test_ids_are_the_vaults_and_a_records_own_id_stays_data(vault: Path) -> None:
    with Vault(vault) as v:
        report = v.ingest_file("an", FIX / "anthropic" / "messages.jsonl")
        mid = report.ids[1]
        assert re.fullmatch(r"m-[0-9a-f]{16}", mid)
        shown = v.show(mid)
        assert shown["id"] == mid and shown["message"]["id"] == "msg_013vXyZaBcDeFgHiJkLmNoPq"
        assert v.describe(mid)["id"] == mid
        code, out, err = run("--vault", str(vault), "show", mid)
        assert code == 0 and out.startswith(mid), err
    with Vault(vault) as v:
        ids = v.ingest_file("cc", CLAUDE).ids
        streamed = [i for i, r in zip(ids, records(CLAUDE))
                    if r.get("message", {}).get("id") == "msg_01AbCdEfGhIjKlMnOpQrStUv"]
        assert len(streamed) == 3 and len(set(streamed)) == 3  # three lines of one API message: three ids


def test_mixed_line_endings_ansi_and_edits_survive_and_read_well(vault: Path) -> None:
    with Vault(vault) as v:
        v.ingest_file("cc", CLAUDE)
        exported = v.export("cc", "claude-code")
        assert exported == records(CLAUDE)
        hits = v.grep("three", conversation="cc")["hits"]
        assert any("line one line two line three" in h["snippet"].replace("\n", " ") for h in hits)
    log = (vault / "conversations/cc/logs/2026-03-02.md").read_text()
    body = "\n".join(line for line in log.split("\n") if not line.startswith("<!-- lcm:"))
    assert "\x1b" not in body and "\\u001b" not in body
    assert "> ```diff" in body and "> -import pytz" in body and "> +from zoneinfo import ZoneInfo" in body
    assert max(len(line) for line in log.split("\n")) < 12_000  # toolUseResult copies of whole files went to files/
    assert any(p.suffix == ".json" for p in (vault / "conversations/cc/files").iterdir())


def test_time_comes_from_neighbours_and_export_adds_none(vault: Path) -> None:
    with Vault(vault) as v:
        ids = v.ingest_file("cc", CLAUDE).ids
        rows = v.catalog.rows_by_ids(ids)
        assert rows[ids[0]].at.startswith("2026-03-02T09:14:05.12")  # leading summary line: the next line's time
        snapshot_at = rows[ids[3]].at  # permission-mode line: the previous line's time
        assert snapshot_at == rows[ids[2]].at
        assert "timestamp" not in v.export("cc", "claude-code")[0]
        assert {p.name for p in (vault / "conversations/cc/logs").iterdir()} == {"2026-03-02.md", "2026-03-03.md"}


@pytest.mark.parametrize(("fmt", "record"), [
    ("openai", {"role": "user", "content": "hi", "timestamp": "yesterday"}),
    ("anthropic", {"role": "user", "content": "hi", "timestamp": 1770364145}),
    ("native", {"role": "user", "content": "hi", "timestamp": "2026-13-45T00:00:00Z"}),
    ("claude-code", {"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "s", "timestamp": "now",
                     "message": {"role": "user", "content": "hi"}}),
    ("native", {"role": "user", "content": "hi", "timestamp": "9999-12-31T23:59:59-14:00"}),
])
def test_an_unreadable_timestamp_names_file_and_line(vault: Path, tmp_path: Path, fmt: str, record: dict) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text(json.dumps({"role": "user", "content": "ok"} if fmt != "claude-code" else {**record, "timestamp":
                 "2026-03-02T09:00:00Z", "uuid": "u0"}) + "\n" + json.dumps(record) + "\n")
    code, _, err = run("--vault", str(vault), "ingest", str(f), "-c", "t", "--format", fmt)
    assert code == 1 and f"{f}:2:" in err and "--keep-bad-timestamps" in err, err
    assert err.count("\n") == 1 and not (vault / "conversations/t").exists()
    code, out, err = run("--vault", str(vault), "ingest", str(f), "-c", "t", "--format", fmt, "--keep-bad-timestamps")
    assert code == 0, err
    code, out, _ = run("--vault", str(vault), "export", "-c", "t", "--format", fmt if fmt != "claude-code" else fmt)
    assert json.loads(out.splitlines()[1]) == record  # kept as data, exactly


def test_native_export_of_agent_transcripts_reads_back_as_native(vault: Path, tmp_path: Path) -> None:
    for path, name in ((CLAUDE, "cc"), (PI, "pi"), (FIX / "anthropic" / "messages.jsonl", "an")):
        run("--vault", str(vault), "ingest", str(path), "-c", name)
        code, native, _ = run("--vault", str(vault), "export", "-c", name)
        f = tmp_path / f"{name}.native.jsonl"
        f.write_text(native)
        code, out, err = run("--vault", str(vault), "ingest", str(f), "-c", f"{name}-again", "--json")
        assert code == 0 and json.loads(out)["format"] == "native", err
        assert run("--vault", str(vault), "export", "-c", f"{name}-again")[1] == native


def test_skip_bad_lines_reports_a_torn_last_line(vault: Path, tmp_path: Path) -> None:
    f = tmp_path / "torn.jsonl"
    f.write_text(CLAUDE.read_text() + '{"type": "assistant", "uuid": "zz", "mess')
    code, _, err = run("--vault", str(vault), "ingest", str(f), "-c", "t")
    n = len(records(CLAUDE)) + 1
    assert code == 1 and f"{f}:{n}:" in err and "--skip-bad-lines" in err
    code, out, err = run("--vault", str(vault), "ingest", str(f), "-c", "t", "--skip-bad-lines", "--json")
    assert code == 0 and json.loads(out)["new"] == n - 1
    assert json.loads(out)["skipped_lines"][0]["line"] == n and f"skipped line {n}" in err


@pytest.mark.parametrize("fmt", ["claude-code", "openclaw"])
def test_a_forced_format_that_finds_none_of_its_records_is_an_error(vault: Path, fmt: str) -> None:
    code, _, err = run("--vault", str(vault), "ingest", str(FIX / "openai" / "chat.jsonl"), "-c", "t", "--format", fmt)
    assert code == 1 and f"no {fmt} records found" in err
    assert not (vault / "conversations/t").exists()


def test_non_chat_lines_are_rendered_and_searchable(vault: Path) -> None:
    with Vault(vault) as v:
        v.ingest_file("cc", CLAUDE)
        v.ingest_file("pi", PI)
        assert v.grep('"LEDG-482 tz fix"', conversation="cc")["hits"]  # custom title
        assert v.grep("lock_timeout=5s Progress", conversation="pi")["hits"]  # pi compaction summary
    log = (vault / "conversations/cc/logs/2026-03-02.md").read_text()
    assert "> #### Fix timezone bug in billing due dates (LEDG-482)" in log


def test_one_damaged_entry_never_takes_down_the_rest_of_the_vault(vault: Path) -> None:
    with Vault(vault) as v:
        v.ingest_file("cc", CLAUDE)
        v.ingest_file("pi", PI)
        v.grep("routes")  # index built
    log = vault / "conversations/cc/logs/2026-03-02.md"
    data = log.read_text()
    lines = data.split("\n")
    target = next(i for i, line in enumerate(lines) if line.startswith("<!-- lcm:") and '"seq":6,' in line)
    lines[target] = lines[target].replace('"parts":', '"parts":{', 1)  # a bad edit breaks one metadata line
    log.write_text("\n".join(lines))
    with Vault(vault) as v:
        assert v.grep("lock_timeout")["hits"]  # vault-wide search still works
        assert v.export("pi", "openclaw") == records(PI)
        assert v.assemble("pi", 50_000).messages
        assert len(v.export("cc", "claude-code")) == len(records(CLAUDE)) - 1  # the rest of cc reads too
        report = v.doctor()
        damaged = [p for p in report["problems"] if p["kind"] == "damaged_entry"]
        assert damaged and f"logs/2026-03-02.md:{target + 1}" in damaged[0]["detail"]


# -- property tests: agent transcript lines round-trip --------------------------------------

TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=20)
SCALAR = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | TEXT
JSON = st.recursive(SCALAR, lambda c: st.lists(c, max_size=3) | st.dictionaries(TEXT, c, max_size=3), max_leaves=6)
ANTHROPIC_BLOCK = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, TEXT),
    st.builds(lambda t, s: {"type": "thinking", "thinking": t, "signature": s}, TEXT, TEXT),
    st.builds(lambda i, n, a: {"type": "tool_use", "id": i, "name": n, "input": a}, TEXT, TEXT,
              st.dictionaries(TEXT, JSON, max_size=3)),
    st.builds(lambda i, c, e: {"type": "tool_result", "tool_use_id": i, "content": c, "is_error": e}, TEXT,
              TEXT | st.lists(st.builds(lambda t: {"type": "text", "text": t}, TEXT), max_size=2), st.booleans()),
    st.builds(lambda d: {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": d}},
              st.sampled_from(["iVBORw0KGgo=", "AAAA"])),
    st.dictionaries(TEXT, JSON, max_size=2).map(lambda d: {**d, "type": "x-unknown"}),
)


@st.composite
def claude_code_line(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["user", "assistant", "summary", "progress", "system", "queue-operation"]))
    line: dict[str, Any] = {"type": kind, "uuid": draw(TEXT), "parentUuid": draw(st.none() | TEXT), "sessionId": "s"}
    line.update(draw(st.dictionaries(TEXT.filter(lambda k: k not in ("type", "message", "uuid")), JSON, max_size=2)))
    if draw(st.booleans()):
        line["timestamp"] = draw(st.sampled_from(["2026-03-02T09:14:05.120Z", "2026-03-03T00:00:00Z"]))
    if kind in ("user", "assistant"):
        content = draw(TEXT | st.lists(ANTHROPIC_BLOCK, max_size=3))
        line["message"] = {"role": kind, "content": content, **draw(st.dictionaries(
            st.sampled_from(["id", "model", "usage", "stop_reason"]), JSON, max_size=2))}
        if draw(st.booleans()):
            line["isSidechain"] = draw(st.booleans())
    return line


OPENCLAW_BLOCK = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, TEXT),
    st.builds(lambda t, s: {"type": "thinking", "thinking": t, "thinkingSignature": s}, TEXT, TEXT),
    st.builds(lambda i, n, a: {"type": "toolCall", "id": i, "name": n, "arguments": a}, TEXT, TEXT,
              st.dictionaries(TEXT, JSON, max_size=2)),
    st.builds(lambda d: {"type": "image", "data": d, "mimeType": "image/png"}, st.sampled_from(["AAAA", "iVBOR="])),
)


@st.composite
def openclaw_line(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["message", "message", "compaction", "model_change", "label"]))
    line: dict[str, Any] = {"type": kind, "id": draw(TEXT), "parentId": draw(st.none() | TEXT),
                            "timestamp": "2026-02-06T07:49:00.000Z"}
    if kind != "message":
        line.update(draw(st.dictionaries(TEXT.filter(lambda k: k not in line), JSON, max_size=2)))
        return line
    role = draw(st.sampled_from(["user", "assistant", "toolResult", "custom"]))
    inner: dict[str, Any] = {"role": role, "timestamp": draw(st.integers(0, 2**42))}
    if role == "toolResult":
        inner |= {"toolCallId": draw(TEXT), "toolName": draw(TEXT), "isError": draw(st.booleans()),
                  "content": draw(st.lists(OPENCLAW_BLOCK, max_size=2))}
    else:
        inner["content"] = draw(TEXT | st.lists(OPENCLAW_BLOCK, max_size=3))
    line["message"] = inner
    return line


@pytest.mark.parametrize(("fmt", "strategy"), [("claude-code", claude_code_line()), ("openclaw", openclaw_line())])
def test_agent_lines_roundtrip_exactly(fmt: str, strategy: st.SearchStrategy[dict[str, Any]]) -> None:
    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(strategy, min_size=1, max_size=6))
    def check(lines: list[dict[str, Any]]) -> None:
        numbered = list(enumerate(lines, start=1))
        try:
            parsed = fmts.parse(fmt, numbered, source="t")
        except InputFormatError:
            return  # e.g. none of the lines is of this format: refused, never misread
        assert fmts.to_records(fmt, [i.message for i in parsed]) == lines

    check()
