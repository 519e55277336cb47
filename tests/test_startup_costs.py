"""Start-up paths whose cost must not grow with history: counts kept in the catalog, status from the catalog."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from vaultlcm import Vault, tokens
from vaultlcm.catalog import Catalog


class DictStore:
    """A :class:`vaultlcm.tokens.CountStore` in memory that records what it was asked."""

    def __init__(self, known: dict[str, int] | None = None) -> None:
        self.known = dict(known or {})
        self.asked: list[str] = []

    def counts(self, keys: list[str]) -> dict[str, int]:
        self.asked.extend(keys)
        return {k: self.known[k] for k in keys if k in self.known}


TEXTS = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=3000)


@settings(max_examples=60, deadline=None)
@given(text=TEXTS)
def test_a_remembered_count_is_the_count(text: str) -> None:
    exact = len(tokens.encoding().encode(text, disallowed_special=()))
    store = DictStore()
    with tokens.remembering(store) as fresh:
        assert tokens._count(text) == exact
    assert fresh == {tokens.text_key(text): exact}
    # A later scope takes the count from the store without counting.
    with tokens.remembering(DictStore(fresh)) as again:
        assert tokens._count(text) == exact
    assert again == {}


def test_a_wrong_store_entry_is_what_you_get_so_the_key_must_name_the_text() -> None:
    """The key is a hash of the exact text: a different text never finds another's count."""
    a, b = "deploy went fine", "deploy went fine "
    assert tokens.text_key(a) != tokens.text_key(b)
    with tokens.remembering(DictStore({tokens.text_key(a): 999})):
        assert tokens._count(b) == len(tokens.encoding().encode(b))
    assert tokens._count(a) == len(tokens.encoding().encode(a))  # outside a scope the store is not asked


def test_the_catalog_keeps_the_newest_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from vaultlcm import catalog as catalog_module

    monkeypatch.setattr(catalog_module, "TOKEN_COUNTS_KEPT", 5)
    cat = Catalog(tmp_path, tmp_path / "catalog.sqlite")
    cat.save_counts({f"k{i}": i for i in range(4)})
    cat.save_counts({f"k{i}": i for i in range(4, 8)})
    assert cat.counts([f"k{i}" for i in range(8)]) == {f"k{i}": i for i in range(3, 8)}
    cat.close()


SESSION = [{"role": "user" if i % 2 == 0 else "assistant", "timestamp": f"2026-10-{1 + i // 40:02d}T10:{i % 40:02d}:00Z",
            "content": f"step {i}: the deploy of service-{i % 7} to staging finished with code {i * 13 % 256}"}
           for i in range(160)]

CHILD = textwrap.dedent("""
    import json, sys
    from vaultlcm import Vault, tokens
    with Vault(sys.argv[1]) as v:
        ctx = v.assemble("c", int(sys.argv[2])).to_dict()
    print(json.dumps({"ctx": ctx, "loaded": tokens._encoding is not None}))
""")


def assemble_in_new_process(root: Path, budget: int) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(root), str(budget)], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_new_process_assembles_an_unchanged_vault_without_the_token_table(tmp_path: Path) -> None:
    with Vault.init(tmp_path) as v:
        v.ingest("c", SESSION)
        v.compact("c", force=True)
        assert v.dag.all("c")
    first = assemble_in_new_process(tmp_path, 1500)
    # The compaction counted what the next context meets while its token table was loaded.
    assert not first["loaded"]
    again = assemble_in_new_process(tmp_path, 1500)
    assert again["ctx"] == first["ctx"] and not again["loaded"]
    assert again["ctx"]["summary_ids"] and again["ctx"]["estimated_tokens"] <= 1500
    # Something new: the new texts are counted (the table is loaded) and the context follows.
    with Vault(tmp_path) as v:
        v.ingest("c", [{"role": "user", "content": "and now the rollback of service-3?"}])
    after = assemble_in_new_process(tmp_path, 1500)
    assert after["loaded"] and after["ctx"]["messages"][-1]["content"] == "and now the rollback of service-3?"
    assert after["ctx"]["estimated_tokens"] <= 1500


def test_the_counted_constants_are_the_counts() -> None:
    from vaultlcm.assembly import SUMMARY_PREAMBLE, SUMMARY_PREAMBLE_TOKENS, SYSTEM_ADDITION, SYSTEM_ADDITION_TOKENS

    assert tokens.count_tokens(SUMMARY_PREAMBLE) == SUMMARY_PREAMBLE_TOKENS
    assert tokens.count_tokens(SYSTEM_ADDITION) == SYSTEM_ADDITION_TOKENS


STATUS_CHILD = textwrap.dedent("""
    import json, sys
    from vaultlcm import Vault, tokens
    with Vault(sys.argv[1]) as v:
        st = v.status()
    print(json.dumps({"status": st, "loaded": tokens._encoding is not None}))
""")


@pytest.mark.parametrize("budget", [700, 1500, 4000, 100_000])
def test_status_plans_the_cut_from_the_catalog_alone(tmp_path: Path, budget: int) -> None:
    """A new process's `status` loads no token table, and its cut is the one `assemble` shows, give or take
    the sizes it estimates: the same tail, every message under exactly one span, the budget respected."""
    (tmp_path / "v").mkdir()
    root = tmp_path / "v"
    Vault.init(root).close()
    (root / "vaultlcm.toml").write_text(f"context_budget_tokens = {budget}\nfresh_tail_count = 8\n")
    with Vault(root) as v:
        v.ingest("c", SESSION)
        v.compact("c", force=True)
        v.ingest("c", [{"role": "user", "content": "and now the rollback of service-3?"}])
        exact = v.assemble("c", budget).describe()
    before = {p: p.stat().st_mtime_ns for p in root.rglob("*.md")}
    out = subprocess.run([sys.executable, "-c", STATUS_CHILD, str(root)], capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert not got["loaded"]
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*.md")} == before  # a reader writes no note
    cut = got["status"]["conversations"][0]["context"]
    assert cut["estimated"] and cut["budget"] == budget
    assert sum(s["messages"] for s in cut["spans"]) == len(SESSION) + 1
    assert sum(s["tokens"] for s in cut["spans"] if s["kind"] != "omitted") <= budget
    assert cut["spans"][-1]["last_seq"] == exact["spans"][-1]["last_seq"] == len(SESSION) + 1
    assert cut["verbatim"] == exact["verbatim"]
    if not exact["verbatim"]:
        tail, exact_tail = [s for s in cut["spans"] if s["tail"]], [s for s in exact["spans"] if s["tail"]]
        assert tail[0]["first_seq"] == exact_tail[0]["first_seq"]  # the same protected tail
    # The same resolution of history, within what the estimate can be off by.
    kinds = lambda c: {(s["kind"], s["depth"]) for s in c["spans"] if not s["tail"]}  # noqa: E731
    assert kinds(cut) & kinds(exact) or not kinds(exact)


def test_compaction_keeps_the_redaction_tally_so_status_reads_no_log(tmp_path: Path) -> None:
    with Vault.init(tmp_path) as v:
        v.ingest("c", [*SESSION[:40], {"role": "user", "content": "my key is sk-ant-api03-" + "x" * 90}])
        v.compact("c", force=True)
        tally = tmp_path / ".vaultlcm" / "redactions.json"
        counted = json.loads(tally.read_text())["files"]
        assert counted and all(rel.startswith("conversations/c/") for rel in counted)
        stamp = tally.stat().st_mtime_ns
        assert v.status()["conversations"][0]["redacted"] == v.status()["redacted"]
        assert tally.stat().st_mtime_ns == stamp  # nothing new to count


def test_the_startup_benchmark_runs(tmp_path: Path) -> None:
    """A smoke run of benchmarks/bench_startup.py (that it measures, not how fast)."""
    root = tmp_path / "v"
    with Vault.init(root) as v:
        v.ingest("c", SESSION[:60])
        v.compact("c", force=True)
    repo = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, str(repo / "benchmarks" / "bench_startup.py"), str(root), "--code",
                          f"here={repo}", "--rounds", "1", "--only", "status", "ingest", "--workdir", str(tmp_path / "w")],
                         capture_output=True, text=True, check=True)
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert {r["measure"] for r in rows} == {"status (ms)", "status again (ms)", "ingest of a new day's first message (ms)"}
    assert all(r["s"] > 0 for r in rows) and "| status (ms) |" in out.stdout
    assert not any(r["table_loaded"] for r in rows if r["measure"].startswith("status"))
    assert sorted(p.name for p in (root / "conversations/c/logs").iterdir()) == ["2026-10-01.md", "2026-10-02.md"]


OLD_STATS = ("SELECT conv, COUNT(*), COALESCE(SUM(tokens),0), COUNT(DISTINCT path), MIN(at), MAX(at) "
             "FROM messages GROUP BY conv ORDER BY conv")


@settings(max_examples=12, deadline=None)
@given(steps=st.lists(st.tuples(st.sampled_from(["ingest", "edit", "delete", "status"]), st.sampled_from("ab"),
                                st.integers(1, 5), st.integers(1, 4)), min_size=1, max_size=10))
def test_stats_kept_per_log_are_the_aggregate_over_every_message(tmp_path_factory, steps) -> None:
    """Whatever happened to the logs (appends, a hand edit, a deleted day), the totals kept per log add up
    to the aggregate over the messages table, and a second call counts nothing again."""
    root = tmp_path_factory.mktemp("v")
    n = 0
    with Vault.init(root) as v:
        for what, conv, day, count in steps:
            logs = root / "conversations" / conv / "logs"
            if what == "ingest":
                v.ingest(conv, [{"role": "user", "timestamp": f"2026-11-{day:02d}T10:{(n + i) % 60:02d}:00Z",
                                 "content": f"message {n + i} " * (1 + i)} for i in range(count)])
                n += count
            elif what == "edit" and (logs / f"2026-11-{day:02d}.md").exists():
                path = logs / f"2026-11-{day:02d}.md"
                path.write_text(path.read_text(encoding="utf-8").replace("message", "MESSAGE", 1), encoding="utf-8")
            elif what == "delete" and (logs / f"2026-11-{day:02d}.md").exists():
                (logs / f"2026-11-{day:02d}.md").unlink()
            for c in v.conversations():
                v.sync(c)
            assert v.catalog.stats() == [tuple(r) for r in v.catalog.execute(OLD_STATS)]
        kept = v.catalog.execute("SELECT COUNT(*) FROM log_stats")[0][0]
        assert kept == v.catalog.execute("SELECT COUNT(*) FROM logs")[0][0]


BODIES = st.text(st.characters(exclude_categories=("Cs",)), max_size=400)


@settings(max_examples=200, deadline=None)
@given(bodies=st.lists(BODIES, min_size=1, max_size=5), edited=st.lists(st.booleans(), min_size=5, max_size=5),
       depth=st.integers(0, 12), after=st.text(st.characters(exclude_categories=("Cs",)), max_size=200))
def test_a_run_of_summaries_costs_the_sum_of_its_blocks(bodies: list[str], edited: list[bool], depth: int,
                                                        after: str) -> None:
    """The count of a run's message (preamble, blocks, blank lines) from the blocks' costs is the count, so
    a context of known summaries is measured without the token table."""
    from types import SimpleNamespace

    from vaultlcm.assembly import SUMMARY_PREAMBLE, render_summary, run_tokens, summary_item_cost

    rows = [SimpleNamespace(id=f"sum_{i:016x}", kind="leaf" if depth == 0 else "condensed", depth=depth,
                            descendant_count=i * 7, earliest_at="2026-10-01T10:00:00Z",
                            latest_at="2026-10-02T11:30:00Z", human_owned=edited[i], body=body)
            for i, body in enumerate(bodies)]
    text = SUMMARY_PREAMBLE + "\n\n" + "\n\n".join(render_summary(r) for r in rows)  # type: ignore[arg-type]
    assert run_tokens([summary_item_cost(r) for r in rows]) == tokens.count_tokens(text)  # type: ignore[arg-type]
    # A merge repair joins the next user text to the run with a newline: the record is counted from the parts.
    from vaultlcm import apiformat
    from vaultlcm.assembly import _context_tokens

    record = {"role": "user", "content": [{"type": "text", "text": text}, {"type": "text", "text": after}]}
    assert _context_tokens([record], "", {text: tokens.count_tokens(text)}) == apiformat.record_tokens(record)


def test_the_run_constants_are_the_counts() -> None:
    from vaultlcm import assembly

    assert assembly._PREAMBLE_BLANK_TOKENS == tokens.count_tokens(assembly.SUMMARY_PREAMBLE + "\n\n")
    assert assembly._CLOSE_TOKENS == tokens.count_tokens(">")
    assert assembly._CLOSE_BLANK_TOKENS == tokens.count_tokens(">\n\n")
    assert assembly._CLOSE_NEWLINE_TOKENS == tokens.count_tokens(">\n")
    assert assembly.run_tokens([]) == tokens.count_tokens(assembly.SUMMARY_PREAMBLE)
