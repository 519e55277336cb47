"""The command line: the contract in PRODUCT.md, through CliRunner and real subprocesses."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from vaultlcm.cli import cli

OPENAI = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Read src/app.py please"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"src/app.py\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "print('hi')\n```\n---\n"},
    {"role": "assistant", "content": "It prints hi. 🦜", "refusal": None},
]
ANTHROPIC = [
    {"role": "user", "content": "What is in /etc/hosts?"},
    {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Use the tool.", "signature": "sig=="},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "cat", "input": {"path": "/etc/hosts"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "127.0.0.1 localhost\r\n", "is_error": False}]},
    {"role": "assistant", "content": [{"type": "text", "text": "> [!note] looks fine\n^m-fake"}]},
]
NATIVE = [
    {"id": "m-n1", "role": "user", "timestamp": "2026-11-29T10:00:00Z", "content": [{"type": "text", "text": "hi"}]},
    {"role": "assistant", "timestamp": "2026-11-29T10:00:03.250000Z", "content": [
        {"type": "tool_call", "id": "c1", "name": "ls", "arguments": {"dir": "."}}], "custom": {"x": [1, 2.5, None]}},
    {"role": "tool", "timestamp": "2026-11-30T00:00:00Z", "content": [{"type": "tool_result", "call_id": "c1", "content": "a\nb"}]},
]


def run(args: list[str], input: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, args, input=input, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    code, out, _ = run(["init", str(tmp_path / "v")])
    assert code == 0 and "Initialized" in out
    return tmp_path / "v"


@pytest.mark.parametrize(
    "fmt,records,as_lines",
    [("openai", OPENAI, False), ("openai", OPENAI, True), ("anthropic", ANTHROPIC, False), ("native", NATIVE, True)],
)
def test_ingest_export_round_trip(vault: Path, tmp_path: Path, fmt: str, records: list, as_lines: bool) -> None:
    f = tmp_path / f"in.{fmt}.json"
    f.write_text("\n".join(json.dumps(r) for r in records) if as_lines else json.dumps(records), encoding="utf-8")
    for given in (fmt, "auto"):
        conv = f"c-{given}"
        vault = tmp_path / given  # ids given in the input are unique per vault
        run(["init", str(vault)])
        code, out, err = run(["--vault", str(vault), "ingest", str(f), "-c", conv, "--format", given, "--json"])
        assert code == 0, err
        ids = json.loads(out)["ids"]
        assert len(ids) == len(records) and len(set(ids)) == len(ids)
        code, out, err = run(["--vault", str(vault), "export", "-c", conv, "--format", fmt])
        assert code == 0, err
        assert [json.loads(line) for line in out.splitlines()] == records


def test_ingest_from_stdin_and_show(vault: Path) -> None:
    code, out, _ = run(["--vault", str(vault), "ingest", "-", "-c", "s", "--json"], input=json.dumps(NATIVE))
    assert code == 0
    report = json.loads(out)
    ids = report["ids"]
    assert re.fullmatch(r"m-[0-9a-f]{16}", ids[0])  # the vault's own ids; the record's "id" is data
    assert report["new"] == 3 and report["already_stored"] == 0
    code, out, _ = run(["--vault", str(vault), "show", ids[0], "--json"])
    assert json.loads(out)["message"]["id"] == "m-n1"
    code, out, _ = run(["--vault", str(vault), "ingest", "-", "-c", "s", "--json"], input=json.dumps(NATIVE))
    again = json.loads(out)
    assert again["ids"] == ids and again["new"] == 0 and again["already_stored"] == 3
    code, out, _ = run(["--vault", str(vault), "show", ids[1], "--json"])
    shown = json.loads(out)
    assert shown["kind"] == "message" and shown["message"]["custom"] == {"x": [1, 2.5, None]}
    code, out, _ = run(["--vault", str(vault), "show", ids[0]])
    assert code == 0 and "hi" in out
    code, out, _ = run(["--vault", str(vault), "status", "--json"])
    st = json.loads(out)["conversations"][0]
    assert st["messages"] == 3 and st["days"] == 2


def test_bad_line_names_file_and_line_and_writes_nothing(vault: Path, tmp_path: Path) -> None:
    f = tmp_path / "bad.jsonl"
    f.write_text('{"role": "user", "content": "ok"}\n{"role": "user", "content": oops}\n')
    code, out, err = run(["--vault", str(vault), "ingest", str(f), "-c", "x"])
    assert code == 1
    assert err.startswith("Error: ") and f"{f}:2" in err
    assert not (vault / "conversations" / "x").exists()


def test_invalid_utf8_is_an_error(vault: Path, tmp_path: Path) -> None:
    f = tmp_path / "bad.jsonl"
    f.write_bytes(b'{"role": "user", "content": "ok"}\n{"role": "user", "content": "\xff\xfe"}\n')
    code, _, err = run(["--vault", str(vault), "ingest", str(f), "-c", "x"])
    assert code == 1 and "UTF-8" in err and ":2" in err


def test_lone_surrogate_is_an_error(vault: Path, tmp_path: Path) -> None:
    f = tmp_path / "bad.jsonl"
    f.write_text('{"role": "user", "content": "a \\ud800 b"}\n')
    code, _, err = run(["--vault", str(vault), "ingest", str(f), "-c", "x"])
    assert code == 1 and "surrogate" in err


def test_bad_conversation_name(vault: Path, tmp_path: Path) -> None:
    f = tmp_path / "in.jsonl"
    f.write_text(json.dumps({"role": "user", "content": "x"}))
    code, _, err = run(["--vault", str(vault), "ingest", str(f), "-c", "../escape"])
    assert code == 1 and "Error: conversation name" in err
    assert not (vault.parent / "escape").exists()


def test_not_a_vault_says_how_to_fix(tmp_path: Path) -> None:
    code, _, err = run(["--vault", str(tmp_path), "status"])
    assert code == 1 and "vaultlcm init" in err


def test_usage_error_exit_2(vault: Path) -> None:
    code, _, _ = run(["--vault", str(vault), "assemble", "-c", "x"])
    assert code == 2


def test_subprocess_end_to_end(tmp_path: Path) -> None:
    """The installed console script, as a user runs it."""
    env = {**os.environ, "VAULTLCM_VAULT": str(tmp_path / "v")}
    exe = [sys.executable, "-m", "vaultlcm"]
    subprocess.run([*exe, "init"], env=env, check=True, capture_output=True)
    data = "\n".join(json.dumps(r) for r in OPENAI)
    p = subprocess.run([*exe, "ingest", "-", "-c", "sp", "--json"], input=data, env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([*exe, "export", "-c", "sp", "--format", "openai"], env=env, capture_output=True, text=True)
    assert [json.loads(x) for x in p.stdout.splitlines()] == OPENAI
    p = subprocess.run([*exe, "show", "m-nope"], env=env, capture_output=True, text=True)
    assert p.returncode == 1 and p.stderr.startswith("Error: ") and "m-nope" in p.stderr
