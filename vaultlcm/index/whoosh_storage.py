"""Whoosh's file storage, reading a segment's files through a map of the file instead of a copy of it.

Whoosh maps a segment's compound file (``.seg``) and then opens each file inside it
(postings, terms, columns) as a ``BufferFile``, whose constructor makes a ``BytesIO``
of the file's bytes: a **copy of every file of every segment** in the process's own
memory, made each time a searcher opens. At 1M messages that is 1.2 GB of anonymous
memory plus 1.2 GB of the file's pages touched by the copy, and about 1.5 s, in every
process that opens the index and again at each refresh after a commit.

:class:`MappedStorage` says it cannot map (``supports_mmap = False``), so Whoosh asks
the file this storage opened for each part (``subset``); that file is a map of the whole
``.seg`` and each part a window on it: reading copies only the bytes read, and the
kernel's page cache holds the rest, shared by every process and reclaimable.

Whoosh reads a part through ``get(position, length)`` (postings, terms, columns) and
through ``seek`` with ``read``/``read_pickle`` (block headers): :class:`_Window` is the
file object behind both, with no copy of more than what is asked.
"""

from __future__ import annotations

import mmap
import os
import pickle
from io import BytesIO
from typing import Any

from whoosh.filedb.filestore import FileStorage
from whoosh.filedb.structfile import BufferFile, StructFile


#: The files read through maps: a segment's compound file (Whoosh's ``Segment.COMPOUND_EXT``).
SEGMENT_SUFFIX = ".seg"
#: Bytes sliced for a pickle read at once (a posting block's header takes 40-80).
_HEAD = 512


class _Window:
    """A read-only file object over ``[start, end)`` of a map; reads copy only what they return."""

    __slots__ = ("_map", "_start", "_end", "_pos")

    def __init__(self, source: mmap.mmap | bytes, start: int, end: int) -> None:
        self._map, self._start, self._end, self._pos = source, start, end, start

    def read(self, n: int | None = -1) -> bytes:
        pos = self._pos
        end = self._end if n is None or n < 0 else min(pos + n, self._end)
        if end <= pos:
            return b""
        self._pos = end
        return self._map[pos:end]

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(memoryview(buffer)))
        memoryview(buffer).cast("B")[: len(data)] = data
        return len(data)

    def readline(self, limit: int | None = -1) -> bytes:
        pos = self._pos
        stop = self._end if limit is None or limit < 0 else min(pos + limit, self._end)
        nl = self._map.find(b"\n", pos, stop)
        return self.read((nl + 1 if nl >= 0 else stop) - pos)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: self._start, os.SEEK_CUR: self._pos, os.SEEK_END: self._end}[whence]
        self._pos = max(self._start, base + offset)
        return self._pos - self._start

    def tell(self) -> int:
        return self._pos - self._start

    def __iter__(self) -> Any:
        return iter(self.readline, b"")

    def close(self) -> None:
        """Nothing to release: the map belongs to the file that made the window (see :class:`_MappedFile`)."""


class _MappedFile(BufferFile):
    """Whoosh's :class:`BufferFile` over a window of a map, without its copy; ``subset`` gives a window
    of the same map."""

    def __init__(self, source: mmap.mmap | bytes, start: int, end: int, name: str | None = None,
                 owner: bool = False) -> None:
        window = _Window(source, start, end)
        StructFile.__init__(self, window, name=name)  # not BufferFile's: it copies
        self._map, self._start, self._end, self._owner = source, start, end, owner
        # A posting block's header is read by seek, read and tell: straight to the window, no wrapper.
        self.seek, self.read, self.tell = window.seek, window.read, window.tell  # type: ignore[method-assign]

    def read_pickle(self) -> Any:
        """The pickle at the position, unpickled from a slice of the map (a block header is a few
        dozen bytes; a longer one is read through the window)."""
        window = self.file
        pos = window._pos
        head = BytesIO(self._map[pos : min(pos + _HEAD, self._end)])
        try:
            obj = pickle.load(head)
        except Exception:  # longer than the slice (or damaged: then the window's read says so)
            return pickle.load(window)
        window._pos = pos + head.tell()
        return obj

    def get(self, position: int, length: int) -> bytes:
        start = self._start + position
        return self._map[start : min(start + length, self._end)]

    def subset(self, position: int, length: int, name: str | None = None) -> "_MappedFile":
        start = self._start + position
        return _MappedFile(self._map, start, min(start + length, self._end), name=name or self._name)

    def close(self) -> None:
        super().close()
        if self._owner and isinstance(self._map, mmap.mmap):
            # Whoosh closes a segment's file when its reader closes (never before its parts'
            # last use, as with its unmapped files); reads copy out, so nothing still points in.
            self._map.close()


class MappedStorage(FileStorage):
    """:class:`FileStorage` whose opened files are maps, and their parts windows on them (see the module)."""

    def __init__(self, path: str, readonly: bool = False) -> None:
        super().__init__(path, supports_mmap=False, readonly=readonly)

    def open_file(self, name: str, **kwargs: Any) -> StructFile:
        if not name.endswith(SEGMENT_SUFFIX):
            # The table of contents (read once), and a new segment's own files, which the writer only
            # copies into its compound file: read through a map, the copy would count every page
            # in the writer's resident set (650 MB per worker at the end of a 1M rebuild).
            return super().open_file(name, **kwargs)
        with open(self._fpath(name), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            # An empty file cannot be mapped; its bytes serve the same way (slices, find).
            source = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        return _MappedFile(source, 0, size, name=name, owner=True)


def create_in(path: str, schema: Any) -> Any:
    """A new, empty index in ``path`` (made if missing) on :class:`MappedStorage`."""
    return MappedStorage(path).create().create_index(schema)


def open_dir(path: str) -> Any:
    """The index in ``path`` on :class:`MappedStorage`."""
    return MappedStorage(path).open_index()
