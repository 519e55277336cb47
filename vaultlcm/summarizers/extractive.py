"""The default summarizer: deterministic, offline, standard library only.

It does not write prose; it *selects*. Every line (long lines: every sentence)
of the sources is scored by what an agent needs to carry on: decisions,
constraints, file paths, identifiers, numbers with units, errors, open tasks,
and the first thing the user asked. The best lines that fit the budget are
kept in source order, each group attributed to its source id, and the summary
ends with ``Expand for detail: <ids>`` naming the sources whose content was
left out, so an agent knows exactly what to expand.

Same request, same bytes: no randomness, no clocks, stable tie-breaking.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..tokens import count_tokens, truncate_to_tokens
from .base import (
    TRUNCATION_MARKER,
    SourceItem,
    SummaryRequest,
    aggressive_target,
    bound_items,
    fit_tokens,
    source_tokens,
)

EXPAND_PREFIX = "Expand for detail: "

_I = re.IGNORECASE
# (weight, pattern, per-extra-match bonus cap): a category scores once per unit,
# plus a little for each extra match where density matters (paths, identifiers).
_DECISION = re.compile(
    r"\b(?:decided|decide|decision|we(?:'ll| will| are going to)|let's|chose|choose|chosen|going with|"
    r"go with|opted|settled on|agreed|switch(?:ed|ing)? to|instead of|prefer(?:red)?|plan is)\b",
    _I,
)
_CONSTRAINT = re.compile(
    r"\b(?:must|never|always|do not|don't|cannot|can't|shall|required?|requires|only|at most|at least|"
    r"no more than|forbidden|not allowed|keep)\b",
    _I,
)
_PATH = re.compile(
    r"https?://\S+"
    r"|\b[A-Za-z]:\\(?:[\w .-]+\\)*[\w.-]+"
    r"|(?<![\w/])(?:~|\.{1,2})?/[\w.-]+(?:/[\w.-]*)+"
    r"|(?<![\w/])/[\w-]+\.\w{1,8}\b"
    r"|\b[\w.-]+(?:/[\w.-]+)+\.\w{1,8}\b"
    r"|\b[\w-]+\.(?:py|pyi|js|mjs|ts|tsx|jsx|md|toml|yaml|yml|json|jsonl|conf|cfg|ini|txt|rs|go|java|kt|c|h|cc|"
    r"cpp|hpp|rb|php|sh|ps1|sql|html|css|lock|log|csv|xml|env|dockerfile)\b",
    _I,
)
_IDENT = re.compile(
    r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b"  # CamelCase
    r"|\b[a-z]+[A-Z][A-Za-z0-9]*\b"  # camelCase
    r"|\b[A-Za-z0-9]+(?:_[A-Za-z0-9]+)+\b"  # snake_case, SCREAMING_CASE
    r"|\b(?:call|toolu|tool|msg|req|run|sum|m)[-_][A-Za-z0-9_]{4,}\b"  # call / message / summary ids
    r"|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,64}\b"  # hashes
    r"|\bv?\d+\.\d+(?:\.\d+)+(?:[-+][\w.]+)?\b|\bv\d+(?:\.\d+)*\b"  # versions
    r"|\b\w+\(\)"  # function()
)
_NUMBER_UNIT = re.compile(
    r"[$€£]\s?\d[\d,.]*"
    r"|\b\d+(?:[.,]\d+)*\s?(?:%|ms|µs|us|ns|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?|days?|weeks?|months?|"
    r"years?|[kKMGT]i?B|bytes?|tokens?|lines?|rows?|files?|items?|messages?|requests?|req/s|rps|qps|px|x|k|"
    r"cores?|threads?|USD|EUR|dollars?)(?!\w)"
)
_NUMBER = re.compile(r"\b\d{2,}\b")
_ERROR = re.compile(
    r"\b(?:error|errors|exception|traceback|failed|failure|fails|failing|crash(?:ed|es)?|panic(?:ked)?|"
    r"segfault|fatal|refused|denied|timed? ?out|exit (?:code|status)|stack ?trace|broken|bug)\b"
    r"|\b\w+(?:Error|Exception)\b",
    _I,
)
_TASK = re.compile(
    r"\bTODO\b|\bFIXME\b|\bXXX\b|^\s*[-*]\s*\[ \]"
    r"|(?i:\bnext(?: step)?s?\b|\bneeds? to\b|\bshould\b|\bhave to\b|\bremaining\b|\bpending\b|\bblocked\b"
    r"|\bfollow[- ]?up\b|\bnot yet\b|\bstill\b|\bopen question\b)"
)
_CORRECTION = re.compile(
    r"\b(?:correction|corrected|correcting|erratum|errata|actually|in fact|instead of|was wrong|is wrong|mistaken(?:ly)?)\b", _I
)
_CATEGORIES: tuple[tuple[re.Pattern[str], int, int], ...] = (
    (_CORRECTION, 8, 0),
    (_DECISION, 6, 0),
    (_ERROR, 4, 0),
    (_TASK, 4, 0),
    (_CONSTRAINT, 3, 0),
    (_PATH, 3, 2),
    (_IDENT, 3, 2),
    (_NUMBER_UNIT, 2, 1),
    (_NUMBER, 1, 0),
)
FIRST_REQUEST_BONUS = 50
#: Lines of a summary a person corrected (or that sits above one) outrank everything else but
#: the first request, so the correction survives every level of condensation.
EDITED_BONUS = 30
LEAD_BONUS = 1

_SENTENCE_SPLIT = re.compile(r"(?<=[.!?…])\s+(?=[A-Za-z0-9\"'(\[`])")
_BULLET = re.compile(r"^(?:[-*+•]|\d+[.)])\s+(?!\[ \])")
_ID_PREFIX = re.compile(r"^\[[A-Za-z0-9_-]+\]\s*")
_FENCE = re.compile(r"^\s*(?:```|~~~)")
LONG_LINE_CHARS = 160


@dataclass
class _Unit:
    item: int
    pos: int
    text: str
    score: int
    tokens: int
    clipped: bool = False


def score_text(text: str) -> int:
    """How much an agent would miss ``text`` if it were dropped (0 = chit-chat)."""
    score = 0
    for pattern, weight, extra_cap in _CATEGORIES:
        hits = len(pattern.findall(text)) if extra_cap else (1 if pattern.search(text) else 0)
        if hits:
            score += weight + min(hits - 1, extra_cap)
    return score


def _split_units(text: str, condensed: bool) -> list[str]:
    """Lines of ``text``, long lines split into sentences, noise lines dropped."""
    units: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or _FENCE.match(line):
            continue
        if condensed:
            # Lower summaries carry their own expand lines and attributions: the
            # condensed node attributes to the summary ids instead.
            if line.startswith(EXPAND_PREFIX.strip()) or line.startswith(TRUNCATION_MARKER):
                continue
            line = _ID_PREFIX.sub("", line)
        line = _BULLET.sub("", line)
        parts = _SENTENCE_SPLIT.split(line) if len(line) > LONG_LINE_CHARS else [line]
        units.extend(" ".join(p.split()) for p in parts if p.strip())
    return units


def expand_line(ids: list[str], limit: int) -> str:
    """``Expand for detail: a, b, …`` naming as many ``ids`` as fit ``limit`` tokens (at least one)."""
    full = EXPAND_PREFIX + ", ".join(ids)
    if len(ids) <= 1 or count_tokens(full) <= limit:
        return full

    def line(k: int) -> str:
        return EXPAND_PREFIX + ", ".join(ids[:k]) + f", … (+{len(ids) - k} more)"

    lo, hi = 1, len(ids) - 1  # binary search for the most ids that fit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count_tokens(line(mid)) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return line(lo)


class ExtractiveSummarizer:
    """Deterministic offline summarizer; see the module docstring."""

    name = "extractive"

    def __init__(self, max_input_tokens: int | None = None) -> None:
        #: Cap on the source tokens read (None = read everything); keeps a
        #: pathological multi-megabyte item from making scoring slow.
        self.max_input_tokens = max_input_tokens

    def complete(self, system: str, prompt: str, max_tokens: int) -> str:
        """Not available: the extractive summarizer has no language model."""
        raise NotImplementedError(
            "the extractive summarizer cannot answer free-form prompts; set summarizer = \"anthropic\" "
            "or \"openai\" in vaultlcm.toml for LLM answers"
        )

    def summarize(self, request: SummaryRequest, *, aggressive: bool = False) -> str:
        """Pick the lines that matter, within ``target_tokens`` (about half when ``aggressive``).

        The output never exceeds ``target_tokens`` (for targets of at least
        about 20 tokens, the size of a one-id expand line) and always ends
        with an ``Expand for detail:`` line.
        """
        items = request.items
        if not items:
            return ""
        if self.max_input_tokens is not None:
            items = bound_items(items, self.max_input_tokens)
        ids = list(dict.fromkeys(item.id for item in items))
        minimal = count_tokens(expand_line(ids, 0))
        # Never aim at more than the source: a "summary" that does not shrink
        # would only be rejected by the escalation.
        source = source_tokens(items)
        if aggressive:
            aim = min(aggressive_target(request.target_tokens), max(1, source // 2))
        else:
            aim = min(request.target_tokens, max(1, source - 1))
        budget = min(request.target_tokens, max(aim, minimal))

        units, all_units_of = self._units(request, items)
        reserve = min(count_tokens(expand_line(ids, 10**9)), max(budget // 4, minimal))
        room = budget - reserve - 1
        max_unit = max(24, room // 6)  # no single line may eat the budget
        chosen = self._select(units, items, room, max_unit)
        while True:
            text = self._render(items, ids, chosen, all_units_of, budget)
            if count_tokens(text) <= budget or not chosen:
                break
            # Token counts of joined text are not exactly additive: drop the
            # least important kept unit until the real count fits.
            worst = min(chosen, key=lambda u: (u.score, -u.pos))
            chosen = [u for u in chosen if u is not worst]
        if count_tokens(text) > budget:
            return fit_tokens(text, budget)
        return self._fill(units, items, ids, chosen, all_units_of, budget, max_unit, text)

    # -- steps -----------------------------------------------------------------

    def _units(
        self, request: SummaryRequest, items: tuple[SourceItem, ...]
    ) -> tuple[list[_Unit], dict[int, int]]:
        """Scored, deduplicated units of every item, and how many units each item has."""
        condensed = request.depth > 0
        first_user = next((i for i, it in enumerate(items) if (it.role or "").lower() == "user"), 0)
        seen: set[str] = set()
        units: list[_Unit] = []
        count_of: dict[int, int] = {}
        pos = 0
        for index, item in enumerate(items):
            count_of[index] = 0
            for n, text in enumerate(_split_units(item.text, condensed)):
                key = text.lower()
                if key in seen:
                    continue  # repeated line (tool output, lower summaries): keep the first
                seen.add(key)
                count_of[index] += 1
                score = score_text(text)
                if score and n == 0:
                    score += LEAD_BONUS
                if index == first_user and n == 0:
                    score += FIRST_REQUEST_BONUS  # what the user asked for frames everything else
                if item.edited:
                    score += EDITED_BONUS
                units.append(_Unit(index, pos, text, score, count_tokens(text)))
                pos += 1
        return units, count_of

    @staticmethod
    def _clip(unit: _Unit, max_unit: int) -> _Unit:
        if unit.tokens <= max_unit:
            return unit
        clipped = truncate_to_tokens(unit.text, max_unit - 1).rstrip() + "…"
        return _Unit(unit.item, unit.pos, clipped, unit.score, count_tokens(clipped), clipped=True)

    def _select(
        self, units: list[_Unit], items: tuple[SourceItem, ...], room: int, max_unit: int
    ) -> list[_Unit]:
        """Highest-scoring units that fit ``room`` tokens (long ones clipped), in source order."""
        chosen: list[_Unit] = []
        prefixed: set[int] = set()
        for unit in sorted((u for u in units if u.score > 0), key=lambda u: (-u.score, u.pos)):
            unit = self._clip(unit, max_unit)
            cost = unit.tokens + 2
            if unit.item not in prefixed:
                cost += count_tokens(f"[{items[unit.item].id}] ")
            if cost <= room:
                chosen.append(unit)
                prefixed.add(unit.item)
                room -= cost
        return sorted(chosen, key=lambda u: u.pos)

    def _fill(
        self,
        units: list[_Unit],
        items: tuple[SourceItem, ...],
        ids: list[str],
        chosen: list[_Unit],
        count_of: dict[int, int],
        budget: int,
        max_unit: int,
        text: str,
    ) -> str:
        """Use the room the expand-line reservation did not need for more units.

        The reservation assumes every id gets listed; usually far fewer are, so
        a second pass adds the next best units while the real count still fits.
        """
        taken = {u.pos for u in chosen}
        slack = budget - count_tokens(text)
        attempts = 0
        for unit in sorted((u for u in units if u.score > 0 and u.pos not in taken), key=lambda u: (-u.score, u.pos)):
            if slack <= 2 or attempts >= 64:  # bounded work: this is a refinement
                break
            if min(unit.tokens, max_unit) + 2 > slack:
                continue
            attempts += 1
            trial = sorted([*chosen, self._clip(unit, max_unit)], key=lambda u: u.pos)
            candidate = self._render(items, ids, trial, count_of, budget)
            used = count_tokens(candidate)
            if used <= budget:
                chosen, text, slack = trial, candidate, budget - used
        return text

    def _render(
        self,
        items: tuple[SourceItem, ...],
        ids: list[str],
        chosen: list[_Unit],
        count_of: dict[int, int],
        budget: int,
    ) -> str:
        """Kept units grouped per source, then the expand line (sources with omitted content)."""
        lines: list[str] = []
        kept_whole: dict[int, int] = {}
        prev: _Unit | None = None
        for unit in sorted(chosen, key=lambda u: u.pos):
            if prev is not None and unit.item == prev.item:
                # "…" marks a gap (left-out lines) unless the previous unit already ends with one.
                gap = unit.pos != prev.pos + 1 and not lines[-1].endswith("…")
                lines[-1] += (" … " if gap else " ") + unit.text
            else:
                lines.append(f"[{items[unit.item].id}] {unit.text}")
            prev = unit
            if not unit.clipped:
                kept_whole[unit.item] = kept_whole.get(unit.item, 0) + 1
        omitted = [items[i].id for i in range(len(items)) if kept_whole.get(i, 0) < count_of[i]]
        wanted = list(dict.fromkeys(omitted)) or ids
        body = "\n".join(lines)
        left = budget - (count_tokens(body) + 1 if body else 0)
        tail = expand_line(wanted, left)
        return f"{body}\n{tail}" if body else tail
