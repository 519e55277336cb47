"""Crash-safe file writes: a note appears whole or not at all.

``atomic_write`` writes a temporary file in the same folder, fsyncs it, renames it
over the target and fsyncs the folder, so after a crash at any point the target
holds either the old bytes or the new ones. (The ``atomicwrites`` package that
used to do this is archived by its author; this is the same dozen lines.)
``durable_append`` is the append-only counterpart used by the daily logs.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

TEMP_PREFIX = ".vaultlcm-tmp-"


def fsync_dir(path: Path) -> None:
    """Make a rename or a new file in ``path`` durable (no-op where unsupported)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, skip_if_same: bool = True, sync_dir: bool = True) -> bool:
    """Write ``data`` to ``path`` atomically; returns False when nothing had to change.

    ``skip_if_same`` keeps git diffs honest: a write that changes nothing does not
    touch the file (or its mtime) at all. ``sync_dir=False`` leaves the folder's
    fsync (what makes the rename durable) to the caller, who writes many files
    into it and syncs it once (:func:`fsync_dir`).
    """
    if skip_if_same:
        try:
            if path.lstat().st_size == len(data) and read_file(path) == data:
                return False
        except OSError:
            pass
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=path.parent)
    try:
        # mkstemp makes 0600 files; a note should read like any other file (or keep its mode).
        try:
            st = path.lstat()
            mode = st.st_mode & 0o777 if not os.path.islink(path) else 0o644
        except FileNotFoundError:
            mode = 0o644
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    if sync_dir:
        fsync_dir(path.parent)
    return True


NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def durable_append(path: Path, data: bytes) -> int:
    """Append ``data`` to ``path`` in one write and fsync it; returns the offset it started at.

    All or nothing: when the write or the sync fails (a full disk), the bytes
    already written are cut off again before the error is raised. The final
    component is never followed if it is a symlink (``O_NOFOLLOW``). The folder
    is fsynced only when this call created the file (what makes a new name
    durable); appending to an existing file costs one ``fdatasync`` and nothing else.
    """
    flags = os.O_WRONLY | os.O_APPEND | NOFOLLOW
    created = False
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
            created = True
        except FileExistsError:  # created by someone else in between: append to theirs
            fd = os.open(path, flags)
    try:
        start = os.lseek(fd, 0, os.SEEK_END)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fdatasync(fd) if hasattr(os, "fdatasync") else os.fsync(fd)
        except BaseException:
            try:
                os.ftruncate(fd, start)
                os.fsync(fd)
            except OSError:
                pass
            raise
    finally:
        os.close(fd)
    if created:
        fsync_dir(path.parent)
    return start


def read_span(path: Path, start: int, end: int) -> bytes:
    """Bytes ``start:end`` of ``path``, never through a symlink."""
    fd = os.open(path, os.O_RDONLY | NOFOLLOW)
    try:
        return os.pread(fd, end - start, start)
    finally:
        os.close(fd)


def read_file(path: Path) -> bytes:
    """A whole regular file, never through a symlink (a FIFO or device is refused, never blocked on)."""
    import stat

    fd = os.open(path, os.O_RDONLY | NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise IsADirectoryError(f"{path} is not a regular file")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def truncate(path: Path, size: int) -> None:
    """Cut a torn tail off an append-only file (used under the conversation lock)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    finally:
        os.close(fd)
