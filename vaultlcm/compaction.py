"""Compaction: turning old raw messages into leaf summaries and leaves into condensed nodes.

Compaction prepares summaries ahead of time; what the model sees is chosen per
call by assembly (a cut through the DAG), so a summary never hides anything
for good. One *step* writes one summary note. Steps repeat until the active
context (the coarsest cut) is under the target (or, with ``force``, until
nothing is eligible):

1. **refresh**: a stale node that no person owns is regenerated from its
   current sources (same sources, same id), so a correction below it rises;
2. **leaf**: the oldest chunk of uncovered messages outside the protected tail
   (the newest user message and what follows it, and at least
   ``fresh_tail_count`` messages), sized in tokens: about three leaf targets,
   at most ``leaf_max_messages`` and ``leaf_chunk_max_tokens``; an oversized
   message is a chunk of its own; never ending between a tool call and its
   result;
3. **condense**: the oldest run of ``condensed_min_fanin``..``condensed_max_fanin``
   adjacent root summaries of one depth, up to ``incremental_max_depth``.

A chunk whose leaf would not be clearly smaller than its messages (a leaf is
about a third of its chunk, plus its ``<summary>`` wrapper) is never
summarized, and a condensed node replaces several nodes by one smaller than
their sum: compaction never grows the context. In *hard* mode (a model call
waits on it) the rules loosen step by step: short chunks, fan-in of two, mixed
depths; the protected tail is never summarized. Every step removes at least one
item from the active context or turns messages into a smaller summary, so
compaction always terminates.

A provider failure never loses data: in soft mode compaction stops and the
messages stay uncovered for the next run; in hard mode the chunk falls back to
the digest summarizer and the note says so (``doctor`` lists it).
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from filelock import FileLock, Timeout

from .tail import find_tail
from .catalog import MessageRow
from .dag import ActiveItem, Dag, SummaryRow
from .dag_rows import MESSAGE_OVERHEAD_TOKENS, SUMMARY_OVERHEAD_TOKENS, item_tokens
from .errors import LockTimeoutError, SummarizerError, ValidationProblem
from .messages import Message, format_timestamp
from .msglog import MessageLog
from .settings import Settings
from .tokens import count_tokens
from .summarizers import DIGEST_NAME, DigestSummarizer, SourceItem, Summarizer, SummaryRequest, summarize_with_escalation
from .summarizers.base import TARGET_SLACK, SummaryResult, source_tokens, target_for
from .summarizers.linecount import count_by_lines
from .summarizers.corrections import diff_corrections, enforce, required_lines
from .upkeep import refill_plan
from .summary_notes import (
    SummaryFrontmatter,
    body_hash,
    make_summary_id,
    message_link,
    note_body,
    sources_hash,
    summary_link,
)

#: Most children of a condensed node above depth 1 (see :meth:`Compactor.max_fanin`).
UPPER_FANIN = 4
#: A summary must cost at most this share of what it replaces in the context ("clearly smaller").
CLEARLY_SMALLER = 0.8
#: After a provider failure, a blocked assemble uses the fallback without asking again for this long.
PROVIDER_BACKOFF_SECONDS = 60.0
#: How often compaction checks every note of a conversation for in-place edits (see ``_refresh_stale``).
FULL_CHECK_SECONDS = 60.0
#: Decoded messages kept during one compaction run (see ``Compactor._read_rows``).
READ_CACHE_SIZE = 4096
#: Messages of an uncovered run looked at per step when planning leaves (widened when a chunk needs more).
RUN_WINDOW = 128


def message_for_summary(msg: Message) -> str:
    """A message as plain text for a summarizer: role, text, tool calls and results.

    Thinking blocks are left out: they are the agent's scratch work, not what
    happened, and a summary must not present them as findings.
    """
    out: list[str] = []
    for block in msg.content:
        kind = block.get("type")
        if kind == "text":
            out.append(str(block.get("text", "")))
        elif kind in ("thinking", "redacted_thinking"):
            continue
        elif kind == "tool_call":
            out.append(f"-> tool call {block.get('name')} [{block.get('id')}]: {json.dumps(block.get('arguments'), ensure_ascii=False)}")
        elif kind == "tool_result":
            inner = block.get("content")
            text = inner if isinstance(inner, str) else Message(role="tool", content=inner or []).searchable_text()
            flag = " (error)" if block.get("is_error") else ""
            out.append(f"<- tool result [{block.get('call_id')}]{flag}: {text}")
        elif kind == "image":
            out.append("[image]")
        else:
            out.append(f"[{kind}] {json.dumps(block, ensure_ascii=False)[:500]}")
    return f"{msg.role}: " + "\n".join(out)


@dataclass
class CompactionReport:
    conversation: str
    created: list[str] = field(default_factory=list)
    refreshed: list[str] = field(default_factory=list)
    fallbacks: list[str] = field(default_factory=list)
    error: str | None = None
    tokens_before: int = 0
    tokens_after: int = 0
    #: What was done first about people's changes: outdated links rewritten, set-aside notes removed.
    tidied: list[str] = field(default_factory=list)
    #: What the git auto-commit did (``git_auto_commit`` / ``--git-commit``), when asked for.
    commit: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "conversation": self.conversation,
            "created": self.created,
            "refreshed": self.refreshed,
            "fallbacks": self.fallbacks,
            "error": self.error,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "tidied": self.tidied,
            **({"commit": self.commit} if self.commit is not None else {}),
        }


class Compactor:
    """Runs compaction for the conversations of one vault."""

    def __init__(
        self,
        log: MessageLog,
        dag: Dag,
        settings: Settings,
        summarizer: Callable[[], Summarizer],
        clock: Callable[[], datetime],
    ) -> None:
        self.log = log
        self.dag = dag
        self.settings = settings
        self._summarizer_factory = summarizer
        self._summarizer: Summarizer | None = None
        self.clock = clock
        self._failed_at = float("-inf")
        self._recent_failure = ""
        #: Messages read during one compaction run, by (id, entry hash): a chunk is read to plan it
        #: (tool pairs), to summarize it and for the tail; decoding it once is enough. Cleared after
        #: each run and bounded, so a long-running engine holds nothing that grows with history.
        self._read_cache: OrderedDict[tuple[str, str], Message] = OrderedDict()

    @property
    def summarizer(self) -> Summarizer:
        if self._summarizer is None:
            self._summarizer = self._summarizer_factory()
        return self._summarizer

    def _read_rows(self, rows: list[MessageRow]) -> list[tuple[MessageRow, Message]]:
        """``log.read_rows`` through the run's cache of decoded messages, and the messages this process just
        appended (``log.just_written``)."""
        cache = self._read_cache
        missing = [r for r in rows if (r.id, r.hash) not in cache]
        if missing:
            # What this process appended a moment ago is at hand already (checked against the row).
            written = self.log.just_written.take(missing)
            if written:
                for r in missing:
                    if r.id in written:
                        cache[(r.id, r.hash)] = written[r.id]
                missing = [r for r in missing if r.id not in written]
            for row, msg in self.log.read_rows(missing) if missing else ():
                cache[(row.id, row.hash)] = msg
            while len(cache) > READ_CACHE_SIZE:
                cache.popitem(last=False)
        out = []
        for r in rows:
            kept = cache.get((r.id, r.hash))
            out.append((r, kept) if kept is not None else self.log.read_rows([r])[0])
        return out

    def _read_row(self, row: MessageRow) -> Message:
        return self._read_rows([row])[0][1]

    # -- planning ----------------------------------------------------------------

    def chunk_target_tokens(self) -> int:
        """Raw tokens a leaf chunk aims at: three times the leaf target, so a leaf compresses about 3x."""
        return min(3 * self.settings.leaf_target_tokens, self.settings.leaf_chunk_max_tokens)

    def expected_leaf_tokens(self, source_tokens: int) -> int:
        """About what a leaf over ``source_tokens`` comes to (the summarizer's own target rule)."""
        return target_for(0, source_tokens, self.settings.leaf_target_tokens)

    def max_fanin(self, depth: int) -> int:
        """Most children of a node at ``depth``: ``condensed_max_fanin`` over leaves, fewer above.

        Assembly unfolds a node into all its children at once, so the fan-in sets how
        finely the cut can fill a budget; wide nodes over leaves keep the most detail
        (the level assembly shows most), narrower ones above let small budgets unfold
        the top of the DAG step by step.
        """
        s = self.settings
        return s.condensed_max_fanin if depth <= 1 else max(s.condensed_min_fanin, min(s.condensed_max_fanin, UPPER_FANIN))

    def worth_a_leaf(self, chunk: list[MessageRow]) -> bool:
        """Whether a leaf over ``chunk``, wrapper included, would be clearly smaller in the context."""
        raw = sum(r.tokens for r in chunk)
        in_context = raw + MESSAGE_OVERHEAD_TOKENS * len(chunk)
        expected = SUMMARY_OVERHEAD_TOKENS + TARGET_SLACK * self.expected_leaf_tokens(raw)
        return expected <= CLEARLY_SMALLER * in_context

    def tail_start(self, items: list[ActiveItem]) -> int:
        """Index in ``items`` where the protected tail begins (the same tail assembly keeps verbatim).

        The tail is the newest real user message and everything after it, and at least
        ``fresh_tail_count`` messages; compaction never summarizes it.
        """
        if not items:
            return 0
        conv = items[-1].summary.conv if items[-1].summary is not None else items[-1].message.conv  # type: ignore[union-attr]
        rows, _ = find_tail(self.log, conv, self.settings.fresh_tail_count, self._read_row)
        if not rows:
            return len(items)
        first = rows[0].seq
        i = len(items)
        while i > 0:
            it = items[i - 1]
            last = it.message.seq if it.message is not None else (it.summary.last_seq or 0)  # type: ignore[union-attr]
            if last < first:
                break
            i -= 1
        return i

    def _take_chunk(self, run: list[MessageRow]) -> tuple[list[MessageRow], bool]:
        """The first chunk of ``run`` and whether it is full (no later message would join it)."""
        s = self.settings
        target = self.chunk_target_tokens()
        chunk: list[MessageRow] = []
        tokens = 0
        for row in run:
            if chunk and tokens + row.tokens > s.leaf_chunk_max_tokens:
                return chunk, True  # an oversized message gets a chunk of its own next
            chunk.append(row)
            tokens += row.tokens
            # At leaf_max_messages a chunk closes once its leaf would be clearly smaller; short
            # messages keep joining until then, or they would never be summarized at all.
            if tokens >= target or (len(chunk) >= s.leaf_max_messages and self.worth_a_leaf(chunk)):
                return chunk, True
        return chunk, False

    def _turn_end(self, chunk: list[MessageRow]) -> list[MessageRow]:
        """End a full chunk where a turn ends (before a user message) when that keeps most of it."""
        half = sum(r.tokens for r in chunk) // 2
        seen = 0
        cut = len(chunk)
        for j, row in enumerate(chunk):
            if j >= max(1, self.settings.leaf_min_messages) and row.role == "user" and seen >= half and (
                    self.worth_a_leaf(chunk[:j])):
                cut = j
            seen += row.tokens
        return chunk[:cut]

    def _leaf_chunk(self, items: list[ActiveItem], start: int, end: int, *, force: bool) -> tuple[list[MessageRow], int] | None:
        """The oldest chunk worth a leaf among the message items in ``items[start:end]``, and the index after it.

        Chunks are sized in tokens (:meth:`chunk_target_tokens`, capped by
        ``leaf_chunk_max_tokens``, at most ``leaf_max_messages``); an oversized message is
        a chunk of its own, so it never stalls the pass. A chunk that is not full waits for
        more messages unless ``force`` or nothing can join it (a summary follows). A chunk
        whose summary would not be clearly smaller (:meth:`worth_a_leaf`) is never summarized.
        """
        i = start
        while i < end:
            if items[i].kind != "message":
                i += 1
                continue
            # The run of messages is read a window at a time: a full compaction walks a run of
            # every uncovered message, and scanning the rest of it for each chunk would be quadratic.
            run: list[MessageRow] = []
            window = RUN_WINDOW
            seen, complete = self._grow_run(items, i, end, window, run)
            pos = 0
            while pos < len(run):
                if not complete and len(run) - pos < window // 2:
                    seen, complete = self._grow_run(items, seen, end, window, run)
                chunk, full = self._take_chunk(run[pos:])
                taken = len(chunk)
                if full and pos + len(chunk) < len(run):
                    chunk = self._turn_end(chunk)
                turned = len(chunk)
                chunk = self._keep_tool_pairs(chunk, run[pos:])  # type: ignore[arg-type]
                if not complete and (pos + max(taken, len(chunk)) + 8 >= len(run) or len(chunk) < turned):
                    # The chunk reached the end of the window, or was cut before a call whose result
                    # may lie past it (a long chain of tool results): widen the window and look again.
                    window *= 2
                    seen, complete = self._grow_run(items, seen, end, window, run)
                    continue
                if not chunk:
                    break  # the run opens with a call whose result is not stored yet
                island = complete and seen < end  # a summary follows: no later message can join this run
                if (full or force or island) and self.worth_a_leaf(chunk):
                    return chunk, i + pos + len(chunk)
                if not full:
                    break
                pos += len(chunk)
            while not complete:
                seen, complete = self._grow_run(items, seen, end, window, [])
            i = seen
        return None

    @staticmethod
    def _grow_run(items: list[ActiveItem], seen: int, end: int, n: int, run: list[MessageRow]) -> tuple[int, bool]:
        """Add up to ``n`` more messages of the run that goes on at ``items[seen]`` to ``run``.

        Returns the index after the last message taken and whether the run is complete.
        """
        stop = min(end, seen + n)
        while seen < stop and items[seen].kind == "message":
            run.append(items[seen].message)  # type: ignore[arg-type]
            seen += 1
        return seen, seen < stop or seen == end

    def _keep_tool_pairs(self, chunk: list[MessageRow], run: list[MessageRow | None]) -> list[MessageRow]:
        """Never end a chunk between a tool call and its result: extend over the results, else cut before the call."""
        if not chunk:
            return chunk
        rest = [x for x in run[len(chunk) :] if x is not None]
        msgs = {r.id: m for r, m in self._read_rows(chunk + rest[:8])}
        opened_at: dict[str, int] = {}
        for i, r in enumerate(chunk):
            m = msgs[r.id]
            for call in m.tool_call_ids:
                opened_at[call] = i
            for res in m.tool_result_ids:
                opened_at.pop(res, None)
        extended = list(chunk)
        j = 0
        moved_on = False
        while opened_at and j < len(rest):
            nxt = rest[j]
            if nxt.id not in msgs:
                msgs.update({r.id: m for r, m in self._read_rows(rest[j : j + 8])})
            m = msgs[nxt.id]
            if not set(m.tool_result_ids) & set(opened_at):
                moved_on = True  # the conversation went on: the open calls never got a result
                break
            extended.append(nxt)
            for res in m.tool_result_ids:
                opened_at.pop(res, None)
            for call in m.tool_call_ids:
                opened_at[call] = len(extended) - 1
            j += 1
        if not opened_at or moved_on:
            return extended
        # A result lies beyond reach (in the fresh tail, or not yet ingested): stop before its call.
        return extended[: min(opened_at.values())]

    def _condense_chunk(
        self, items: list[ActiveItem], end: int, min_fanin: int, mixed: bool, start: int = 0
    ) -> tuple[list[SummaryRow], int] | None:
        """The oldest run of adjacent root summaries to condense, and the index after it.

        A run holds ``min_fanin``..``condensed_max_fanin`` nodes of one depth (any depths
        when ``mixed``), up to ``incremental_max_depth``.
        """
        s = self.settings
        max_depth = s.incremental_max_depth
        i = start
        while i < end:
            if items[i].kind != "summary":
                i += 1
                continue
            j = i
            depth = items[i].summary.depth  # type: ignore[union-attr]
            # Of a run of one depth only its first few nodes matter (a node and the remainder
            # rule below): never walk a run of thousands of leaves for each condensed node.
            stop = end if mixed else min(end, i + s.condensed_max_fanin + s.condensed_min_fanin + 1)
            while j < stop and items[j].kind == "summary" and (mixed or items[j].summary.depth == depth):  # type: ignore[union-attr]
                j += 1
            run = [it.summary for it in items[i:j] if it.summary is not None]
            new_depth = max(r.depth for r in run) + 1
            if len(run) >= min_fanin and (max_depth < 0 or new_depth <= max_depth):
                picked = run[: self.max_fanin(new_depth)]
                rest = len(run) - len(picked)
                if 0 < rest < min_fanin and len(run) >= 2 * min_fanin:
                    # Split the run evenly rather than leave a remainder too short to condense.
                    picked = run[: (len(run) + 1) // 2]
                return picked, i + len(picked)
            i = j if j < stop or mixed else self._run_end(items, j, end, depth)
        return None

    @staticmethod
    def _run_end(items: list[ActiveItem], j: int, end: int, depth: int) -> int:
        """The end of the run of depth-``depth`` summaries that continues at ``j``."""
        while j < end and items[j].kind == "summary" and items[j].summary.depth == depth:  # type: ignore[union-attr]
            j += 1
        return j

    # -- running -----------------------------------------------------------------

    def compact(self, conv: str, *, force: bool = False, target_tokens: int | None = None, hard: bool = False,
                synced: bool = False) -> CompactionReport:
        """Compact ``conv`` until its active context is under ``target_tokens`` (or fully, with ``force``).

        ``synced``: the caller brought the catalog up to date with the logs and notes just
        before (``Vault.compact`` does); checking every daily log again would cost a stat
        per day of history for nothing.
        """
        lock = FileLock(str(self.log.layout.locks_dir / f"{conv}.compact.lock"), timeout=self.settings.lock_timeout_seconds)
        self.log.layout.locks_dir.mkdir(parents=True, exist_ok=True)
        try:
            lock.acquire()
        except Timeout:
            raise LockTimeoutError(f"another process is compacting conversation {conv!r}; try again later") from None
        try:
            # One batch for the whole call (the passes, the hard steps): folders are fsynced and
            # their stamps carried forward once, at the end (see Dag.batched_dir_syncs).
            with self.dag.batched_dir_syncs():
                return self._compact_locked(conv, force=force, target_tokens=target_tokens, hard=hard, synced=synced)
        finally:
            self._read_cache.clear()
            lock.release()

    def _compact_locked(self, conv: str, *, force: bool, target_tokens: int | None, hard: bool,
                        synced: bool) -> CompactionReport:
        if not synced:
            self.log.sync(conv)
            self.dag.sync(conv)
        report = CompactionReport(conv)
        items = self.dag.active(conv)
        report.tokens_before = sum(item_tokens(i) for i in items)
        if target_tokens is None:
            target_tokens = int(self.settings.context_budget_tokens * self.settings.context_threshold)
        try:
            self._refresh_stale(conv, report, hard)
            while True:
                items = self.dag.active(conv)
                tokens = sum(item_tokens(i) for i in items)
                if not force and tokens <= target_tokens:
                    break
                # A pass writes many new notes: one folder fsync for them all, and their files and catalog
                # rows written together at its end (see Dag.staged_notes).
                with self.dag.batched_dir_syncs(), self.dag.staged_notes():
                    wrote = self._pass(conv, items, tokens, target_tokens, report, force=force, hard=hard)
                if wrote:
                    continue
                # With force, or when a model call waits, the rules loosen until nothing is left to do.
                if not ((hard or force) and self._hard_step(conv, items, report)):
                    break
        except ValidationProblem as exc:
            report.error = str(exc)  # a note a person must fix stands where a new one would go
        except SummarizerError as exc:
            report.error = str(exc)
            self.dag.catalog.execute(
                "INSERT INTO failures(conv, at, summarizer, detail) VALUES(?,?,?,?)",
                (conv, format_timestamp(self.clock()), self.summarizer.name, str(exc)),
            )
        report.tokens_after = sum(item_tokens(i) for i in self.dag.active(conv))
        return report

    def _pass(
        self, conv: str, items: list[ActiveItem], tokens: int, target: int, report: CompactionReport, *, force: bool, hard: bool
    ) -> bool:
        """One sweep over the active context: every eligible leaf chunk, else every eligible run to condense.

        Sweeping (instead of re-reading the active context after each note) keeps a full
        compaction linear in the number of messages.
        """
        s = self.settings
        tail = self.tail_start(items)
        wrote = False
        i = 0
        while found := self._leaf_chunk(items, i, tail, force=force):
            chunk, i = found
            row = self._write_leaf(conv, chunk, report, hard)
            wrote = True
            tokens += row.token_count + SUMMARY_OVERHEAD_TOKENS - sum(r.tokens + MESSAGE_OVERHEAD_TOKENS for r in chunk)
            if not force and tokens <= target:
                return True
        if wrote:
            return True
        i = 0
        while found2 := self._condense_chunk(items, tail, s.condensed_min_fanin, mixed=False, start=i):
            run, i = found2
            row = self._write_condensed(conv, run, report, hard)
            wrote = True
            tokens += row.token_count - sum(r.token_count for r in run) - SUMMARY_OVERHEAD_TOKENS * (len(run) - 1)
            if not force and tokens <= target:
                return True
        return wrote

    def _hard_step(self, conv: str, items: list[ActiveItem], report: CompactionReport) -> bool:
        """Over the budget with nothing eligible: loosen the rules one at a time, one note per step.

        The protected tail is never summarized: when it alone is over the budget,
        assembly stubs its oldest tool results instead.
        """
        tail = self.tail_start(items)
        for kind, found in (
            ("leaf", lambda: self._leaf_chunk(items, 0, tail, force=True)),
            ("condense", lambda: self._condense_chunk(items, tail, 2, mixed=False)),
            ("condense", lambda: self._condense_chunk(items, tail, 2, mixed=True)),
        ):
            result = found()
            if result:
                if kind == "leaf":
                    self._write_leaf(conv, result[0], report, True)  # type: ignore[arg-type]
                else:
                    self._write_condensed(conv, result[0], report, True)  # type: ignore[arg-type]
                return True
        return False

    def _summarize(self, request: SummaryRequest, hard: bool, report: CompactionReport, node_id: str) -> tuple[SummaryResult, str | None]:
        failure = self._recent_failure if hard and time.monotonic() - self._failed_at < PROVIDER_BACKOFF_SECONDS else None
        if failure is None:
            try:
                return summarize_with_escalation(self.summarizer, request), None
            except SummarizerError as exc:
                if not hard or isinstance(self.summarizer, DigestSummarizer):
                    raise
                # While the provider is down, a blocked assemble must not wait on it chunk after chunk.
                self._failed_at, self._recent_failure = time.monotonic(), str(exc)
                failure = str(exc)
        result = summarize_with_escalation(self._digest(), request)
        report.fallbacks.append(node_id)
        return result, f"{DIGEST_NAME} (fallback: {self.summarizer.name} failed: {failure[:120]})"

    def _digest(self) -> DigestSummarizer:
        return DigestSummarizer(self.settings.summary_max_input_tokens)

    # -- building requests -----------------------------------------------------------

    def _leaf_items(self, chunk: list[MessageRow]) -> tuple[SourceItem, ...]:
        return tuple(
            SourceItem(id=row.id, kind="message", text=message_for_summary(msg), role=row.role, at=row.at,
                       message=msg, link=message_link(row.path, row.id)[2:-2])
            for row, msg in self._read_rows(chunk)
        )

    def _condensed_items(self, run: list[SummaryRow], refresh: bool) -> tuple[SourceItem, ...]:
        return tuple(
            SourceItem(id=r.id, kind="summary", text=r.body, at=r.earliest_at, depth=r.depth,
                       edited=r.human_owned or (refresh and self._has_human_below(r)),
                       link=self.dag.link_path(r.id), latest_at=r.latest_at,
                       corrections=self._corrections_of(r) if r.human_owned else ())
            for r in run
        )

    def _request(self, conv: str, depth: int, items: tuple[SourceItem, ...], carried: list[str],
                 previous: str | None = None) -> SummaryRequest:
        """The request for a node over ``items``: its target follows the size of the input.

        A person's corrections are carried on top of the target: they are kept
        whole, and must not squeeze out the summary (or push it into truncation).
        ``carried``: :meth:`_required` of ``items`` (the caller finishes the text with them too).
        """
        cap = self.settings.leaf_target_tokens if depth == 0 else self.settings.condensed_target_tokens
        source = source_tokens(items)
        target = target_for(depth, source, cap)
        if carried:
            target = min(max(1, source - 1), target + count_tokens("\n".join(carried)) + 1)
        return SummaryRequest(conversation=conv, depth=depth, items=items, target_tokens=target, previous=previous)

    def _previous(self, conv: str, depth: int, first_seq: int | None) -> str | None:
        """Body of the newest node of ``depth`` that ends before ``first_seq`` (context for an LLM)."""
        if first_seq is None or isinstance(self.summarizer, DigestSummarizer):
            return None  # the digest reads only its sources: no query for it
        self.dag.flush_staged()  # the newest node before it may be one this pass has not written yet
        rows = self.dag.catalog.execute(
            "SELECT id FROM summaries WHERE conv=? AND depth=? AND last_seq < ? AND (parent IS NULL OR parent <> '!invalid') "
            "ORDER BY last_seq DESC LIMIT 1",
            (conv, depth, first_seq),
        )
        row = self.dag.get(rows[0][0]) if rows else None
        return row.body if row is not None else None

    @staticmethod
    def _required(items: tuple[SourceItem, ...]) -> list[str]:
        """The correction lines a summary of ``items`` must carry."""
        return required_lines(
            (item.text for item in items if item.kind == "summary"),
            ((c, item.link) for item in items for c in item.corrections),
        )

    def _finish(self, text: str, carried: list[str]) -> str:
        """The summary holding every correction its sources carry (``carried``, see :meth:`_required`), and no forged one."""
        return enforce(text, carried)

    # -- writing nodes -----------------------------------------------------------------

    def _write_leaf(
        self, conv: str, chunk: list[MessageRow], report: CompactionReport, hard: bool, refresh: bool = False, force: bool = False,
        node_id: str | None = None,
    ) -> SummaryRow:
        items = self._leaf_items(chunk)
        ids = [row.id for row in chunk]
        return self._write_node(
            conv, "leaf", 0, ids, items, report, hard, refresh, force,
            earliest=min(r.at for r in chunk), latest=max(r.at for r in chunk), descendants=len(chunk),
            sources_digest=sources_hash([r.hash for r in chunk]), links=[message_link(r.path, r.id) for r in chunk],
            node_id=node_id,
            first_seq=min(r.seq for r in chunk),
        )

    def _write_condensed(
        self, conv: str, run: list[SummaryRow], report: CompactionReport, hard: bool, refresh: bool = False, force: bool = False,
        node_id: str | None = None,
    ) -> SummaryRow:
        depth = max(r.depth for r in run) + 1
        items = self._condensed_items(run, refresh)
        ids = [r.id for r in run]
        seqs = [r.first_seq for r in run if r.first_seq is not None]
        return self._write_node(
            conv, "condensed", depth, ids, items, report, hard, refresh, force,
            earliest=min(r.earliest_at for r in run), latest=max(r.latest_at for r in run),
            descendants=sum(r.descendant_count for r in run),
            sources_digest=sources_hash([r.body_hash for r in run]), links=[summary_link(i) for i in ids],
            node_id=node_id,
            first_seq=min(seqs) if seqs else None,
        )

    def _write_node(
        self, conv: str, kind: str, depth: int, ids: list[str], items: tuple[SourceItem, ...],
        report: CompactionReport, hard: bool, refresh: bool, force: bool, *,
        earliest: str, latest: str, descendants: int, sources_digest: str, links: list[str], first_seq: int | None,
        node_id: str | None = None,
    ) -> SummaryRow:
        """Summarize ``items`` and write the node's note (the part leaves and condensed nodes share).

        A node is refreshed under its own id (``node_id``), even when its sources changed
        because a deleted source was rebuilt differently.
        """
        node_id = node_id or make_summary_id(conv, depth, ids)
        carried = self._required(items)  # parsed once: the request's target and the finished text both need it
        request = self._request(conv, depth, items, carried, self._previous(conv, depth, first_seq))
        result, fallback = self._summarize(request, hard, report, node_id)
        text = self._finish(result.text, carried)
        body = note_body(text)
        fm = SummaryFrontmatter(
            id=node_id,
            kind=kind,  # type: ignore[arg-type]
            depth=depth,
            conversation=conv,
            earliest_at=earliest,
            latest_at=latest,
            descendant_count=descendants,
            source_count=len(ids),
            source_tokens=source_tokens(items),
            token_count=count_by_lines(text) if text != result.text else result.tokens,
            summarizer=fallback or result.summarizer,
            prompt=result.prompt,
            level=result.level,
            body_sha256=body_hash(body),
            sources_sha256=sources_digest,
            tags=["lcm/summary", f"lcm/{kind}", f"lcm/depth-{depth}"],
            sources=links,
        )
        row = self.dag.write_summary(conv, fm, body, force=force)
        (report.refreshed if refresh else report.created).append(node_id)
        return row

    def _refill(self, conv: str, node: SummaryRow, report: CompactionReport, hard: bool) -> list[SummaryRow]:
        """``node``'s sources, with what a deleted source covered summarized again in its place.

        Messages that came back become leaves; when a gap holds several nodes that fit
        below ``node`` they are condensed into one, so a deleted note is rebuilt from
        the same sources (and gets the same id).
        """
        out: list[SummaryRow] = []
        for part in refill_plan(self.dag, node):
            if not isinstance(part, list):
                out.append(part)
                continue
            made: list[SummaryRow] = []
            i = 0
            while i < len(part):
                if part[i].summary is not None:
                    made.append(part[i].summary)  # type: ignore[arg-type]
                    i += 1
                    continue
                found = self._leaf_chunk(part, i, len(part), force=True)
                if found is None:
                    break
                chunk, i = found
                made.append(self._write_leaf(conv, chunk, report, hard))
            if len(made) > 1 and max(r.depth for r in made) + 1 < node.depth:
                made = [self._write_condensed(conv, made, report, hard)]
            out.extend(made)
        return out

    # -- corrections -------------------------------------------------------------------

    def _corrections_of(self, row: SummaryRow) -> tuple[str, ...]:
        """What a person changed in ``row`` (a human-owned note), one line per change."""
        original = self.dag.generated_body(row.id)
        if original is None:
            original = self._regenerated(row)
        return tuple(diff_corrections(original, row.body))

    def _regenerated(self, row: SummaryRow) -> str | None:
        """The body the digest wrote for ``row``, written again (None when it cannot be had back exactly)."""
        if row.summarizer != DIGEST_NAME:
            return None  # an LLM does not say the same thing twice
        if row.kind == "leaf":
            found = self.log.catalog.rows_by_ids(row.sources)
            if len(found) != len(row.sources):
                return None
            items = self._leaf_items([found[i] for i in row.sources])
        else:
            children = self.dag.children(row.id)
            if len(children) != len(row.sources):
                return None
            items = self._condensed_items(children, refresh=False)
        carried = self._required(items)
        result = summarize_with_escalation(self._digest(), self._request(row.conv, row.depth, items, carried))
        body = note_body(self._finish(result.text, carried))
        return body if body_hash(body) == row.gen_hash else None

    def _has_human_below(self, row: SummaryRow) -> bool:
        """Whether a person corrected this node or one below it (worth a walk only when refreshing)."""
        stack = [row]
        while stack:
            node = stack.pop()
            if node.human_owned:
                return True
            if node.kind == "condensed":
                stack.extend(self.dag.children(node.id))
        return False

    def _refresh_stale(self, conv: str, report: CompactionReport, hard: bool) -> None:
        """Regenerate stale nodes nobody owns, lowest depth first, so corrections rise to the top.

        Every note of the conversation is checked first (a full stat): a person's
        in-place save leaves the folder's mtime alone, and compaction must see it
        without `watch` or `doctor` having run. That costs a stat per note, so a
        long-running process (an engine compacting after every few turns) does it
        at most every :data:`FULL_CHECK_SECONDS`; in between it trusts the folder's
        mtime, the watcher and the check before any note is overwritten.
        """
        # A full check the caller's sync just made (the first of a process) counts: one is enough.
        full = time.monotonic() - self.dag.full_sync_at(conv) >= FULL_CHECK_SECONDS
        self.dag.sync(conv, full=full)
        tried: set[str] = set()  # a node whose refresh could not be written is not tried again in this run
        for _ in range(64):  # a DAG is never that deep; guards against a pathological loop
            stale = [r for r in self.dag.stale(conv) if not r.human_owned and r.id not in tried]
            if not stale:
                return
            node = min(stale, key=lambda r: (r.depth, r.first_seq or 0))
            tried.add(node.id)
            try:
                if node.kind == "leaf":
                    rows = self.log.catalog.rows_by_ids(node.sources)
                    chunk = [rows[i] for i in node.sources if i in rows]
                    self._write_leaf(conv, chunk, report, hard, refresh=True, node_id=node.id)
                else:
                    children = self._refill(conv, node, report, hard) if node.gaps else self.dag.children(node.id)
                    fresh = self.dag.get(node.id)
                    if fresh is not None and (fresh.stale or fresh.gaps):  # a rebuilt source may have healed it
                        self._write_condensed(conv, children, report, hard, refresh=True, node_id=node.id)
            except ValidationProblem:
                pass  # a person edited it a moment ago: it is theirs now (the catalog was updated)
            self.dag.recompute(conv)

    def resummarize(self, conv: str, ids: list[str], *, force: bool = False) -> CompactionReport:
        """Regenerate the given summaries with the current summarizer, lowest depth first.

        Human-owned notes are refused unless ``force``; nodes above a regenerated one
        become stale and are refreshed by the next compaction (or by ``--stale``).
        """
        from .errors import UsageError

        report = CompactionReport(conv)
        rows = [r for r in (self.dag.get(i) for i in ids) if r is not None]
        for row in sorted(rows, key=lambda r: r.depth):
            if row.human_owned and not force:
                raise UsageError(
                    f"{row.path}: summary {row.id} was edited by a person; pass --force to replace the correction"
                )
            fresh = self.dag.get(row.id) or row
            if fresh.kind == "leaf":
                found = self.log.catalog.rows_by_ids(fresh.sources)
                self._write_leaf(conv, [found[i] for i in fresh.sources if i in found], report, False, refresh=True,
                                 force=force, node_id=fresh.id)
            else:
                self._write_condensed(conv, self.dag.children(fresh.id), report, False, refresh=True, force=force,
                                      node_id=fresh.id)
            self.dag.recompute(conv)
        return report
