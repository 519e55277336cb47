"""Wikilinks resolved the way Obsidian resolves them, and written the way Obsidian writes them.

A person renames and moves notes in Obsidian; Obsidian then rewrites every link
to them. vaultlcm must read those links as Obsidian does and, when it writes a
link itself, write one Obsidian resolves. Obsidian finds the file a link path
names (``[[path#subpath|alias]]``) like this:

1. a path starting with ``./`` or ``../`` is relative to the folder of the note
   holding the link;
2. otherwise the path is first tried from the vault root;
3. otherwise by file name: every file whose name is the path's last part and
   whose path ends with the whole link path (so ``[[sub/note]]`` finds
   ``any/where/sub/note.md``); when several match, the one in the linking
   note's folder, then the one in the fewest folders, then by path.

A path without an extension names a Markdown note (``.md`` is implied); names
compare without regard to case, an exact match first. Folders starting with a
dot (``.obsidian``, ``.git``, ``.trash``, ``.vaultlcm``) are not part of the
vault for Obsidian. Written links use Obsidian's default format, "shortest path
when possible": the bare file name when no other file in the vault has it, the
path from the vault root otherwise (``.md`` left out).
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable
from pathlib import Path


def _forms(path: str) -> list[str]:
    """The file paths a link path may name: with ``.md`` implied first (``[[v1.2 notes]]`` is a note), then as written."""
    return [path] if path.lower().endswith(".md") else [path + ".md", path]


class VaultFiles:
    """The files of a vault (vault-relative POSIX paths), looked up as Obsidian looks them up."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.paths: set[str] = set()
        # What a lookup by lower case needs, kept only for the lower-case forms some path differs from:
        # every path with that form, in order. Most paths are their own lower case (every summary note
        # and log vaultlcm writes): without a copy of each, and a list for every name held once, a DAG
        # recompute's peak at 1M messages fell from 205 MB to 174-177.
        self._folded: dict[str, list[str]] = {}
        # Paths by lower-case file name: the first, then every one where there are several.
        self._by_name: dict[str, str] = {}
        self._more: dict[str, list[str]] = {}
        for p in sorted(set(paths)):
            self.add(p)

    def _named(self, key: str) -> list[str]:
        """Every path whose lower-case file name is ``key``, in order."""
        more = self._more.get(key)
        if more is not None:
            return more
        one = self._by_name.get(key)
        return [one] if one is not None else []

    @classmethod
    def scan(cls, root: Path) -> "VaultFiles":
        """Every file below ``root`` that Obsidian sees (no dot-folders; symlinks are not followed)."""
        found: list[str] = []
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            rel = os.path.relpath(dirpath, root)
            prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"
            found.extend(prefix + f for f in filenames)
        return cls(found)

    def add(self, path: str) -> None:
        if path not in self.paths:
            low = path.lower()
            if low in self._folded:
                self._folded[low].append(path)
            elif low != path:
                self._folded[low] = [low, path] if low in self.paths else [path]
            self.paths.add(path)
            key = path.rsplit("/", 1)[-1].lower()
            first = self._by_name.setdefault(key, path)
            if first is not path:
                self._more.setdefault(key, [first]).append(path)

    def _exact(self, path: str) -> str | None:
        if path in self.paths:
            return path
        low = path.lower()
        same = self._folded.get(low)
        if same:
            return same[0]
        return low if low in self.paths else None

    def resolve(self, link_path: str, source: str | None = None) -> str | None:
        """The file ``link_path`` names from the note ``source`` (None when it names none)."""
        link_path = link_path.strip()
        if not link_path:
            return source
        folder = posixpath.dirname(source) if source else ""
        if link_path.startswith(("./", "../")):
            joined = posixpath.normpath(posixpath.join(folder, link_path))
            if joined.startswith("../"):
                return None
            return next(filter(None, (self._exact(f) for f in _forms(joined))), None)
        link_path = link_path.lstrip("/")
        found = next(filter(None, (self._exact(f) for f in _forms(link_path))), None)
        if found:
            return found
        for form in _forms(link_path):
            wanted = form.lower()
            matches = [p for p in self._named(wanted.rsplit("/", 1)[-1])
                       if p.lower() == wanted or p.lower().endswith("/" + wanted)]
            if matches:
                exact_case = [p for p in matches if p == form or p.endswith("/" + form)]
                return min(exact_case or matches,
                           key=lambda p: (posixpath.dirname(p) != folder, p.count("/"), p))
        return None

    def is_unique_name(self, path: str) -> bool:
        """Whether no other file of the vault has ``path``'s file name (so a bare name link is safe)."""
        return len(self._named(path.rsplit("/", 1)[-1].lower())) <= 1

    def link_path(self, path: str) -> str:
        """How Obsidian links to ``path``: its name when unique in the vault, else its full path (no ``.md``)."""
        shown = path[:-3] if path.lower().endswith(".md") else path
        return shown.rsplit("/", 1)[-1] if self.is_unique_name(path) else shown
