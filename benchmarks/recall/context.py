"""Three ways to fill a context of B tokens from the same history, and how many answers each keeps.

* **vaultlcm**: the session ingested into a fresh vault (one ``Vault.ingest``
  per day), ``compact(conv, force=True)``, then ``assemble(conv, B)`` on a copy
  of that compacted vault (so one budget's call cannot change what the next
  one sees; whether ``assemble`` wrote to the vault is reported).
* **window**: the newest raw messages that fit B, each counted as vaultlcm
  counts a raw message (tokens of its text, tool calls and results, + 4).
* **window + summary**: the newest raw messages in B/2, plus one summary of
  everything older by the vault's own summarizer (``make_summarizer`` with the
  vault's settings, ``summarize_with_escalation``, items rendered as
  compaction renders them) with the rest of the budget as its target; when the
  summary overshoots its target the oldest window messages make room.

Score: the share of questions whose answer is in the context's text (every
message's text, tool calls and results, summary blocks, and the system text
``assemble`` returns), by the rules in ``scoring.py``.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from vaultlcm import Vault
from vaultlcm.summarizers import SourceItem, SummaryRequest, make_summarizer, summarize_with_escalation
from vaultlcm.tokens import count_tokens

from .scoring import context_text, present
from .sessions import Session, message_tokens

CONV = "recall-bench"
#: What a summary costs around its body in a context (vaultlcm's own allowance for the <summary> wrapper).
SUMMARY_OVERHEAD = 60
STRATEGIES = ("vaultlcm", "window", "window+summary")


def fixed_clock(session: Session) -> datetime:
    last = datetime.fromisoformat(session.messages[-1]["timestamp"])
    return last + timedelta(hours=1)


@dataclass
class BuiltVault:
    root: Path
    ids: list[str]
    """Vault message id of each session message, by index."""
    ingest_s: float
    compact_s: float
    clock: datetime

    def open(self, root: Path | None = None) -> Vault:
        return Vault(root or self.root, environ={}, clock=lambda: self.clock)


def build_vault(session: Session, root: Path) -> BuiltVault:
    """Ingest the session day by day into a new vault at ``root`` and compact it fully."""
    clock = fixed_clock(session)
    with Vault.init(root, environ={}, clock=lambda: clock) as vault:
        t0 = time.perf_counter()
        ids: list[str] = []
        for day in session.by_day():
            ids.extend(vault.ingest(CONV, day))
        ingest_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        vault.compact(CONV, force=True)
        compact_s = time.perf_counter() - t0
    if len(ids) != len(session.messages):
        raise RuntimeError(f"ingest returned {len(ids)} ids for {len(session.messages)} messages")
    return BuiltVault(root, ids, ingest_s, compact_s, clock)


def vault_digest(root: Path) -> str:
    """sha256 over every file of the vault outside the derived ``.vaultlcm/`` folder."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if rel.parts[0] == ".vaultlcm" or not p.is_file():
            continue
        h.update(str(rel).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


@dataclass
class Cell:
    """One strategy at one budget."""

    strategy: str
    budget: int
    found: dict[str, bool]
    tokens: int
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def score(self) -> float:
        return sum(self.found.values()) / len(self.found) if self.found else 0.0


def score(session: Session, text: str) -> dict[str, bool]:
    return {q.id: present(q, text) for q in session.qas}


def vaultlcm_cell(session: Session, built: BuiltVault, budget: int, scratch: Path) -> Cell:
    copy = scratch / f"assemble-{budget}"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(built.root, copy, symlinks=True)
    before = vault_digest(copy)
    t0 = time.perf_counter()
    with built.open(copy) as vault:
        ctx = vault.assemble(CONV, budget)
    seconds = time.perf_counter() - t0
    text = context_text(ctx.messages) + "\n" + str(getattr(ctx, "system_prompt_addition", "") or "")
    changed = vault_digest(copy) != before
    shutil.rmtree(copy, ignore_errors=True)
    extra = {"budget_use": ctx.estimated_tokens / budget, "vault_changed": changed,
             "summaries": len(getattr(ctx, "summary_ids", []) or []), "raw_messages": len(getattr(ctx, "message_ids", []) or [])}
    return Cell("vaultlcm", budget, score(session, text), ctx.estimated_tokens, seconds, extra)


def window_start(session: Session, room: int) -> tuple[int, int]:
    """Index of the oldest message of the newest run that fits ``room`` tokens, and the run's tokens."""
    used = 0
    i = len(session.messages)
    while i > 0:
        cost = message_tokens(session.messages[i - 1])
        if used + cost > room:
            break
        used += cost
        i -= 1
    return i, used


def window_cell(session: Session, budget: int) -> Cell:
    t0 = time.perf_counter()
    start, used = window_start(session, budget)
    text = context_text(session.messages[start:])
    return Cell("window", budget, score(session, text), used, time.perf_counter() - t0, {"raw_messages": len(session.messages) - start})


def render_for_summary(message: Any) -> str:
    """A message as compaction hands it to the summarizer (its own renderer when the module still has it)."""
    try:
        from vaultlcm.compaction import message_for_summary
    except ImportError:  # compaction was reorganised: the role and the searchable text, as a summarizer sees them
        return f"{message.role}: {message.searchable_text()}"
    return message_for_summary(message)


class SummaryBaseline:
    """Window + one summary of everything older, by the vault's summarizer, on the vault's own messages."""

    def __init__(self, built: BuiltVault) -> None:
        with built.open() as vault:
            self.settings = vault.settings
            self.template_dir = vault.root / "templates"
            messages = vault.messages(CONV)
        self.items = [SourceItem(id=mid, kind="message", text=render_for_summary(m), role=m.role, at=m.timestamp)
                      for mid, m in zip(built.ids, messages)]

    def cell(self, session: Session, budget: int) -> Cell:
        t0 = time.perf_counter()
        start, used = window_start(session, budget // 2)
        summary, level = "", "none"
        if start > 0:
            summarizer = make_summarizer(self.settings, {}, template_dir=self.template_dir if self.template_dir.is_dir() else None)
            target = max(32, budget - used - SUMMARY_OVERHEAD)
            request = SummaryRequest(conversation=CONV, depth=0, items=tuple(self.items[:start]), target_tokens=target)
            result = summarize_with_escalation(summarizer, request)
            summary, level = result.text, result.level
        s_tokens = count_tokens(summary) + SUMMARY_OVERHEAD if summary else 0
        while start < len(session.messages) and used + s_tokens > budget:  # the summary overshot: make room
            used -= message_tokens(session.messages[start])
            start += 1
        text = summary + "\n" + context_text(session.messages[start:])
        return Cell("window+summary", budget, score(session, text), used + s_tokens, time.perf_counter() - t0,
                    {"summary_tokens": s_tokens, "level": level, "raw_messages": len(session.messages) - start})


def run_contexts(session: Session, built: BuiltVault, budgets: list[int], scratch: Path, log: Any = None) -> list[Cell]:
    cells: list[Cell] = []
    baseline = SummaryBaseline(built)
    for budget in budgets:
        for make in (lambda b: vaultlcm_cell(session, built, b, scratch), lambda b: window_cell(session, b),
                     lambda b: baseline.cell(session, b)):
            cell = make(budget)
            cells.append(cell)
            if log:
                log(f"  {session.size} B={budget:>6} {cell.strategy:<15} {cell.score:6.1%}  {cell.tokens:>6} tokens  {cell.seconds:5.1f}s")
    return cells
