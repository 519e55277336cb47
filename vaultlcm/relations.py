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

import re

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

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


@dataclass(frozen=True, slots=True)
class Settled:
    """A node an earlier :func:`derive` call settled, as the nodes above it see it.

    The DAG can be settled in parts (the leaves a page at a time, then the
    condensed nodes over them): what a node needs of a child is only this.
    """

    depth: int
    body_hash: str
    valid: bool
    waiting: bool  # set aside until a person fixes it: links to it wait instead of leaving a gap
    first: int | None
    last: int | None
    covered: int  # messages it covers, transitively
    exact_body_hash: str = ""


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
    #: Nodes set aside until a person fixes them (a broken link, or a person's note that lost a source).
    waiting: set[str] = field(default_factory=set)
    #: Messages each valid node covers, transitively.
    covered: dict[str, int] = field(default_factory=dict)

    def settled(self, node: Node) -> Settled:
        """What the nodes above need of ``node`` (one of this call's), for a later call's ``below``."""
        nid = node.id
        return Settled(node.depth, node.body_hash, nid in self.valid, nid in self.waiting, self.first.get(nid),
                       self.last.get(nid), self.covered.get(nid, 0), node.exact_body_hash)


def derive(
    conv: str,
    nodes: dict[str, Node],
    resolve: Callable[[Node, str], Link],
    messages: dict[str, Msg],
    count_between: Callable[[int, int], int],
    *,
    below: Mapping[str, Settled] | None = None,
    referenced: Collection[str] = (),
) -> Derived:
    """Settle the DAG of ``conv``.

    ``resolve(node, link)`` names what a source link of ``node`` points at;
    ``messages`` holds the messages any leaf link names; ``count_between(a, b)``
    counts the conversation's main-thread messages at positions ``a..b``
    (used only to break ties between nodes claiming the same source).

    Settling in parts: ``below`` holds nodes an earlier call settled, which
    ``nodes`` may name as sources (all of them lower: the leaves under the
    condensed nodes); ``referenced`` names the nodes that links outside
    ``nodes`` point at (a tie-break). Leaves that share no message with a leaf
    outside ``nodes`` settle the same in any part as in the whole.
    """
    below = below or {}
    out = Derived()
    broken: dict[str, str] = {}
    for n in nodes.values():
        resolved = [resolve(n, link) for link in n.links]
        out.links[n.id] = resolved
        bad = _broken_link(conv, n, resolved, nodes, messages, below)
        if bad:
            broken[n.id] = bad
    named_here = {r.id for links in out.links.values() for r in links if r.id is not None}
    claimed: dict[str, str] = {}
    covered = out.covered  # messages a valid node covers, transitively
    out.waiting.update(broken)
    waiting = set(broken).union(i for i, s in below.items() if s.waiting)  # nodes a person must fix; links to them wait

    def valid(i: str) -> bool:
        s = below.get(i)
        return i in out.valid or (s is not None and s.valid)
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
            states = [COUNTS if r.id is not None and (n.kind == "leaf" or valid(r.id))
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
            # Sources are valid nodes: this call's, else settled below.
            firsts = [f for f in (out.first[s] if s in out.first else below[s].first for s in srcs) if f is not None]
            lasts = [x for x in (out.last[s] if s in out.last else below[s].last for s in srcs) if x is not None]
            return (min(firsts) if firsts else None, max(lasts) if lasts else None,
                    sum(covered[s] if s in covered else below[s].covered for s in srcs))

        def contiguous(nid: str) -> bool:
            lo, hi, n_covered = span(nid)
            return lo is None or hi is None or count_between(lo, hi) == n_covered

        def preference(nid: str) -> tuple[bool, bool, bool, bool, str]:
            n = nodes[nid]
            return (not n.human_owned, gaps[nid] > 0, nid in contested and not contiguous(nid),
                    nid not in named_here and nid not in referenced, nid)

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
                    out.waiting.add(nid)
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
                kids: list[Node | Settled] = [nodes[s] if s in nodes else below[s] for s in srcs]
                digest = sources_hash([k.body_hash for k in kids])
                if digest != n.sources_hash and sources_hash([k.exact_body_hash for k in kids]) == n.sources_hash:
                    digest = n.sources_hash
                out.parent.update((s, nid) for s in srcs)
            # A node waiting for a person is never regenerated: that would drop the link they must fix.
            out.stale[nid] = 0 if WAITING in out.states[nid] else int(digest != n.sources_hash or gaps[nid] > 0)
            for s in srcs:
                claimed[s] = nid
    return out


#: Why a leaf's link is broken when the message it names is not in the catalog (read back by
#: :func:`missing_sources`: a message that appears later mends the link, see ``Vault.sync``).
MISSING_SOURCE = "source {} is not a message of this vault"
_MISSING_SOURCE = re.compile(re.escape(MISSING_SOURCE).replace(r"\{\}", r"(\S+)"))


def missing_sources(detail: str) -> set[str]:
    """The message ids a problem's ``detail`` says are missing (those :data:`MISSING_SOURCE` names)."""
    return set(_MISSING_SOURCE.findall(detail))


def _broken_link(conv: str, n: Node, resolved: list[Link], nodes: dict[str, Node],
                 messages: dict[str, Msg], below: Mapping[str, Settled]) -> str | None:
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
                return MISSING_SOURCE.format(r.id)
            if msg.conv != conv:
                return f"source {r.id} belongs to conversation {msg.conv!r}"
        else:
            child: Node | Settled | None = nodes.get(r.id) or below.get(r.id)
            if child is None:
                return f"source {r.link} is not a summary of this conversation"
            if child.depth >= n.depth:
                return (f"source {r.id} has depth {child.depth}, not below this node's depth {n.depth} "
                        "(a cycle or a wrong depth)")
    return None


class Parts(Protocol):
    """Where :func:`derive_in_parts` reads the leaves of a conversation and records what they settle to."""

    def pages(self) -> Iterable[dict[str, Node]]:
        """Every leaf, a page at a time (each leaf in exactly one page)."""

    def messages(self, leaves: dict[str, Node]) -> dict[str, Msg]:
        """The messages these leaves' links name (those that exist)."""

    def record(self, leaves: dict[str, Node], derived: Derived) -> None:
        """Record what these leaves settled to (:attr:`Derived.coverage` included); a later record of the same
        leaves (after :meth:`leaves`) replaces it."""

    def claim(self, claims: list[tuple[str, str]]) -> set[str]:
        """Claim ``(message id, leaf id)`` pairs; return every leaf that shares a message with another leaf
        (in these pairs or in earlier ones), the first claimant included."""

    def leaves(self, ids: set[str]) -> dict[str, Node]:
        """These leaves again, to settle them together; what was recorded and claimed for them is undone."""

    def exact_hashes(self, ids: list[str]) -> dict[str, str]:
        """:attr:`Node.exact_body_hash` of these nodes."""


def derive_in_parts(conv: str, upper: dict[str, Node], resolve: Callable[[Node, str], Link],
                    count_between: Callable[[int, int], int], parts: Parts) -> Derived:
    """Settle the DAG of ``conv`` holding one page of leaves at a time; returns the condensed nodes' part.

    The same result as :func:`derive` over every node at once: a leaf depends only on
    its own messages, unless it shares one with another leaf (a merge of two machines'
    compactions, a hand edit), and those few are settled again, all together, with
    every leaf they share with. The condensed nodes (``upper``: all the others, far
    fewer) are settled last, over what each leaf left them (:class:`Settled`); only
    the children of a node whose sources hash differs need their exact body hash.
    """
    upper = dict(upper)  # given their exact body hashes below, where needed
    named = {n.id: [resolve(n, link).id for link in n.links] for n in upper.values()}
    referenced = {i for ids in named.values() for i in ids if i is not None}
    below: dict[str, Settled] = {}
    tangled: set[str] = set()

    def settle(leaves: dict[str, Node]) -> Derived:
        derived = derive(conv, leaves, resolve, parts.messages(leaves), count_between, referenced=referenced)
        parts.record(leaves, derived)
        below.update((nid, derived.settled(n)) for nid, n in leaves.items())
        return derived

    for page in parts.pages():
        derived = settle(page)
        # Every message a leaf counts, won or lost: how leaves sharing one find each other across pages.
        tangled |= parts.claim([(mid, nid) for nid in page for r, st in zip(derived.links[nid], derived.states[nid])
                                if st == COUNTS and (mid := r.id) is not None])
    if tangled:
        settle(parts.leaves(tangled))
    wanted: set[str] = set()
    for nid, ids in named.items():
        kids = [upper.get(i) or below.get(i) if i is not None else None for i in ids]
        if any(k is None for k in kids) or sources_hash([k.body_hash for k in kids if k is not None]) \
                != upper[nid].sources_hash:
            wanted.update(i for i in ids if i is not None)
    for sid, exact in parts.exact_hashes(sorted(wanted)).items():
        if sid in upper:
            upper[sid] = replace(upper[sid], exact_body_hash=exact)
        elif sid in below:
            below[sid] = replace(below[sid], exact_body_hash=exact)
    return derive(conv, upper, resolve, {}, count_between, below=below)
