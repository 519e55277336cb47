"""How good are the summaries? Compression, what they are made of, repetition, facts kept by depth.

Read from the summary notes themselves (frontmatter and body, the way a person
or Obsidian reads them) plus ``Vault.get_message`` for the sources of leaves:

* **compression by depth**: body tokens / source tokens per note, from the
  frontmatter (``token_count`` / ``source_tokens``) and recounted
  (``count_tokens`` of the body / the frontmatter's ``source_tokens``);
  median and quartiles;
* **what leaves are made of**: the share of a leaf's words that are copied
  verbatim (runs of 5 words) from tool calls and results, and from the user's
  own messages (words copied from both count as the user's);
* **repetition**: the share of a condensed note's word 8-grams that also occur
  in its children (median); wikilinks are left out of these word measures;
* **facts kept by depth**: for each planted fragment, whether its string (the
  answer, the stale value, the event's detail, the identifier a two-hop
  question hinges on) is still in the leaf covering its message, and in that
  leaf's ancestor at each depth.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vaultlcm import Vault, VaultLCMError
from vaultlcm.tokens import count_tokens

from .scoring import answer_regex

_WORD = re.compile(r"\w+")
#: Obsidian links (``[[…#^m-…|↗]]``) are navigation, not content: left out of the word-level measures.
_LINK = re.compile(r"\[\[[^\]]*\]\]")
_MSG_LINK = re.compile(r"#\^(m-[A-Za-z0-9-]+)")
_SUM_LINK = re.compile(r"\[\[(?:[^\]|#]*/)?(sum_[0-9a-f]{16})")


@dataclass
class Note:
    id: str
    kind: str
    depth: int
    token_count: int
    source_tokens: int
    body: str
    sources: list[str] = field(default_factory=list)


def _frontmatter(text: str) -> tuple[dict[str, Any], str] | None:
    if not text.startswith("---\n"):
        return None
    end = text.find("\n---\n", 4)
    if end < 0:
        return None
    data: dict[str, Any] = {}
    key = ""
    for line in text[4:end].split("\n"):
        if line.startswith("  - ") and key:
            data.setdefault(key, []).append(_value(line[4:]))
        elif ":" in line and not line.startswith(" "):
            key, _, raw = line.partition(":")
            if raw.strip():
                data[key] = _value(raw.strip())
    return data, text[end + 5 :]


def _value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.strip("'\"")


def read_notes(root: Path, conversation: str) -> list[Note]:
    """Every summary note of a conversation (wherever a person moved it inside its folder)."""
    notes = []
    for path in sorted((root / "conversations" / conversation).rglob("*.md")):
        parsed = _frontmatter(path.read_text(encoding="utf-8"))
        if parsed is None:
            continue
        fm, body = parsed
        if not str(fm.get("id", "")).startswith("sum_"):
            continue
        links = [str(x) for x in fm.get("sources", [])]
        sources = [m.group(1) for x in links for m in [_MSG_LINK.search(x) or _SUM_LINK.search(x)] if m]
        notes.append(Note(fm["id"], str(fm.get("kind", "")), int(fm.get("depth", 0)), int(fm.get("token_count", 0)),
                          int(fm.get("source_tokens", 0)), body, sources))
    return notes


def quartiles(xs: list[float]) -> dict[str, float]:
    if not xs:
        return {"n": 0}
    if len(xs) == 1:
        return {"n": 1, "p25": xs[0], "median": xs[0], "p75": xs[0]}
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return {"n": len(xs), "p25": q[0], "median": q[1], "p75": q[2]}


def words_of(text: str) -> list[str]:
    return _WORD.findall(_LINK.sub(" ", text).lower())


def ngrams(words: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def _covered(body_words: list[str], grams: set[tuple[str, ...]], n: int) -> list[bool]:
    marks = [False] * len(body_words)
    for i in range(len(body_words) - n + 1):
        if tuple(body_words[i : i + n]) in grams:
            for j in range(i, i + n):
                marks[j] = True
    return marks


def leaf_makeup(note: Note, vault: Vault) -> tuple[int, int, int]:
    """(words, words copied from tool traffic, words copied from the user) of one leaf."""
    tool_text, user_text = [], []
    for mid in note.sources:
        try:
            msg = vault.get_message(mid)
        except VaultLCMError:  # a source a person deleted: nothing to attribute
            continue
        for b in msg.content:
            if b.get("type") == "tool_call":
                tool_text.append(f"{b.get('name')} {json.dumps(b.get('arguments'), ensure_ascii=False)}")
            elif b.get("type") == "tool_result":
                inner = b.get("content")
                tool_text.append(inner if isinstance(inner, str) else json.dumps(inner, ensure_ascii=False))
            elif b.get("type") == "text" and msg.role == "user":
                user_text.append(str(b.get("text", "")))
    words = words_of(note.body)
    user = _covered(words, ngrams(words_of(" ".join(user_text)), 5), 5)
    tool = _covered(words, ngrams(words_of(" ".join(tool_text)), 5), 5)
    return len(words), sum(t and not u for t, u in zip(tool, user)), sum(user)


def report(vault: Vault, conversation: str, plants: list[tuple[str, str]] | None = None) -> dict[str, Any]:
    """The quality numbers of one conversation; ``plants`` are (message id, needle) pairs to trace by depth."""
    notes = read_notes(vault.root, conversation)
    by_id = {n.id: n for n in notes}
    parent: dict[str, str] = {}
    leaf_of: dict[str, str] = {}
    for n in notes:
        for s in n.sources:
            (leaf_of if n.kind == "leaf" else parent)[s] = n.id
    ratios: dict[int, list[float]] = defaultdict(list)
    recounted: dict[int, list[float]] = defaultdict(list)
    for n in notes:
        if n.source_tokens:
            ratios[n.depth].append(n.token_count / n.source_tokens)
            recounted[n.depth].append(count_tokens(n.body.strip()) / n.source_tokens)
    words = tool_words = user_words = 0
    for n in notes:
        if n.kind == "leaf":
            w, t, u = leaf_makeup(n, vault)
            words, tool_words, user_words = words + w, tool_words + t, user_words + u
    repetition = []
    for n in notes:
        if n.kind == "condensed":
            mine = ngrams(words_of(n.body), 8)
            children: set[tuple[str, ...]] = set()
            for c in n.sources:
                if c in by_id:
                    children |= ngrams(words_of(by_id[c].body), 8)
            if mine:
                repetition.append(len(mine & children) / len(mine))
    kept: dict[int, list[bool]] = defaultdict(list)
    for mid, needle in plants or []:
        node = leaf_of.get(mid)
        rx = answer_regex(needle)
        while node is not None and node in by_id:
            kept[by_id[node].depth].append(bool(rx.search(by_id[node].body)))
            node = parent.get(node)
    depths = sorted(set(ratios) | set(kept))
    return {
        "notes": len(notes),
        "by_depth": {d: {"notes": sum(1 for n in notes if n.depth == d),
                         "ratio": quartiles(ratios.get(d, [])), "ratio_recounted": quartiles(recounted.get(d, [])),
                         "facts_kept": sum(kept.get(d, [])), "facts_traced": len(kept.get(d, []))} for d in depths},
        "leaf_words": words,
        "leaf_tool_share": tool_words / words if words else 0.0,
        "leaf_user_share": user_words / words if words else 0.0,
        "condensed_repetition": quartiles(repetition),
        "plants": len(plants or []),
        "plants_uncovered": sum(1 for mid, _ in plants or [] if mid not in leaf_of),
    }
