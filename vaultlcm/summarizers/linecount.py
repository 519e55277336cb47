"""Token counts of multi-line texts, summed from their lines' remembered counts.

A digest sizes the note it is building again and again (each candidate body,
the source of every node, a child's body when its parent is built); each of
those texts is new, but its lines are not. :func:`count_by_lines` cuts a text
where the ``cl100k_base`` pre-tokenizer always cuts, counts each piece (short
pieces are remembered by :func:`count_piece`, long ones by the shared cache of
:func:`~vaultlcm.tokens.count_tokens`) and adds the counts up: the same number as counting the whole text, for any text.

Why the cut is exact: tiktoken splits text into pieces with one regular
expression (no look-behind) and merges tokens only inside a piece. At a
position ``p`` just after a ``\\n`` whose next character is printable ASCII and
not a space, every branch of that expression ends the piece that holds the
newline at ``p`` (a run of white space ending in a newline is one piece,
``[\\r\\n]*`` and letters stop at the next character, ``\\s++$`` takes the same
run that ``\\s*[\\r\\n]`` takes when text follows) and starts the next piece at
``p`` exactly (no branch lets a piece begin with a newline and go on with
something else). So the pieces of the text are the pieces of its parts, and
so are the tokens. ``tests/test_digest_speed.py`` checks it on any text.

The pieces themselves (a note's lines, a unit's sentence, a clause) are asked
for many times while a digest packs a note: :func:`count_piece` remembers the
short ones by their text, a dict lookup where the shared cache of
:func:`~vaultlcm.tokens.count_tokens` would hash every byte of the text first.
"""

from __future__ import annotations

import re

from ..memo import Generations
from ..tokens import count_tokens, count_tokens_unshared, encoding

#: A newline followed by a printable, non-space ASCII character: the pre-tokenizer always cuts after it.
_SEAM = re.compile(r"\n(?=[!-~])")
#: Pieces up to this many characters are remembered by :func:`count_piece` (a bullet line, a sentence).
PIECE_MAX_CHARS = 512
#: Pieces remembered per generation: the newest ones, and the generation before (a few megabytes at most).
PIECE_MEMO_SIZE = 1 << 13
_PIECES: Generations[str, int] = Generations(PIECE_MEMO_SIZE)


def count_piece(text: str) -> int:
    """``count_tokens(text)``, remembered by the text itself when it is short (see the module docstring).

    Two generations: when the young one is full it becomes the old one and the one before
    is dropped, and a piece found in the old one moves back to the young; so what was
    asked for lately stays (a leaf's lines, when the node above it is sized), and the
    memo stays bounded in a process that runs for months.
    """
    hit = _PIECES.young.get(text)
    if hit is not None:
        return hit
    hit = _PIECES.old.get(text)
    if hit is None:
        if len(text) > PIECE_MAX_CHARS:
            return count_tokens(text)  # not remembered here: the shared cache keeps it
        hit = count_tokens_unshared(text)  # remembered below: hashing it for the shared cache buys nothing
    _PIECES.keep(text, hit)
    return hit


def count_by_lines(text: str) -> int:
    """``count_tokens(text)``, summed over the parts of ``text`` between its safe cuts (see the module docstring)."""
    if "\n" not in text:
        return count_piece(text)
    *parts, last = _SEAM.split(text)  # each cut takes its newline away: it goes back on the part before
    return sum(count_piece(part + "\n") for part in parts) + count_piece(last)


def count_mostly_known(text: str) -> int:
    """``count_tokens(text)``, by its pieces when most of the text is in remembered pieces, else whole.

    For a text that wraps lines counted before (a note this process just wrote, rendered
    for a context: its lines were sized while it was packed), only the new pieces are
    tokenized; a text that is new throughout is counted in one call, the cheapest way.
    Exact either way (see the module docstring).

    The new pieces (a block's header, its last line) go to the table directly, not through
    a :func:`~vaultlcm.tokens.remembering` block's store: asking the store for each would
    cost a query apiece, and pieces are remembered only where this process sized notes itself
    (with the table loaded).
    """
    if "\n" not in text:
        return count_piece(text)
    *parts, last = _SEAM.split(text)
    pieces = [part + "\n" for part in parts]
    pieces.append(last)
    new = sum(len(p) for p in pieces if p not in _PIECES)
    if 2 * new > len(text):
        return count_tokens(text)
    enc = encoding()
    return sum(count_piece(p) if p in _PIECES else len(enc.encode(p, disallowed_special=()))
               for p in pieces)
