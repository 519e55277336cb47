"""A scripted recall agent: grep words from the question, read the hits, expand the best ones.

For each question the agent:

1. takes 1-3 content words **from the question only** (stop words dropped;
   identifiers, then capitalised names, then longer words first) and greps
   them (``limit=10``); when nothing matches it drops words, keeping the
   strongest as long as possible (abc, ab, ac, a, bc, b, c), and keeps the
   first query with hits;
2. pages through the hits with ``offset`` when the API has it (up to 3 pages;
   every page for a counting question), and records a total count when the
   result carries one (``total`` or ``count``);
3. expands the 3 best hits with ``max_tokens=4000`` (every message hit, up to
   10, for a counting question), a message with ``around=2`` and a summary with
   ``query=`` the grep words when ``expand`` accepts them;
4. for a two-hop question, greps once more for up to 3 identifiers found in
   the first round's results that the question does not name, and expands
   the best hit of each: first those written near an identifier the question
   names (in verbatim messages before summaries, whose lists of names put
   unrelated ones side by side), then those in a sentence with the question's
   other words; never one of the same form as the question's own (another
   ticket, when it asks about a ticket).

An answer is *found* when the scoring rule (``scoring.py``) holds on
everything the agent saw, or, for a counting question, when grep reports a
total number of matching messages for the agent's query and that number is
the count. For changed values the order of what it saw decides "latest
first". The agent never looks at the answer to decide what to do.
"""

from __future__ import annotations

import inspect
import itertools
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from vaultlcm import Vault, VaultLCMError

from .context import CONV
from .facts import KINDS, QA
from .scoring import context_text, latest_first, present

LIMIT = 10
EXPAND_TOKENS = 4000
STOP = frozenset(
    ["a", "about", "after", "again", "all", "am", "an", "and", "any", "are", "as", "at", "be", "been", "before", "being", "but", "by", "can", "could", "did", "do", "does", "doing", "done", "for", "from", "get", "got", "had", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "just", "me", "my", "new", "now", "of", "on", "once", "one", "or", "our", "out", "over", "same", "say", "said", "should", "so", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "up", "us", "use", "used", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "change", "changed", "many", "much", "times", "time", "long", "big", "first", "last", "still", "go", "goes", "went", "happen", "happened", "want", "wants", "need", "needs", "take", "takes", "come", "came", "get", "put", "make", "called",
     # the rest of the usual English stop words (NLTK's list): words a person does not search for
     "above", "against", "below", "between", "both", "down", "during", "each", "few", "further", "here", "hers", "herself", "himself", "itself", "more", "most", "myself", "no", "nor", "not", "off", "only", "other", "ours", "ourselves", "own", "some", "such", "themselves", "through", "too", "under", "until", "very", "yours", "yourself", "yourselves", "because", "having", "his", "her", "him", "he", "she", "whom"]
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\s*…\s*|\n+")
_SHAPES = [
    ("ticket", re.compile(r"[A-Z]{2,}-\d+")),
    ("snake", re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")),
    ("camel", re.compile(r"[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+")),
    ("hash", re.compile(r"(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}")),
]
_IDENT = re.compile("|".join(rf"\b{rx.pattern}\b" for _kind, rx in _SHAPES))
#: How far (in characters) from an identifier the question names the next step may be written.
HOP_WINDOW = 300


def ranked_words(question: str) -> list[str]:
    """Content words of a question, most telling first: identifiers, then names, then longer words."""
    seen: list[str] = []
    for w in re.findall(r"[#\w][\w.\-/:#@']*[\w]|\w+", question):
        w = w.removesuffix("'s")
        if w.lower() in STOP or (len(w) < 3 and not any(c.isdigit() for c in w)) or w in seen:
            continue
        seen.append(w)
    first = question.split()[0] if question.split() else ""

    def strength(w: str) -> int:
        if any(c.isdigit() for c in w) or any(c in w for c in "-_./#") or w[1:] != w[1:].lower():
            return 3
        return 2 if w[0].isupper() and w != first else 0

    return sorted(seen, key=lambda w: (-strength(w), -len(w)))


def content_words(question: str, k: int = 3) -> list[str]:
    """The ``k`` most telling words of a question, in question order."""
    best = ranked_words(question)[:k]
    return [w for w in dict.fromkeys(re.findall(r"[#\w][\w.\-/:#@']*[\w]|\w+", question)) if w in best] or best


def next_hop(question: str, words: list[str], items: list[str], raw: list[bool] | None = None) -> list[str]:
    """Identifiers the question does not name, most likely the next step first.

    Best are those near an identifier the question names (within :data:`HOP_WINDOW`
    characters), in verbatim messages before summaries (a summary's list of names
    puts unrelated ones side by side); then those in a sentence with the question's
    other words; nearest first. An identifier of the same form as one the question
    names (another ticket when it asks about a ticket) is not the next step.
    """
    asked = {w.lower() for w in re.findall(r"[\w-]+", question)}
    named = [m.group() for m in _IDENT.finditer(question)]
    shapes = [_shape(n) for n in named]
    anchors = [w.lower() for w in words if w not in named]
    raw = raw if raw is not None else [True] * len(items)
    ranked: dict[str, tuple[int, int, int]] = {}

    def rank(ident: str, key: tuple[int, int, int]) -> None:
        if ident.lower() not in asked and _shape(ident) not in shapes and (ident not in ranked or key < ranked[ident]):
            ranked[ident] = key

    for order, (text, verbatim) in enumerate(zip(items, raw)):
        low = text.lower()
        strong = [m.start() for n in named for m in re.finditer(re.escape(n.lower()), low)]
        for m in _IDENT.finditer(text) if strong else ():
            dist = min(abs(m.start() - p) for p in strong)
            if dist <= HOP_WINDOW:
                rank(m.group(), (0 if verbatim else 1, dist, order))
        for sentence in _SENTENCE.split(text):
            low = sentence.lower()
            spots = [m.start() for a in anchors for m in re.finditer(re.escape(a), low)]
            for m in _IDENT.finditer(sentence):
                rank(m.group(), (2, min(abs(m.start() - p) for p in spots), order) if spots else (3, 0, order))
    return sorted(ranked, key=lambda i: ranked[i])


def _shape(ident: str) -> str:
    """What kind of identifier this is (a ticket, a snake_case name, a CamelCase name, a hash)."""
    return next(kind for kind, rx in _SHAPES if rx.fullmatch(ident))


def word_sets(ranked: list[str]) -> list[tuple[str, ...]]:
    """The queries to try, in order: the strongest words kept as long as possible (abc, ab, ac, a, bc, b, c)."""
    subsets = [c for k in range(len(ranked), 0, -1) for c in itertools.combinations(ranked, k)]
    return sorted(subsets, key=lambda c: tuple(w not in c for w in ranked))


@dataclass
class Trace:
    qa: QA
    words: list[str]
    query: str = ""
    calls: int = 0
    items: list[str] = field(default_factory=list)
    raw: list[bool] = field(default_factory=list)  # per item: verbatim messages only (no summary text)
    snippet_items: int = 0
    total: int | None = None

    @property
    def found(self) -> bool:
        if self.qa.kind == "counting" and self.total is not None and str(self.total) == self.qa.answers[0]:
            return True  # grep's own count of matching messages for the agent's query is the answer
        return present(self.qa, "\n".join(self.items))

    @property
    def found_in_snippets(self) -> bool:
        return present(self.qa, "\n".join(self.items[: self.snippet_items]))

    @property
    def latest_first(self) -> bool | None:
        return latest_first(self.qa, self.items)


class RecallAgent:
    """Drives ``Vault.grep`` and ``Vault.expand``, using newer options when the API has them."""

    def __init__(self, vault: Vault, conversation: str = CONV) -> None:
        self.vault = vault
        self.conv = conversation
        grep_params = inspect.signature(vault.grep).parameters
        expand_params = inspect.signature(vault.expand).parameters
        self.features = {
            "grep_offset": "offset" in grep_params,
            "expand_around": "around" in expand_params,
            "expand_query": "query" in expand_params,
        }

    def grep(self, trace: Trace, query: str, pages: int) -> tuple[list[dict[str, Any]], int | None]:
        """Hits for ``query`` (paged when possible) and the total the API reports, if it does."""
        hits: list[dict[str, Any]] = []
        reported: int | None = None
        for page in range(pages):
            kwargs: dict[str, Any] = {"conversation": self.conv, "limit": LIMIT}
            if self.features["grep_offset"]:
                kwargs["offset"] = page * LIMIT
            try:
                result = self.vault.grep(query, **kwargs)
            except VaultLCMError:
                break
            trace.calls += 1
            if page == 0:
                reported = self._reported_count(result)
            got = result.get("hits", [])
            hits.extend(got)
            if not self.features["grep_offset"] or len(got) < LIMIT:
                break
        return hits, reported

    @staticmethod
    def _reported_count(result: dict[str, Any]) -> int | None:
        """How many messages match, when the result says: raw messages only (summaries restate them)."""
        by_kind = result.get("by_kind")
        total = by_kind.get("messages") if isinstance(by_kind, dict) else result.get("total", result.get("count"))
        return total if isinstance(total, int) and not isinstance(total, bool) else None

    def expand(self, trace: Trace, hit: dict[str, Any], query: str) -> None:
        kwargs: dict[str, Any] = {"max_tokens": EXPAND_TOKENS}
        is_summary = hit.get("kind") == "summary" or str(hit["id"]).startswith("sum_")
        if not is_summary and self.features["expand_around"]:
            kwargs["around"] = 2
        if is_summary and self.features["expand_query"]:
            kwargs["query"] = query
        try:
            out = self.vault.expand(hit["id"], **kwargs)
        except VaultLCMError:
            return
        trace.calls += 1
        parts = [s.get("text", "") for s in out.get("summaries", [])]
        parts.append(context_text(out.get("messages", [])))
        trace.items.append("\n".join(parts))
        trace.raw.append(not out.get("summaries"))

    def _add_hits(self, trace: Trace, hits: list[dict[str, Any]]) -> None:
        trace.items.extend(self._hit_text(h) for h in hits)
        trace.raw.extend(h.get("kind") != "summary" for h in hits)

    @staticmethod
    def _hit_text(hit: dict[str, Any]) -> str:
        return " ".join(str(hit.get(k, "")) for k in ("at", "time", "role", "snippet") if hit.get(k))

    def ask(self, qa: QA) -> Trace:
        words = content_words(qa.question)
        ranked = [w for w in ranked_words(qa.question) if w in words]
        trace = Trace(qa, words)
        counting = qa.kind == "counting"
        pages = 20 if counting else 3
        hits: list[dict[str, Any]] = []
        for chosen in word_sets(ranked):
            trace.query = " ".join(w for w in words if w in chosen)
            hits, trace.total = self.grep(trace, trace.query, pages)
            if hits:
                break
        self._add_hits(trace, hits)
        if counting:
            to_expand = [h for h in hits if h.get("kind") != "summary"][:10]
        else:
            to_expand = hits[:3]
        trace.snippet_items = len(trace.items)
        for h in to_expand:
            self.expand(trace, h, trace.query)
        if qa.kind == "two_hop":
            for ident in next_hop(qa.question, words, trace.items, trace.raw)[:3]:
                more, _ = self.grep(trace, ident, 1)
                self._add_hits(trace, more)
                if more:
                    self.expand(trace, more[0], ident)
        return trace


def run_agent(vault: Vault, qas: list[QA]) -> dict[str, Any]:
    agent = RecallAgent(vault)
    traces = [agent.ask(q) for q in qas]
    by_kind: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        ts = [t for t in traces if t.qa.kind == kind]
        if ts:
            by_kind[kind] = {"questions": len(ts), "found": sum(t.found for t in ts),
                             "found_in_snippets": sum(t.found_in_snippets for t in ts)}
    updated = [t.latest_first for t in traces if t.qa.kind == "updated"]
    seen_latest = [x for x in updated if x is not None]
    return {
        "features": agent.features,
        "questions": len(traces),
        "found": sum(t.found for t in traces),
        "found_in_snippets": sum(t.found_in_snippets for t in traces),
        "by_kind": by_kind,
        "updated_questions": len(updated),
        "latest_first": sum(bool(x) for x in seen_latest),
        "latest_seen": len(seen_latest),
        "calls": sum(t.calls for t in traces),
        "counting_totals": Counter(str(t.total is not None) for t in traces if t.qa.kind == "counting"),
        "traces": [{"id": t.qa.id, "kind": t.qa.kind, "words": t.words, "query": t.query, "found": t.found,
                    "found_in_snippets": t.found_in_snippets, "latest_first": t.latest_first, "calls": t.calls,
                    "total": t.total} for t in traces],
    }
