"""The tokenizer and the backend-neutral query language of the search index.

Both backends tokenize with :func:`iter_tokens` and translate the same
:class:`ParsedQuery` (from :func:`parse_query`) into their native queries, so
they match exactly the same documents; :func:`make_snippet` cuts the text shown
with each hit.

Query language (identical on both backends, never raises on odd input)
------------------------------------------------------------------------
* ``deploy failed`` -- every word must match (AND), case-insensitive.
* ``"disk is full"`` -- a quoted phrase: the words in this order, adjacent. An
  unterminated quote runs to the end of the query.
* ``deploy*`` -- prefix: ``deploy``, ``deployed``, ``deployment`` ...
  (``"open src/ap*"`` is a phrase whose last word is a prefix).
* Identifiers are first-class: ``m-3f2a``, ``src/app.py``, ``snake_case_name``,
  ``CamelCase``, ``call_01``, ``user@example.com``, ``8443`` match as a whole,
  and their parts match too (``app``, ``snake``, ``camel``, ``case`` ...).
* Everything else is literal: ``foo(``, ``***``, ``a:b"c`` never raise; characters
  that are not letters or digits only separate words. A query with no word left
  (``***``, ``""``) matches nothing.

There are no operators (AND/OR/NOT are ordinary words) and no field syntax.

How text is tokenized (:func:`iter_tokens`): a *chunk* is a run of word
characters joined by ``- . / : @ \\`` (``src/app.py``). Each chunk yields its
*parts* (alphanumeric runs, further split at camelCase boundaries) at consecutive
positions, plus the lower-cased whole chunk and each camelCase word as extra
tokens at the position of their first part. So a phrase of parts matches an
identifier inside a longer one, and a prefix of the whole (``src/ap*``) works.
Tokens are cut at :data:`MAX_TOKEN_CHARS` characters on both sides.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass

import regex

MAX_TOKEN_CHARS = 64
SNIPPET_CHARS = 200


# ------------------------------------------------------------------------ analysis

# A chunk: word characters joined by identifier punctuation (src/app.py, m-3f2a).
_CHUNK = regex.compile(r"\w+(?:[-./:@\\]\w+)*")
# Parts of a chunk: alphanumeric runs ("_" and joiners separate them).
_PART = regex.compile(r"[^\W_]+")
# camelCase boundaries: fooBar -> foo|Bar, HTTPServer -> HTTP|Server.
_CAMEL = regex.compile(r"(?<=\p{Ll})(?=\p{Lu})|(?<=\p{Lu})(?=\p{Lu}\p{Ll})")
_SPACES = regex.compile(r"\s+")


def _plain(word: str) -> bool:
    """True when a word needs no splitting (the common case, kept cheap)."""
    return word.isalnum() and (word.islower() or word.isupper() or word.istitle() or not _CAMEL.search(word))


def _subwords(part: str) -> list[str]:
    return [part] if _plain(part) else [s for s in _CAMEL.split(part) if s]


def iter_tokens(text: str) -> Iterator[tuple[str, int, int, int]]:
    """Yield ``(token, position, start_char, end_char)`` for ``text``.

    Parts advance the position; whole chunks and camelCase words are extra
    tokens at the position of their first part (see the module docstring).
    Per token text, positions never decrease (Whoosh needs that).
    """
    pos = 0
    cut = MAX_TOKEN_CHARS
    for m in _CHUNK.finditer(text):
        chunk = m.group()
        start = m.start()
        if _plain(chunk):  # fast path: an ordinary word
            yield chunk.lower()[:cut], pos, start, m.end()
            pos += 1
            continue
        first = pos
        single_part = False
        for pm in _PART.finditer(chunk):
            part = pm.group()
            ps = start + pm.start()
            subs = _subwords(part)
            if len(subs) > 1:
                yield part.lower()[:cut], pos, ps, ps + len(part)
            for sub in subs:
                yield sub.lower()[:cut], pos, ps, ps + len(sub)
                ps += len(sub)
                pos += 1
            single_part = len(part) == len(chunk)
        if not single_part:
            yield chunk.lower()[:cut], first, start, m.end()


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
class ParsedQuery:
    """A query in backend-neutral form: every clause must match."""

    clauses: tuple[QNode, ...]
    terms: frozenset[str]  # exact tokens, for snippets
    prefixes: tuple[str, ...]  # prefixes, for snippets


# A quoted phrase (closing quote optional) or a run of non-space, non-quote chars.
_QUERY_PART = regex.compile(r'"([^"]*)"?|([^\s"]+)')


def _word_clause(text: str, prefix: bool, quoted: bool, terms: set[str], prefixes: list[str]) -> QNode | None:
    cut = MAX_TOKEN_CHARS
    chunks = [m.group() for m in _CHUNK.finditer(text)]
    subs = [s.lower()[:cut] for c in chunks for p in _PART.findall(c) for s in _subwords(p)]
    if not subs:
        return None
    terms.update(subs[:-1] if prefix else subs)
    if prefix:
        prefixes.append(subs[-1])
    # The whole identifier as one token (only a bare single-chunk word has one).
    whole = chunks[0].lower()[:cut] if len(chunks) == 1 and not quoted else None
    if len(subs) == 1:
        return QPrefix(subs[0]) if prefix else QTerm(subs[0])
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
    terms: set[str] = set()
    prefixes: list[str] = []
    for m in _QUERY_PART.finditer(query or ""):
        quoted = m.group(1) is not None
        raw = (m.group(1) if quoted else m.group(2)).strip()
        core = raw.rstrip("*")
        node = _word_clause(core, core != raw, quoted, terms, prefixes)
        if node is not None and node not in clauses:
            clauses.append(node)
    return ParsedQuery(tuple(clauses), frozenset(terms), tuple(prefixes))


@functools.lru_cache(maxsize=256)
def _candidates(pq: ParsedQuery) -> regex.Pattern[str]:
    """Case-insensitive substrings where a match may start (a cheap pre-scan)."""
    words = sorted(pq.terms | set(pq.prefixes), key=len, reverse=True)
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


def make_snippet(text: str, pq: ParsedQuery, width: int = SNIPPET_CHARS) -> str:
    """About ``width`` characters of ``text`` around the first match, one line."""
    hit = _first_match(text, pq)
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

