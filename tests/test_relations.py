"""The DAG derived from notes people changed: gaps, overlaps, set-aside nodes, under any mix of edits."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dataclasses import replace

from vaultlcm.relations import COUNTS, GAP, WAITING, Derived, Link, Msg, Node, derive, derive_in_parts
from vaultlcm.summary_notes import sources_hash


def build(draw: st.DrawFn) -> tuple[dict[str, Node], dict[str, Msg]]:
    """A well-formed DAG over N messages, then what people and merges do to it."""
    n = draw(st.integers(2, 40))
    messages = {f"m{i}": Msg("c", i + 1, f"h{i}") for i in range(n)}
    nodes: dict[str, Node] = {}
    level: list[str] = []
    i = 0
    while i < n:  # leaves over consecutive runs
        size = draw(st.integers(1, 4))
        ids = [f"m{j}" for j in range(i, min(n, i + size))]
        nid = f"L{i}"
        nodes[nid] = Node(nid, f"{nid}.md", "leaf", 0, tuple(ids), False, f"b{nid}", sources_hash([messages[m].hash for m in ids]),
                          f"e{nid}")
        level.append(nid)
        i += size
    depth = 1
    while len(level) > 1 and draw(st.booleans()):
        upper: list[str] = []
        j = 0
        while j < len(level):
            run = level[j : j + draw(st.integers(2, 3))]
            if len(run) == 1:
                upper.append(run[0])
                j += 1
                continue
            nid = f"C{depth}_{j}"
            old = draw(st.booleans())  # written before link paths left the body hash: its sources hash is exact
            nodes[nid] = Node(nid, f"{nid}.md", "condensed", depth, tuple(run), False, f"b{nid}",
                              sources_hash([nodes[r].exact_body_hash if old else nodes[r].body_hash for r in run]),
                              f"e{nid}")
            upper.append(nid)
            j += len(run)
        level, depth = upper, depth + 1
    # what people and merges do
    for nid in draw(st.lists(st.sampled_from(sorted(nodes)), max_size=3, unique=True)):
        nodes.pop(nid, None)  # deleted
    for k in range(draw(st.integers(0, 3))):  # another machine's leaves over overlapping runs
        start = draw(st.integers(0, n - 1))
        ids = [f"m{j}" for j in range(start, min(n, start + draw(st.integers(1, 4))))]
        nodes[f"X{k}"] = Node(f"X{k}", f"X{k}.md", "leaf", 0, tuple(ids), draw(st.booleans()), f"bX{k}",
                              sources_hash([messages[m].hash for m in ids]))
    for nid in draw(st.lists(st.sampled_from(sorted(nodes)), max_size=3, unique=True)) if nodes else []:
        old = nodes[nid]
        nodes[nid] = Node(old.id, old.path, old.kind, old.depth, old.links, True, old.body_hash, old.sources_hash,
                          old.exact_body_hash)
    if draw(st.booleans()) and any(x.kind == "leaf" for x in nodes.values()):  # a broken link
        nid = draw(st.sampled_from(sorted(x.id for x in nodes.values() if x.kind == "leaf")))
        old = nodes[nid]
        nodes[nid] = Node(old.id, old.path, old.kind, old.depth, ("m-nowhere", *old.links[1:]), old.human_owned,
                          old.body_hash, old.sources_hash, old.exact_body_hash)
    return nodes, messages


@st.composite
def vaults(draw: st.DrawFn) -> tuple[dict[str, Node], dict[str, Msg]]:
    return build(draw)


def resolver(nodes: dict[str, Node]):  # noqa: ANN201
    def resolve(node: Node, link: str) -> Link:
        if node.kind == "leaf":
            return Link(link, link)
        return Link(link, link if link in nodes else None)

    return resolve


def counter(messages: dict[str, Msg]):  # noqa: ANN201
    def count_between(a: int, b: int) -> int:
        return sum(1 for m in messages.values() if a <= m.seq <= b)

    return count_between


def run(nodes: dict[str, Node], messages: dict[str, Msg]) -> Derived:
    return derive("c", nodes, resolver(nodes), messages, counter(messages))


@settings(max_examples=300)
@given(vaults())
def test_every_message_is_covered_at_most_once_and_the_dag_is_sound(v: tuple[dict[str, Node], dict[str, Msg]]) -> None:
    nodes, messages = v
    d = run(nodes, messages)
    claimed: dict[str, str] = {}
    for nid in d.valid:
        node = nodes[nid]
        for s in d.sources[nid]:
            assert s not in claimed, f"{s} covered by {claimed[s]} and {nid}"
            claimed[s] = nid
            if node.kind == "leaf":
                assert s in messages and d.coverage[s] == nid
            else:
                assert s in d.valid and nodes[s].depth < node.depth and d.parent[s] == nid
        assert d.sources[nid], "a valid node covers something"
        states = d.states[nid]
        if GAP in states and WAITING not in states:
            assert d.stale[nid] == 1  # a deleted source is rebuilt by the next compaction
    problem_paths = {p for p, _k, _d in d.problems}
    for nid, node in nodes.items():
        if nid not in d.valid:  # set aside: always said why, unless it only waits for a note a person must fix
            assert node.path in problem_paths or WAITING in d.states[nid]
    assert not any(nodes[r].human_owned for r in d.removable)  # a person's note is never removed
    assert d.removable.isdisjoint(d.valid)


@settings(max_examples=200)
@given(vaults())
def test_the_result_does_not_depend_on_reading_order(v: tuple[dict[str, Node], dict[str, Msg]]) -> None:
    nodes, messages = v
    a = run(nodes, messages)
    b = run(dict(reversed(list(nodes.items()))), messages)
    assert (a.valid, a.parent, a.coverage, a.removable, a.stale) == (b.valid, b.parent, b.coverage, b.removable, b.stale)
    assert sorted(a.problems) == sorted(b.problems)


@settings(max_examples=200)
@given(vaults())
def test_a_deleted_note_never_dissolves_what_is_above_it(v: tuple[dict[str, Node], dict[str, Msg]]) -> None:
    nodes, messages = v
    d = run(nodes, messages)
    for nid in d.valid:
        node = nodes[nid]
        if node.kind == "condensed":
            for link, state in zip(node.links, d.states[nid]):
                if link not in nodes:
                    assert state == GAP  # a gap, never a reason to set the node aside
                elif state == COUNTS:
                    assert link in d.valid


def test_the_side_consistent_with_the_order_wins_an_overlap() -> None:
    messages = {f"m{i}": Msg("c", i + 1, f"h{i}") for i in range(8)}
    ours = Node("sum_b", "b.md", "leaf", 0, ("m2", "m3", "m4", "m5"), False, "bb", sources_hash(["h2", "h3", "h4", "h5"]))
    # the other machine's leaf took m2, m3 and then its own messages, which the merge put after ours
    theirs = Node("sum_a", "a.md", "leaf", 0, ("m2", "m3", "m6", "m7"), False, "ba", sources_hash(["h2", "h3", "h6", "h7"]))
    d = run({"sum_a": theirs, "sum_b": ours}, messages)
    assert d.valid == {"sum_b"} and d.removable == {"sum_a"}  # not the lower id: the contiguous one
    assert [k for _p, k, _d in d.problems] == ["superseded"]
    # a person's correction wins over the engine's note, and is never removed
    mine = Node("sum_a", "a.md", "leaf", 0, theirs.links, True, "ba", theirs.sources_hash)
    d = run({"sum_a": mine, "sum_b": ours}, messages)
    assert d.valid == {"sum_a"} and d.removable == {"sum_b"}


class DictParts:
    """The leaves for :func:`derive_in_parts`, kept in dicts: what the catalog does with them, in memory."""

    def __init__(self, leaves: dict[str, Node], messages: dict[str, Msg], size: int, exact: dict[str, str]) -> None:
        self.all, self.msgs, self.size, self.exact = leaves, messages, size, exact
        self.claimed: dict[str, str] = {}
        self.recorded: dict[str, tuple[object, ...]] = {}
        self.coverage: dict[str, str] = {}
        self.problems: dict[str, list[tuple[str, str, str]]] = {}
        self.exact_asked: set[str] = set()

    def pages(self):  # noqa: ANN201
        ids = list(self.all)
        for i in range(0, len(ids), self.size):
            yield {k: self.all[k] for k in ids[i : i + self.size]}

    def messages(self, leaves: dict[str, Node]) -> dict[str, Msg]:
        return {m: self.msgs[m] for n in leaves.values() for m in n.links if m in self.msgs}

    def record(self, leaves: dict[str, Node], d: Derived) -> None:
        for nid, n in leaves.items():
            self.recorded[nid] = (nid in d.valid, d.links[nid], d.states[nid], d.stale.get(nid), d.first.get(nid),
                                  d.last.get(nid), nid in d.removable, d.sources.get(nid))
            self.problems[n.path] = [p for p in d.problems if p[0] == n.path]
        self.coverage.update(d.coverage)

    def claim(self, claims: list[tuple[str, str]]) -> set[str]:
        shared: set[str] = set()
        for mid, nid in claims:
            owner = self.claimed.setdefault(mid, nid)
            if owner != nid:
                shared.update((nid, owner))
        return shared

    def leaves(self, ids: set[str]) -> dict[str, Node]:
        self.coverage = {m: leaf for m, leaf in self.coverage.items() if leaf not in ids}
        return {i: self.all[i] for i in sorted(ids)}

    def exact_hashes(self, ids: list[str]) -> dict[str, str]:
        self.exact_asked.update(ids)
        return {i: self.exact[i] for i in ids if i in self.exact}


@settings(max_examples=300)
@given(vaults(), st.integers(1, 6), st.randoms(use_true_random=False))
def test_settling_the_leaves_a_page_at_a_time_gives_what_settling_the_whole_dag_gives(
        v: tuple[dict[str, Node], dict[str, Msg]], size: int, rnd) -> None:  # noqa: ANN001
    nodes, messages = v
    order = list(nodes)
    rnd.shuffle(order)  # pages in any order: shared messages across pages as often as within one
    nodes = {k: nodes[k] for k in order}
    whole = run(nodes, messages)
    # Exact body hashes are not known up front: the parts give them when asked.
    leaves = {k: replace(n, exact_body_hash="") for k, n in nodes.items() if n.kind == "leaf"}
    upper = {k: n for k, n in nodes.items() if n.kind != "leaf"}
    parts = DictParts(leaves, messages, size, {k: n.exact_body_hash for k, n in nodes.items()})
    d = derive_in_parts("c", {k: replace(n, exact_body_hash="") for k, n in upper.items()}, resolver(nodes),
                        counter(messages), parts)
    for nid in leaves:
        assert parts.recorded[nid] == (nid in whole.valid, whole.links[nid], whole.states[nid], whole.stale.get(nid),
                                       whole.first.get(nid), whole.last.get(nid), nid in whole.removable,
                                       whole.sources.get(nid))
    assert parts.coverage == whole.coverage
    assert d.valid == whole.valid & set(upper) and d.parent == whole.parent and d.removable == whole.removable & set(upper)
    for nid in upper:
        assert (d.links[nid], d.states[nid], d.stale.get(nid), d.first.get(nid), d.last.get(nid)) == \
            (whole.links[nid], whole.states[nid], whole.stale.get(nid), whole.first.get(nid), whole.last.get(nid))
    assert sorted(d.problems + [p for ps in parts.problems.values() for p in ps]) == sorted(whole.problems)


@given(ids=st.lists(st.text(st.characters(blacklist_categories=("Zs", "Zl", "Zp", "Cc")), min_size=1), max_size=4),
       around=st.text())
def test_the_missing_sources_a_problem_names_are_read_back(ids: list[str], around: str) -> None:
    """What ``Vault.sync`` reads back to tell whether a message that appeared mends a link: every id the
    problem named, and no other, whatever the note's path or text around it."""
    from vaultlcm.relations import MISSING_SOURCE, missing_sources

    ids = [i for i in ids if not any(ch.isspace() for ch in i)]
    detail = "; ".join(f"{around.split()[0] if around.split() else 'n.md'}: field 'sources': " + MISSING_SOURCE.format(i)
                       for i in ids)
    assert missing_sources(detail) == set(ids)
