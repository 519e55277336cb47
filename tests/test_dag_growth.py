"""What a compaction reads of the whole vault, made cheaper, gives what the plain forms gave.

The writer's stamp check takes the names of a folder's known notes from a range of the path index
(``Dag._known_names``); the full check's scan takes a regular note from its listing's file type. Both
are compared here with the plain computation, on any names (any code point but ``/`` and NUL,
folders nested, names that sort around ``/`` and ``0``).
"""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vaultlcm import Vault
from vaultlcm.dag import Dag

_NAME = st.text(st.characters(exclude_characters="/\x00", exclude_categories=("Cs",)), min_size=1, max_size=12)
_FOLDERS = ["conversations/c/summaries", "conversations/c/summaries/sub", "conversations/c/summaries0",
            "conversations/c/summaries-x", "conversations/c/notes", "conversations/c"]


def _plain(paths: list[str], rel: str) -> list[str]:
    """What the stamp check compared before: the names directly in ``rel``, by splitting each path."""
    return sorted(name for head, _, name in (p.rpartition("/") for p in paths) if head == rel)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(_FOLDERS), _NAME), max_size=40, unique=True),
       st.sampled_from(_FOLDERS))
def test_known_names_are_the_names_directly_in_the_folder(tmp_path_factory, notes: list[tuple[str, str]],
                                                          folder: str) -> None:
    root = tmp_path_factory.mktemp("v")
    with Vault.init(root) as v:
        paths = [f"{head}/{name}" for head, name in notes]
        with v.catalog.transaction() as db:
            db.executemany("INSERT INTO note_files(path, conv, size, mtime_ns, summary_id) VALUES(?, 'c', 1, 1, NULL)",
                           [(p,) for p in paths])
            # another conversation's notes never count, whatever their path
            db.execute("INSERT INTO note_files(path, conv, size, mtime_ns, summary_id) VALUES(?, 'd', 1, 1, NULL)",
                       (f"{folder}/other.md",))
        assert v.dag._known_names("c", folder) == _plain(paths, folder)


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
        assert {rel: (size, mtime) for rel, (_p, size, mtime) in notes.items()} == _plain_scan(summaries)
        assert sorted(r for r, _ in refused) == ["conversations/c/summaries/link.md", "conversations/c/summaries/pipe.md"]
        assert [r for r, _ in refused] == sorted(r for r, _ in refused)
        assert all(Path(p) == v.layout.root / rel for rel, (p, _s, _m) in notes.items())
        assert isinstance(v.dag, Dag)
