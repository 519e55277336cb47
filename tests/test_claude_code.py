"""Claude Code with no glue: the hook (true subprocesses, every event type), install and import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from vaultlcm import Vault
from vaultlcm.claude_code import (
    HOOK_EVENTS,
    Session,
    conversation_name,
    find_sessions,
    read_session,
    run_hook,
)
from vaultlcm.cli import cli
from vaultlcm.names import validate_conversation_name
from vaultlcm.threads import SIDE

FIXTURE = Path(__file__).parent / "fixtures" / "claude-code" / "session.jsonl"
SESSION = "7f3b2c1e-9a4d-4e5f-8b6a-0c1d2e3f4a5b"
CONV = "ledgerly-7f3b2c1e"
LINES = FIXTURE.read_text(encoding="utf-8").splitlines(keepends=True)


def records(lines: list[str]) -> list[Any]:
    return [json.loads(line) for line in lines if line.strip()]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / ".claude" / "projects" / "-home-dev-ledgerly").mkdir(parents=True)
    return home


def env_for(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VAULTLCM_VAULT", "CLAUDE_CONFIG_DIR")}
    return env | {"HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache")}


def event(name: str, transcript: Path, **extra: Any) -> str:
    base = {"session_id": SESSION, "transcript_path": str(transcript), "cwd": "/home/dev/ledgerly/src",
            "permission_mode": "default", "hook_event_name": name}
    return json.dumps(base | extra)


def hook(home: Path, payload: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "vaultlcm", "hook", "claude-code", *args], input=payload,
                          env=env_for(home), capture_output=True, text=True, timeout=300)


def test_each_hook_event_stores_what_is_new_exactly_once(home: Path) -> None:
    transcript = home / ".claude" / "projects" / "-home-dev-ledgerly" / f"{SESSION}.jsonl"
    events = [
        ("Stop", {"stop_hook_active": False}),
        ("SubagentStop", {"stop_hook_active": False, "agent_id": "a4e80a2", "agent_type": "Explore",
                          "agent_transcript_path": str(transcript.parent / SESSION / "subagents" / "agent-a4e80a2.jsonl")}),
        ("PreCompact", {"trigger": "auto", "custom_instructions": ""}),
        ("SessionEnd", {"reason": "prompt_input_exit"}),
    ]
    cuts = [9, 17, 26, len(LINES)]
    for (name, extra), cut in zip(events, cuts):
        written = "".join(LINES[:cut])
        if cut < len(LINES):
            written += LINES[cut][: len(LINES[cut]) // 2]  # Claude Code is still writing the next line
        transcript.write_text(written, encoding="utf-8")
        p = hook(home, event(name, transcript, **extra), "--time-limit", "240")
        assert (p.returncode, p.stdout, p.stderr) == (0, "", "")  # nothing Claude Code would act on
    vault = home / ".vaultlcm" / "claude-code"
    log = (vault / ".vaultlcm" / "hooks.log").read_text(encoding="utf-8").splitlines()
    assert [line.split()[1] for line in log] == list(HOOK_EVENTS)
    assert all("error" not in line for line in log), log
    with Vault(vault) as v:
        assert v.conversations() == [CONV]
        assert v.export(CONV, "claude-code") == records(LINES)  # every line once, in order, exactly
        assert len(v.catalog.rows(CONV)) == len(records(LINES))
    p = hook(home, event("Stop", transcript, stop_hook_active=True), "--time-limit", "240")
    assert p.returncode == 0
    assert "unchanged since the last event" in (vault / ".vaultlcm" / "hooks.log").read_text(encoding="utf-8")
    with Vault(vault) as v:  # and a full re-read stores nothing either
        from vaultlcm.claude_code import ingest_session, session_at

        again = ingest_session(v, session_at(transcript))
    assert (again.new, again.already_stored) == (0, len(records(LINES)))


def test_subagent_transcripts_join_their_session(home: Path) -> None:
    folder = home / ".claude" / "projects" / "-home-dev-ledgerly"
    main = [line for line in LINES if not json.loads(line).get("isSidechain")]
    side = [line for line in LINES if json.loads(line).get("isSidechain")]
    (folder / SESSION / "subagents").mkdir(parents=True)
    transcript = folder / f"{SESSION}.jsonl"
    agent = folder / SESSION / "subagents" / "agent-a4e80a2.jsonl"
    transcript.write_text("".join(main[:16]), encoding="utf-8")  # up to the Task call
    agent.write_text("".join(side), encoding="utf-8")
    vault = home / "v"
    payload = event("SubagentStop", transcript, agent_id="a4e80a2", agent_transcript_path=str(agent)).encode()
    run_hook(payload, root=vault, create=True, environ=env_for(home), time_limit=60, detach=False)
    transcript.write_text("".join(main), encoding="utf-8")
    run_hook(event("Stop", transcript).encode(), root=vault, create=True, environ=env_for(home), time_limit=60,
             detach=False)
    with Vault(vault) as v:
        rows = v.catalog.rows(CONV)
        assert len(rows) == len(LINES)
        lanes = [r.lane for r in rows]
        assert lanes.count(SIDE) == len(side)
        first_side = lanes.index(SIDE)
        assert all(lane == SIDE for lane in lanes[first_side:first_side + len(side)])  # merged where they happened
    log = (vault / ".vaultlcm" / "hooks.log").read_text(encoding="utf-8")
    assert f"{len(main[:16]) + len(side)} new" in log and f"{len(main) - 16} new, {len(main[:16]) + len(side)}" in log
    text = "".join(p.read_text(encoding="utf-8") for p in (vault / "conversations" / CONV / "logs").glob("*.md"))
    assert "subagent a4e80a2 of Task `toolu_01TaskExplore00000000004`" in text


def test_the_hook_never_fails_the_agent(home: Path) -> None:
    p = hook(home, "this is not json")
    assert (p.returncode, p.stdout) == (0, "")
    assert "not JSON" in (home / ".cache" / "vaultlcm" / "hooks.log").read_text(encoding="utf-8")
    missing = home / ".claude" / "projects" / "-home-dev-ledgerly" / "gone.jsonl"
    run_hook(event("Stop", missing).encode(), root=home / "v", create=True, environ=env_for(home), time_limit=5,
             detach=False)
    assert "does not exist" in (home / ".cache" / "vaultlcm" / "hooks.log").read_text(encoding="utf-8")
    # a vault named by --vault / VAULTLCM_VAULT is never created by the hook (a typo must not scatter vaults)
    transcript = home / ".claude" / "projects" / "-home-dev-ledgerly" / f"{SESSION}.jsonl"
    transcript.write_text("".join(LINES), encoding="utf-8")
    run_hook(event("Stop", transcript).encode(), root=home / "typo", create=False, environ=env_for(home),
             time_limit=5, detach=False)
    assert not (home / "typo").exists()
    assert "not a vaultlcm vault" in (home / ".cache" / "vaultlcm" / "hooks.log").read_text(encoding="utf-8")


def test_the_hook_returns_at_its_time_limit_and_finishes_in_the_background(home: Path) -> None:
    transcript = home / ".claude" / "projects" / "-home-dev-ledgerly" / f"{SESSION}.jsonl"
    # enough work that no machine finishes it within the 0.1 s limit
    transcript.write_text("".join(small_session(f"{n:08d}-{SESSION[9:]}", "/home/dev/ledgerly", f"step {n} " * 50)
                                  for n in range(100)), encoding="utf-8")
    Vault.init(home / ".vaultlcm" / "claude-code").close()  # as `install claude-code --write` leaves it
    p = hook(home, event("Stop", transcript), "--time-limit", "0.1")
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    log = home / ".vaultlcm" / "claude-code" / ".vaultlcm" / "hooks.log"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not (log.exists() and "new" in log.read_text(encoding="utf-8")):
        time.sleep(0.2)
    text = log.read_text(encoding="utf-8")
    assert "continuing in the background" in text and "200 new" in text


# -- install -------------------------------------------------------------------------------

EXISTING_SETTINGS = {
    "model": "opus",
    "permissions": {"allow": ["Bash(npm run test:*)"]},
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "~/bin/guard.sh"}]}],
        # an older install pointing at another path: replaced, not doubled
        "SessionEnd": [{"hooks": [{"type": "command", "command": "/old/bin/vaultlcm hook claude-code"}]},
                       {"hooks": [{"type": "command", "command": "/old/bin/vaultlcm hook claude-code"}]}],
    },
}


def install(home: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["install", "claude-code", *args], env=env_for(home))
    return result.exit_code, result.stdout, result.stderr


def test_install_merges_into_existing_settings_and_is_idempotent(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(home))
    settings_path = home / ".claude" / "settings.json"
    settings_path.write_text(json.dumps(EXISTING_SETTINGS, indent=4), encoding="utf-8")
    state = home / ".claude.json"
    state.write_text(json.dumps({"numStartups": 12, "mcpServers": {"github": {"command": "gh-mcp"}},
                                 "projects": {"/home/dev/x": {"allowedTools": []}}}), encoding="utf-8")
    before = {p: p.read_bytes() for p in (settings_path, state)}

    code, out, err = install(home)
    assert code == 0, err
    assert "--write" in out and "+ hooks.Stop" in out and "+ mcpServers.vaultlcm" in out
    assert {p: p.read_bytes() for p in before} == before  # showing writes nothing

    code, out, err = install(home, "--write")
    assert code == 0, err
    merged = json.loads(settings_path.read_text(encoding="utf-8"))
    assert {k: v for k, v in merged.items() if k != "hooks"} == {"model": "opus",
                                                                   "permissions": {"allow": ["Bash(npm run test:*)"]}}
    assert merged["hooks"]["PreToolUse"] == EXISTING_SETTINGS["hooks"]["PreToolUse"]
    assert merged["hooks"]["Stop"][0] == EXISTING_SETTINGS["hooks"]["Stop"][0]
    for name in HOOK_EVENTS:
        ours = [h for g in merged["hooks"][name] for h in g["hooks"] if "hook claude-code" in h["command"]]
        assert len(ours) == 1 and ours[0]["type"] == "command" and ours[0]["timeout"] > 10
        assert "/old/bin" not in ours[0]["command"]
    mcp = json.loads(state.read_text(encoding="utf-8"))
    assert mcp["numStartups"] == 12 and mcp["projects"] == {"/home/dev/x": {"allowedTools": []}}
    assert mcp["mcpServers"]["github"] == {"command": "gh-mcp"}
    server = mcp["mcpServers"]["vaultlcm"]
    assert server["args"][-3:] == ["--vault", str(home / ".vaultlcm" / "claude-code"), "mcp"]
    assert (settings_path.parent / "settings.json.vaultlcm-backup").read_bytes() == before[settings_path]
    assert (home / ".claude.json.vaultlcm-backup").read_bytes() == before[state]
    assert (home / ".vaultlcm" / "claude-code" / "vaultlcm.toml").is_file()  # the vault is ready

    after = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in before}
    code, out, err = install(home, "--write")
    assert code == 0 and "nothing to change" in out
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in before} == after


def test_install_project_scope_writes_the_project_files(home: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(home))
    project = tmp_path / "proj"
    project.mkdir()
    code, out, err = install(home, "--write", "--scope", "project", "--project", str(project))
    assert code == 0, err
    settings_ = json.loads((project / ".claude" / "settings.json").read_text(encoding="utf-8"))
    assert settings_["hooks"]["Stop"][0]["hooks"][0]["command"] == "vaultlcm hook claude-code"
    mcp = json.loads((project / ".mcp.json").read_text(encoding="utf-8"))
    assert mcp["mcpServers"]["vaultlcm"] == {"type": "stdio", "command": "vaultlcm", "env": {},
                                             "args": ["--vault", "${HOME}/.vaultlcm/claude-code", "mcp"]}
    assert not (home / ".claude" / "settings.json").exists()


def test_install_keeps_a_symlinked_settings_file_and_refuses_broken_json(home: Path, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(home))
    dotfiles = tmp_path / "dotfiles" / "claude-settings.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text("{}", encoding="utf-8")
    link = home / ".claude" / "settings.json"
    link.symlink_to(dotfiles)
    code, _, err = install(home, "--write")
    assert code == 0, err
    assert link.is_symlink() and "hook claude-code" in dotfiles.read_text(encoding="utf-8")
    state = home / ".claude.json"
    state.write_text('{"mcpServers": {', encoding="utf-8")
    code, _, err = install(home, "--write")
    assert code == 1 and err.startswith("Error: ") and ".claude.json:1" in err and "not valid JSON" in err
    assert state.read_text(encoding="utf-8") == '{"mcpServers": {'


def test_the_public_claude_code_object_plans_writes_and_imports(home: Path, tmp_path: Path) -> None:
    """What the three commands call (``ClaudeCode.install``/``import_sessions``), used as a library."""
    from vaultlcm import ClaudeCode, UsageError

    environ = {"CLAUDE_CONFIG_DIR": str(home / ".claude")}
    claude = ClaudeCode(tmp_path / "named", environ=environ)
    plan = claude.install()
    assert not plan.written and len(plan.pending) == 2 and not plan.vault_exists
    assert "would change 2 file(s)" in plan.describe() and "(created by --write)" in plan.describe()
    assert not (home / ".claude" / "settings.json").exists() and not (tmp_path / "named").exists()

    done = claude.install(write=True)
    assert done.written and done.vault_created and [p for p, _ in done.applied] == [c.path for c in done.pending]
    hooks = json.loads((home / ".claude" / "settings.json").read_text(encoding="utf-8"))["hooks"]
    assert all(str(tmp_path / "named") in hooks[name][0]["hooks"][0]["command"] for name in HOOK_EVENTS)
    again = claude.install(write=True)
    assert not again.pending and not again.vault_created and "nothing to change" in again.describe()

    with pytest.raises(UsageError, match="does not exist"):
        claude.import_sessions(tmp_path / "nowhere")
    project = home / ".claude" / "projects" / "-home-dev-ledgerly"
    (project / f"{SESSION}.jsonl").write_text("".join(LINES), encoding="utf-8")
    report = claude.import_sessions()  # Claude Code's own projects folder, under CLAUDE_CONFIG_DIR
    assert report.new > 0 and not report.failed
    assert claude.import_sessions().new == 0


# -- import --------------------------------------------------------------------------------


def small_session(session_id: str, cwd: str, text: str, at: str = "2026-04-01T10:00:00Z") -> str:
    common = {"sessionId": session_id, "cwd": cwd, "version": "2.1.37", "isSidechain": False, "userType": "external"}
    lines = [
        common | {"type": "user", "uuid": f"{session_id[:8]}-u1", "parentUuid": None, "timestamp": at,
                  "message": {"role": "user", "content": text}},
        common | {"type": "assistant", "uuid": f"{session_id[:8]}-a1", "parentUuid": f"{session_id[:8]}-u1",
                  "timestamp": at.replace(":00Z", ":05Z"),
                  "message": {"role": "assistant", "content": [{"type": "text", "text": "On it."}]}},
    ]
    return "".join(json.dumps(line) + "\n" for line in lines)


def test_import_brings_in_every_session_once(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(home))
    projects = home / ".claude" / "projects"
    (projects / "-home-dev-ledgerly" / f"{SESSION}.jsonl").write_text("".join(LINES), encoding="utf-8")
    other = "0a1b2c3d-1111-4222-8333-444455556666"
    (projects / "-home-dev-ledgerly" / f"{other}.jsonl").write_text(
        small_session(other, "/home/dev/ledgerly", "Rotate the staging key"), encoding="utf-8")
    # an older version's subagent file, next to the sessions
    (projects / "-home-dev-ledgerly" / "agent-5e6f7a8b.jsonl").write_text(json.dumps(
        {"type": "user", "isSidechain": True, "sessionId": other, "agentId": "5e6f7a8b", "uuid": "side-1",
         "parentUuid": None, "timestamp": "2026-04-01T10:00:02Z", "cwd": "/home/dev/ledgerly",
         "message": {"role": "user", "content": "Find the staging key"}}) + "\n", encoding="utf-8")
    weird = "9f8e7d6c-aaaa-4bbb-8ccc-dddddddddddd"
    (projects / "-srv-My-App-v2").mkdir()
    (projects / "-srv-My-App-v2" / f"{weird}.jsonl").write_text(
        small_session(weird, "/srv/My App: v2 [beta] #1", "Hello"), encoding="utf-8")

    result = CliRunner().invoke(cli, ["import", "claude-code", "--json"], env=env_for(home))
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    names = sorted(s["conversation"] for s in report["sessions"])
    assert names == sorted([CONV, "ledgerly-0a1b2c3d", "My-App-v2-beta-1-9f8e7d6c"])
    assert report["new"] == len(LINES) + 3 + 2 and report["failed"] == []
    again = CliRunner().invoke(cli, ["import", "claude-code"], env=env_for(home))
    assert again.exit_code == 0 and "0 new" in again.stdout and f"{report['new']:,} already stored" in again.stdout
    vault = home / ".vaultlcm" / "claude-code"
    index = (vault / "Conversations.md").read_text(encoding="utf-8")
    assert all(f"|{name}]]" in index for name in names)


def test_import_of_a_folder_that_does_not_exist_says_so(home: Path) -> None:
    result = CliRunner().invoke(cli, ["import", "claude-code"], env=env_for(home) | {"HOME": str(home / "nobody")})
    assert result.exit_code == 2 and "does not exist" in result.stderr


# -- properties ------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(cwd=st.text(st.characters(codec="utf-8"), max_size=120), sid=st.text(max_size=40))
def test_any_project_folder_gives_a_valid_conversation_name(cwd: str, sid: str) -> None:
    session = Session(Path("/p") / "-x" / f"{sid.replace('/', '_') or 's'}.jsonl")
    name = conversation_name(session, b"", cwd)
    assert validate_conversation_name(name) == name


_stamp = st.one_of(st.none(), st.datetimes(min_value=__import__("datetime").datetime(2026, 1, 1),
                                           max_value=__import__("datetime").datetime(2026, 1, 2)))


@settings(max_examples=100, deadline=None)
@given(files=st.lists(st.lists(_stamp, max_size=8), min_size=1, max_size=4))
def test_merging_a_session_keeps_every_line_and_each_files_order(tmp_path_factory: pytest.TempPathFactory,
                                                                 files: list[list[Any]]) -> None:
    folder = tmp_path_factory.mktemp("s")
    paths = []
    for f, stamps in enumerate(files):
        path = folder / f"{f}.jsonl"
        lines = [{"n": f"{f}.{i}"} | ({"timestamp": s.isoformat() + "Z"} if s else {}) for i, s in enumerate(stamps)]
        path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
        paths.append(path)
    merged = [json.loads(line)["n"] for line in read_session(Session(paths[0], paths[1:])).splitlines()]
    assert sorted(merged) == sorted(f"{f}.{i}" for f, stamps in enumerate(files) for i in range(len(stamps)))
    for f in range(len(files)):
        mine = [n for n in merged if n.startswith(f"{f}.")]
        assert mine == [f"{f}.{i}" for i in range(len(files[f]))]


def test_find_sessions_accepts_the_projects_folder_one_project_or_one_file(home: Path) -> None:
    folder = home / ".claude" / "projects" / "-home-dev-ledgerly"
    (folder / f"{SESSION}.jsonl").write_text("".join(LINES), encoding="utf-8")
    for root in (home / ".claude" / "projects", folder, folder / f"{SESSION}.jsonl"):
        assert [s.session_id for s in find_sessions(root)] == [SESSION]


def test_an_event_on_unchanged_transcripts_reads_nothing(home: Path) -> None:
    transcript = home / ".claude" / "projects" / "-home-dev-ledgerly" / f"{SESSION}.jsonl"
    transcript.write_text("".join(LINES[:10]), encoding="utf-8")
    vault = home / "v"
    for name in ("Stop", "SessionEnd"):
        run_hook(event(name, transcript).encode(), root=vault, create=True, environ=env_for(home), time_limit=60,
                 detach=False)
    with transcript.open("a", encoding="utf-8") as fh:
        fh.write("".join(LINES[10:]))
    run_hook(event("Stop", transcript).encode(), root=vault, create=True, environ=env_for(home), time_limit=60,
             detach=False)
    log = (vault / ".vaultlcm" / "hooks.log").read_text(encoding="utf-8").splitlines()
    assert "10 new" in log[0] and "unchanged since the last event" in log[1] and "23 new, 10 already" in log[2]
