"""What people do to a vault, measured on the demo vault (issue 13).

    python benchmarks/bench_people.py [--json out.json]

Builds the demo vault (the shipped three-day session, extractive summaries),
then for each edit a person makes in Obsidian or a shell works on a fresh copy:
the active context (the coarsest cut: items and tokens) before the edit, after
it, and after one plain ``vaultlcm compact``; what ``doctor`` says (exit code,
problems, warnings) after the edit and after the compaction; how many links in
the conversation's notes Obsidian would not resolve; and how long that
compaction took against a compaction of the untouched copy in the same run.

The bars: a rename or a move changes nothing; a delete brings back exactly the
deleted note's sources (and the compaction puts the context back as it was);
``doctor`` exits 0 throughout.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import dump_json, print_table  # noqa: E402

from vaultlcm import Vault  # noqa: E402
from vaultlcm.dag_rows import item_tokens  # noqa: E402
from vaultlcm.sample import SAMPLE_CONVERSATION as CONV  # noqa: E402
from vaultlcm.sample import build_sample_vault  # noqa: E402


def context(root: Path) -> tuple[int, int]:
    with Vault(root) as v:
        v.sync(CONV)
        items = v.dag.active(CONV)
        return len(items), sum(item_tokens(i) for i in items)


def doctor(root: Path) -> tuple[int, int, int]:
    with Vault(root) as v:
        r = v.doctor()
    return (1 if r["problems"] else 0), len(r["problems"]), len(r["warnings"])


def compact(root: Path) -> float:
    t0 = time.perf_counter()
    with Vault(root) as v:
        v.compact(CONV)
    return time.perf_counter() - t0


def obsidian_rename(root: Path, old: Path, new: Path) -> None:
    """Move the note and rewrite every ``[[old name]]`` link to it, as Obsidian does."""
    new.parent.mkdir(parents=True, exist_ok=True)
    old.rename(new)
    pattern = re.compile(r"\[\[" + re.escape(old.stem) + r"([\]|#])")
    for p in (root / "conversations").rglob("*.md"):
        text = p.read_text(encoding="utf-8")
        changed = pattern.sub(lambda m: "[[" + new.stem + m.group(1), text)
        if changed != text:
            p.write_text(changed, encoding="utf-8")


def unresolved(root: Path) -> int:
    """Wikilinks in the conversation notes that Obsidian would show as unresolved."""
    from vaultlcm.links import VaultFiles
    from vaultlcm.summary_notes import text_links

    files = VaultFiles.scan(root)
    count = 0
    for p in (root / "conversations").rglob("*.md"):
        rel = p.relative_to(root).as_posix()
        count += sum(1 for _s, _e, link in text_links(p.read_text(encoding="utf-8"))
                     if link.path and files.resolve(link.path, rel) is None)
    return count


def pick(root: Path) -> tuple[Path, Path]:
    """A leaf and a condensed note that both have a parent."""
    with Vault(root) as v:
        v.sync(CONV)
        rows = [s for s in v.dag.all(CONV) if s.parent and s.parent != "!invalid"]
        leaves = [s for s in rows if s.kind == "leaf"]
        condensed = [s for s in rows if s.kind == "condensed"]
        return root / leaves[len(leaves) // 2].path, root / condensed[0].path


EDITS: dict[str, Callable[[Path, Path, Path], None]] = {
    "none": lambda root, leaf, cond: None,
    "rename (Obsidian)": lambda root, leaf, cond: obsidian_rename(root, leaf, leaf.with_name("Timezone decision.md")),
    "rename (mv)": lambda root, leaf, cond: leaf.rename(leaf.with_name("Timezone decision.md")),
    "move to subfolder": lambda root, leaf, cond: obsidian_rename(root, leaf, leaf.parent / "archive" / leaf.name),
    "delete leaf": lambda root, leaf, cond: leaf.unlink(),
    "delete condensed": lambda root, leaf, cond: cond.unlink(),
}


def main(argv: list[str] | None = None) -> list[dict[str, object]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "demo"
        build_sample_vault(base)
        rows = []
        baseline = None
        for name, edit in EDITS.items():
            root = Path(tmp) / re.sub(r"\W+", "-", name)
            shutil.copytree(base, root)
            before = context(root)
            edit(root, *pick(root))
            after = context(root)
            doctor_after = doctor(root)
            broken = unresolved(root)
            seconds = compact(root)
            baseline = baseline or seconds
            settled = context(root)
            rows.append({
                "edit": name, "items": f"{before[0]} -> {after[0]} -> {settled[0]}",
                "tokens": f"{before[1]:,} -> {after[1]:,} -> {settled[1]:,}",
                "doctor after edit (exit, problems, warnings)": str(doctor_after),
                "doctor after compact": str(doctor(root)),
                "unresolved links": f"{broken} -> {unresolved(root)}",
                "compact ms": seconds * 1000,
                "compact vs untouched": seconds / baseline,
            })
    print_table(rows)
    dump_json(args.json, rows)
    return rows


if __name__ == "__main__":
    main()
