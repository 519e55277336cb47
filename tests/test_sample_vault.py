"""sample-vault/ is what the project itself produces, byte for byte, and it is sound."""

from __future__ import annotations

import re
from pathlib import Path

from vaultlcm import Vault
from vaultlcm.sample import SAMPLE_CONVERSATION, build_sample_vault

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample-vault"
LINK = re.compile(r"\[\[([^\]|#]+)(?:#\^([A-Za-z0-9-]+))?(?:\|[^\]]*)?\]\]")


def files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".vaultlcm" not in p.relative_to(root).parts
    }


def test_sample_vault_rebuilds_to_the_same_bytes(tmp_path: Path) -> None:
    report = build_sample_vault(tmp_path / "sample")
    built, committed = files(tmp_path / "sample"), files(SAMPLE)
    assert sorted(built) == sorted(committed), "file list differs: rebuild with `python -m vaultlcm demo sample-vault`"
    changed = [name for name in built if built[name] != committed[name]]
    assert not changed, f"these files differ from sample-vault/: {changed[:5]} (rebuild it)"
    assert max(report.summaries_by_depth) >= 2


def test_every_wikilink_resolves(tmp_path: Path) -> None:
    import shutil

    sample = tmp_path / "copy"
    shutil.copytree(SAMPLE, sample, ignore=shutil.ignore_patterns(".vaultlcm"))
    names = {p.stem for p in sample.rglob("*.md")}
    paths = {p.relative_to(sample).with_suffix("").as_posix() for p in sample.rglob("*.md")}
    with Vault(sample) as v:
        v.sync(SAMPLE_CONVERSATION)
        for p in sample.rglob("*.md"):
            for target, block in LINK.findall(p.read_text(encoding="utf-8")):
                # Obsidian resolves a link to a note by name or path, and to any other file by its path (.base)
                assert target in names or target in paths or (sample / target).is_file(), (
                    f"{p}: [[{target}]] does not resolve")
                if block:
                    row = v.catalog.get(block)
                    assert row is not None and row.path == target + ".md", f"{p}: ^{block} is not in {target}"
        assert not v.dag.problems()
        assert v.export(SAMPLE_CONVERSATION)  # readable


def test_the_public_demo_builds_what_the_command_builds(tmp_path: Path) -> None:
    import vaultlcm

    report = vaultlcm.demo(tmp_path / "demo")
    assert isinstance(report, vaultlcm.DemoReport) and report.messages > 0 and sum(report.summaries_by_depth.values()) > 0
    assert (tmp_path / "demo" / "vaultlcm.toml").is_file() and str(tmp_path / "demo") in report.describe()
