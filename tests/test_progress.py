"""Feedback on long work: the library reports progress, the command line draws it (only for a person)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from click.testing import CliRunner

from vaultlcm import Vault
from vaultlcm.cli import BIG_INPUT_BYTES, cli
from vaultlcm.progress import progress_bar


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_is_drawn_only_on_a_terminal_and_never_with_quiet() -> None:
    term = Terminal()
    with progress_bar("Working", quiet=False, stream=term) as bar:
        assert bar is not None
        for done in range(0, 101, 10):
            bar(done, 100)
    assert "Working" in term.getvalue() and "100%" in term.getvalue()
    for quiet, stream in ((True, Terminal()), (False, io.StringIO())):
        with progress_bar("Working", quiet=quiet, stream=stream) as bar:
            assert bar is None
        assert stream.getvalue() == ""


def test_ingest_reports_progress_through_its_callback(tmp_path: Path) -> None:
    calls: list[tuple[int, int]] = []
    data = "".join(json.dumps({"role": "user", "content": f"message {i}"}) + "\n" for i in range(300)).encode()
    with Vault.init(tmp_path / "v") as v:
        report = v.ingest_bytes("c", data, progress=lambda done, total: calls.append((done, total)))
        assert report.new == 300
        again: list[tuple[int, int]] = []
        v.compact(progress=lambda done, total: again.append((done, total)))
    assert calls[0] == (0, 600) and calls[-1] == (600, 600)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    assert again[-1] == (1, 1)


def test_long_commands_keep_stdout_clean_for_scripts(tmp_path: Path) -> None:
    root = tmp_path / "v"
    Vault.init(root).close()
    big = tmp_path / "big.jsonl"
    line = json.dumps({"role": "user", "content": "x" * 2000}) + "\n"
    big.write_text(line * (BIG_INPUT_BYTES // len(line) + 1), encoding="utf-8")
    result = CliRunner().invoke(cli, ["--vault", str(root), "ingest", str(big), "-c", "c", "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["new"] > 0
    assert result.stderr == ""  # not a terminal: no bar
    for args in (["reindex", "--json"], ["compact", "--json"], ["reindex", "--quiet"]):
        result = CliRunner().invoke(cli, ["--vault", str(root), *args])
        assert result.exit_code == 0 and result.stderr == "", (args, result.stderr)
    assert json.loads(CliRunner().invoke(cli, ["--vault", str(root), "reindex", "--json"]).stdout)["messages"] > 0
