"""How many secrets were redacted, counted from the vault's own files.

``status`` reports, per conversation, the ``[redacted: kind]`` markers its logs
and payload files hold. The count is derived from the Markdown (so it survives a
deleted ``.vaultlcm/`` and a git clone) and kept incrementally in
``.vaultlcm/redactions.json``: logs are append-only, so only the bytes added
since the last count are read; a log whose counted part changed (a hand edit,
a repair) is counted again from the start. Payload files never change (their
name is the hash of their bytes).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from .fsutil import atomic_write, read_file, read_span
from .layout import VaultLayout
from .secrets import MARKER_RE

CACHE_VERSION = 1
#: Payload files that can hold text (images and other binary payloads cannot hold a marker).
TEXT_PAYLOADS = (".txt", ".json", ".md")
_MARKER_BYTES = re.compile(MARKER_RE.pattern.encode("ascii"))
_CHECK = 256


class RedactionTally:
    """Markers per conversation, counted once per new byte."""

    def __init__(self, layout: VaultLayout) -> None:
        self.layout = layout
        self.path = layout.state_dir / "redactions.json"
        self._files: dict[str, Any] = self._load()
        self._dirty = False

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("version") != CACHE_VERSION or not isinstance(data.get("files"), dict):
            return {}
        return data["files"]

    def counts(self, conv: str) -> dict[str, int]:
        """``{kind: markers}`` in the logs and text payloads of ``conv``."""
        total: Counter[str] = Counter()
        for path in self._paths(conv):
            total.update(self._count(path))
        return dict(sorted(total.items()))

    def save(self) -> None:
        """Write the counts back (renamed into place, not fsynced).

        Compaction saves after every run, several times a minute for a busy agent: two fsyncs
        each (the file and its folder) bought nothing, since a file lost or cut short by a
        crash loads as no counts (see :meth:`_load`) and the next count reads the logs again.
        """
        if self._dirty:
            data = json.dumps({"version": CACHE_VERSION, "files": self._files}, sort_keys=True).encode("utf-8")
            try:
                atomic_write(self.path, data, skip_if_same=False, durable=False)
            except OSError:
                pass  # a cache: the next count reads the files again
            self._dirty = False

    def _paths(self, conv: str) -> list[Path]:
        out: list[Path] = []
        logs, files = self.layout.logs_dir(conv), self.layout.files_dir(conv)
        if logs.is_dir():
            out += sorted(p for p in logs.glob("*.md") if p.is_file() and not p.is_symlink())
        if files.is_dir():
            out += sorted(p for p in files.iterdir()
                          if p.suffix in TEXT_PAYLOADS and p.is_file() and not p.is_symlink())
        return out

    def _count(self, path: Path) -> Counter[str]:
        rel = self.layout.relative(path)
        try:
            size = path.stat().st_size
        except OSError:
            return Counter()
        entry = self._files.get(rel)
        if isinstance(entry, dict) and entry.get("size") == size:
            return Counter(entry.get("counts") or {})
        start, base = 0, Counter[str]()
        if isinstance(entry, dict) and isinstance(entry.get("size"), int) and 0 < entry["size"] < size and (
                self._check(path, entry["size"]) == entry.get("check")):
            start, base = entry["size"], Counter(entry.get("counts") or {})  # appended since: count the new bytes
        try:
            data = read_span(self.layout.inside(path), start, size) if start else read_file(self.layout.inside(path))
        except OSError:
            return Counter()
        base.update(m.group(1).decode("ascii") for m in _MARKER_BYTES.finditer(data))
        self._files[rel] = {"size": size, "check": self._check(path, size), "counts": dict(base)}
        self._dirty = True
        return base

    def _check(self, path: Path, size: int) -> str:
        """A hash of the bytes just before ``size``: unchanged means the file only grew since."""
        try:
            tail = read_span(path, max(0, size - _CHECK), size)
        except OSError:
            return ""
        return hashlib.sha256(tail).hexdigest()[:16]
