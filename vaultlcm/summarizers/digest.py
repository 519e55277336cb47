"""The default summarizer: a deterministic, offline digest a person can learn from.

A **leaf** says what was asked, what was done (one line per tool action, never
raw JSON), what was found or decided and what is still open, each line linked
to its source block (see :mod:`.digest_leaf`). A **condensed** note is a dated
timeline of its children with the decisions merged, superseded values marked
and the open items still standing (see :mod:`.digest_condensed`). The body
format is :mod:`.body`.

Both are built the same way: the content becomes scored *units* (a sentence,
an action, a key phrase), each belonging to a *line*; the best units that fit
the target are kept and rendered in source order. A person's corrections are
kept verbatim before anything else. Content is only ever quoted: nothing in it
can change the structure, the order or the length of the output.

Same request, same bytes: no randomness, no clocks, stable tie-breaking. The
standard library and the token counter are all it needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..tokens import count_tokens
from .base import SummaryRequest, aggressive_target, bound_items, fit_tokens, source_tokens
from .body import bullet, render
from .linecount import count_by_lines, count_piece
from .phrases import clip_words, shorten

#: What ``summarizer`` in a note's frontmatter says for digest summaries.
DIGEST_NAME = "digest"
#: A section's best unit is taken before the rest only when it says at least this much.
DIVERSITY_MIN_SCORE = 3
DIVERSITY_MIN_ROOM = 200


@dataclass
class Unit:
    """A piece of a line: kept or dropped as a whole, by score."""

    section: str
    line: tuple[object, ...]
    """Units with the same key render on one line (sentences of one message, parts of one timeline entry)."""
    pos: tuple[int, ...]
    """Source order."""
    text: str
    link: str | None
    score: int
    joiner: str | None = None
    """What joins this unit to a kept unit of the same ``part`` before it (", " in a list of facts)."""
    part: str | None = None
    """Units of one line in different parts are joined by " · "; sentences (None) by " " or " … " after a gap."""
    required: bool = False
    """Kept whenever its line is kept (the date of a timeline entry)."""
    alone: bool = True
    """Whether the unit may make a line by itself (a later day's date says nothing without its facts)."""
    tokens: int = 0

    def __post_init__(self) -> None:
        if not self.tokens:
            self.tokens = count_piece(self.text)


@dataclass
class Draft:
    """Everything a digest may say, before fitting it to the target."""

    order: tuple[str, ...]
    units: list[Unit] = field(default_factory=list)
    corrections: list[str] = field(default_factory=list)
    """Correction lines, kept verbatim whatever the budget."""
    fallback: str = ""
    """A line to say when no unit fits (never an empty summary for non-empty input)."""
    fallback_link: str | None = None
    """The source the fallback line links to (every line of a digest links to its source)."""


def _line_text(units: list[Unit]) -> str:
    parts: list[str] = []
    prev: Unit | None = None
    for unit in units:
        if prev is not None:
            if unit.part is not None or prev.part is not None:
                parts.append(unit.joiner if unit.part == prev.part and unit.joiner else " · ")
            else:
                adjacent = unit.pos[:-1] == prev.pos[:-1] and unit.pos[-1] == prev.pos[-1] + 1
                parts.append(" " if adjacent or parts[-1].endswith("…") else " … ")
        parts.append(unit.text)
        prev = unit
    return "".join(parts)


def render_units(draft: Draft, chosen: list[Unit]) -> str:
    """The body for the ``chosen`` units: lines grouped, sections in order, corrections last."""
    by_line: dict[tuple[object, ...], list[Unit]] = {}
    for unit in sorted(chosen, key=lambda u: u.pos):
        by_line.setdefault(unit.line, []).append(unit)
    sections: dict[str, list[tuple[tuple[int, ...], str]]] = {}
    for units in by_line.values():
        first = units[0]
        sections.setdefault(first.section, []).append((first.pos, bullet(_line_text(units), first.link)))
    rendered = {name: [text for _, text in sorted(lines)] for name, lines in sections.items()}
    return render(rendered, draft.order, draft.corrections)


def pack(draft: Draft, budget: int) -> str:
    """The best units of ``draft`` that fit ``budget`` tokens, rendered.

    Greedy by score on estimated costs (a unit's tokens, plus its line's
    bullet and link the first time the line is used, plus the section heading
    the first time the section is used), then checked against the real count:
    the weakest unit goes until the text fits, and the room left is offered to
    the units not yet taken.
    """
    fixed = "\n".join(draft.corrections)
    fixed_cost = count_by_lines(fixed) + (1 if fixed else 0)
    room = budget - fixed_cost
    if room <= 0:
        return fixed
    max_unit = max(20, min(48, room // 5))
    units = [_clipped(u, max_unit) for u in draft.units]
    units = [u for u in units if u.text]
    ranked = sorted(units, key=lambda u: (-u.score, u.pos))
    links = {u.line: u.link for u in units}  # counted once per line, not once per unit
    line_cost = {line: count_piece(bullet("", link)) + 1 for line, link in links.items()}
    heading_cost = {name: count_piece(f"### {name}") + 1 for name in draft.order}

    chosen: list[Unit] = []
    taken: set[int] = set()
    lines: set[tuple[object, ...]] = set()
    sections: set[str] = set()
    required: dict[tuple[object, ...], list[Unit]] = {}  # a line's required units, in order: one pass, not one a unit
    for unit in units:
        if unit.required:
            required.setdefault(unit.line, []).append(unit)

    def offer(candidates: list[Unit], room: int) -> int:
        for unit in candidates:
            if id(unit) in taken:
                continue
            extra = [r for r in required.get(unit.line, []) if id(r) not in taken and r is not unit]
            cost = unit.tokens + 1 + sum(r.tokens + 1 for r in extra)
            if unit.line not in lines:
                cost += line_cost[unit.line]
            if unit.section not in sections:
                cost += heading_cost.get(unit.section, 4)
            if cost > room:
                continue
            for u in [unit, *extra]:
                chosen.append(u)
                taken.add(id(u))
            lines.add(unit.line)
            sections.add(unit.section)
            room -= cost
        return room

    # Every section first gets its best unit (a leaf that lost all its Done lines to
    # facts would no longer say what was done), then the rest goes by score.
    best_of: dict[str, Unit] = {}
    for unit in ranked:
        if unit.score >= DIVERSITY_MIN_SCORE:  # a plain "read x.py" does not earn a section of its own
            best_of.setdefault(unit.section, unit)
    if room >= DIVERSITY_MIN_ROOM:  # with room for a handful of lines only, the best ones go first
        room = offer(sorted(best_of.values(), key=lambda u: (-u.score, u.pos)), room)
    offer(ranked, room)
    text = render_units(draft, chosen)
    for _ in range(3):
        while chosen and count_by_lines(text) > budget:
            worst = min((u for u in chosen if not u.required) or chosen, key=lambda u: (u.score, [-p for p in u.pos]))
            chosen = [u for u in chosen if u is not worst and not (worst.required and u.line == worst.line)]
            taken = {id(u) for u in chosen}
            lines = {u.line for u in chosen}
            sections = {u.section for u in chosen}
            text = render_units(draft, chosen)
        slack = budget - count_by_lines(text)
        if slack < 4 or len(taken) == len(units):
            break
        before = len(chosen)
        offer(ranked, slack - 2)
        if len(chosen) == before:
            break
        text = render_units(draft, chosen)
    if any(not u.alone for u in chosen):
        company = {u.line for u in chosen if u.alone}
        if any(u.line not in company for u in chosen):
            chosen = [u for u in chosen if u.line in company]  # a date whose facts did not fit goes too
            text = render_units(draft, chosen)
    if count_by_lines(text) > budget:  # only the corrections left and still too long: keep them whole
        text = fixed
    if not chosen and not fixed:
        text = _fallback(draft, units, budget)
    return text


def _clipped(unit: Unit, max_tokens: int) -> Unit:
    if unit.tokens <= max_tokens:
        return unit
    return replace(unit, text=shorten(unit.text, max_tokens), tokens=0)


def _fallback(draft: Draft, units: list[Unit], budget: int) -> str:
    """Something true and short when the target is too small for a whole line."""
    best = min(units, key=lambda u: (-u.score, u.pos)) if units else None
    text = best.text if best is not None else draft.fallback
    if not text:
        return ""
    line = bullet(text, best.link if best is not None else draft.fallback_link)
    if count_tokens(line) <= budget:
        return line
    short = clip_words("- " + text, budget)
    if short.strip(" -…"):
        return short
    head = fit_tokens(text, budget - 1)  # one long word: cut it, keep the bullet
    return "- " + head if head and count_tokens("- " + head) <= budget else fit_tokens(text, budget)


class DigestSummarizer:
    """Deterministic offline digest summarizer; see the module docstring."""

    name = DIGEST_NAME

    def __init__(self, max_input_tokens: int | None = None) -> None:
        #: Cap on the source tokens read (None = everything): a pathological
        #: multi-megabyte item cannot make a digest slow.
        self.max_input_tokens = max_input_tokens

    def complete(self, system: str, prompt: str, max_tokens: int) -> str:
        """Not available: the digest summarizer has no language model."""
        raise NotImplementedError(
            "the digest summarizer cannot answer free-form prompts; set summarizer = \"anthropic\" "
            "or \"openai\" in vaultlcm.toml for LLM answers"
        )

    def summarize(self, request: SummaryRequest, *, aggressive: bool = False) -> str:
        """The digest of ``request`` within ``target_tokens`` (about half when ``aggressive``).

        Never longer than the target and never as long as the source, unless a
        person's corrections alone are longer (they are always kept whole);
        never empty for non-empty input and a target of a few tokens.
        """
        from .digest_condensed import condensed_draft
        from .digest_leaf import leaf_draft

        items = request.items
        if not items:
            return ""
        if self.max_input_tokens is not None:
            items = bound_items(items, self.max_input_tokens)
        source = source_tokens(items)
        budget = aggressive_target(request.target_tokens) if aggressive else request.target_tokens
        budget = min(budget, max(1, source - 1))
        draft = leaf_draft(items) if request.depth <= 0 else condensed_draft(items, request.depth)
        return pack(draft, budget)
