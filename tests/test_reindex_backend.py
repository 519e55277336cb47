"""``vaultlcm reindex --backend``: switching the index backend is one command, recorded in vaultlcm.toml."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st

from vaultlcm import Vault
from vaultlcm.cli import cli
from vaultlcm.errors import SettingsError
from vaultlcm.settings import Settings, load_settings, write_setting


def run(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, args, env=env, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def index_backend_on_disk(vault: Path) -> str:
    return json.loads((vault / ".vaultlcm" / "index" / "vaultlcm-index.json").read_text())["backend"]


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "v"
    assert run(["init", str(root)])[0] == 0
    with Vault(root) as v:
        v.ingest("chat", [
            {"role": "user", "content": "Where is the deploy config? src/app.py has call_4242"},
            {"role": "assistant", "content": "The deploy timeout lives in config/settings.toml"},
        ])
        v.compact("chat", force=True)
    return root


def grep_ids(root: Path, query: str) -> set[str]:
    code, out, _ = run(["--vault", str(root), "grep", query, "--json"])
    assert code == 0, out
    return {h["id"] for h in json.loads(out)["hits"]}


def test_reindex_backend_switches_both_ways_and_records_the_choice(vault: Path) -> None:
    before = grep_ids(vault, "deploy")
    toml_before = (vault / "vaultlcm.toml").read_text()
    assert 'index_backend = "whoosh"' in toml_before

    code, out, err = run(["--vault", str(vault), "reindex", "--backend", "tantivy", "--quiet"])
    assert code == 0, err
    assert "with tantivy" in out and "Recorded index_backend" in out
    assert index_backend_on_disk(vault) == "tantivy"
    assert load_settings(vault / "vaultlcm.toml", environ={}).index_backend == "tantivy"
    toml_after = (vault / "vaultlcm.toml").read_text()
    # One line changed; every comment and other setting kept as written.
    changed = [(a, b) for a, b in zip(toml_before.splitlines(), toml_after.splitlines()) if a != b]
    assert changed == [('index_backend = "whoosh"', 'index_backend = "tantivy"')]
    # A new process opens the tantivy index and finds the same documents (identifiers too).
    assert grep_ids(vault, "deploy") == before
    assert grep_ids(vault, "call_4242")

    code, out, _ = run(["--vault", str(vault), "reindex", "--backend", "tantivy", "--json", "--quiet"])
    assert code == 0 and json.loads(out)["settings_changed"] is False  # already recorded: the file is not touched

    code, out, _ = run(["--vault", str(vault), "reindex", "--backend", "whoosh", "--json", "--quiet"])
    result = json.loads(out)
    assert code == 0 and result["backend"] == "whoosh" and result["settings_changed"] is True
    assert index_backend_on_disk(vault) == "whoosh"
    assert (vault / "vaultlcm.toml").read_text() == toml_before
    assert grep_ids(vault, "deploy") == before


def test_reindex_without_backend_keeps_the_setting(vault: Path) -> None:
    text = (vault / "vaultlcm.toml").read_text()
    code, out, _ = run(["--vault", str(vault), "reindex", "--json", "--quiet"])
    assert code == 0 and json.loads(out)["backend"] == "whoosh" and "settings_changed" not in json.loads(out)
    assert (vault / "vaultlcm.toml").read_text() == text


def test_environment_override_is_refused_before_anything_changes(vault: Path) -> None:
    assert grep_ids(vault, "deploy")  # the index exists
    text = (vault / "vaultlcm.toml").read_text()
    code, _, err = run(["--vault", str(vault), "reindex", "--backend", "tantivy"], env={"VAULTLCM_INDEX_BACKEND": "whoosh"})
    assert code == 2 and err.startswith("Error: ") and "VAULTLCM_INDEX_BACKEND" in err
    assert (vault / "vaultlcm.toml").read_text() == text
    assert index_backend_on_disk(vault) == "whoosh"


def test_unknown_backend_is_a_usage_error(vault: Path) -> None:
    code, _, err = run(["--vault", str(vault), "reindex", "--backend", "lucene"])
    assert code == 2 and "lucene" in err


# -- write_setting ----------------------------------------------------------------------

_KEYS = ["fresh_tail_count", "regex_timeout_seconds", "summarizer", "redact_secrets", "anthropic_model"]
_values = {
    "fresh_tail_count": st.integers(0, 10_000),
    "regex_timeout_seconds": st.floats(0.01, 1e6, allow_nan=False),
    "summarizer": st.sampled_from(["digest", "anthropic", "openai"]),
    "redact_secrets": st.booleans(),
    "anthropic_model": st.text(max_size=30),
}
comment_text = st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=40)  # TOML comments hold no controls


@st.composite
def toml_files(draw: st.DrawFn) -> tuple[str, dict[str, object]]:
    """A settings file a person could have written: some keys set, comments, blank lines, maybe the key commented."""
    from vaultlcm.settings import _toml_value

    keys = draw(st.lists(st.sampled_from(_KEYS), unique=True))
    lines: list[str] = []
    values: dict[str, object] = {}
    for key in keys:
        values[key] = draw(_values[key])
        lines.append(f"{key} = {_toml_value(values[key])}")
    lines += ["# " + c for c in draw(st.lists(comment_text, max_size=3))]
    lines += [""] * draw(st.integers(0, 2))
    where = draw(st.sampled_from(["absent", "set", "commented"]))
    if where == "set":
        lines.append(f'index_backend = "{draw(st.sampled_from(["whoosh", "tantivy"]))}"')
    elif where == "commented":
        lines.append('# index_backend = "whoosh"')
    order = draw(st.permutations(range(len(lines))))
    text = "\n".join(lines[i] for i in order)
    return text + ("\n" if draw(st.booleans()) else ""), values


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(toml_files(), st.sampled_from(["whoosh", "tantivy"]))
def test_write_setting_sets_one_key_and_keeps_the_rest(tmp_path: Path, drawn: tuple[str, dict], backend: str) -> None:
    text, values = drawn
    path = tmp_path / "vaultlcm.toml"
    path.write_text(text, encoding="utf-8")
    write_setting(path, "index_backend", backend)
    new = path.read_text(encoding="utf-8")
    data = tomllib.loads(new)
    assert data["index_backend"] == backend
    assert {k: v for k, v in data.items() if k != "index_backend"} == values
    # Every comment but the one naming the key survives.
    kept = [ln for ln in text.splitlines() if ln.startswith("#") and "index_backend" not in ln]
    assert all(ln in new.splitlines() for ln in kept)
    assert load_settings(path, environ={}).index_backend == backend
    assert write_setting(path, "index_backend", backend) is False  # same value: nothing written


def test_write_setting_keeps_tables_below_and_validates(tmp_path: Path) -> None:
    path = tmp_path / "vaultlcm.toml"
    path.write_text('fresh_tail_count = 8\n\n[tool.other]\nindex_backend = "x"\n', encoding="utf-8")
    assert write_setting(path, "index_backend", "tantivy")
    data = tomllib.loads(path.read_text())
    assert data["index_backend"] == "tantivy" and data["tool"]["other"]["index_backend"] == "x"
    with pytest.raises(SettingsError, match="index_backend"):
        write_setting(path, "index_backend", "lucene")
    with pytest.raises(SettingsError, match="unknown setting"):
        write_setting(path, "no_such_setting", 1)
    assert Settings.model_fields["index_backend"].description  # appended lines carry it


# -- an index of the other backend: refused with the way out, never rebuilt silently ----------------


def index_files(vault: Path) -> dict[str, int]:
    folder = vault / ".vaultlcm" / "index"
    return {p.name: p.stat().st_size for p in folder.iterdir() if p.suffix not in (".lock", ".pid")}


def test_a_search_refuses_an_index_of_the_other_backend_and_names_the_way_out(vault: Path) -> None:
    assert grep_ids(vault, "deploy")
    before = index_files(vault)
    # A person switches the setting by hand (or by the environment): the next search would
    # have rebuilt the whole index with no word of it (minutes at a million messages).
    code, out, err = run(["--vault", str(vault), "grep", "deploy"], env={"VAULTLCM_INDEX_BACKEND": "tantivy"})
    assert code == 1 and out == ""
    assert err.startswith("Error: ") and err.count("\n") == 1, err
    assert "built with whoosh" in err and "says tantivy" in err
    assert "`vaultlcm reindex --backend tantivy`" in err and 'index_backend = "whoosh"' in err
    assert index_files(vault) == before and index_backend_on_disk(vault) == "whoosh"
    # Either way out works: the setting back, or the switch with reindex.
    assert grep_ids(vault, "deploy")
    toml = vault / "vaultlcm.toml"
    toml.write_text(toml.read_text().replace('index_backend = "whoosh"', 'index_backend = "tantivy"'))
    code, _, err = run(["--vault", str(vault), "grep", "deploy"])
    assert code == 1 and "reindex --backend tantivy" in err
    code, _, err = run(["--vault", str(vault), "reindex", "--quiet"])
    assert code == 0, err
    assert index_backend_on_disk(vault) == "tantivy" and grep_ids(vault, "deploy")


def test_doctor_reports_the_other_backend_and_fix_rebuilds_with_the_setting(vault: Path) -> None:
    assert grep_ids(vault, "deploy")
    env = {"VAULTLCM_INDEX_BACKEND": "tantivy"}
    code, out, _ = run(["--vault", str(vault), "doctor", "--json"], env=env)
    report = json.loads(out)
    assert code == 1 and [p["kind"] for p in report["problems"]] == ["index_backend"]
    assert report["problems"][0]["fixable"] and report["problems"][0]["path"] == ".vaultlcm/index"
    assert index_backend_on_disk(vault) == "whoosh"  # a check changes nothing
    code, out, err = run(["--vault", str(vault), "doctor", "--fix"], env=env)
    assert code == 0, out + err
    assert "rebuilt the search index with tantivy (it was a whoosh index)" in out
    assert index_backend_on_disk(vault) == "tantivy"
    code, out, _ = run(["--vault", str(vault), "grep", "deploy", "--json"], env=env)
    assert code == 0 and json.loads(out)["hits"]


@pytest.mark.parametrize("watch", [False, True], ids=["plain", "watching"])
def test_an_engine_keeps_its_memory_when_the_index_is_of_the_other_backend(vault: Path, watch: bool) -> None:
    from vaultlcm import Engine, IndexBackendError, Settings

    assert grep_ids(vault, "deploy")  # the index exists (whoosh)
    before = index_files(vault)
    settings_ = Settings(background_compaction=False, index_backend="tantivy")
    with Engine(vault, "chat", settings=settings_, watch=watch) as engine:
        assert engine.last_error is not None and "reindex --backend tantivy" in engine.last_error
        engine.ingest({"role": "user", "content": "the agent goes on: rollout at noon"})
        assert engine.after_turn() in (True, False)
        assert "rollout at noon" in json.dumps(engine.assemble().messages)
        answer = engine.call_tool("lcm_grep", {"pattern": "rollout"})
        assert answer.startswith("Error: ") and "reindex --backend tantivy" in answer
        with pytest.raises(IndexBackendError):
            engine.vault.grep("rollout")
    assert index_files(vault) == before


def test_the_refusal_is_one_line_from_the_installed_command(vault: Path) -> None:
    import os
    import subprocess
    import sys

    assert grep_ids(vault, "deploy")  # the index exists (whoosh)
    proc = subprocess.run([sys.executable, "-m", "vaultlcm", "--vault", str(vault), "grep", "deploy"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "VAULTLCM_INDEX_BACKEND": "tantivy"})
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("Error: the search index at ") and proc.stderr.count("\n") == 1, proc.stderr
    assert "Traceback" not in proc.stderr


# -- rebuilds nobody asked for are announced ------------------------------------------------------


def test_an_index_an_older_version_wrote_is_rebuilt_with_one_note_on_stderr(vault: Path) -> None:
    from vaultlcm.index.buffered import SCHEMA_VERSION

    assert grep_ids(vault, "deploy")
    meta_path = vault / ".vaultlcm" / "index" / "vaultlcm-index.json"
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "schema_version": SCHEMA_VERSION - 1}))  # an upgrade changed the format
    code, out, err = run(["--vault", str(vault), "grep", "deploy", "--json"])
    assert code == 0 and json.loads(out)["hits"]
    assert err.startswith("Note: the search index at ") and err.count("\n") == 1, err
    assert f"schema version {SCHEMA_VERSION - 1}" in err and "rebuilding it from the files" in err
    assert json.loads(meta_path.read_text())["schema_version"] == SCHEMA_VERSION
    code, out, err = run(["--vault", str(vault), "grep", "deploy", "--json"])
    assert code == 0 and json.loads(out)["hits"] and err == ""  # once rebuilt, nothing to say


def test_the_library_hands_the_note_to_its_caller_and_never_prints(vault: Path, capsys: pytest.CaptureFixture[str]) -> None:
    meta_path = vault / ".vaultlcm" / "index" / "vaultlcm-index.json"
    with Vault(vault) as v:
        assert v.grep("deploy")["hits"]
    meta_path.write_text(json.dumps({**json.loads(meta_path.read_text()), "analyzer": "porter-0"}))
    with Vault(vault) as v:
        assert v.grep("deploy")["hits"]
    assert capsys.readouterr() == ("", "")
    meta_path.write_text(json.dumps({**json.loads(meta_path.read_text()), "analyzer": "porter-0"}))
    told: list[str] = []
    with Vault(vault, notice=told.append) as v:
        assert v.grep("deploy")["hits"] and v.grep("timeout")["hits"]
    assert len(told) == 1 and "stemmer 'porter-0'" in told[0] and told[0].endswith("rebuilding it from the files")


def test_an_engine_hands_the_note_to_its_caller(vault: Path) -> None:
    from vaultlcm import Engine

    meta_path = vault / ".vaultlcm" / "index" / "vaultlcm-index.json"
    assert grep_ids(vault, "deploy")
    meta_path.write_text(json.dumps({**json.loads(meta_path.read_text()), "schema_version": 1}))
    told: list[str] = []
    with Engine(vault, "chat", settings=Settings(background_compaction=False), notice=told.append) as engine:
        assert "deploy" in engine.call_tool("lcm_grep", {"pattern": "deploy"})
    assert len(told) == 1 and "schema version 1" in told[0]


def test_a_deleted_index_of_a_large_vault_is_rebuilt_with_a_note(tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "v"
    with Vault.init(root, settings=Settings(background_compaction=False)) as v:
        v.ingest("chat", [{"role": "user" if i % 2 == 0 else "assistant", "content": f"deploy step {i} on host-{i % 7}"}
                          for i in range(2_100)])
        assert v.grep("deploy")["total"] == 2_100
    shutil.rmtree(root / ".vaultlcm" / "index")
    code, out, err = run(["--vault", str(root), "grep", "deploy", "--json"])
    assert code == 0 and json.loads(out)["total"] == 2_100
    assert err == "Note: building the search index from the files (2,100 messages and summaries)\n", err
