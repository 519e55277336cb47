"""Whoosh's postings blocks as arrays: a block's ids and weights read without its positions, and no pickle.

Whoosh 3 writes each block of up to 128 postings as one zlib-compressed pickle
of ``(ids, weights, values)``: to know which documents hold a word, a reader
decompresses and unpickles the positions too (a bytes object per posting), then
undoes the ids' deltas one Python step at a time. At a million messages a
common word has 5,000 blocks, and that read was most of a grep's time.

:class:`ArrayBlockCodec` writes a block's data as two zlib streams instead:

* the *head*: the ids' deltas as unsigned 32-bit integers (little-endian), then
  one byte saying how the weights follow -- ``0`` every weight is 1.0 (nothing
  follows), ``1`` all share one weight (one 32-bit float), ``2`` one 32-bit float
  per posting (Whoosh keeps weights as 32-bit floats: the same numbers);
* the *values* (a word's encoded positions), present only when the field's
  values are not empty: for values of varying size, each one's length as an
  unsigned 32-bit integer after their number (Whoosh keeps only the values
  that are not empty), then the values one after the other; for values of a
  fixed size, the values alone.

The block's data starts with the two streams' compressed sizes (two unsigned
32-bit integers, little-endian); the block length and the pickled block info
before it are Whoosh's own, so skipping blocks works as before. Reading a
block's ids decompresses the head alone (C loops: ``frombytes`` and
``accumulate``); the values stream is decompressed when something asks for
positions.

Segments keep the codec that wrote them (the table of contents stores it), so an
index written by :class:`~vaultlcm.index.whoosh_backend.SecureIdCodec` (Whoosh's
pickled blocks) is read as before, and its segments take this format when they
are merged or rebuilt. Term vectors (ids that are bytes) stay in Whoosh's format.
"""

from __future__ import annotations

import struct
import sys
import zlib
from array import array
from itertools import accumulate, chain
from operator import sub
from typing import Any

from whoosh.codec.whoosh3 import WHOOSH3_HEADER_MAGIC, W3LeafMatcher, W3PostingsWriter
from whoosh.compat import dumps
from whoosh.matching import ListMatcher
from whoosh.system import emptybytes
from whoosh.util.numeric import length_to_byte

#: The two streams' compressed sizes at the start of a block's data.
_SIZES = struct.Struct("<II")
#: The array type code of unsigned 32-bit integers ("I" on every common platform; C leaves it open).
_U32 = next(code for code in "IL" if array(code).itemsize == 4)
_ALL_ONE, _ONE_WEIGHT, _WEIGHTS = 0, 1, 2
_FLOAT = struct.Struct("<f")


def _le(a: array) -> array:  # type: ignore[type-arg]
    """``a`` in little-endian order (the format's), in place."""
    if sys.byteorder != "little":
        a.byteswap()
    return a


def _compress(data: bytes, level: int) -> bytes:
    """``data`` as a zlib stream with an 8 KB window: a block is a few KB at most, and ``zlib.compress``'s
    default 32 KB window and hash tables cost more to set up than a small block takes to compress
    (34 us against 2 for 40 bytes). Any zlib reader decompresses it."""
    packer = zlib.compressobj(level, zlib.DEFLATED, 13, 4)
    return packer.compress(data) + packer.flush()


def encode_block(ids: Any, weights: Any, values: list[bytes] | None, fixedsize: int | None,
                 level: int) -> bytes:
    """A block's data: ``ids`` ascending document numbers, ``weights`` one float each, ``values``
    each posting's encoded value (None: the field stores none); ``fixedsize`` as Whoosh's
    ``Format.fixed_value_size()``."""
    deltas = array(_U32, map(sub, ids, chain((0,), ids)))  # each id less the one before (the first less 0)
    head = _le(deltas).tobytes()
    first, n = weights[0], len(weights)
    if weights.count(1.0) == n:  # (== as Whoosh compares them, in a C loop)
        head += bytes([_ALL_ONE])
    elif weights.count(first) == n:
        head += bytes([_ONE_WEIGHT]) + _FLOAT.pack(first)
    else:
        head += bytes([_WEIGHTS]) + _le(array("f", weights)).tobytes()
    tail = b""
    if values and fixedsize != 0:
        joined = emptybytes.join(values)
        if fixedsize is None or fixedsize < 0:
            # Whoosh keeps only the values that are not empty: their number, then their lengths.
            joined = _le(array(_U32, [len(values), *map(len, values)])).tobytes() + joined
        tail = _compress(joined, level)
    head = _compress(head, level)
    return _SIZES.pack(len(head), len(tail)) + head + tail


def decode_head(data: bytes, count: int) -> tuple[tuple[int, ...], Any]:
    """The ids (a tuple) and the weights (None: all 1.0; a float: all that; else an ``array("f")``) of
    a block of ``count`` postings whose data is ``data``."""
    n_head, _n_tail = _SIZES.unpack_from(data)
    head = zlib.decompress(data[_SIZES.size : _SIZES.size + n_head])
    deltas = _le(array(_U32, head[: 4 * count]))
    kind = head[4 * count]
    weights: Any = None
    if kind == _ONE_WEIGHT:
        weights = _FLOAT.unpack_from(head, 4 * count + 1)[0]
    elif kind == _WEIGHTS:
        weights = _le(array("f", head[4 * count + 1 :]))
    return tuple(accumulate(deltas)), weights


def decode_values(data: bytes, count: int, fixedsize: int | None) -> tuple[Any, ...]:
    """The values of a block of ``count`` postings whose data is ``data``, as Whoosh's reader gives them."""
    if fixedsize == 0:
        return (None,) * count
    n_head, n_tail = _SIZES.unpack_from(data)
    if not n_tail:
        return ()
    start = _SIZES.size + n_head
    joined = zlib.decompress(data[start : start + n_tail])
    if fixedsize is not None and fixedsize > 0:
        return tuple(joined[i : i + fixedsize] for i in range(0, len(joined), fixedsize))
    n = int.from_bytes(joined[:4], "little")
    ends = list(accumulate(_le(array(_U32, joined[4 : 4 + 4 * n])), initial=4 + 4 * n))
    return tuple(joined[a:b] for a, b in zip(ends, ends[1:]))


def block_weights(stored: Any, count: int) -> Any:
    """The weights of a block of ``count`` postings from what its data stores (in this format and in
    Whoosh's): None is every weight 1.0, a float every weight that, anything else the weights themselves."""
    if stored is None or isinstance(stored, float):
        return array("f", [1.0 if stored is None else stored]) * count
    return stored


class ArrayPostingsWriter(W3PostingsWriter):  # type: ignore[misc]
    """Whoosh's postings writer with each block's data in the format above (ids that are numbers)."""

    def _write_block(self, last: bool = False) -> None:
        # Whoosh's own steps (see W3PostingsWriter._write_block), the data encoded as above.
        if not self._blockcount:
            self._postfile.write(WHOOSH3_HEADER_MAGIC)
        self._terminfo.add_block(self)
        ids = self._ids
        databytes = encode_block(ids, self._weights, self._values, self._format.fixed_value_size(),
                                 self._compression)
        infobytes = dumps((len(ids), ids[-1], self._maxweight, self._compression,
                           length_to_byte(self._minlength), length_to_byte(self._maxlength)), 2)
        length = len(infobytes) + len(databytes)
        self._postfile.write_int(-length if last else length)
        self._postfile.write(infobytes)
        self._postfile.write(databytes)
        self._blockcount += 1
        self._new_block()


class ArrayLeafMatcher(W3LeafMatcher):  # type: ignore[misc]
    """Whoosh's block matcher reading blocks in the format above: the head when ids or weights are
    asked for, the values stream when values are."""

    def _read_data(self) -> None:
        raw = self._postfile.get(self._dataoffset, self._nextoffset - self._dataoffset)
        ids, weights = decode_head(raw, self._blocklength)
        # (ids, weights, the raw data for the values): what whoosh_postings reads of ``_data``.
        self._data = (ids, weights, raw)

    def _read_ids(self) -> None:
        if self._data is None:
            self._read_data()
        self._ids = self._data[0]

    def _read_weights(self) -> None:
        if self._data is None:
            self._read_data()
        self._weights = block_weights(self._data[1], self._blocklength)

    def _read_values(self) -> None:
        if self._data is None:
            self._read_data()
        self._values = decode_values(self._data[2], self._blocklength, self._fixedsize)


class ArrayBlocks:
    """The postings half of :class:`~vaultlcm.index.whoosh_backend.ArrayBlockCodec` (a mixin of a W3Codec)."""

    _blocklimit: int
    _compression: int
    _inlinelimit: int

    def postings_writer(self, dbfile: Any, byteids: bool = False) -> Any:
        if byteids:  # term vectors: Whoosh's own blocks
            return super().postings_writer(dbfile, byteids)  # type: ignore[misc]
        return ArrayPostingsWriter(dbfile, blocklimit=self._blocklimit, byteids=False,
                                   compression=self._compression, inlinelimit=self._inlinelimit)

    def postings_reader(self, dbfile: Any, terminfo: Any, format_: Any, term: Any = None, scorer: Any = None) -> Any:
        if terminfo.is_inlined():  # a term of one posting lives in its term info, as in Whoosh
            ids, weights, values = terminfo.inlined_postings()
            return ListMatcher(ids, weights, values, format_, scorer=scorer, term=term, terminfo=terminfo)
        offset, length = terminfo.extent()
        return ArrayLeafMatcher(dbfile, offset, length, format_, term=term, scorer=scorer)
