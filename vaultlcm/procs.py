"""Child processes that never outlive the command that started them.

The Whoosh backend starts helpers: its rebuild writer forks one process per
core, and segment merges run in a child process. If the command is killed
(SIGKILL leaves no chance to clean up), such a child would go on holding the
index's write lock, and every later ``grep`` would wait on it. On Linux each
child therefore asks the kernel to kill it when its parent dies
(``PR_SET_PDEATHSIG``), and exits at once if the parent is already gone.
Elsewhere this is a no-op (the index lock is still released when a process
exits).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int | None = None) -> None:
    """In a child process: be killed when the parent dies (Linux); exit now if it already has."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)  # the parent died before the request took effect


def bind_forked_children() -> None:
    """Make every ``multiprocessing`` child forked from now on die with this process."""
    import multiprocessing.util

    parent = os.getpid()
    multiprocessing.util.register_after_fork(_marker, lambda _obj: die_with_parent(parent))


class _Marker:
    pass


_marker = _Marker()
