"""Write locks that live with the data they protect, not in the deletable cache.

Appends to a conversation are serialized by an advisory lock (``flock``) on the
conversation's folder itself; compaction of a conversation by one on its
``summaries/`` folder. A directory lock has no file of its own, so deleting
``.vaultlcm/`` at any moment (documented as safe) can never let a second writer
in, and git never sees a lock file. The lock is released by the kernel when the
process dies, so a crash leaves nothing stale behind.

``filelock`` (used for the index's writer lock) locks a *file* it creates; it
cannot lock a directory, hence these few lines on :func:`fcntl.flock`. Where
``fcntl`` does not exist (Windows) a ``filelock`` lock file in the state folder
stands in.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import LockTimeoutError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


@contextmanager
def dir_lock(folder: Path, *, timeout: float, what: str, fallback: Path | None = None) -> Iterator[None]:
    """Hold an exclusive lock on ``folder`` (created if missing) for the ``with`` block.

    Raises :class:`LockTimeoutError` naming ``what`` after ``timeout`` seconds.
    """
    if fcntl is None:  # pragma: no cover - Windows
        folder.mkdir(parents=True, exist_ok=True)
        from filelock import FileLock, Timeout

        lock_file = fallback or folder / ".vaultlcm.lock"
        lock_file.parent.mkdir(parents=True, exist_ok=True)
        try:
            with FileLock(str(lock_file), timeout=timeout):
                yield
        except Timeout:
            raise LockTimeoutError(_busy(what, timeout)) from None
        return
    try:
        fd = os.open(folder, os.O_RDONLY | _DIRECTORY)
    except FileNotFoundError:  # the usual case (the folder exists) costs no mkdir
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder, os.O_RDONLY | _DIRECTORY)
    try:
        deadline = time.monotonic() + timeout
        pause = 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockTimeoutError(_busy(what, timeout)) from None
                time.sleep(pause)
                pause = min(pause * 2, 0.05)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _busy(what: str, timeout: float) -> str:
    return (f"{what} is locked by another process for more than {timeout:.0f}s; retry when it has finished "
            "(raise lock_timeout_seconds in vaultlcm.toml for long imports)")
