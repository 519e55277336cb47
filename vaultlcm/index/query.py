"""The tokenizer and the backend-neutral query language of the search index.

Both backends tokenize with :func:`iter_tokens` and translate the same
:class:`ParsedQuery` (from :func:`parse_query`) into their native queries, so
they match exactly the same documents; :func:`make_snippet` cuts the text shown
with each hit.

Query language (identical on both backends, never raises on odd input)
------------------------------------------------------------------------
* ``deploy failed`` -- every word must match (AND), case-insensitive. A plain
  word also matches the other forms of the same English word (``pinned`` and
  ``pin``, ``retries`` and ``retry``, ``deploys`` and ``deployed``): words are
  stemmed with the Snowball English stemmer, the algorithm of Tantivy's
  ``en_stem`` tokenizer.
* With ``match="any"`` (see :class:`~vaultlcm.index.base.SearchIndex`), a
  document needs only one of the plain words, and is ranked by how many it has;
  identifiers, numbers and quoted phrases still must match (``commit fixed
  LEDG-482``: documents about LEDG-482, those with more of the words first).
* ``"disk is full"`` -- a quoted phrase: the words in this order, adjacent,
  exactly as written (no stemming: quotes are the way to ask for one form). An
  unterminated quote runs to the end of the query.
* ``deploy*`` -- prefix: ``deploy``, ``deployed``, ``deployment`` ...
  (``"open src/ap*"`` is a phrase whose last word is a prefix).
* Identifiers are first-class and never stemmed: ``LEDG-482``, ``src/app.py``,
  ``v2.14.1``, ``8443``, ``snake_case_name``, ``CamelCase``, ``call_0042``,
  ``user@example.com`` match as a whole, and their parts match too (``app``,
  ``snake``, ``camel``, ``case`` ...); ``compute_due_date`` does not match
  ``compute_due_dates``.
* Chinese, Japanese and Korean text is matched by characters: ``日本`` finds
  ``日本語のテキスト`` (a run of CJK characters is a phrase of single characters).
* Everything else is literal: ``foo(``, ``***``, ``a:b"c`` never raise; characters
  that are not letters or digits only separate words. A query with no word left
  (``***``, ``""``) matches nothing.

There are no operators (AND/OR/NOT are ordinary words) and no field syntax.

How text is tokenized (:func:`iter_tokens`): a *chunk* is a run of word
characters joined by ``- . / : @ \\`` (``src/app.py``); each CJK character is a
chunk of its own. Each chunk yields its *parts* (alphanumeric runs, further
split at camelCase boundaries) at consecutive positions, plus the lower-cased
whole chunk and each camelCase word as extra tokens at the position of their
first part. So a phrase of parts matches an identifier inside a longer one, and
a prefix of the whole (``src/ap*``) works. A part made of Latin letters whose
stem differs from it also yields :data:`STEM_MARK` + stem at its position
(``retries`` -> ``retries``, ``~retri``): stems live in their own namespace, so
they never make an exact token or an identifier match something it is not.
Tokens are cut at :data:`MAX_TOKEN_CHARS` characters on both sides.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import regex

MAX_TOKEN_CHARS = 64
SNIPPET_CHARS = 200
#: Prefix of stem tokens (never a word character, so no text token starts with it).
STEM_MARK = "~"

# ------------------------------------------------------------------------ analysis

# A chunk: word characters joined by identifier punctuation (src/app.py, m-3f2a). Compiled by the
# standard library's ``re``, about three times faster than ``regex`` here; it is only used on ASCII
# text, where both modules' ``\w`` is ``[A-Za-z0-9_]``.
_CHUNK = re.compile(r"\w+(?:[-./:@\\]\w+)*")
# The same, for text that may hold CJK: each CJK character is a chunk of its own,
# since those scripts do not separate words with spaces.
_CJK_SET = r"[\p{scx=Han}\p{scx=Hira}\p{scx=Kana}\p{scx=Hang}]"
_NON_CJK_WORD = rf"[\w--{_CJK_SET}]"
_CHUNK_CJK = regex.compile(rf"{_NON_CJK_WORD}+(?:[-./:@\\]{_NON_CJK_WORD}+)*|[\w&&{_CJK_SET}]", regex.V1)
# Parts of a chunk: alphanumeric runs ("_" and joiners separate them).
_PART = regex.compile(r"[^\W_]+")
# camelCase boundaries: fooBar -> foo|Bar, HTTPServer -> HTTP|Server.
_CAMEL = regex.compile(r"(?<=\p{Ll})(?=\p{Lu})|(?<=\p{Lu})(?=\p{Lu}\p{Ll})")
_SPACES = regex.compile(r"\s+")
_LATIN = regex.compile(r"\p{Latin}+")


#: Punctuation common in notes and agent text (dashes, arrows, quotes, bullets): none is a word
#: character (for ``re`` or ``regex``) or a joiner, so each separates chunks exactly as a space does.
_SEPARATORS = "–—…·•↗↘→←↑↓“”‘’«»×©®°±§¶†‡€£¥"
_NOT_PLAIN = re.compile(f"[^\x00-\x7f{_SEPARATORS}]")


def _chunk_pattern(text: str) -> Any:
    """The chunk pattern for ``text``: text that cannot hold CJK (ASCII, the common case, and text whose
    only other characters are the separators above) takes the cheaper one."""
    return _CHUNK if text.isascii() or _NOT_PLAIN.search(text) is None else _CHUNK_CJK


def _chunks(text: str) -> Iterator[Any]:
    return _chunk_pattern(text).finditer(text)


def _plain(word: str) -> bool:
    """True when a word needs no splitting (the common case, kept cheap)."""
    return word.isalnum() and (word.islower() or word.isupper() or word.istitle() or not _CAMEL.search(word))


def _subwords(part: str) -> list[str]:
    return [part] if _plain(part) else [s for s in _CAMEL.split(part) if s]


# -- stemming

_stemmers = threading.local()  # the stemmer objects are not thread-safe


@functools.lru_cache(maxsize=1)
def stemmer_name() -> str:
    """Which stemmer implementation and version stems words (part of the index's identity).

    An index records it; one built by another stemmer is rebuilt, since its stems
    could differ from the query's.
    """
    from importlib.metadata import PackageNotFoundError, version

    import snowballstemmer

    package = "PyStemmer" if type(snowballstemmer.stemmer("english")).__module__ == "Stemmer" else "snowballstemmer"
    try:
        return f"snowball-english ({package} {version(package)})"
    except PackageNotFoundError:
        return f"snowball-english ({package})"


def _stem_lower(word: str) -> str:
    st = getattr(_stemmers, "english", None)
    if st is None:
        import snowballstemmer  # uses the C PyStemmer when it is installed

        st = _stemmers.english = snowballstemmer.stemmer("english")
    return str(st.stemWord(word))


#: The tokenizer's caches (words' stems, chunks' tokens) are least-recently-used and small: agent text
#: repeats a vocabulary of a few thousand words, while its numbers, ids and paths are new with every
#: message and would fill a larger cache for months (about 600 bytes a chunk with its stems).
STEM_CACHE = 1 << 13
CHUNK_CACHE = 1 << 13


@functools.lru_cache(maxsize=STEM_CACHE)
def word_stem(word: str) -> str | None:
    """The English stem of a lower-cased word, or None for a word that is not stemmed.

    Only words of Latin letters are stemmed (English is the stemmer's language).
    """
    if not word.isalpha() or not (word.isascii() or _LATIN.fullmatch(word)):
        return None
    return _stem_lower(word)


@functools.lru_cache(maxsize=STEM_CACHE)  # one lookup per word on the indexing path
def stem_token(word: str) -> str | None:
    """The stem token a lower-cased text word yields, or None when it yields none.

    A word that is its own stem yields none: the word itself is enough.
    """
    stem = word_stem(word)
    return None if stem is None or stem == word else (STEM_MARK + stem)[:MAX_TOKEN_CHARS]


Tokens = tuple[tuple[str, int, int, int], ...]


def _chunk_tokens(chunk: str) -> tuple[Tokens, int]:
    """The tokens of one chunk, positions and offsets relative to it, and how many positions it takes."""
    cut = MAX_TOKEN_CHARS
    end = len(chunk)
    if _plain(chunk):  # fast path: an ordinary word
        low = chunk.lower()[:cut]
        stem = stem_token(low)
        return (((low, 0, 0, end),) if stem is None else ((low, 0, 0, end), (stem, 0, 0, end))), 1
    out: list[tuple[str, int, int, int]] = []
    pos = 0
    single_part = False
    for pm in _PART.finditer(chunk):
        part = pm.group()
        ps = pm.start()
        subs = _subwords(part)
        if len(subs) > 1:
            out.append((part.lower()[:cut], pos, ps, ps + len(part)))
        for sub in subs:
            low = sub.lower()[:cut]
            out.append((low, pos, ps, ps + len(sub)))
            stem = stem_token(low)
            if stem is not None:
                out.append((stem, pos, ps, ps + len(sub)))
            ps += len(sub)
            pos += 1
        single_part = len(part) == len(chunk)
    if not single_part:
        out.append((chunk.lower()[:cut], 0, 0, end))
    return tuple(out), pos


#: Chunks up to this long are remembered (agent text repeats its words and identifiers); a longer
#: one (a hash, a run of base64) rarely comes back and would only fill the cache.
CACHED_CHUNK_CHARS = 48
_cached_chunk_tokens = functools.lru_cache(maxsize=CHUNK_CACHE)(_chunk_tokens)


def iter_tokens(text: str) -> Iterator[tuple[str, int, int, int]]:
    """Yield ``(token, position, start_char, end_char)`` for ``text``.

    Parts advance the position; whole chunks, camelCase words and stems are
    extra tokens at the position of their part (see the module docstring).
    Per token text, positions never decrease (Whoosh needs that).
    """
    pos = 0
    for m in _chunks(text):
        start = m.start()
        chunk = m.group()
        tokens, width = _cached_chunk_tokens(chunk) if len(chunk) <= CACHED_CHUNK_CHARS else _chunk_tokens(chunk)
        for tok, p, s, e in tokens:
            yield tok, pos + p, start + s, start + e
        pos += width


def text_chunks(text: str) -> list[str]:
    """The chunks of ``text`` in order (see the module docstring): what :func:`iter_tokens` tokenizes."""
    return _chunk_pattern(text).findall(text)  # type: ignore[no-any-return]


def chunk_tokens(chunk: str) -> tuple[str, ...]:
    """The texts of the tokens one chunk yields (:func:`iter_tokens` of the chunk, without positions).

    A chunk's tokens depend on the chunk alone, so a caller scoring many lines can
    remember what each distinct chunk holds (agent text repeats its words).
    """
    tokens, _width = _cached_chunk_tokens(chunk) if len(chunk) <= CACHED_CHUNK_CHARS else _chunk_tokens(chunk)
    return tuple(t[0] for t in tokens)


class TokenMaker:
    """Builds a backend's token objects for texts, tokenized as :func:`index_terms` does, without the
    ``(token, position)`` pairs in between: what a bulk rebuild calls for every document.

    ``make(token, position, 0, 0)`` is called once per token (tantivy's ``Token``, whose last two
    arguments are character offsets, which the index does not keep); give it a type (a native
    class) rather than a Python function, which would cost a call frame a token. Each distinct short chunk's
    tokens are kept in plain dictionaries (most chunks are a word that yields one token, or a word
    and its stem), cleared whenever one holds :data:`CHUNK_CACHE` of them, so the memory stays
    bounded in a long rebuild.
    """

    def __init__(self, make: Callable[[str, int, int, int], Any]) -> None:
        self._make = make
        self._one: dict[str, str] = {}  # chunk -> its only token (one position)
        self._two: dict[str, tuple[str, str]] = {}  # chunk -> word and stem (one position)
        self._more: dict[str, tuple[Tokens, int]] = {}  # any other short chunk -> (tokens, width)

    def tokens(self, text: str) -> list[Any]:
        """``make(token, position, 0, 0)`` for every token of ``text``, in :func:`index_terms`'s order."""
        out: list[Any] = []
        add = out.append
        make = self._make
        one, two = self._one.get, self._two.get
        pos = 0
        for chunk in _chunk_pattern(text).findall(text):
            tok = one(chunk)
            if tok is not None:
                add(make(tok, pos, 0, 0))
                pos += 1
                continue
            pair = two(chunk)
            if pair is not None:
                add(make(pair[0], pos, 0, 0))
                add(make(pair[1], pos, 0, 0))
                pos += 1
                continue
            tokens, width = self._more.get(chunk) or self._learn(chunk)
            for t, p, _s, _e in tokens:
                add(make(t, pos + p, 0, 0))
            pos += width
        return out

    def _learn(self, chunk: str) -> tuple[Tokens, int]:
        tokens, width = _chunk_tokens(chunk)
        if len(chunk) <= CACHED_CHUNK_CHARS:
            if width == 1 and len(tokens) <= 2:
                table: dict[str, Any] = self._one if len(tokens) == 1 else self._two
                value: Any = tokens[0][0] if len(tokens) == 1 else (tokens[0][0], tokens[1][0])
            else:
                table, value = self._more, (tokens, width)
            if len(table) >= CHUNK_CACHE:
                table.clear()
            table[chunk] = value
        return tokens, width


def index_terms(text: str) -> list[tuple[str, int]]:
    """``(token, position)`` of every token of ``text``: :func:`iter_tokens` without the offsets.

    What the indexing path needs (neither backend keeps character offsets), at about
    half the cost: chunks come from ``findall`` (no match objects) and each chunk's
    tokens from a cache.
    """
    out: list[tuple[str, int]] = []
    add = out.append
    pos = 0
    for chunk in _chunk_pattern(text).findall(text):
        tokens, width = _cached_chunk_tokens(chunk) if len(chunk) <= CACHED_CHUNK_CHARS else _chunk_tokens(chunk)
        if width == 1 and len(tokens) == 1:
            add((tokens[0][0], pos))
        else:
            for tok, p, _s, _e in tokens:
                add((tok, pos + p))
        pos += width
    return out


# ----------------------------------------------------------------- query language


@dataclass(frozen=True)
class QTerm:
    """One token."""

    text: str


@dataclass(frozen=True)
class QPhrase:
    """Two or more tokens at consecutive positions."""

    words: tuple[str, ...]


@dataclass(frozen=True)
class QPrefix:
    """Any token starting with ``text``."""

    text: str


@dataclass(frozen=True)
class QPhrasePrefix:
    """A phrase whose last word is a prefix (two or more words)."""

    words: tuple[str, ...]


@dataclass(frozen=True)
class QAny:
    """At least one of the options (how an identifier matches whole or by parts)."""

    options: tuple["QNode", ...]


QNode = QTerm | QPhrase | QPrefix | QPhrasePrefix | QAny


@dataclass(frozen=True)
class ClauseMatch:
    """What one clause looks for in a text: tokens and token prefixes (for snippets and ``matched``)."""

    label: str  # the clause as the user wrote it
    terms: frozenset[str]
    prefixes: tuple[str, ...]
    #: Not a plain word: an identifier, a number, a "quoted phrase". Under ``match="any"`` it
    #: must still match (it names what the query is about); only plain words are optional.
    required: bool = False

    def holds(self, token: str) -> bool:
        """Whether a token of a text (see :func:`iter_tokens`) is one this clause looks for."""
        return token in self.terms or bool(self.prefixes and token.startswith(self.prefixes))


@dataclass(frozen=True)
class ParsedQuery:
    """A query in backend-neutral form: every clause must match (or, with ``match="any"``, one)."""

    clauses: tuple[QNode, ...]
    terms: frozenset[str]  # exact tokens (and stem tokens), for snippets
    prefixes: tuple[str, ...]  # prefixes, for snippets
    hints: tuple[str, ...] = ()  # text a stemmed word's forms share, for the snippet pre-scan
    parts: tuple[ClauseMatch, ...] = ()  # one per clause, in order


# A quoted phrase (closing quote optional) or a run of non-space, non-quote chars.
_QUERY_PART = regex.compile(r'"([^"]*)"?|([^\s"]+)')


def _stemmed_word(word: str, terms: set[str], hints: list[str]) -> QNode:
    """A plain word: itself, or any word with the same stem (see the module docstring).

    A text word that is its own stem has no stem token, so the bare stem is an
    option too (``pin`` in the text, ``pinned`` in the query).
    """
    bare = word_stem(word)
    if bare is None:
        return QTerm(word)
    stem = (STEM_MARK + bare)[:MAX_TOKEN_CHARS]
    terms.update((bare, stem))
    # Forms of a word nearly always share its stem but the last letter (happy/happi).
    hints.append(bare[:-1] if len(bare) > 3 else bare)
    return QAny(tuple(QTerm(t) for t in dict.fromkeys((word, bare, stem))))


def _word_clause(
    text: str, prefix: bool, quoted: bool, terms: set[str], prefixes: list[str], hints: list[str]
) -> QNode | None:
    cut = MAX_TOKEN_CHARS
    chunks = [m.group() for m in _chunks(text)]
    subs = [s.lower()[:cut] for c in chunks for p in _PART.findall(c) for s in _subwords(p)]
    if not subs:
        return None
    terms.update(subs[:-1] if prefix else subs)
    if prefix:
        prefixes.append(subs[-1])
    # The whole identifier as one token (only a bare single-chunk word has one).
    whole = chunks[0].lower()[:cut] if len(chunks) == 1 and not quoted else None
    if len(subs) == 1:
        if prefix:
            return QPrefix(subs[0])
        if whole == subs[0]:  # a plain word, not part of an identifier: stemmed
            return _stemmed_word(whole, terms, hints)
        return QTerm(subs[0])
    seq = tuple(subs)
    node: QNode = QPhrasePrefix(seq) if prefix else QPhrase(seq)
    if whole is None:
        return node
    if prefix:
        prefixes.append(whole)
        return QAny((QPrefix(whole), node))
    terms.add(whole)
    return QAny((QTerm(whole), node))


def parse_query(query: str) -> ParsedQuery:
    """Translate user input into a :class:`ParsedQuery`; never raises.

    ``clauses`` is empty when nothing searchable is left (``***``); callers
    return no hits for such a query.
    """
    clauses: list[QNode] = []
    parts: list[ClauseMatch] = []
    all_terms: set[str] = set()
    all_prefixes: list[str] = []
    hints: list[str] = []
    for m in _QUERY_PART.finditer(query or ""):
        quoted = m.group(1) is not None
        raw = (m.group(1) if quoted else m.group(2)).strip()
        core = raw.rstrip("*")
        terms: set[str] = set()
        prefixes: list[str] = []
        node = _word_clause(core, core != raw, quoted, terms, prefixes, hints)
        if node is not None and node not in clauses:
            clauses.append(node)
            plain = not quoted and core.isalpha()
            parts.append(ClauseMatch(f'"{raw}"' if quoted else raw, frozenset(terms), tuple(prefixes), not plain))
            all_terms |= terms
            all_prefixes += [p for p in prefixes if p not in all_prefixes]
    return ParsedQuery(tuple(clauses), frozenset(all_terms), tuple(all_prefixes), tuple(hints), tuple(parts))


#: A plain word naming a doer or a tool (formatter, parser, logger, validator): the stemmer keeps its
#: ending, so it never meets the verb the text uses (format, parsing, logged).
_DOER = re.compile(r"(?:er|or)s?$")


def related_forms(query: str) -> str | None:
    """``query`` with each plain word naming a doer turned into a prefix of its root, or None.

    ``formatter`` -> ``format*``, ``parsers`` -> ``pars*``, ``logger`` -> ``log*``
    (a doubled last consonant is undoubled); quoted phrases, identifiers, prefixes,
    words under six letters and words whose root would be shorter than 3 letters
    stay as written. What grep tries when the words as written match nothing.
    """
    out: list[str] = []
    changed = False
    for m in _QUERY_PART.finditer(query or ""):
        word = m.group(2)
        # Six letters at least: "after", "never", "order" end so too and name no doer.
        if word is not None and len(word) >= 6 and word.isalpha() and word.isascii() and (
                cut := _DOER.search(word.lower())):
            root = word.lower()[: cut.start()]
            if len(root) >= 2 and root[-1] == root[-2] and root[-1] not in "aeiou":
                root = root[:-1]
            if len(root) >= 3:
                out.append(root + "*")
                changed = True
                continue
        out.append(m.group())
    return " ".join(out) if changed else None


def matched_words(text: str, pq: ParsedQuery) -> tuple[str, ...]:
    """The clauses of ``pq`` (as the user wrote them) that ``text`` holds a token of.

    A hint for the reader of a ``match="any"`` hit (a phrase counts when one of
    its words occurs), not a second search: the index decided what matches.
    """
    tokens = {tok for tok, _pos, _start, _end in iter_tokens(text)}
    out = []
    for part in pq.parts:
        if (part.terms & tokens) or (part.prefixes and any(t.startswith(part.prefixes) for t in tokens)):
            out.append(part.label)
    return tuple(out)


@functools.lru_cache(maxsize=256)
def _candidates(pq: ParsedQuery) -> regex.Pattern[str]:
    """Case-insensitive substrings where a match may start (a cheap pre-scan)."""
    plain = {t for t in pq.terms if not t.startswith(STEM_MARK)}
    words = sorted(plain | set(pq.prefixes) | set(pq.hints), key=len, reverse=True)
    return regex.compile("|".join(regex.escape(w) for w in words) or "(?!)", regex.IGNORECASE | regex.FULLCASE)


def _is_match(tok: str, pq: ParsedQuery) -> bool:
    return tok in pq.terms or (bool(pq.prefixes) and tok.startswith(pq.prefixes))


def _first_match(text: str, pq: ParsedQuery) -> int:
    """Offset of the first token matching the query (0 if none is found)."""
    # Tokenizing whole documents for every hit dominated search time, so find
    # candidates with one regex and tokenize only the whitespace-delimited run
    # around each (no chunk spans whitespace, so its tokens are the same).
    rx = _candidates(pq)
    pos = 0
    while (m := rx.search(text, pos)) is not None:
        run_start = max(text.rfind(c, 0, m.start()) for c in " \n\t\r") + 1
        ws = _SPACES.search(text, m.end())
        run_end = ws.start() if ws else len(text)
        for tok, _pos, start, _end in iter_tokens(text[run_start:run_end]):
            if _is_match(tok, pq):
                return run_start + start
        pos = run_end
    for tok, _pos, start, _end in iter_tokens(text):  # exotic case folding: be exact
        if _is_match(tok, pq):
            return start
    return 0


#: The passage search of a snippet looks at this many candidate places at most (long tool outputs).
MAX_SNIPPET_CANDIDATES = 64


def _best_match(text: str, pq: ParsedQuery, width: int) -> int:
    """Offset of the match that starts the passage holding the most of the query's clauses.

    A message often names a query word early in passing and states the fact the
    query is about later ("the retry path ... I bumped the webhook retry limit
    from 5 attempts to 8 attempts"): the snippet shows where the words meet. The
    first such passage wins; a one-clause query takes its first match.
    """
    if len(pq.parts) < 2:
        return _first_match(text, pq)
    rx = _candidates(pq)
    found: list[tuple[int, int]] = []  # (offset, clause)
    pos, seen = 0, 0
    while seen < MAX_SNIPPET_CANDIDATES and (m := rx.search(text, pos)) is not None:
        seen += 1
        run_start = max(text.rfind(c, 0, m.start()) for c in " \n\t\r") + 1
        ws = _SPACES.search(text, m.end())
        run_end = ws.start() if ws else len(text)
        for tok, _pos, start, _end in iter_tokens(text[run_start:run_end]):
            for k, part in enumerate(pq.parts):
                if part.holds(tok):
                    found.append((run_start + start, k))
        pos = run_end
    if not found:
        return _first_match(text, pq)
    reach = width - width // 4  # the passage shown after the match it starts from
    best, best_n = found[0][0], 0
    inside: dict[int, int] = {}  # clause -> matches in the window found[i] .. found[j - 1]
    j = 0
    for at, k in found:  # a window starting at each match, slid along (offsets ascend)
        while j < len(found) and found[j][0] - at <= reach:
            inside[found[j][1]] = inside.get(found[j][1], 0) + 1
            j += 1
        if len(inside) > best_n:
            best, best_n = at, len(inside)
        inside[k] -= 1
        if not inside[k]:
            del inside[k]
    return best


def make_snippet(text: str, pq: ParsedQuery, width: int = SNIPPET_CHARS) -> str:
    """About ``width`` characters of ``text`` around the passage that best matches, one line."""
    hit = _best_match(text, pq, width)
    # Start a little before the match, on a word boundary when one is near.
    begin = max(0, hit - width // 4)
    if begin:  # snap to the word boundary nearest to the ideal start
        ends = [m.end() for m in _SPACES.finditer(text, max(0, begin - 20), hit)]
        begin = min(ends, key=lambda e: abs(e - begin)) if ends else begin
    window = _SPACES.sub(" ", text[begin : begin + width * 2]).strip()
    cut = window[:width]
    if len(window) > width:
        space = cut.rfind(" ")
        cut = (cut[:space] if space > width // 2 else cut) + " …"
    return ("… " if begin else "") + cut

