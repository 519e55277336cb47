"""What a Whoosh segment writer holds in memory: its term table's entries, and a rebuild's external sort.

**The term table.** Whoosh's writer keeps an entry for every term of the segment it writes,
(hash, position) as a tuple in a list, 128 bytes each measured, until the segment ends: a 1M
rebuild's workers write about 1.45M terms each (a document's id is a term).
:func:`compact_term_table` keeps them as two 64-bit words in an array (21 bytes an entry
measured, with the writer's index of positions); the file written is the same. A 1M rebuild's
workers peaked at 140 MB each instead of about 225.

**The external sort.**

Whoosh's segment writer gathers postings in a pool; when the pool's estimate passes
``limitmb`` it sorts them and writes them to a run file, and at the segment's end it
merges the runs. It opens at most 128 runs at once: past that it first merges 128 runs
into one run, another pass over most of the postings through ``pickle`` (about a tenth
of a 100k rebuild's wall time, measured with a pool that made 220 runs a worker).

A small pool costs a rebuild nothing else: at 100k messages, 6 MB a worker (74 runs
each) took 60.2 s and 64 MB (7 runs) 59.9 s, and the processes' peak fell from 355 MB to
236 MB. So the pool is kept small and the merge made wide: :func:`wide_merges` lets every
writer made under it (in the worker processes it forks too) merge up to
:func:`runs_merged_at_once` runs in one pass.
"""

from __future__ import annotations

import contextlib
from array import array
from collections.abc import Iterator
from typing import Any

import whoosh.writing
from whoosh.writing import PostingPool

#: MB of postings (by Whoosh's estimate) a rebuild sorts in memory before it writes a run file, shared by
#: its worker processes; a worker's resident set grows by about as much as its share. At 100k messages a
#: share of 24 MB makes 18-19 runs a worker: one merge pass up to about 1.4M messages under an open-file
#: limit of 1,024, 5.5M under 4,096 (see :func:`runs_merged_at_once`).
POOL_MB = 48
#: Whoosh's own limit on the runs merged at once.
WHOOSH_RUNS = 128
#: The most runs merged at once, whatever the open-file limit (each holds a file and its read buffer).
MAX_RUNS = 1024


def runs_merged_at_once() -> int:
    """How many run files a writer may merge at once: a quarter of the process's soft limit on open
    files (two workers merge at the same time, each with other files open), never fewer than Whoosh's
    own 128 nor more than :data:`MAX_RUNS`."""
    try:
        import resource
    except ImportError:  # Windows: no such limit to read
        return WHOOSH_RUNS
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_RUNS
    return max(WHOOSH_RUNS, min(MAX_RUNS, soft // 4))


class WidePostingPool(PostingPool):  # type: ignore[misc]
    """Whoosh's posting pool, merging up to :attr:`maxfiles` run files in its final pass."""

    maxfiles = WHOOSH_RUNS

    def iter_postings(self) -> Any:
        return self.items(maxfiles=self.maxfiles)


@contextlib.contextmanager
def wide_merges() -> Iterator[None]:
    """While inside, each Whoosh segment writer made in this process, and in the processes it forks,
    merges up to :func:`runs_merged_at_once` run files at once.

    Whoosh's writer makes its pool from the module's ``PostingPool`` by name and offers no other way to
    pass the limit; the swap lasts only as long as the block (a rebuild, which holds the index's writer
    lock). Worker processes started by ``spawn`` rather than ``fork`` import Whoosh afresh and merge
    128 at a time, as Whoosh does: slower past 128 runs, never wrong.
    """
    saved = whoosh.writing.PostingPool
    WidePostingPool.maxfiles = runs_merged_at_once()
    whoosh.writing.PostingPool = WidePostingPool
    try:
        yield
    finally:
        whoosh.writing.PostingPool = saved


class PairBucket:
    """One of the 256 buckets of Whoosh's hash-table writer: its (hash, position) pairs in one array of
    unsigned 64-bit words (a 32-bit hash, a file position), 16 bytes a pair. Whoosh's writer appends a pair,
    and at the end asks for the number of pairs and iterates them; it does nothing else with a bucket."""

    __slots__ = ("_words",)

    def __init__(self) -> None:
        self._words = array("Q")

    def append(self, pair: tuple[int, int]) -> None:
        self._words.extend(pair)

    def __len__(self) -> int:
        return len(self._words) // 2

    def __iter__(self) -> Iterator[tuple[int, int]]:
        words = self._words
        return zip(words[0::2], words[1::2])


def compact_term_table(field_writer: Any) -> Any:
    """``field_writer`` (Whoosh's, new: no term written yet) with its term table's buckets made
    :class:`PairBucket`; the same file is written."""
    table = field_writer._tindex
    if any(len(b) for b in table.buckets):
        raise RuntimeError("the term table already holds terms")  # a bucket's pairs would be lost
    table.buckets = [PairBucket() for _ in table.buckets]
    return field_writer

