"""The LCM context engine for one conversation, in the shape of OpenClaw's ContextEngine.

Lifecycle::

    engine = Engine("my-vault", "support-bot")
    engine.bootstrap()
    engine.ingest({"role": "user", "content": "..."})
    ctx = engine.assemble(token_budget=50_000)      # messages for the next model call
    ...                                             # call the model, ingest its reply
    engine.after_turn()                             # schedules compaction in the background
    engine.dispose()

The engine is thread-safe. Compaction scheduled by :meth:`after_turn` runs on
one background thread per engine. The engine indexes what it stores as it goes
(at the end of each turn, and at least every :data:`INDEX_EVERY` messages), so
a search never has to catch up a long gap in one batch: what a long-running
engine holds in memory does not grow with its history. :meth:`assemble` is the vault's pure read, except
at the hard threshold: when even the coarsest cut (root summaries and uncovered
messages) is over the budget, it first runs compaction and waits for it.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .assembly import AssembledContext
from .compaction import CompactionReport
from .dag_rows import item_tokens
from .errors import IndexBackendError, UsageError, VaultLCMError
from .messages import Message
from .names import validate_conversation_name
from .native_memory import release_free_memory
from .settings import Settings
from .vault import Vault

#: Messages an engine stores before it indexes them even without a turn's end (:meth:`Engine.after_turn`).
INDEX_EVERY = 64
#: Messages an engine stores between two returns of freed memory to the system (:func:`release_free_memory`).
TRIM_EVERY = 2048
#: Seconds between two rewrites of the home note and the index note by a compacting engine (see
#: :meth:`Engine._refresh_views`): a person reading them in Obsidian sees them at most this old.
VIEWS_EVERY = 30.0


@dataclass
class SubagentHandle:
    """A child engine prepared for a subagent; call :meth:`rollback` if the spawn fails."""

    parent: "Engine"
    engine: "Engine"
    conversation: str
    token_cap: int
    depth: int
    _rolled_back: bool = field(default=False, repr=False)

    def rollback(self) -> None:
        """Undo the preparation: remove the child conversation created for the spawn."""
        if self._rolled_back:
            return
        self._rolled_back = True
        self.engine.dispose()
        folder = self.parent.vault.layout.conversation_dir(self.conversation)
        if folder.is_dir():
            shutil.rmtree(folder)
        self.parent.vault.catalog.forget_conversation(self.conversation)


class Engine:
    """Lossless context management for one conversation of a vault."""

    def __init__(
        self,
        vault: Vault | str | os.PathLike[str],
        conversation: str,
        *,
        settings: Settings | None = None,
        environ: Mapping[str, str] | None = None,
        token_budget: int | None = None,
        depth: int = 0,
        max_depth: int = 2,
        token_cap: int | None = None,
        watch: bool = False,
        notice: Callable[[str], None] | None = None,
    ) -> None:
        """``notice`` gets one line before long work nobody asked for (see :class:`Vault`), when
        the engine opens the vault itself; a :class:`Vault` passed in keeps its own."""
        self.conversation = validate_conversation_name(conversation)
        if isinstance(vault, Vault):
            self.vault, self._owns_vault = vault, False
        else:
            root = Path(vault)
            if not (root / "vaultlcm.toml").exists():
                Vault.init(root, settings=settings, environ=environ).close()
            self.vault, self._owns_vault = Vault(root, settings=settings, environ=environ, notice=notice), True
        self.settings = self.vault.settings
        self.token_budget = token_budget or self.settings.context_budget_tokens
        self.depth = depth
        self.max_depth = max_depth
        self.token_cap = token_cap
        # With watch=True, edits people make in Obsidian reach this engine within about a second.
        self._watch = watch
        self._watcher: Any = None
        self._lock = threading.RLock()
        self._wake = threading.Condition(self._lock)
        self._pending = False
        self._idle = threading.Event()
        self._idle.set()
        self._stopping = False
        self._worker: threading.Thread | None = None
        # How many subagents were spawned (names the next one); a count, not the handles, so a
        # 24/7 agent does not keep every finished subagent's engine for the life of the process.
        self._spawned = 0
        self._unindexed = 0
        self._untrimmed = 0
        # Whether messages or summaries were written since this engine last assembled a context at its
        # budget (which stores the token counts the next process needs; see dispose).
        self._unprimed = False
        # Views (home note, index note) owed since the last compaction, and when they were last written.
        self._views_due = False
        self._views_at = float("-inf")
        self.last_report: CompactionReport | None = None
        self.last_error: str | None = None

    # -- lifecycle -----------------------------------------------------------------

    def bootstrap(self) -> dict[str, Any]:
        """Load (or create) the conversation's state and open the index; returns what is known."""
        with self._lock:
            if self.vault.layout.conversation_dir(self.conversation).is_dir():
                self.vault.sync(self.conversation)
            # A long-lived engine keeps the index open so new messages are searchable at once.
            try:
                self.vault.indexer.open()
            except IndexBackendError as exc:
                # The agent's memory works without the index; its searches say what to run.
                self.last_error = str(exc)
            if self._watch and self._watcher is None:
                self._watcher = self.vault.watch(index=self.vault.indexer.is_open)
            return self.info()

    def info(self) -> dict[str, Any]:
        exists = self.vault.layout.conversation_dir(self.conversation).is_dir()
        items = self.vault.dag.active(self.conversation) if exists else []
        return {
            "conversation": self.conversation,
            "messages": self.vault.catalog.count(self.conversation) if exists else 0,
            "summaries": len(self.vault.dag.all(self.conversation)) if exists else 0,
            "active_items": len(items),
            "active_tokens": sum(item_tokens(i) for i in items),
            "token_budget": self.effective_budget(),
        }

    def ingest(self, message: Message | Mapping[str, Any], *, format: str = "native") -> str:
        """Store one message durably; returns its id.

        ``format`` ``"anthropic"`` or ``"openai"`` takes a provider's message as it is
        (a model's reply, say); the default is a native record.
        """
        return self.ingest_batch([message], format=format)[0]

    def ingest_batch(self, messages: Iterable[Message | Mapping[str, Any]], *, format: str = "native") -> list[str]:
        """Store messages durably, all or nothing; returns their ids in order."""
        ids = self.vault.ingest(self.conversation, list(messages), format=format)
        with self._lock:
            self._unindexed += len(ids)
            self._untrimmed += len(ids)
            self._unprimed = self._unprimed or bool(ids)
            if self._unindexed >= INDEX_EVERY:
                self._follow_index()
        return ids

    def _follow_index(self) -> None:
        """Put what this conversation gained since the last time (messages, summaries) in the open index.

        Small and often: a catch-up batch is bounded by a turn (or :data:`INDEX_EVERY`
        messages), not by the time since the last search. The index is derived state:
        if it cannot be written now (another process holds it), the next search catches up.
        """
        self._unindexed = 0
        if not self.vault.indexer.is_open or not self.vault.layout.conversation_dir(self.conversation).is_dir():
            return
        try:
            self.vault.indexer.ready()
            self.vault.indexer.follow(self.conversation)
        except VaultLCMError as exc:
            self.last_error = f"indexing postponed to the next search: {exc}"

    def active_tokens(self) -> int:
        return sum(item_tokens(i) for i in self.vault.dag.active(self.conversation))

    def effective_budget(self, token_budget: int | None = None) -> int:
        budget = token_budget or self.token_budget
        return min(budget, self.token_cap) if self.token_cap else budget

    def after_turn(self, token_budget: int | None = None) -> bool:
        """Index the turn, and schedule compaction if the context passed the soft threshold; returns whether it did."""
        with self._lock:
            self._follow_index()
            trim = self._untrimmed >= TRIM_EVERY
            if trim:
                self._untrimmed = 0
        if trim:
            release_free_memory()
        if not self.settings.background_compaction:
            self._refresh_views()  # no idle worker to write them when due
        budget = self.effective_budget(token_budget)
        if self.active_tokens() <= budget * self.settings.context_threshold:
            return False
        if not self.settings.background_compaction:
            self.compact(token_budget=budget)
            return True
        with self._lock:
            if self._stopping:
                return False
            self._pending = True
            self._idle.clear()
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._run_worker, name=f"vaultlcm-compact-{self.conversation}", daemon=True)
                self._worker.start()
            self._wake.notify_all()
        return True

    def _run_worker(self) -> None:
        while True:
            with self._lock:
                while not self._pending and not self._stopping:
                    # Views owed by the last compaction are written when due, even if no turn follows.
                    wait = self._views_wait()
                    if wait == 0.0:
                        break
                    self._wake.wait(wait)
                if self._stopping:
                    self._idle.set()
                    return
                pending, self._pending = self._pending, False
            try:
                if pending:
                    self.compact()
                self._refresh_views()
            except VaultLCMError as exc:  # recorded for doctor; the next turn retries
                self.last_error = str(exc)
            finally:
                with self._lock:
                    if not self._pending:
                        self._idle.set()

    def _views_wait(self) -> float | None:
        """Seconds until the owed views are due (0 when they are), None when none are owed."""
        if not self._views_due:
            return None
        return max(0.0, self._views_at + VIEWS_EVERY - time.monotonic())

    def _refresh_views(self, *, now: bool = False) -> None:
        """Rewrite the home note and the index note if compaction changed them and they are due.

        Compaction runs every few turns of a busy agent; rendering the home note after each
        would make Obsidian re-render an open note (its DAG diagram) several times a minute
        and cost every compaction a look at the whole DAG. Written at most every
        :data:`VIEWS_EVERY` seconds instead (the first compaction's at once, the last one's by
        the idle worker or at :meth:`dispose`), each only if its text changed. The summaries
        and logs themselves are always current: only these overviews lag.
        """
        with self._lock:
            wait = self._views_wait()
            if wait is None or (wait and not now):
                return
            self._views_due = False
            self._views_at = time.monotonic()
        if self.vault.read_only or not self.vault.layout.conversation_dir(self.conversation).is_dir():
            return
        try:
            self.vault.refresh_views([self.conversation])
        except (OSError, VaultLCMError) as exc:  # derived notes: the next compaction or `doctor --fix` rewrites them
            self.last_error = f"home note not refreshed: {exc}"

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Block until scheduled background compaction has finished; False on timeout."""
        return self._idle.wait(timeout)

    def compact(self, *, force: bool = False, token_budget: int | None = None, hard: bool = False) -> CompactionReport:
        """Compact now: until under the soft threshold, or everything eligible with ``force``.

        ``hard`` is for a caller that cannot go on until the context fits: a failing
        provider is replaced by the offline fallback instead of waiting.
        """
        budget = self.effective_budget(token_budget)
        target = int(budget * self.settings.context_threshold)
        # The new summaries' costs are counted now; the context they meet is counted by this engine's
        # next assemble (an agent assembles before each model call: a context here too would double
        # the work of every compaction), or at dispose. The views follow at the engine's pace.
        [report] = self.vault.compact(self.conversation, force=force, target_tokens=target, hard=hard, budget=budget,
                                      views=False, prime_context=False)
        self.last_report = report
        if report.error:
            self.last_error = report.error
        with self._lock:
            self._views_due = True
            self._unprimed = self._unprimed or bool(report.created)
        self._refresh_views()
        return report

    def assemble(self, token_budget: int | None = None, *, format: str = "anthropic") -> AssembledContext:
        """The context for the next model call, never above the budget.

        At the hard threshold (the coarsest cut is over the budget, so part of history
        would be left out) compaction runs first and this waits for it; the context
        itself is always the vault's pure :meth:`Vault.assemble`.
        """
        budget = self.effective_budget(token_budget)
        if self.vault.layout.conversation_dir(self.conversation).is_dir():
            self.vault.sync(self.conversation)
            if self.active_tokens() > budget:
                self.compact(token_budget=budget, hard=True)
        primes = budget == self.effective_budget()
        with self._lock:
            # Cleared before: a message another thread stores meanwhile is owed again.
            unprimed, self._unprimed = self._unprimed, self._unprimed and not primes
        try:
            return self.vault.assemble(self.conversation, budget, format=format)
        except BaseException:
            with self._lock:
                self._unprimed = self._unprimed or unprimed
            raise

    # -- memory tools ----------------------------------------------------------------

    def tool_definitions(self, format: str = "anthropic") -> list[dict[str, Any]]:
        """Schemas of lcm_grep, lcm_describe, lcm_expand and lcm_expand_query for the model."""
        from .tools import tool_definitions

        return tool_definitions(format)

    def call_tool(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Run a memory tool the model called; returns text sized for its context."""
        from .tools import call_tool

        return call_tool(self.vault, self.conversation, name, dict(arguments))

    # -- subagents -------------------------------------------------------------------

    def prepare_subagent_spawn(self, task: str, *, token_cap: int | None = None, name: str | None = None) -> SubagentHandle:
        """A child engine for a subagent, limited to ``token_cap`` tokens and this engine's depth limit."""
        if self.depth + 1 > self.max_depth:
            raise UsageError(
                f"subagent depth {self.depth + 1} exceeds max_depth {self.max_depth} for {self.conversation!r}; "
                "finish the work in this agent or raise max_depth"
            )
        cap = min(token_cap or self.effective_budget() // 2, self.effective_budget())
        n = self._spawned + 1
        child_name = name or f"{self.conversation}--sub-{n}"
        while self.vault.layout.conversation_dir(child_name).exists() and name is None:
            n += 1
            child_name = f"{self.conversation}--sub-{n}"
        child = Engine(self.vault, child_name, depth=self.depth + 1, max_depth=self.max_depth, token_cap=cap)
        handle = SubagentHandle(parent=self, engine=child, conversation=child_name, token_cap=cap, depth=self.depth + 1)
        try:
            child.ingest({"role": "user", "content": task, "parent_conversation": self.conversation})
        except BaseException:
            handle.rollback()
            raise
        self._spawned += 1
        return handle

    def on_subagent_ended(self, handle: SubagentHandle, result: str, *, success: bool = True) -> str:
        """Fold a finished subagent's result into this conversation; returns the new message id."""
        status = "ok" if success else "failed"
        text = f'<subagent_result conversation="{handle.conversation}" status="{status}">\n{result}\n</subagent_result>'
        handle.engine.dispose()
        return self.ingest({"role": "user", "content": text, "subagent": handle.conversation, "subagent_status": status})

    def dispose(self) -> None:
        """Stop background compaction (finishing the step under way) and release the vault."""
        with self._lock:
            self._stopping = True
            self._wake.notify_all()
            worker = self._worker
        if worker is not None and worker is not threading.current_thread():
            worker.join(timeout=self.settings.lock_timeout_seconds + 60)
        self._refresh_views(now=True)  # what the last compaction changed, before the vault is let go
        if self._unprimed and not self.vault.read_only:
            # Written to since the last context: count one now, so the next process plans with counts alone.
            self._unprimed = False
            try:
                self.vault.assembler.prime(self.conversation, [], self.effective_budget())
            except (OSError, VaultLCMError) as exc:
                self.last_error = f"next context not counted: {exc}"
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        if self._owns_vault:
            self.vault.close()

    def __enter__(self) -> "Engine":
        self.bootstrap()
        return self

    def __exit__(self, *exc: object) -> None:
        self.dispose()
