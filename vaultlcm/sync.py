"""Following what people do in Obsidian: a watchdog watcher that re-syncs the vault.

Editors save in different ways: an atomic replace (temp file + rename, so only a
``moved`` event names the target), an in-place write, vim's backup-and-rename,
Obsidian's own renames (which also rewrite links in other notes). The watcher
therefore treats every event as "this path may have changed", waits until a
path has been quiet for ``watch_debounce_ms`` (one save yields 4-17 events),
compares the content hash with the last one it saw (which also skips the
engine's own writes) and re-syncs the conversation the path belongs to. Temp
and editor files, ``.obsidian/``, ``.trash/`` and ``.vaultlcm/`` are ignored.
When events pile up past ``rescan_threshold`` (a burst, or an inotify queue
overflow) it stops tracking paths and re-syncs every conversation instead.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import VaultLCMError
from .fsutil import TEMP_PREFIX, read_file

if TYPE_CHECKING:
    from .layout import VaultLayout

IGNORED_DIRS = frozenset({".obsidian", ".trash", ".vaultlcm", ".git"})
_EDITOR_SUFFIXES = (".swp", ".swx", ".swo", ".tmp", ".part", ".crdownload", "~")


def is_ignored(rel_parts: tuple[str, ...]) -> bool:
    """Paths whose events never mean a note changed."""
    if not rel_parts or rel_parts[0] != "conversations":
        return True
    if any(p in IGNORED_DIRS for p in rel_parts):
        return True
    name = rel_parts[-1]
    return (
        name.startswith((TEMP_PREFIX, ".#", ".~"))
        or name == "4913"  # vim's probe file
        or name.endswith(_EDITOR_SUFFIXES)
        or (name.startswith(".") and name.endswith(".md"))
    )


def _digest(path: Path) -> str | None:
    # Never blocks (a FIFO dropped into the vault is not read) and never follows a symlink.
    try:
        return hashlib.sha256(read_file(path)).hexdigest()
    except OSError:
        return None


class VaultWatcher:
    """Watch a vault and keep its derived state in step with the files.

    ``refresh`` re-reads one conversation from its files and reports what changed
    (:meth:`vaultlcm.Vault.refresh`); the watcher decides only when, and for which.
    """

    def __init__(
        self,
        layout: "VaultLayout",
        refresh: Callable[[str], dict[str, Any]],
        *,
        debounce_ms: int,
        rescan_threshold: int = 1000,
        on_sync: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.layout = layout
        self.refresh = refresh
        self.root = layout.root
        self.debounce = debounce_ms / 1000
        self.rescan_threshold = rescan_threshold
        self.on_sync = on_sync
        self._pending: dict[Path, float] = {}
        self._hashes: dict[Path, str | None] = {}
        self._rescan = False
        self._lock = threading.Condition()
        self._busy = False
        self._last_event = 0.0
        self._stop = threading.Event()
        self._observer: Any = None
        self._worker: threading.Thread | None = None
        self.syncs = 0
        self.rescans = 0
        self.errors: list[str] = []

    # -- events ----------------------------------------------------------------

    def _note(self, raw: str | bytes) -> None:
        path = Path(raw.decode() if isinstance(raw, bytes) else raw)
        try:
            rel = path.relative_to(self.root).parts
        except ValueError:
            return
        if is_ignored(rel):
            return
        with self._lock:
            self._last_event = time.monotonic()
            if self._rescan:
                return
            self._pending[path] = time.monotonic()
            if len(self._pending) > self.rescan_threshold:
                self._rescan = True
                self._pending.clear()
            self._lock.notify_all()

    def _ignored(self, raw: str | bytes) -> bool:
        path = Path(raw.decode() if isinstance(raw, bytes) else raw)
        try:
            rel = path.relative_to(self.root).parts
        except ValueError:
            return True
        return rel != ("conversations",) and is_ignored(rel)

    def request_rescan(self) -> None:
        """Re-sync everything (what an event overflow falls back to)."""
        with self._lock:
            self._rescan = True
            self._pending.clear()
            self._lock.notify_all()

    def start(self) -> "VaultWatcher":
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer

        watcher = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:
                if event.event_type in ("opened", "closed_no_write"):
                    return
                watcher._note(event.src_path)
                dest = getattr(event, "dest_path", "")
                if dest:
                    watcher._note(dest)
                if (event.is_directory and event.event_type in ("moved", "deleted", "created")
                        and not (watcher._ignored(event.src_path) and watcher._ignored(dest or event.src_path))):
                    watcher.request_rescan()

        self._observer = Observer()
        notes = self.root / "conversations"
        if notes.is_dir():
            # Only conversations/ holds notes: watching .vaultlcm/ (index segments, temp folders of a
            # rebuild) or .git/ would cost an inotify watch per folder and wake the worker for nothing.
            self._observer.schedule(Handler(), str(self.root), recursive=False)
            self._observer.schedule(Handler(), str(notes), recursive=True)
        else:
            self._observer.schedule(Handler(), str(self.root), recursive=True)
        self._observer.start()
        self._worker = threading.Thread(target=self._run, name="vaultlcm-watch", daemon=True)
        self._worker.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            self._lock.notify_all()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=10)
        if self._worker is not None:
            self._worker.join(timeout=30)

    def __enter__(self) -> "VaultWatcher":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- work ------------------------------------------------------------------

    def _take_due(self) -> tuple[bool, list[Path]]:
        with self._lock:
            while not self._stop.is_set():
                now = time.monotonic()
                if self._rescan:
                    self._rescan = False
                    self._busy = True
                    return True, []
                due = [p for p, t in self._pending.items() if now - t >= self.debounce]
                if due:
                    for p in due:
                        del self._pending[p]
                    self._busy = True
                    return False, due
                wait = min((self.debounce - (now - t) for t in self._pending.values()), default=None)
                self._lock.wait(timeout=wait if wait is not None else 0.5)
            return False, []

    def _run(self) -> None:
        while not self._stop.is_set():
            rescan, paths = self._take_due()
            try:
                if rescan:
                    self.rescan()
                elif paths:
                    self._sync_paths(paths)
            except VaultLCMError as exc:  # keep running: the last good state stays in force
                self.errors.append(str(exc))
            except Exception as exc:  # noqa: BLE001 - an odd file (a symlink loop, a device) must not stop the watcher
                self.errors.append(f"{type(exc).__name__}: {exc}")
            finally:
                with self._lock:
                    self._busy = False
                    self._lock.notify_all()

    def _sync_paths(self, paths: list[Path]) -> None:
        convs: set[str] = set()
        for path in paths:
            digest = _digest(path)
            if path in self._hashes and self._hashes[path] == digest:
                continue  # touched but unchanged, or our own write seen twice
            self._hashes[path] = digest
            rel = path.relative_to(self.root).parts
            if len(rel) >= 2:
                convs.add(rel[1])
        for conv in sorted(convs):
            folder = self.layout.conversations_dir / conv
            if folder.is_symlink() or not folder.is_dir():
                continue
            result = self.refresh(conv)
            self.syncs += 1
            if self.on_sync:
                self.on_sync(result)

    def rescan(self) -> None:
        """Re-sync every conversation from the files."""
        self.rescans += 1
        for conv in self.layout.conversations():
            result = self.refresh(conv)
            self.syncs += 1
            if self.on_sync:
                self.on_sync(result)

    def wait_idle(self, timeout: float = 10.0, settle: float = 0.3) -> bool:
        """Wait until events have stopped for ``settle`` seconds and every sync has finished.

        Events reach the watcher a little after a write returns, so "nothing pending right
        now" is not enough: the watcher must also have been quiet for a moment.
        """
        start = time.monotonic()
        end = start + timeout
        with self._lock:
            while True:
                now = time.monotonic()
                quiet = now - max(self._last_event, start) >= max(settle, self.debounce + 0.1)
                if quiet and not (self._pending or self._rescan or self._busy):
                    return True
                if now >= end:
                    return False
                self._lock.wait(timeout=0.02)
