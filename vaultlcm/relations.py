"""Which summary condenses which, derived from the ``sources`` links of the notes alone.

Given every summary note of a conversation (its links as written) and the
messages they may cover, :func:`derive` settles the DAG:

* each link is resolved to the node or message it names (the caller resolves
  paths as Obsidian does; see :mod:`vaultlcm.links`);
* a link that names nothing is a **gap**: the note was deleted (or moved out of
  its conversation). The node keeps everything else it covers and becomes
  stale; what the deleted note covered is back in the active context until the
  next compaction rebuilds it under this node. Nothing above dissolves;
* a link that names the wrong thing (a message from a condensed node, a summary
  from a leaf, another conversation, a node that is not lower) **breaks** the
  node: it takes no part in the DAG and its sources return. That is a problem
  for a person to fix, so a node linking to a broken note (or to a note that
  cannot be read) **waits** for them: that link counts for nothing, but it is no
  gap to fill either, and nothing is regenerated around it;
* a source two nodes claim (two machines compacted the same messages and git
  merged both, or a hand edit) goes to one of them, lowest depth first, then a
  person's note over the engine's, a node without gaps, a node whose messages
  are contiguous in conversation order, a node another note links to, then by
  id. The other node is **set
  aside** whole (its sources return): a problem when a person wrote it, else
  ``superseded`` routine work the next compaction removes;
* a node left with no source at all is set aside as ``emptied``.

Everything returned is derived: the same notes give the same result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .summary_notes import sources_hash


@dataclass(frozen=True)
class Node:
    """What the DAG needs of one summary note."""

    id: str
    path: str
    kind: str  # "leaf" | "condensed"
    depth: int
    links: tuple[str, ...]
    human_owned: bool
    body_hash: str
    sources_hash: str
    #: sha256 of the body byte for byte: what nodes written before link paths were left out of the
    #: body hash took over their sources (so such a node is not stale for that alone).
    exact_body_hash: str = ""


@dataclass(frozen=True)
class Msg:
    """What the DAG needs of one message."""

    conv: str
    seq: int
    hash: str


@dataclass(frozen=True)
class Link:
    """One source link, resolved: ``id`` is what it names (None: nothing), ``ok`` whether Obsidian finds it too.

    ``waiting``: the link names a note that exists but cannot be read (its
    frontmatter is broken); it counts for nothing until a person fixes the note.
    """

    link: str
    id: str | None
    ok: bool = True
    why: str = ""  # for a gap or a broken link: what the link names instead
    waiting: bool = False


#: What a source link is to its node: covered, a gap to fill, or waiting for a person.
COUNTS, GAP, WAITING = 1, 0, 2


@dataclass
class Derived:
    """The settled DAG of one conversation."""

    links: dict[str, list[Link]] = field(default_factory=dict)
    valid: set[str] = field(default_factory=set)
    parent: dict[str, str] = field(default_factory=dict)
    first: dict[str, int | None] = field(default_factory=dict)
    last: dict[str, int | None] = field(default_factory=dict)
    stale: dict[str, int] = field(default_factory=dict)
    coverage: dict[str, str] = field(default_factory=dict)  # message id -> leaf id
    #: ``(path, kind, detail)``; kinds: ``dag`` (a problem), ``superseded``, ``emptied``.
    problems: list[tuple[str, str, str]] = field(default_factory=list)
    #: Engine-written nodes set aside (superseded or emptied): the next compaction removes them.
    removable: set[str] = field(default_factory=set)
    #: Sources each valid node covers, in the order of its links (gaps left out).
    sources: dict[str, list[str]] = field(default_factory=dict)
    #: For every node, the state of each link (:data:`COUNTS`, :data:`GAP`, :data:`WAITING`).
    states: dict[str, list[int]] = field(default_factory=dict)


def derive(
    conv: str,
    nodes: dict[str, Node],
    resolve: Callable[[Node, str], Link],
    messages: dict[str, Msg],
    count_between: Callable[[int, int], int],
) -> Derived:
    """Settle the DAG of ``conv``.

    ``resolve(node, link)`` names what a source link of ``node`` points at;
    ``messages`` holds the messages any leaf link names; ``count_between(a, b)``
    counts the conversation's main-thread messages at positions ``a..b``
    (used only to break ties between nodes claiming the same source).
    """
    out = Derived()
    broken: dict[str, str] = {}
    for n in nodes.values():
        resolved = [resolve(n, link) for link in n.links]
        out.links[n.id] = resolved
        bad = _broken_link(conv, n, resolved, nodes, messages)
        if bad:
            broken[n.id] = bad
    referenced = {r.id for links in out.links.values() for r in links if r.id is not None}
    claimed: dict[str, str] = {}
    covered: dict[str, int] = {}  # messages a valid node covers, transitively
    waiting = set(broken)  # nodes a person must fix; links to them wait
    for depth in sorted({n.depth for n in nodes.values()}):
        level = [n for n in nodes.values() if n.depth == depth]
        effective: dict[str, list[str]] = {}
        gaps: dict[str, int] = {}
        for n in level:
            if n.id in broken:
                out.states[n.id] = [GAP] * len(n.links)
                out.problems.append((n.path, "dag", f"{n.path}: field 'sources': {broken[n.id]}; fix the link "
                                     "(or restore the note it named from git)"))
                continue
            states = [COUNTS if r.id is not None and (n.kind == "leaf" or r.id in out.valid)
                      else WAITING if r.waiting or r.id in waiting else GAP for r in out.links[n.id]]
            out.states[n.id] = states
            effective[n.id] = [r.id for r, st in zip(out.links[n.id], states) if st == COUNTS and r.id is not None]
            gaps[n.id] = states.count(GAP)
        counts: dict[str, int] = {}
        for sid_list in effective.values():
            for sid in sid_list:
                counts[sid] = counts.get(sid, 0) + 1
        contested = {nid for nid, s in effective.items() if any(counts[x] > 1 or x in claimed for x in s)}

        def span(nid: str) -> tuple[int | None, int | None, int]:
            srcs = effective[nid]
            if nodes[nid].kind == "leaf":
                seqs = [messages[s].seq for s in srcs]
                return (min(seqs) if seqs else None, max(seqs) if seqs else None, len(srcs))
            firsts = [f for f in (out.first.get(s) for s in srcs) if f is not None]
            lasts = [x for x in (out.last.get(s) for s in srcs) if x is not None]
            return (min(firsts) if firsts else None, max(lasts) if lasts else None, sum(covered[s] for s in srcs))

        def contiguous(nid: str) -> bool:
            lo, hi, n_covered = span(nid)
            return lo is None or hi is None or count_between(lo, hi) == n_covered

        def preference(nid: str) -> tuple[bool, bool, bool, bool, str]:
            n = nodes[nid]
            return (not n.human_owned, gaps[nid] > 0, nid in contested and not contiguous(nid),
                    nid not in referenced, nid)

        for nid in sorted(effective, key=preference):
            n = nodes[nid]
            srcs = effective[nid]
            taken = next((s for s in srcs if s in claimed), None)
            if taken is not None:
                winner = claimed[taken]
                what = (f"{n.path}: field 'sources': source {taken} is already covered by {winner} "
                        f"({nodes[winner].path})")
                if n.human_owned:
                    waiting.add(nid)
                    out.problems.append((n.path, "dag", what + "; this note holds a person's correction: move it "
                                         f"into {winner} by hand and delete this note"))
                else:
                    out.problems.append((n.path, "superseded", what + ", as when two machines compacted the same "
                                         "messages and git merged both; it is set aside (its sources return to the "
                                         "active context) and the next compaction removes it"))
                    out.removable.add(nid)
                continue
            if not srcs and WAITING in out.states[nid]:
                continue  # set aside until a person fixes the note(s) it names
            if not srcs:
                out.problems.append((n.path, "emptied", f"{n.path}: every source of summary {nid} was deleted or "
                                     "set aside; it is set aside and the next compaction summarizes what they "
                                     "covered again" + ("" if n.human_owned else " and removes it")))
                if not n.human_owned:
                    out.removable.add(nid)
                continue
            lo, hi, n_covered = span(nid)
            out.valid.add(nid)
            out.sources[nid] = srcs
            out.first[nid], out.last[nid] = lo, hi
            covered[nid] = n_covered
            if n.kind == "leaf":
                digest = sources_hash([messages[s].hash for s in srcs])
                out.coverage.update((s, nid) for s in srcs)
            else:
                digest = sources_hash([nodes[s].body_hash for s in srcs])
                if digest != n.sources_hash and sources_hash([nodes[s].exact_body_hash for s in srcs]) == n.sources_hash:
                    digest = n.sources_hash
                out.parent.update((s, nid) for s in srcs)
            # A node waiting for a person is never regenerated: that would drop the link they must fix.
            out.stale[nid] = 0 if WAITING in out.states[nid] else int(digest != n.sources_hash or gaps[nid] > 0)
            for s in srcs:
                claimed[s] = nid
    return out


def _broken_link(conv: str, n: Node, resolved: list[Link], nodes: dict[str, Node],
                 messages: dict[str, Msg]) -> str | None:
    """Why a link of ``n`` names the wrong thing (None when every link is fine or names nothing)."""
    seen: set[str] = set()
    for r in resolved:
        if r.id is None:
            if r.why and n.kind == "leaf":
                return f"{r.link} {r.why}"
            continue
        if r.id in seen:
            return f"{r.link} is listed twice"
        seen.add(r.id)
        if n.kind == "leaf":
            msg = messages.get(r.id)
            if msg is None:
                return f"source {r.id} is not a message of this vault"
            if msg.conv != conv:
                return f"source {r.id} belongs to conversation {msg.conv!r}"
        else:
            child = nodes.get(r.id)
            if child is None:
                return f"source {r.link} is not a summary of this conversation"
            if child.depth >= n.depth:
                return (f"source {r.id} has depth {child.depth}, not below this node's depth {n.depth} "
                        "(a cycle or a wrong depth)")
    return None
