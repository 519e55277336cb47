"""Handing the memory the C allocator keeps after frees back to the system.

glibc keeps a heap (an arena) per thread that allocates and keeps in each what was
freed, for reuse; a long-running engine (its compaction thread, the index writer's,
the catalog's checkpointer) and a reindex's index builder (tantivy's writer frees its
buffers after each segment) would otherwise hold the sum of every heap's high-water
mark. Other C libraries return memory by themselves, or not at all: there the call
does nothing.
"""

from __future__ import annotations

import functools
from typing import Any


@functools.lru_cache(maxsize=1)
def _malloc_trim() -> Any:
    """glibc's ``malloc_trim``, or None where the C library has none."""
    import ctypes
    import ctypes.util

    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


def release_free_memory() -> bool:
    """Give the C allocator's free pages back to the system; returns whether it could (glibc only).

    Memory in use is untouched; the call walks the heaps (a few milliseconds).
    """
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
