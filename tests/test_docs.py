"""The documentation keeps up with the code: every command and setting is documented."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click

from vaultlcm.cli import cli
from vaultlcm.clidoc import REGENERATE, render_cli_reference
from vaultlcm.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
CLI_MD = ROOT / "docs" / "CLI.md"

HEAVY = ("anthropic", "whoosh", "watchdog", "openai", "tantivy", "mcp")


def test_cli_reference_is_current() -> None:
    assert CLI_MD.is_file(), f"docs/CLI.md is missing; generate it with `{REGENERATE}`"
    committed = CLI_MD.read_text(encoding="utf-8")
    assert committed == render_cli_reference(), f"docs/CLI.md is out of date; regenerate it with `{REGENERATE}`"


def test_every_command_has_a_section() -> None:
    text = CLI_MD.read_text(encoding="utf-8")
    headings = {line for line in text.splitlines() if line.startswith("## ")}
    with click.Context(cli, info_name="vaultlcm") as ctx:
        names = cli.list_commands(ctx)
    assert names, "the click group lists no commands"
    missing = [name for name in names if f"## vaultlcm {name}" not in headings]
    assert not missing, f"docs/CLI.md has no section for: {', '.join(missing)}; regenerate it with `{REGENERATE}`"


def test_every_setting_is_documented() -> None:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    text = "\n".join(p.read_text(encoding="utf-8") for p in docs)
    missing = [name for name in Settings.model_fields if f"`{name}`" not in text]
    assert not missing, f"settings documented nowhere in README.md or docs/: {', '.join(missing)}"


def test_help_imports_no_heavy_library() -> None:
    """`vaultlcm --help` (and every `vaultlcm COMMAND --help`) stays instant: no SDK, index or watcher."""
    code = f"""
import contextlib, io, sys
import vaultlcm.cli
heavy = {set(HEAVY)!r}

def help_of(*args):
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            vaultlcm.cli.cli.main([*args, "--help"], prog_name="vaultlcm")
        except SystemExit as exc:
            assert exc.code in (0, None), (args, exc.code)

help_of()
for name in vaultlcm.cli.cli.commands:
    help_of(name)
print(__import__("json").dumps(sorted(m for m in sys.modules if m.split(".")[0] in heavy)))
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    loaded = json.loads(p.stdout.strip().splitlines()[-1])
    assert loaded == [], f"`vaultlcm --help` imported {loaded}; import them inside the commands that need them"


#: Loaded by compaction (its module, the digest's phrase and fact patterns, the prompts), not before.
COMPACTION_ONLY = ("vaultlcm.compaction", "vaultlcm.summarizers.digest", "vaultlcm.summarizers.facts",
                   "vaultlcm.summarizers.phrases", "vaultlcm.summarizers.prompts", "vaultlcm.summarizers.anthropic",
                   "vaultlcm.summarizers.openai_compat")


def test_commands_that_read_or_append_do_not_load_compaction(tmp_path: Path) -> None:
    """An agent that runs `vaultlcm grep` or `ingest` per call pays every import each time: what only
    compaction needs (a tenth of a command's start-up) is loaded by `compact` and `doctor`, not by them."""
    (tmp_path / "m.jsonl").write_text('{"role": "user", "content": "please deploy the billing service"}\n',
                                      encoding="utf-8")
    code = f"""
import contextlib, io, json, sys
import vaultlcm.cli
watched = {COMPACTION_ONLY!r}

def run(*args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            vaultlcm.cli.cli.main(list(args), prog_name="vaultlcm")
        except SystemExit as exc:
            assert exc.code in (0, None), (args, exc.code)
    return out.getvalue()

run("init", "v")
run("--vault", "v", "ingest", "m.jsonl", "-c", "c")
hit = json.loads(run("--vault", "v", "grep", "deploy", "--json"))["hits"][0]["id"]
run("--vault", "v", "status")
run("--vault", "v", "assemble", "-c", "c", "--budget", "2000")
for command in ("describe", "expand", "show"):
    run("--vault", "v", command, hit)
run("--vault", "v", "export", "-c", "c")
print(json.dumps(sorted(m for m in sys.modules if m in watched)))
run("--vault", "v", "compact", "-c", "c", "--force")
print(json.dumps(sorted(m for m in sys.modules if m in watched)))
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    before, after = (json.loads(line) for line in p.stdout.strip().splitlines()[-2:])
    assert before == [], f"a command that neither compacts nor checks the vault loaded {before}"
    assert "vaultlcm.compaction" in after and "vaultlcm.summarizers.digest" in after  # the watch is real
