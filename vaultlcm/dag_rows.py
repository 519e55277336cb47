"""The rows of the summary DAG as the catalog mirrors them, and the catalog helpers they share.

:class:`SummaryRow` is a summary note's row (``summaries``), :class:`ActiveItem` one item of the
active context; :mod:`vaultlcm.dag` reads and derives them, :mod:`vaultlcm.dag_writes` writes them.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field

from .catalog import Catalog, MessageRow
from .relations import COUNTS, GAP

#: The columns of ``summaries``, in the order of :class:`SummaryRow`'s fields.
SUMMARY_COLUMNS = (
    "id, conv, path, size, mtime_ns, kind, depth, earliest_at, latest_at, first_seq, last_seq, descendant_count, "
    "source_tokens, token_count, summarizer, prompt, level, gen_hash, body_hash, sources_hash, sources, body, parent, stale"
)
#: The same columns with ``body`` left empty: for lists of many rows that never show a body.
SUMMARY_COLUMNS_NO_BODY = SUMMARY_COLUMNS.replace(", body,", ", '' AS body,")


def bump_generation(db: "sqlite3.Connection", conv: str, changes: int = 1) -> None:
    """Count changes to a conversation's summaries, so followers can tell cheaply that something changed."""
    db.execute(
        "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + ?",
        (f"summaries_gen:{conv}", str(changes), changes),
    )


def summaries_generation(catalog: Catalog, conv: str) -> str:
    rows = catalog.execute("SELECT value FROM meta WHERE key=?", (f"summaries_gen:{conv}",))
    return rows[0][0] if rows else "0"


@dataclass(frozen=True)
class SummaryRow:
    """A summary node as the catalog mirrors it."""

    id: str
    conv: str
    path: str
    size: int
    mtime_ns: int
    kind: str
    depth: int
    earliest_at: str
    latest_at: str
    first_seq: int | None
    last_seq: int | None
    descendant_count: int
    source_tokens: int
    token_count: int
    summarizer: str
    prompt: str
    level: str
    gen_hash: str
    body_hash: str
    sources_hash: str
    sources_json: str
    body: str
    parent: str | None
    stale: int

    @property
    def links(self) -> list[SourceLink]:
        """Each source link as written, with what it resolved to (see :class:`SourceLink`)."""
        return [SourceLink(link, sid, bool(ok), int(state)) for link, sid, ok, state in json.loads(self.sources_json)]

    @property
    def sources(self) -> list[str]:
        """Ids of the sources this node covers, in order (deleted or set-aside sources left out)."""
        return [s.id for s in self.links if s.counts and s.id is not None]

    @property
    def gaps(self) -> list[str]:
        """Source links that name nothing this node can cover (a deleted note): filled by the next compaction."""
        return [s.link or "" for s in self.links if s.state == GAP]

    @property
    def human_owned(self) -> bool:
        """A person changed the body: the engine must never regenerate or overwrite it."""
        return self.gen_hash != self.body_hash


@dataclass(frozen=True)
class SourceLink:
    """One entry of a note's ``sources``: the link as written, the id it names, whether Obsidian
    resolves it to that note too (``ok``), and its ``state`` (:data:`~vaultlcm.relations.COUNTS`:
    covered, ``GAP``: a deleted source to rebuild, ``WAITING``: a note a person must fix)."""

    link: str | None
    id: str | None
    ok: bool
    state: int

    @property
    def counts(self) -> bool:
        return self.state == COUNTS


@dataclass(frozen=True)
class ActiveItem:
    """One item of the active context: a root summary or an uncovered message."""

    kind: str  # "summary" | "message"
    position: int  # first seq covered
    summary: SummaryRow | None = None
    message: MessageRow | None = None

    @property
    def id(self) -> str:
        return self.summary.id if self.summary else self.message.id  # type: ignore[union-attr]


#: Tokens the ``<summary …>`` wrapper adds around a summary body in the assembled context.
SUMMARY_OVERHEAD_TOKENS = 60
#: Tokens a raw message's framing adds in the assembled context.
MESSAGE_OVERHEAD_TOKENS = 4


def item_tokens(item: ActiveItem) -> int:
    """What ``item`` costs in the active context, by the catalog's counts (compaction's measure and ``status``')."""
    if item.summary is not None:
        return item.summary.token_count + SUMMARY_OVERHEAD_TOKENS
    assert item.message is not None
    return item.message.tokens + MESSAGE_OVERHEAD_TOKENS


@dataclass
class DagProblem:
    path: str
    kind: str
    detail: str


@dataclass
class SyncReport:
    changed: int = 0
    problems: list[DagProblem] = field(default_factory=list)
