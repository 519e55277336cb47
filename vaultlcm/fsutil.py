"""Crash-safe file writes: a note appears whole or not at all.

``atomic_write`` writes a temporary file in the same folder, fsyncs it, renames it
over the target and fsyncs the folder, so after a crash at any point the target
holds either the old bytes or the new ones. (The ``atomicwrites`` package that
used to do this is archived by its author; this is the same dozen lines.)
``write_new_files`` is the batch form for files that did not exist (a compaction pass's new
notes): every file written to its temporary name, then synced, then renamed, so each ends
up whole or absent with one pass over the disk instead of one per file.
``durable_append`` is the append-only counterpart used by the daily logs; its two
halves (:func:`start_append`, :meth:`Append.sync`) let a writer do other work while
the disk syncs (:func:`sync_in_background`).
"""

from __future__ import annotations

import itertools
import os
import queue
import threading
from collections.abc import Sequence
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


def atomic_write(path: Path, data: bytes, *, skip_if_same: bool = True, sync_dir: bool = True,
                 durable: bool = True) -> bool:
    """Write ``data`` to ``path`` atomically; returns False when nothing had to change.

    ``skip_if_same`` keeps git diffs honest: a write that changes nothing does not
    touch the file (or its mtime) at all. ``sync_dir=False`` leaves the folder's
    fsync (what makes the rename durable) to the caller, who writes many files
    into it and syncs it once (:func:`fsync_dir`). ``durable=False`` syncs neither the
    file nor the folder: for a cache that a crash may lose or cut short (still never
    seen half-written by another process, the rename is atomic).
    """
    if skip_if_same:
        try:
            if path.lstat().st_size == len(data) and read_file(path) == data:
                return False
        except OSError:
            pass
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _new_temp(path.parent)
    try:
        # The temporary file is 0600; a note should read like any other file (or keep its mode).
        try:
            st = path.lstat()
            mode = st.st_mode & 0o777 if not os.path.islink(path) else 0o644
        except FileNotFoundError:
            mode = 0o644
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    if sync_dir and durable:
        fsync_dir(path.parent)
    return True


#: Files of :func:`write_new_files` open at once (written, waiting for their fsync): far under any
#: descriptor limit, and enough that the disk sees them together.
OPEN_AT_ONCE = 64
#: Distinguishes the temporary names of :func:`atomic_write` and :func:`write_new_files` within a process (with the pid across
#: processes): no random name to draw per file, and ``O_EXCL`` still refuses a name taken.
_temp_serial = itertools.count()
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _new_temp(folder: Path) -> tuple[int, str]:
    """A new temporary file in ``folder`` (0600 until the caller sets its mode): its descriptor and name."""
    while True:
        tmp = os.path.join(folder, f"{TEMP_PREFIX}{os.getpid()}-{next(_temp_serial)}")
        try:
            return os.open(tmp, _NEW_FILE, 0o600), tmp
        except FileExistsError:  # left by a crashed process that had our pid: the next name
            continue


def write_new_files(files: Sequence[tuple[Path, bytes]], *, sync_dir: bool = True) -> list[tuple[int, int]]:
    """Write each ``(path, data)`` as a new file, crash-safe; returns each file's ``(size, mtime_ns)``.

    For files the caller found absent (no ``skip_if_same``, mode 0644 as :func:`atomic_write` gives a
    new file). Each is written under a temporary name in its own folder, then all are fsynced, then
    renamed over their paths in order: after a crash each path holds the whole file or nothing (a
    temporary file may be left, which ``doctor --fix`` removes). ``(size, mtime_ns)`` are read from
    the written descriptor (``fstat``), which a rename does not change: no ``stat`` after the write.
    ``sync_dir=False`` leaves the folders' fsync to the caller (see :func:`atomic_write`). On an
    error the files not renamed yet are removed and the error raised; the renamed ones stay.
    """
    stamps: list[tuple[int, int]] = []
    temps: list[tuple[str, Path]] = []
    renamed = 0
    try:
        for start in range(0, len(files), OPEN_AT_ONCE):
            fds: list[int] = []
            try:
                for path, data in files[start : start + OPEN_AT_ONCE]:
                    fd, tmp = _new_temp(path.parent)
                    fds.append(fd)
                    temps.append((tmp, path))
                    os.fchmod(fd, 0o644)  # the umask does not decide a note's mode (as atomic_write)
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view):]
                    st = os.fstat(fd)
                    stamps.append((st.st_size, st.st_mtime_ns))
                for fd in fds:
                    os.fsync(fd)  # after all the writes: the disk is asked once the batch is in memory
            finally:
                for fd in fds:
                    os.close(fd)
        for tmp, path in temps:
            os.replace(tmp, path)
            renamed += 1
    except BaseException:
        for tmp, _path in temps[renamed:]:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        raise
    if sync_dir:
        for folder in sorted({path.parent for path, _data in files}):
            fsync_dir(folder)
    return stamps


NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def durable_append(path: Path, data: bytes, *, line_start: bool = False, clean_end: int | None = None) -> int:
    """Append ``data`` to ``path`` in one write and fsync it; returns the offset ``data`` starts at.

    All or nothing: when the write or the sync fails (a full disk), the bytes
    already written are cut off again before the error is raised. The final
    component is never followed if it is a symlink (``O_NOFOLLOW``). The folder
    is fsynced only when this call created the file (what makes a new name
    durable); appending to an existing file costs one ``fdatasync`` and nothing else.
    ``line_start``: ``data`` must start a line (a newline is written first when the file
    does not end with one). ``clean_end``: a size at which the caller knows the file ends a
    line (its own last append ended there): while the file has that size, nothing is read.
    """
    append = start_append(path, data, line_start=line_start, clean_end=clean_end)
    append.sync()
    return append.offset


class Append:
    """Bytes appended to a file and not yet durable: :meth:`sync` makes them durable or cuts them off.

    Owns the file's descriptor until :meth:`sync` returns (or raises). ``start`` is the file's
    size before the append (where a failure cuts it back to), ``offset`` where the data starts.
    """

    __slots__ = ("path", "fd", "start", "offset", "created")

    def __init__(self, path: Path, fd: int, start: int, offset: int, created: bool) -> None:
        self.path, self.fd, self.start, self.offset, self.created = path, fd, start, offset, created

    def sync(self) -> None:
        """``fdatasync`` the file (and its folder when the append created it); on failure cut the
        appended bytes off again and raise. Releases the GIL while the disk works."""
        self.finish(self.datasync())

    def datasync(self) -> BaseException | None:
        """The ``fdatasync`` alone; returns what it raised. All a sync thread does with the file: the
        rest (:meth:`finish`) runs in the waiting thread, so the sync thread, back from the disk,
        holds the GIL for as few bytecodes as possible (each time it takes it, it takes it from
        the caller, who is writing the catalog's rows)."""
        try:
            os.fdatasync(self.fd) if hasattr(os, "fdatasync") else os.fsync(self.fd)
        except BaseException as exc:
            return exc
        return None

    def finish(self, error: BaseException | None) -> None:
        """After :meth:`datasync`: cut the bytes off again if it failed, close the file, make a new
        file's name durable; raise ``error`` (or what making the name durable raised)."""
        try:
            if error is not None:
                _cut(self.fd, self.start)
                raise error
        finally:
            os.close(self.fd)
        if self.created:
            fsync_dir(self.path.parent)


def _cut(fd: int, size: int) -> None:
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    except OSError:
        pass


def start_append(path: Path, data: bytes, *, line_start: bool = False, clean_end: int | None = None) -> Append:
    """The write half of :func:`durable_append`: ``data`` appended in one write, not yet synced.

    A failed write is cut off again before the error is raised (the descriptor closed).
    ``line_start``, ``clean_end``: see :func:`durable_append`.
    """
    flags = (os.O_RDWR if line_start else os.O_WRONLY) | os.O_APPEND | NOFOLLOW
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
        start = offset = os.lseek(fd, 0, os.SEEK_END)
        if line_start and start and start != clean_end and os.pread(fd, 1, start - 1) != b"\n":
            # a file cut short or edited by hand: an entry glued to its last line would not be read back
            data, offset = b"\n" + data, start + 1
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
        except BaseException:
            _cut(fd, start)
            raise
    except BaseException:
        os.close(fd)
        raise
    return Append(path, fd, start, offset, created)


class PendingSync:
    """An :meth:`Append.datasync` running on the sync thread; :meth:`wait` returns once it is done
    and the append is finished (:meth:`Append.finish`, in the waiting thread)."""

    __slots__ = ("append", "error", "started", "_done", "_finished")

    def __init__(self, append: Append) -> None:
        self.append = append
        self.error: BaseException | None = None
        self.started = threading.Lock()
        self.started.acquire()  # released by the sync thread just before it syncs
        self._done = threading.Lock()
        self._done.acquire()  # released by the sync thread
        self._finished = False

    def run(self) -> None:
        try:
            self.started.release()
            self.error = self.append.datasync()
        finally:
            self._done.release()

    def wait(self) -> None:
        """Block until the data is durable; raise what the sync raised (each time it is asked)."""
        if not self._finished:
            self._done.acquire()
            self._finished = True
            try:
                self.append.finish(self.error)
            except BaseException as exc:
                self.error = exc
        if self.error is not None:
            raise self.error


class _SyncThread:
    """One long-lived thread per process running the syncs handed to it, in order."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[PendingSync] = queue.SimpleQueue()
        threading.Thread(target=self._run, name="vaultlcm-fdatasync", daemon=True).start()

    def _run(self) -> None:
        while True:
            self.jobs.get().run()


_sync_thread: _SyncThread | None = None
_sync_thread_lock = threading.Lock()


def _forget_sync_thread() -> None:
    global _sync_thread, _sync_thread_lock
    _sync_thread, _sync_thread_lock = None, threading.Lock()  # a forked child has no such thread


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_sync_thread)


def sync_in_background(append: Append) -> PendingSync:
    """Start making ``append`` durable on the sync thread while the caller goes on (``fdatasync``
    waits for the disk, not for the CPU); the caller must :meth:`PendingSync.wait` before it
    acknowledges the write."""
    global _sync_thread
    job = PendingSync(append)
    thread = _sync_thread
    if thread is None:
        with _sync_thread_lock:
            if _sync_thread is None:
                try:
                    _sync_thread = _SyncThread()
                except RuntimeError:  # no thread can be started (a process at its limit): sync right here
                    job.run()
                    return job
            thread = _sync_thread
    thread.jobs.put(job)
    # Wait (the GIL released) until the sync thread runs: it needs the GIL to start the syscall, and
    # while the caller works it would get it only at the caller's next blocking call, often the
    # final wait, and the sync would not overlap anything (measured: the wait was 60-95% of the
    # sync's time without this, 25-45% with it).
    job.started.acquire()
    return job


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
