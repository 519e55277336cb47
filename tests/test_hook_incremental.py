"""The Claude Code hook reads only what is new, and stores exactly what a full read would.

A session grown in random steps (cut anywhere, mid-line included), with one hook
event per step, must leave the vault as one full read of the final session
does, and as the hook did when it read the whole session at every event; and
every case the state cannot follow must fall back to the full read.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vaultlcm import Vault
from vaultlcm.claude_code import HOOK_LOG, HookEvent, handle_event, ingest_session, read_session, session_at
from vaultlcm.claude_resume import RESUME_DIR, read_step
from vaultlcm.formats import ParseState

FIXTURE = Path(__file__).parent / "fixtures" / "claude-code" / "session.jsonl"
TEMPLATES = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()]
SESSION = "5d6e7f80-1a2b-4c3d-8e9f-0a1b2c3d4e5f"
CWD = "/home/dev/ledgerly"


def _template(kind: str, side: bool = False, block: str | None = None) -> dict[str, Any]:
    """A line of the fixture session of that shape (the real fields Claude Code writes)."""
    for rec in TEMPLATES:
        content = rec.get("message", {}).get("content") if isinstance(rec.get("message"), dict) else None
        blocks = [b.get("type") for b in content] if isinstance(content, list) else ["str"]
        if rec.get("type") == kind and bool(rec.get("isSidechain")) == side and (block is None or block in blocks):
            return copy.deepcopy(rec)
    raise LookupError(kind)


class Writer:
    """Builds a session's lines in the order Claude Code writes them: ``(file, line)``, times always rising."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, bytes]] = []
        self.clock = 0
        self.n = 0

    def stamp(self) -> str:
        self.clock += 1
        return f"2026-03-02T09:{self.clock // 60 % 60:02d}:{self.clock % 60:02d}.{self.clock % 1000:03d}Z"

    def put(self, rec: dict[str, Any], where: str = "main", timed: bool = True) -> dict[str, Any]:
        self.n += 1
        if "uuid" in rec:
            rec["uuid"] = f"u-{self.n}"
        if timed:
            rec["timestamp"] = self.stamp()
        else:
            rec.pop("timestamp", None)
        rec["sessionId"] = SESSION
        self.lines.append((where, json.dumps(rec, ensure_ascii=False).encode("utf-8") + b"\n"))
        return rec

    def again(self, n: int) -> None:
        """The line written ``n`` lines back, written again as it was (an identical record)."""
        where, line = self.lines[-n]
        self.lines.append((where, line))


turn = st.fixed_dictionaries({
    "prompt": st.text(st.characters(codec="utf-8"), max_size=30),
    "replies": st.lists(st.text(st.characters(codec="utf-8"), max_size=30), min_size=1, max_size=3),
    "snapshot": st.sampled_from(["none", "new", "same"]),
    "untimed_reply": st.booleans(),
    "repeat": st.booleans(),
    "task": st.none() | st.fixed_dictionaries({
        "agent": st.sampled_from(["a1b2c3d", "e4f5a6b", "c7d8e9f"]),
        "prompt": st.text(st.characters(codec="utf-8"), max_size=30),
        "steps": st.integers(1, 3),
        "named": st.booleans(),  # the result names the agent; else it is found by its first prompt
    }),
})


def build(turns: list[dict[str, Any]]) -> list[tuple[str, bytes]]:
    w = Writer()
    w.put(_template("summary"), timed=False)
    for n, t in enumerate(turns):
        if t["snapshot"] == "new" or (t["snapshot"] == "same" and n == 0):
            w.put(_template("file-history-snapshot") | {"messageId": f"m-{n}"}, timed=False)
        elif t["snapshot"] == "same":
            w.put(_template("file-history-snapshot") | {"messageId": "m-0"}, timed=False)  # identical record
        user = _template("user", block="str")
        user["message"]["content"] = t["prompt"]
        user["cwd"] = CWD
        w.put(user)
        for reply in t["replies"]:
            rec = _template("assistant", block="text")
            rec["message"]["content"] = [{"type": "text", "text": reply}]
            w.put(rec, timed=not t["untimed_reply"] or reply != t["replies"][0])
        if t["repeat"]:
            w.again(1)
        task = t["task"]
        if task:
            call = _template("assistant", block="tool_use")
            call_id = f"toolu_{w.n:04d}"
            task = task | {"prompt": f"task {n}: {task['prompt']}"}  # what each Task asks differs
            call["message"]["content"] = [{"type": "tool_use", "id": call_id, "name": "Task",
                                           "input": {"description": "look", "prompt": task["prompt"]}}]
            w.put(call)
            where = f"{task['agent']}{n}"  # each Task starts its own agent
            first = _template("user", side=True)
            first["agentId"], first["message"]["content"] = where, task["prompt"]
            w.put(first, where)
            for _ in range(task["steps"]):
                side = _template("assistant", side=True)
                side["agentId"] = where
                w.put(side, where)
            w.put(_template("assistant", side=True) | {"agentId": where}, where, timed=False)
            result = _template("user", block="tool_result")
            text = f"done. agentId: {where}" if task["named"] else "done."
            result["message"]["content"] = [{"type": "tool_result", "tool_use_id": call_id, "content": text}]
            result["toolUseResult"] = {"status": "completed"} | ({"agentId": where} if task["named"] else {})
            w.put(result)
    return w.lines


def paths(root: Path) -> dict[str, Path]:
    folder = root / "projects" / "-home-dev-ledgerly"
    return {"main": folder / f"{SESSION}.jsonl", "sub": folder / SESSION / "subagents"}


def write_upto(root: Path, lines: list[tuple[str, bytes]], cut: int) -> None:
    """The session's files as they are when ``cut`` bytes of the writes have happened (the last one torn)."""
    where = paths(root)
    files: dict[Path, bytes] = {}
    done = 0
    for name, line in lines:
        path = where["main"] if name == "main" else where["sub"] / f"agent-{name}.jsonl"
        take = line[: max(0, cut - done)]
        done += len(line)
        if take:
            files[path] = files.get(path, b"") + take
    for path, data in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def event(root: Path, vault: Path, name: str = "Stop") -> None:
    ev = HookEvent(name=name, session_id=SESSION, transcript=paths(root)["main"], cwd=CWD)
    handle_event(ev, vault, create=True, environ={"XDG_CACHE_HOME": str(vault.parent / "cache")})


def full_read(root: Path, vault: Path) -> str | None:
    """What the hook did before: read the whole session (today's ``ingest_session``); the error, if any."""
    with (Vault(vault) if vault.exists() else Vault.init(vault)) as v:
        try:
            ingest_session(v, session_at(paths(root)["main"]), cwd=CWD)
        except Exception as exc:  # noqa: BLE001 - the hook logs and goes on; so does this stand-in
            return " ".join(str(exc).split())
    return None


def snapshot(vault: Path) -> tuple[dict[str, bytes], list[Any]]:
    """The conversation logs byte for byte and the catalog's messages (ids, keys, order, times, lanes)."""
    logs = {str(p.relative_to(vault)): p.read_bytes() for p in sorted((vault / "conversations").glob("*/logs/*.md"))}
    with Vault(vault) as v:
        rows = [r for conv in v.conversations() for r in v.catalog.rows(conv)]
    return logs, rows


def hook_log(vault: Path) -> list[str]:
    return (vault / ".vaultlcm" / HOOK_LOG).read_text(encoding="utf-8").splitlines()


def torn_in_merge(root: Path) -> bool:
    """A transcript's last line is still being written in a session that is read merged: the old full
    read gave that line a newline (``read_session``) and could report it as bad JSON; it is no line yet."""
    where = paths(root)
    files = [where["main"], *sorted(where["sub"].glob("agent-*.jsonl"))] if where["sub"].is_dir() else [where["main"]]
    return len(files) > 1 and any(p.is_file() and not p.read_bytes().endswith(b"\n") for p in files)


def _cuts(total: int, first: int, fractions: list[float]) -> list[int]:
    return sorted({first + int(f * (total - first)) for f in fractions}) + [total]


@pytest.mark.timeout(1800)
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(turns=st.lists(turn, min_size=1, max_size=5), fractions=st.lists(st.floats(0, 1), max_size=5))
def test_a_session_grown_in_steps_is_stored_as_one_full_read_stores_it(
        tmp_path_factory: pytest.TempPathFactory, turns: list[dict[str, Any]], fractions: list[float]) -> None:
    lines = build(turns)
    total = sum(len(line) for _, line in lines)
    first_timed = 0
    for _, line in lines:  # the first event comes after a turn: after a line with a time
        first_timed += len(line)
        if "timestamp" in json.loads(line):
            break
    cuts = _cuts(total, first_timed, fractions)
    base = tmp_path_factory.mktemp("grow")
    grown, stepwise, once = base / "grown", base / "stepwise", base / "once"
    errors = []
    torn = []
    for cut in cuts:
        write_upto(grown, lines, cut)
        event(grown, base / "v-grown")
        write_upto(stepwise, lines, cut)
        errors.append(full_read(stepwise, base / "v-stepwise"))
        torn.append(torn_in_merge(stepwise))
    write_upto(once, lines, total)
    assert full_read(once, base / "v-once") is None
    result = snapshot(base / "v-grown")
    assert result == snapshot(base / "v-stepwise")  # what the hook stored before, event by event
    assert result == snapshot(base / "v-once")  # and what one full read of the final session stores
    # the same errors too (a cut inside a UTF-8 character: the event stores nothing, the next one does)
    logged = [line.split(": error: ")[1] if ": error: " in line else None for line in hook_log(base / "v-grown")
              if "unchanged since" not in line]
    expected = [e.replace(str(stepwise), str(grown)) if e else None for e in errors]
    # Where the old read took a line still being written for a whole one (a merged session), it may have
    # reported it as bad JSON; the new read leaves that line for the next event: no error, or the same one.
    assert all(got == want or (was_torn and got is None) for got, want, was_torn in zip(logged, expected, torn, strict=True)), \
        (logged, expected, torn)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(turns=st.lists(turn, min_size=1, max_size=4), fractions=st.lists(st.floats(0, 1), max_size=4))
def test_reading_from_the_marks_gives_the_rest_of_the_merged_document(
        tmp_path_factory: pytest.TempPathFactory, turns: list[dict[str, Any]], fractions: list[float]) -> None:
    """``read_step`` without marks is ``read_session``; with them, the rest of its records (or it refuses;
    a torn line, never a record, may sit elsewhere)."""
    lines = build(turns)
    total = sum(len(line) for _, line in lines)
    root = tmp_path_factory.mktemp("read")
    marks = None
    for cut in _cuts(total, 1, fractions):
        write_upto(root, lines, cut)
        session = session_at(paths(root)["main"])
        whole = read_step(session, None)
        assert whole.data == read_session(session)
        try:
            step = read_step(session, marks)
        except Exception:  # noqa: BLE001 - a refusal (the hook then reads the whole session)
            step = whole
        mine, all_ = records_of(step.data), records_of(whole.data)
        assert all_[len(all_) - len(mine):] == mine
        marks = step.files


def records_of(data: bytes) -> list[bytes]:
    out = []
    for line in data.splitlines():
        try:
            json.loads(line)
        except ValueError:
            continue
        out.append(line)
    return out


def test_most_events_read_only_the_new_lines(tmp_path: Path) -> None:
    lines = build([{"prompt": f"p{n}", "replies": ["r"], "snapshot": "new", "untimed_reply": False, "repeat": n == 2,
                    "task": {"agent": "a1b2c3d", "prompt": "look", "steps": 2, "named": n == 1} if n in (1, 4) else None}
                   for n in range(6)])
    total = sum(len(line) for _, line in lines)
    for cut in range(total // 10, total + 1, total // 10):
        write_upto(tmp_path / "s", lines, cut)
        event(tmp_path / "s", tmp_path / "v")
    write_upto(tmp_path / "s", lines, total)
    event(tmp_path / "s", tmp_path / "v")
    log = hook_log(tmp_path / "v")
    reads = [line.split("; read ")[1] for line in log if "; read " in line]
    assert reads[0] == "whole session: no state]"
    # a whole read at the first event and when the first subagent file appears; a second one is read alone
    assert sum(r == "new lines]" for r in reads) == len(reads) - 2, log
    assert "a first subagent transcript" in log[1] + log[2] + log[3]
    full_read(tmp_path / "s", tmp_path / "once")
    assert snapshot(tmp_path / "v") == snapshot(tmp_path / "once")


# -- falling back --------------------------------------------------------------------------------


def _session(tmp_path: Path, turns: int = 4) -> list[tuple[str, bytes]]:
    return build([{"prompt": f"p{n}", "replies": ["r", "s"], "snapshot": "same", "untimed_reply": n == 1,
                   "repeat": True, "task": None} for n in range(turns)])


def _both(tmp_path: Path, change: Any, grow: bool = False) -> list[str]:
    """Run events before and after ``change(root, vault)`` (and more lines, with ``grow``); the vault must
    be as full reads leave it."""
    lines = _session(tmp_path)
    total = sum(len(line) for _, line in lines)
    for name in ("grown", "stepwise"):
        root, vault = tmp_path / name, tmp_path / f"v-{name}"
        for cut in (total // 3, total // 2):
            write_upto(root, lines, cut)
            (event if name == "grown" else full_read)(root, vault)
        change(root, vault)
        if grow:
            write_upto(root, lines, total * 2 // 3)
        (event if name == "grown" else full_read)(root, vault)
        write_upto(root, lines, total)
        (event if name == "grown" else full_read)(root, vault)
    assert snapshot(tmp_path / "v-grown") == snapshot(tmp_path / "v-stepwise")
    return [line.split("; read ")[-1] for line in hook_log(tmp_path / "v-grown")]


def test_a_transcript_cut_short_is_read_whole(tmp_path: Path) -> None:
    def cut(root: Path, vault: Path) -> None:
        main = paths(root)["main"]
        main.write_bytes(main.read_bytes()[: main.stat().st_size // 2])

    reads = _both(tmp_path, cut)
    assert reads[2].startswith("whole session:") and "cut short or rewritten" in reads[2]


def test_a_rewritten_transcript_is_read_whole(tmp_path: Path) -> None:
    def rewrite(root: Path, vault: Path) -> None:
        main = paths(root)["main"]
        data = main.read_bytes()
        main.write_bytes(data.replace(b'"summary"', b'"Summary"', 1) + b'{"type": "x", "uuid": "late"}\n')

    reads = _both(tmp_path, rewrite)
    assert "cut short or rewritten" in reads[2]


@pytest.mark.parametrize("damage", ["delete", "garble", "old version"])
def test_a_deleted_or_damaged_state_is_read_whole(tmp_path: Path, damage: str) -> None:
    def spoil(root: Path, vault: Path) -> None:
        for p in (vault / ".vaultlcm" / RESUME_DIR).glob("*"):
            if damage == "delete":
                p.unlink()
            else:
                p.write_bytes(b"\x00garbage" if damage == "garble" else b'{"v": 0}\n' + p.read_bytes())

    assert _both(tmp_path, spoil, grow=True)[2] == "whole session: no state]"


def _late_agent(root: Path, name: str, at: str) -> None:
    side = _template("user", side=True) | {"agentId": name, "sessionId": SESSION, "timestamp": at}
    folder = paths(root)["sub"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"agent-{name}.jsonl").write_text(json.dumps(side) + "\n", encoding="utf-8")


def test_a_first_subagent_file_is_read_whole(tmp_path: Path) -> None:
    reads = _both(tmp_path, lambda root, vault: _late_agent(root, "0ld0ld0", "2026-03-02T09:59:00.500Z"))
    assert "a first subagent transcript" in reads[2]


def test_a_subagent_file_that_appears_with_old_lines_is_read_whole(tmp_path: Path) -> None:
    """Once the session is merged, a new subagent file is read alone if its lines are newer, else all is."""
    def late(root: Path, vault: Path) -> None:
        _late_agent(root, "0ld0ld0", "2026-03-02T09:00:00.500Z")  # older than lines already read

    lines = _session(tmp_path)
    total = sum(len(line) for _, line in lines)
    for name in ("grown", "stepwise"):
        root, vault = tmp_path / name, tmp_path / f"v-{name}"
        _late_agent(root, "f1r5t00", "2026-03-02T08:00:00.500Z")  # a merged session from the start
        steps: list[Any] = [total // 3, late, total // 2, total]
        for step in steps:
            step(root, vault) if callable(step) else write_upto(root, lines, step)
            (event if name == "grown" else full_read)(root, vault)
    assert snapshot(tmp_path / "v-grown") == snapshot(tmp_path / "v-stepwise")
    reads = [line.split("; read ")[-1] for line in hook_log(tmp_path / "v-grown")]
    assert reads[1] == "whole session: a new line goes before lines already read]"
    assert reads[2:] == ["new lines]"] * 2, reads


def test_a_message_deleted_from_the_conversation_is_read_whole(tmp_path: Path) -> None:
    """A full read stores again what is missing: so does the hook, noticing the conversation changed."""
    def forget(root: Path, vault: Path) -> None:
        with Vault(vault) as v:
            conv = v.conversations()[0]
            v.catalog.execute("DELETE FROM messages WHERE conv=? AND seq=(SELECT MAX(seq) FROM messages WHERE conv=?)",
                              (conv, conv))

    reads = _both(tmp_path, forget, grow=True)
    assert "conversation changed" in reads[2]


def test_the_parse_state_of_a_long_session_is_small() -> None:
    state = ParseState()
    for n in range(10_000):
        state.bump(n.to_bytes(12, "big"))
    state.bump((5).to_bytes(12, "big"))
    again = ParseState.from_bytes(state.to_bytes())
    assert len(state.to_bytes()) < 12 * 10_000 + 300
    assert again.seen((5).to_bytes(12, "big")) == 2 and again.seen((7).to_bytes(12, "big")) == 1
    assert again.seen((10_001).to_bytes(12, "big")) == 0
