"""Recall, for agents and people alike: what the recall commands share, and ``describe``.

The recall commands live in their own modules: :mod:`vaultlcm.grep` (full text
and regex search, counting, paging), :mod:`vaultlcm.expand` (a summary down to
its sources, a message with its turn or neighbours) and :mod:`vaultlcm.ask`
(answer a question from expanded history). This module holds what they share:

* **ids**: :func:`id_kind` checks an id's shape before anything is looked up,
  so ``file_*`` or ``../x`` is a one-line usage error, never a glob or a path;
* **times**: hits and excerpts carry ISO-8601 UTC times (:func:`iso_time`);
* **where an item sits in the DAG and in the model's context**
  (:class:`Placement`): the nearest covering summary (``covered_by``: the leaf
  of a message, the parent of a summary) and the node that stands for the item
  in the assembled context (``shown_as``, with its depth ``shown_depth``).
  Which node that is depends on the budget of the context; a
  :class:`ContextView` answers it. :class:`TopLevelView` (the default) answers
  with the top-level covering node, which is what the model sees when every
  top-level node fits. :class:`CutView` answers from any set of node ids shown
  at a given budget: pass it the cut that assembly makes for that budget.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from .errors import NotFoundError, UsageError
from .messages import ID_RE
from .summary_notes import SUMMARY_ID_RE
from .tokens import count_tokens

if TYPE_CHECKING:
    from .dag import SummaryRow
    from .history import History

SCOPES = ("messages", "summaries", "both")
_STOP = frozenset(
    "a an and are as at be by did do does for from had has have how i in is it its of on or that the this to "
    "was were what when where which who why will with you we our they them there then than about after before "
    "into over under again any all can could should would me my your their his her him she he us"
    .split()
)
FILE_ID_RE = re.compile(r"^file_[0-9a-f]{8,64}(?:\.[A-Za-z0-9]{1,16})?$")


# -- ids and times ----------------------------------------------------------------


def id_kind(item_id: str) -> str:
    """``message``, ``summary`` or ``file`` for a well-formed id; a :class:`UsageError` otherwise."""
    if item_id.startswith("sum_"):
        if SUMMARY_ID_RE.match(item_id):
            return "summary"
    elif item_id.startswith("file_"):
        if FILE_ID_RE.match(item_id):
            return "file"
    elif ID_RE.match(item_id):
        return "message"
    shown = item_id if len(item_id) <= 80 else item_id[:77] + "..."
    raise UsageError(
        f"{shown!r} is not an id: ids look like m-3f2a9c1b0d4e5f60 (a message), sum_3f2a9c1b0d4e5f60 "
        "(a summary) or file_3f2a9c1b0d4e5f60 (a payload file); find them with `vaultlcm grep`"
    )


def iso_time(at: float) -> str:
    """A unix time as ISO-8601 UTC to the second (``2026-11-29T10:00:00Z``)."""
    try:
        return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return str(at)


def scope_kind(scope: str) -> str | None:
    """The index kind for a ``--scope`` value (None: both)."""
    if scope not in SCOPES:
        raise UsageError(f"unknown scope {scope!r}; use messages, summaries or both")
    return {"messages": "message", "summaries": "summary", "both": None}[scope]


# -- ranking by a question -----------------------------------------------------------


def keywords(text: str, limit: int = 12) -> list[str]:
    """The searchable words of a question: identifiers whole, no stop words, each once."""
    out: list[str] = []
    for w in re.findall(r"[\w./:@-]+", text):
        w2 = w.strip(".:-/@").lower()
        if len(w2) >= 2 and w2 not in _STOP and not (len(w2) < 3 and w2.isalpha()) and w2 not in out:
            out.append(w2)
    return out[:limit]


@dataclass
class Ranked:
    """A document ranked for a question: more of its words first, then BM25, then newest."""

    id: str
    kind: str
    conversation: str
    score: float
    at: float
    seq: int
    role: str


def rank(
    history: "History",
    terms: list[str],
    *,
    conversations: list[str] | None,
    kind: str | None = None,
    since: float | None = None,
    before: float | None = None,
    per_term: int = 40,
) -> list[Ranked]:
    """Documents matching any of ``terms``, best first; equally good ones newest first.

    Each term is searched alone (the index is AND-only, and a question's words rarely
    all sit in one message) and, when there are several, all together. A document
    scores one point per term it matches plus a tenth of its BM25 score (capped), so
    matching more words beats matching one word strongly; raw messages get a small
    edge over summaries (they are exact); a document matching every term gets a bonus.
    """
    from .index.buffered import order_rows, tie_key

    index = history.indexer.ready()
    found: dict[str, Ranked] = {}
    queries = ([" ".join(terms)] if len(terms) > 1 else []) + list(terms)
    for n, q in enumerate(queries):
        bonus = 1.0 if n == 0 and len(terms) > 1 else 0.0
        for h in index.search(q, kind=kind, conversations=conversations, since=since, before=before, limit=per_term):
            r = found.get(h.id)
            if r is None:
                r = found[h.id] = Ranked(h.id, h.kind, h.conversation, 0.0, h.at, h.seq, h.role)
                r.score += 0.25 if h.kind == "message" else 0.0
            r.score += bonus if bonus else 1.0 + min(h.score, 10.0) / 10.0
    rows = [(r.score, r.at, r.seq, tie_key(r.id), r) for r in found.values()]
    return [row[4] for row in order_rows(rows, "relevance")]


# -- where an item sits --------------------------------------------------------------


@dataclass(frozen=True)
class Placement:
    """Where an item sits: its nearest covering summary and what stands for it in context.

    ``covered_by``: the leaf covering a message, or the parent of a summary (None when
    nothing covers it). ``shown_as``: the node the model sees in its place (the item
    itself when it is in the context as it is); ``shown_depth``: that node's depth
    (None for a raw message).
    """

    covered_by: str | None
    shown_as: str
    shown_depth: int | None


class ContextView(Protocol):
    """Which node stands for an item in the assembled context."""

    def shown_as(self, item_id: str, chain: list[str]) -> str:
        """The node shown for ``item_id``; ``chain`` is its covering nodes, nearest first."""


class TopLevelView:
    """Every item is shown as its top-level covering node (or as itself when uncovered).

    That is the assembled context when all top-level nodes fit the budget; with a
    smaller or larger budget assembly may show a finer or coarser cut (see :class:`CutView`).
    """

    def shown_as(self, item_id: str, chain: list[str]) -> str:
        return chain[-1] if chain else item_id


class CutView:
    """Items are shown as the first node on their way up that belongs to ``nodes``.

    ``nodes`` holds the ids (summaries and raw messages) of one assembled context:
    the cut through the DAG that assembly makes for a budget. An item none of whose
    covering nodes is in the cut (left out of that context) is shown as its top node.
    """

    def __init__(self, nodes: Collection[str]) -> None:
        self.nodes = frozenset(nodes)

    def shown_as(self, item_id: str, chain: list[str]) -> str:
        for node in [item_id, *chain]:
            if node in self.nodes:
                return node
        return chain[-1] if chain else item_id


def _chunks(ids: list[str], size: int = 500) -> list[list[str]]:
    return [ids[k : k + size] for k in range(0, len(ids), size)]


class Placer:
    """Resolves :class:`Placement` for many items, sharing the walk up the DAG."""

    def __init__(self, history: "History", view: ContextView | None = None) -> None:
        self.history = history
        self.view: ContextView = view or TopLevelView()
        self._parent: dict[str, str | None] = {}
        self._depth: dict[str, int] = {}
        self._covered: dict[str, str | None] = {}  # message id -> its covering leaf (prefetched)

    def prefetch(self, items: list[tuple[str, str]]) -> None:
        """Read what placing ``(id, kind)`` items needs in a few queries: the covering leaf of each
        message, then each level of the DAG above them at once (a query per item and level was
        most of placing a page of hits)."""
        msgs = [i for i, kind in items if kind != "summary" and i not in self._covered]
        for chunk in _chunks(msgs):
            got = self.history.catalog.covering(chunk)
            self._covered.update({i: got.get(i) for i in chunk})
        level = {i for i, kind in items if kind == "summary"} | {self._covered.get(i) for i in msgs}
        while level := {i for i in level if i and i not in self._parent}:
            found: dict[str, tuple[str | None, int]] = {}
            for chunk in _chunks(sorted(level)):
                found.update(self.history.dag.parents(chunk))
            for sid in level:
                parent, depth = found.get(sid, (None, None))
                self._parent[sid] = parent
                if depth is not None:
                    self._depth[sid] = depth
            level = {self._parent[sid] for sid in level}  # type: ignore[misc]

    def _up(self, summary_id: str) -> str | None:
        if summary_id not in self._parent:
            found = self.history.dag.parents([summary_id]).get(summary_id)
            self._parent[summary_id] = found[0] if found else None
            if found:
                self._depth[summary_id] = found[1]
        return self._parent[summary_id]

    def place(self, item_id: str, kind: str) -> Placement:
        if kind == "summary":
            first = self._up(item_id)
        elif item_id in self._covered:
            first = self._covered[item_id]
        else:
            row = self.history.catalog.get(item_id)
            first = row.covered if row is not None else None
        chain: list[str] = []
        node = first
        while node and node not in chain:  # a cycle would be a DAG problem, reported by doctor
            chain.append(node)
            node = self._up(node)
        shown = self.view.shown_as(item_id, chain)
        if shown.startswith("sum_"):
            self._up(shown)
            depth: int | None = self._depth.get(shown)
        else:
            depth = None
        return Placement(first, shown, depth)


# -- describe ---------------------------------------------------------------------


def expand_cost(history: "History", row: "SummaryRow") -> int:
    """Tokens of every raw message under a summary (what a full expand would return)."""
    if row.first_seq is None or row.last_seq is None:
        return 0
    return history.catalog.tokens_between(row.conv, row.first_seq, row.last_seq)


def describe(history: "History", item_id: str) -> dict[str, Any]:
    """What ``item_id`` is: metadata, content, sources, placement and what expanding it costs."""
    kind = id_kind(item_id)
    if kind == "file":
        return _describe_file(history, item_id)
    placement = Placer(history).place(item_id, kind)
    if kind == "summary":
        row = history.summary(item_id)
        sources = row.sources
        if row.kind == "leaf":
            direct_cost = sum(r.tokens for r in history.catalog.rows_by_ids(sources).values())
        else:
            direct_cost = sum(s.token_count for s in history.dag.children(row.id))
        return {
            "id": row.id,
            "kind": "summary",
            "summary_kind": row.kind,
            "depth": row.depth,
            "conversation": row.conv,
            "path": row.path,
            "earliest_at": row.earliest_at,
            "latest_at": row.latest_at,
            "descendant_count": row.descendant_count,
            "token_count": row.token_count,
            "sources": sources,
            "parent": placement.covered_by,
            "top": placement.shown_as if placement.shown_as != row.id else None,
            "shown_as": placement.shown_as,
            "summarizer": row.summarizer,
            "level": row.level,
            "human_owned": row.human_owned,
            "stale": bool(row.stale),
            "content": row.body,
            "expand_cost_tokens": expand_cost(history, row),
            "sources_cost_tokens": direct_cost,
        }
    mrow, msg = history.log.get(item_id)
    return {
        "id": mrow.id,
        "kind": "message",
        "role": mrow.role,
        "conversation": mrow.conv,
        "seq": mrow.seq,
        "at": mrow.at,
        "path": mrow.path,
        "link": f"[[{mrow.path[:-3]}#^{mrow.id}]]",
        "token_count": mrow.tokens,
        "sources": [],
        "covered_by": placement.covered_by,
        "top": placement.shown_as if placement.shown_as != mrow.id else None,
        "shown_as": placement.shown_as,
        "tool_calls": msg.tool_call_ids,
        "tool_results": msg.tool_result_ids,
        "content": msg.searchable_text(),
        "expand_cost_tokens": mrow.tokens,
    }


def _describe_file(history: "History", file_id: str) -> dict[str, Any]:
    stem, _, ext = file_id.partition(".")
    for conv in history.conversations():
        folder = history.layout.files_dir(conv)
        if not folder.is_dir():
            continue
        # Exact names only (the id was checked): never a glob built from user input.
        found = [p for p in sorted(folder.iterdir()) if p.is_file() and p.stem == stem and (not ext or p.suffix == "." + ext)]
        for p in found:
            data = p.read_bytes()
            info: dict[str, Any] = {
                "id": p.stem, "kind": "file", "conversation": conv, "path": history.layout.relative(p),
                "bytes": len(data), "extension": p.suffix.lstrip("."), "sources": [],
            }
            if p.suffix in (".txt", ".json", ".md"):
                text = data.decode("utf-8", errors="replace")
                lines = text.split("\n")
                info["token_count"] = count_tokens(text)
                info["lines"] = len(lines)
                head = [ln[:160] for ln in lines if ln.strip()][:8]
                info["exploration_summary"] = (
                    f"{len(lines):,} lines, {info['token_count']:,} tokens. First lines:\n" + "\n".join(head)
                )
            else:
                info["token_count"] = 0
                info["exploration_summary"] = f"binary payload ({p.suffix.lstrip('.')}, {len(data):,} bytes)"
            return info
    raise NotFoundError(f"no payload file {file_id!r} in any conversation's files/ folder")
