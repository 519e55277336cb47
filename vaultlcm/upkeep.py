"""Keeping the DAG whole after people changed notes: the writer's side of :mod:`vaultlcm.relations`.

Reading the vault never writes (``assemble``, ``grep`` and friends only derive).
What a writer (``compact``, ``doctor --fix``) does on top:

* **relink**: a link Obsidian no longer resolves (a note renamed or moved
  outside Obsidian, by ``mv`` or a file manager) is rewritten to the note's
  current name, as Obsidian itself rewrites links when the rename happens in
  it. Only the link changes: link paths are left out of the body hash, so no
  note becomes edited or stale, and a link a person (or Obsidian) wrote that
  still resolves is never touched;
* **prune**: a note set aside because another covers the same sources (two
  machines compacted the same messages and git merged both) or because every
  source it had was deleted is removed, unless a person wrote it. Nothing is
  lost: its messages are in the logs and are summarized again;
* **refill plan**: what a deleted source covered, found again in the active
  context, so the compaction that refreshes the parent rebuilds it in its place
  (the same messages give the same leaf, and the same id);
* **conflicts**: two machines that summarized the same sources with different
  words (an LLM summarizer) meet in a git conflict over the same note. When no
  person wrote either side, either summary will do: ``doctor --fix`` keeps one (the
  same one on every machine); a person's correction wins over the engine's words;
  two people's versions are theirs to pick.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .errors import ValidationProblem
from .fsutil import atomic_write, read_file
from .relations import WAITING
from .summary_notes import body_hash, exact_body_hash, parse_note, text_links

if TYPE_CHECKING:
    from .dag import ActiveItem, Dag, SummaryRow

_CONFLICT = re.compile(r"^(<{7}|>{7}) ", re.MULTILINE)
#: A link path going into a double-quoted YAML string and a wikilink: no quote, backslash or bracket.
_UNSAFE_IN_LINK = re.compile(r'["\\\[\]|#^\n]')


def tidy(dag: "Dag", conv: str) -> list[str]:
    """Prune set-aside notes nobody wrote and relink outdated links of ``conv``; returns what was done.

    A quick sync is enough: what sets a note aside or outdates a link (a merge, a
    move) adds, removes or renames files; a note edited in place since it was read
    is never removed (its size and mtime are checked first).
    """
    dag.sync(conv)
    done = _prune(dag, conv) + _relink(dag, conv)
    if done:
        dag.sync(conv, full=True)
    return done


def _prune(dag: "Dag", conv: str) -> list[str]:
    done: list[str] = []
    for sid, kind in dag.dropped_by_people(conv):
        row = dag.get(sid)
        if row is None or row.human_owned:
            continue
        path = dag.layout.inside(dag.layout.root / row.path)
        try:
            st = path.stat()
        except FileNotFoundError:
            continue
        if (st.st_size, st.st_mtime_ns) != (row.size, row.mtime_ns):
            continue  # changed since it was read: the next sync decides again
        path.unlink()
        dag.journal.append(row.path)
        why = "another summary covers the same messages" if kind == "superseded" else "all its sources were deleted"
        done.append(f"removed {row.path} ({why}; its messages are summarized again)")
    return done


def _relink(dag: "Dag", conv: str) -> list[str]:
    done: list[str] = []
    for row in dag.with_outdated_links(conv):
        renames: dict[str, str] = {}
        for s in row.links:
            if s.ok or s.id is None or s.link is None:
                continue
            if row.kind == "leaf":
                msg = dag.catalog.get(s.id)
                new = msg.path[:-3] if msg is not None and msg.path.endswith(".md") else None
            else:
                new = dag.link_path(s.id)
            old = text_links(s.link)
            if new and old and not _UNSAFE_IN_LINK.search(new):
                renames[old[0][2].path] = new
        if renames and _rewrite_links(dag, row, renames):
            done.extend(f"rewrote [[{a}]] to [[{b}]] in {row.path}" for a, b in sorted(renames.items()))
    return done


def _rewrite_links(dag: "Dag", row: "SummaryRow", renames: dict[str, str]) -> bool:
    """Point every link of the note whose path is a key of ``renames`` at the new path; True if written."""
    path = dag.layout.inside(dag.layout.root / row.path)
    try:
        text = read_file(path).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    if _CONFLICT.search(text):
        return False  # a person is resolving a git conflict here
    parts: list[str] = []
    at = 0
    for start, end, link in text_links(text):
        if link.path in renames:
            parts += [text[at:start], link.with_path(renames[link.path])]
            at = end
    new_text = "".join(parts) + text[at:]
    if new_text == text or not atomic_write(path, new_text.encode("utf-8")):
        return False
    dag.journal.append(row.path)
    return True


def refill_plan(dag: "Dag", node: "SummaryRow") -> list["SummaryRow | list[ActiveItem]"]:
    """``node``'s sources in order, each gap replaced by the active items that came back from it.

    What a deleted source covered is back in the active context, next to the
    node's remaining sources: between two of them it is exactly what lies between
    their positions; at either end it is the run next to the node's first (or
    last) source, within the node's time range and never more messages than the
    node counted (``descendant_count``) beyond what its sources still cover.
    """
    children = {r.id: r for r in dag.children(node.id)}
    parts: list[SummaryRow | list[ActiveItem]] = []
    for s in node.links:
        if s.state == WAITING:
            continue  # a note a person must fix: nothing is rebuilt in its place
        if s.counts and s.id in children:
            parts.append(children[s.id])
        elif not parts or not isinstance(parts[-1], list):
            parts.append([])
    active = [it for it in dag.active(node.conv) if it.id != node.id]
    budget = node.descendant_count - sum(c.descendant_count for c in children.values())

    def first(it: "ActiveItem") -> int:
        return it.summary.first_seq if it.summary is not None and it.summary.first_seq is not None else it.position

    def last(it: "ActiveItem") -> int:
        return it.summary.last_seq if it.summary is not None and it.summary.last_seq is not None else it.position

    def count(it: "ActiveItem") -> int:
        return it.summary.descendant_count if it.summary is not None else 1

    def in_time(it: "ActiveItem") -> bool:
        lo, hi = (it.summary.earliest_at, it.summary.latest_at) if it.summary is not None else (it.message.at, it.message.at)  # type: ignore[union-attr]
        return node.earliest_at <= lo and hi <= node.latest_at

    gaps = [i for i, p in enumerate(parts) if isinstance(p, list)]
    inner = [i for i in gaps if 0 < i < len(parts) - 1]
    for i in inner:  # exact: what lies between two sources that are still there
        left, right = parts[i - 1], parts[i + 1]
        assert not isinstance(left, list) and not isinstance(right, list)
        got = [it for it in active if left.last_seq is not None and right.first_seq is not None
               and left.last_seq < first(it) and last(it) < right.first_seq]
        parts[i] = got
        budget -= sum(count(it) for it in got)
    for i in (g for g in gaps if g not in inner):
        if i == 0 and len(parts) > 1:
            anchor = parts[1]
            assert not isinstance(anchor, list)
            run = [it for it in reversed(active) if anchor.first_seq is not None and last(it) < anchor.first_seq]
        elif i > 0:
            anchor = parts[i - 1]
            assert not isinstance(anchor, list)
            run = [it for it in active if anchor.last_seq is not None and first(it) > anchor.last_seq]
        else:
            run = []
        got = []
        for it in run:
            if not in_time(it) or count(it) > budget:
                break
            got.append(it)
            budget -= count(it)
        parts[i] = list(reversed(got)) if i == 0 else got
    return parts


def conflict_sides(text: str) -> tuple[str, str] | None:
    """The two versions of a file git left with conflict markers (None if the markers do not pair up)."""
    sides: tuple[list[str], list[str]] = ([], [])
    state = "both"
    for line in text.splitlines(keepends=True):
        mark = line.rstrip("\r\n")
        if mark.startswith("<<<<<<<") and mark[7:8] in ("", " ") and state == "both":
            state = "ours"
        elif mark.startswith("|||||||") and mark[7:8] in ("", " ") and state == "ours":
            state = "base"  # diff3 style: the common ancestor, not kept
        elif mark == "=======" and state in ("ours", "base"):
            state = "theirs"
        elif mark.startswith(">>>>>>>") and mark[7:8] in ("", " ") and state == "theirs":
            state = "both"
        elif state != "base":
            for i, side in enumerate(("ours", "theirs")):
                if state in ("both", side):
                    sides[i].append(line)
    if state != "both" or sides[0] == sides[1]:
        return None
    return "".join(sides[0]), "".join(sides[1])


def resolve_note_conflict(text: str) -> str | None:
    """The version of a conflicted summary note to keep, when no person has to choose (else None)."""
    sides = conflict_sides(text)
    if sides is None:
        return None
    owned: list[bool] = []
    ids = set()
    for side in sides:
        try:
            fm, body = parse_note(side, "<conflict side>")
        except ValidationProblem:
            return None
        ids.add(fm.id)
        owned.append(fm.body_sha256 not in (body_hash(body), exact_body_hash(body)))
    if len(ids) != 1 or all(owned):
        return None  # not the same node, or two people's corrections
    if any(owned):
        return sides[owned.index(True)]
    return min(sides)  # two summaries the engine wrote: either will do, the same one everywhere
