"""What a compaction reads of the whole vault, made cheaper, gives what the plain form gave.

The full check's scan takes a regular note from its listing's file type (one stat, no sort): compared
here with a plain walk of the folder, with the entries the scan must refuse or skip.
"""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vaultlcm import Vault
from vaultlcm.dag import Dag

_NAME = st.text(st.characters(exclude_characters="/\x00", exclude_categories=("Cs",)), min_size=1, max_size=10).filter(
    lambda n: n not in (".", "..") and len(n.encode("utf-8")) < 200)
#: What an entry below summaries/ is: a note-like file, another file, a folder, a symlink to a file or a folder, a pipe.
_KINDS = ("md", "file", "dir", "link", "dirlink", "fifo")


def _plain_scan(root: Path) -> dict[str, tuple[int, int]]:
    """Every regular ``.md`` file below ``summaries/`` (what the scan's slow branches found), with its stat."""
    out = {}
    for here, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and not os.path.islink(os.path.join(here, d))]
        for name in files:
            p = os.path.join(here, name)
            if name.endswith(".md") and not name.startswith(".") and not os.path.islink(p) and os.path.isfile(p):
                st_ = os.lstat(p)
                out[os.path.relpath(p, root.parent.parent.parent)] = (st_.st_size, st_.st_mtime_ns)
    return out


def test_the_scan_finds_every_regular_note_and_refuses_the_rest(tmp_path: Path) -> None:
    with Vault.init(tmp_path) as v:
        v.ingest("c", [{"role": "user", "content": "hello"}])
        summaries = v.layout.summaries_dir("c")
        summaries.mkdir(parents=True, exist_ok=True)
        (summaries / "a.md").write_text("---\n---\n")
        (summaries / "dir.md").mkdir()  # a folder named like a note: looked into, not read
        (summaries / "dir.md" / "inner.md").write_text("x")
        (summaries / "plain.txt").write_text("x")
        (summaries / ".hidden.md").write_text("x")
        (summaries / "link.md").symlink_to(summaries / "a.md")
        os.mkfifo(summaries / "pipe.md")
        notes, refused, _folders = v.dag._scan("c")
        assert notes == _plain_scan(summaries)
        assert sorted(r for r, _ in refused) == ["conversations/c/summaries/link.md", "conversations/c/summaries/pipe.md"]
        assert [r for r, _ in refused] == sorted(r for r, _ in refused)
        # The sync reads a note at the vault root joined with its relative path: that is the regular file scanned.
        assert all((v.layout.root / rel).is_file() and not (v.layout.root / rel).is_symlink() for rel in notes)
        assert isinstance(v.dag, Dag)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.lists(_NAME, min_size=1, max_size=3), st.sampled_from(_KINDS),
                          st.booleans()), max_size=25))
def test_any_tree_of_entries_scans_as_a_plain_walk_finds_it(tmp_path_factory, entries) -> None:
    root = tmp_path_factory.mktemp("v")
    with Vault.init(root) as v:
        v.ingest("c", [{"role": "user", "content": "hello"}])
        summaries = v.layout.summaries_dir("c")
        summaries.mkdir(parents=True, exist_ok=True)
        for parts, kind, md in entries:
            *folders, name = parts
            here = summaries.joinpath(*folders)
            try:
                here.mkdir(parents=True, exist_ok=True)
                target = here / (name + (".md" if md else ""))
                if target.exists() or target.is_symlink():
                    continue
                if kind in ("md", "file"):
                    target.write_bytes(b"---\n---\n" if kind == "md" else b"x")
                elif kind == "dir":
                    target.mkdir()
                elif kind == "link":
                    target.symlink_to(summaries / "nowhere.md")
                elif kind == "dirlink":
                    target.symlink_to(summaries)
                else:
                    os.mkfifo(target)
            except (FileExistsError, NotADirectoryError):
                continue  # a name already taken by an entry of another kind
        notes, refused, _folders = v.dag._scan("c")
        assert notes == _plain_scan(summaries)
        assert [r for r, _ in refused] == sorted(r for r, _ in refused)
        for rel, _detail in refused:
            assert rel.endswith(".md") and not (v.layout.root / rel).is_file() or (v.layout.root / rel).is_symlink()
