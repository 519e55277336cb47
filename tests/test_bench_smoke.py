"""The scale benchmark runs end to end at a tiny size and produces its table, chart and docs section.

It checks that the script works, not how fast anything is (numbers live in docs/PERFORMANCE.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "bench_scale.py"


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    work = tmp_path_factory.mktemp("scale")
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--sizes", "40", "--backends", "whoosh", "tantivy", "--ingests", "3",
         "--rounds", "1", "--workdir", str(work / "vaults"), "--out", str(work / "scale.json"),
         "--write-docs", str(work / "docs")],
        capture_output=True, text=True, timeout=280, check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return work, out.stdout


def test_table_has_every_measure_for_every_size_and_backend(tiny_run: tuple[Path, str]) -> None:
    work, table = tiny_run
    rows = {line.split(" | ")[0].lstrip("| "): line for line in table.splitlines() if line.startswith("| ")}
    for label in ("agent-path ingest p50 (ms)", "indexed grep p95 (ms), whoosh", "indexed grep p95 (ms), tantivy",
                  "identifier grep p50 (ms), tantivy", "regex grep, limit 20 (ms)", "compaction (messages per CPU s)",
                  "compaction's one-time catch-up: costs of summaries older code wrote (CPU s)",
                  "reindex (messages per minute), whoosh",
                  "reindex peak RSS (MB), tantivy", "first assemble after open (ms)", "status (ms)", "doctor (ms)",
                  "*reference:* SQLite FTS5 grep p95 (ms)"):
        assert label in rows, f"no row {label!r} in:\n{table}"
        cells = [c.strip() for c in rows[label].strip("|").split("|")][1:2]
        assert cells and all(c and c != "n/a" for c in cells), rows[label]
    assert "40 messages" in table
    data = json.loads((work / "scale.json").read_text())
    assert [r["size"] for r in data["results"]] == [40]
    for r in data["results"]:
        assert r["tantivy"]["reindex_msgs_per_min"] > 0 and r["whoosh"]["grep_p95_ms"] > 0
        assert r["regex_partial"] is False
        assert r["compact_catch_up_summaries"] > 0 and r["compact_catch_up_cpu_s"] > 0  # reported apart from the rate


def test_render_and_docs_reproduce_the_table(tiny_run: tuple[Path, str]) -> None:
    work, table = tiny_run
    again = subprocess.run([sys.executable, str(SCRIPT), "--render", str(work / "scale.json")],
                           capture_output=True, text=True, timeout=60, check=True).stdout
    assert again == table
    # The raw results are kept beside the table, so that a later session can render or extend it.
    kept = subprocess.run([sys.executable, str(SCRIPT), "--render", str(work / "docs" / "performance.json")],
                          capture_output=True, text=True, timeout=60, check=True).stdout
    assert kept == table
    page = (work / "docs" / "PERFORMANCE.md").read_text()
    assert "<!-- bench_scale:begin -->" in page and "<!-- bench_scale:end -->" in page
    assert table.strip() in page and "performance.svg" in page
    svg = ET.fromstring((work / "docs" / "performance.svg").read_text())
    ns = "{http://www.w3.org/2000/svg}"
    assert svg.tag == f"{ns}svg"
    titles = [c.findtext(f"{ns}title") or "" for c in svg.iter(f"{ns}circle")]
    assert any(t.startswith("indexed grep p95, tantivy at 40:") for t in titles)
    assert any(t.startswith("SQLite FTS5 grep p95 at 40:") for t in titles)


def test_exponents_and_chart_from_results() -> None:
    """Growth exponents are log-log slopes; the chart draws a line per measure through every size."""
    sys.path.insert(0, str(SCRIPT.parent))
    import bench_scale

    def result(size: int, grep: float) -> dict:
        return {"size": size, "ingest_p50_ms": 2.0, "fts5_ingest_p50_ms": 1.0, "fts5_grep_p95_ms": 1.0,
                "whoosh": {"grep_p95_ms": grep, "grep_ids_p50_ms": grep}, "first_assemble_ms": 50.0}

    results = [result(1_000, 10.0), result(100_000, 1000.0)]
    assert bench_scale.exponent(results, "whoosh.grep_p95_ms") == pytest.approx(1.0)
    assert bench_scale.exponent(results, "ingest_p50_ms") == pytest.approx(0.0)
    table = bench_scale.render(results, "cmd")
    assert "| indexed grep p95 (ms), whoosh | 10.0 (10.0x) | 1,000 (1000.0x) | 1.00 |" in table
    svg = ET.fromstring(bench_scale.svg_chart(results))
    lines = svg.findall("{http://www.w3.org/2000/svg}polyline")
    assert len(lines) >= 4 and all(len(line.get("points", "").split()) == 2 for line in lines)


def test_reads_script_measures_an_existing_build(tiny_run: tuple[Path, str]) -> None:
    """``bench_scale_reads.py`` (the read side alone, on a vault bench_scale built) runs and says what it measured."""
    work, _ = tiny_run
    out = subprocess.run(
        [sys.executable, str(SCRIPT.parent / "bench_scale_reads.py"), str(work / "vaults" / "vault-40"),
         str(work / "vaults" / "fts-40.sqlite"), "--rounds", "1", "--out", str(work / "reads.json")],
        capture_output=True, text=True, timeout=200, check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    data = json.loads((work / "reads.json").read_text())
    assert data["backend"] == "tantivy" and data["documents"] > 40
    for key in ("grep_p95_ms", "grep_ids_p50_ms", "regex_ms", "regex_count_ms", "fts5_grep_p95_ms"):
        assert data[key] > 0, key
    assert data["regex_partial"] is False


def test_render_merges_runs_of_other_sizes(tiny_run: tuple[Path, str], tmp_path: Path) -> None:
    """A 1M run made apart (``--skip-reindex``: no full rebuild) joins the table of the smaller sizes."""
    work, _table = tiny_run
    data = json.loads((work / "scale.json").read_text())
    big = json.loads(json.dumps(data))
    for r in big["results"]:
        r["size"] = 4000
        r["tantivy"]["reindex_msgs_per_min"] = None
    big["command"] += " --skip-reindex"
    (tmp_path / "big.json").write_text(json.dumps(big))
    merged = subprocess.run([sys.executable, str(SCRIPT), "--render", str(work / "scale.json"), "--merge",
                             str(tmp_path / "big.json")], capture_output=True, text=True, timeout=60, check=True).stdout
    assert "40 messages | 4,000 messages" in merged
    row = next(line for line in merged.splitlines() if line.startswith("| reindex (messages per minute), tantivy"))
    assert row.count("n/a") == 1  # only the merged size lacks it
    assert "--skip-reindex" in merged


def test_ingest_ab_script_runs_two_trees_and_fts5(tiny_run: tuple[Path, str]) -> None:
    """``bench_ingest_ab.py`` (the agent path of two code trees, alternating, FTS5 in the same round) runs
    on a build and leaves it as it was."""
    work, _ = tiny_run
    vault = work / "vaults" / "vault-40"
    before = sorted((p.relative_to(vault), p.stat().st_size) for p in vault.rglob("*") if p.is_file())
    out = subprocess.run(
        [sys.executable, str(SCRIPT.parent / "bench_ingest_ab.py"), str(vault), str(work / "vaults" / "fts-40.sqlite"),
         "--code", f"a={ROOT}", "--code", f"b={ROOT}", "--rounds", "2", "--calls", "3", "--stages",
         "--slowest", "2", "--out", str(work / "ab.json")],
        capture_output=True, text=True, timeout=200, check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    data = json.loads((work / "ab.json").read_text())
    assert set(data["medians"]) == {"a", "b", "fts5"}
    assert all(len(rows) == 2 for rows in data["runs"].values())
    for name in ("a", "b"):
        stages = data["runs"][name][0]["stages_us"]
        assert {"catalog transaction", "rendering", "fdatasync itself"} <= set(stages)
        assert data["medians"][name]["cpu_p50_ms"] > 0
    slow = [line for line in out.stdout.splitlines() if line.lstrip().startswith("slow call")]
    assert len(slow) == 2 * 2 * 2, out.stdout  # two slowest calls of each run of each tree
    assert all("checkpoint overlap" in line and "fdatasync itself" in line for line in slow), slow
    assert sorted((p.relative_to(vault), p.stat().st_size) for p in vault.rglob("*") if p.is_file()) == before


@pytest.mark.parametrize("backend", ["whoosh", "tantivy"])
def test_grep_ab_script_runs_two_trees_on_one_copy(tiny_run: tuple[Path, str], backend: str) -> None:
    """``bench_grep_ab.py`` (indexed grep of two code trees, alternating on one copy of a build) runs on
    either backend, reports the same answers for the same tree, and leaves the build as it was."""
    work, _ = tiny_run
    vault = work / "vaults" / "vault-40"
    before = sorted((p.relative_to(vault), p.stat().st_size) for p in vault.rglob("*") if p.is_file())
    out = subprocess.run(
        [sys.executable, str(SCRIPT.parent / "bench_grep_ab.py"), str(vault), "--code", f"a={ROOT}",
         "--code", f"b={ROOT}", "--rounds", "2", "--passes", "1", "--backend", backend,
         "--out", str(work / f"grep-ab-{backend}.json")],
        capture_output=True, text=True, timeout=200, check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:] + out.stdout[-2000:]
    data = json.loads((work / f"grep-ab-{backend}.json").read_text())
    assert set(data["medians"]) == {"a", "b"} and all(m["same_answers"] for m in data["medians"].values())
    assert all(len(rows) == 2 and rows[0]["backend"] == backend for rows in data["runs"].values())
    assert all(m["p95_ms"] >= m["p50_ms"] > 0 for m in data["medians"].values())
    assert "medians over the rounds" in out.stdout
    assert sorted((p.relative_to(vault), p.stat().st_size) for p in vault.rglob("*") if p.is_file()) == before


def test_a_kept_build_of_an_older_catalog_schema_is_read_again_before_it_is_copied(tmp_path: Path) -> None:
    """A build kept by ``--builds`` whose catalog another schema made is brought up to date once, by a child,
    so that no measured step pays for reading the catalog again."""
    import sqlite3

    sys.path.insert(0, str(SCRIPT.parent))
    import bench_scale

    from vaultlcm import Vault
    from vaultlcm.catalog_schema import SCHEMA_VERSION

    vault = tmp_path / "vault-5"
    with Vault.init(vault) as v:
        v.ingest("agent", [{"role": "user", "content": f"deploy {i}"} for i in range(5)])
    con = sqlite3.connect(vault / ".vaultlcm" / "catalog.sqlite")
    with con:
        con.execute("UPDATE meta SET value='older' WHERE key='schema'")
        con.execute("DELETE FROM messages")
    con.close()
    assert bench_scale.catalog_schema(vault) == "older"
    bench_scale.refresh_catalog(vault)
    assert bench_scale.catalog_schema(vault) == SCHEMA_VERSION
    con = sqlite3.connect(vault / ".vaultlcm" / "catalog.sqlite")
    try:
        assert con.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 5
    finally:
        con.close()
