"""The :class:`Vault`: the public API behind every command.

Each CLI command calls exactly one method of the same name. The vault owns the
settings, the catalog (derived state in ``.vaultlcm/``) and the message log; the
LCM parts (compaction, assembly, recall) hang off it as they are built.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import formats, gitsync
from .assembly import AssembledContext, Assembler
from .catalog import Catalog
from .dag import Dag
from .indexing import IndexKeeper, parse_when
from .errors import GitError, InputFormatError, NotFoundError, StorageError, UsageError, VaultLCMError
from .formats import Incoming, ParseState
from .fsutil import read_file
from .ingest import IngestReport, incoming_from_api, incoming_from_document, redact_incoming, unencodable
from .layout import InitReport, VaultLayout, checked_name, choose_state_dir, init_vault
from .messages import Message
from .msglog import MessageLog
from .names import validate_conversation_name
from .settings import Settings, default_toml, load_settings
from .upkeep import tidy

if TYPE_CHECKING:
    from .compaction import CompactionReport, Compactor
    from .history import History
    from .recall import ContextView
    from .secrets import Redactor
    from .sync import VaultWatcher
from .summarizers.base import Summarizer

EXPORT_FORMATS = formats.EXPORT_FORMATS
#: ``progress(done, total)``: how far a long call is (for a progress bar; the library never prints).
Progress = Callable[[int, int], None]


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _holds_anything(folder: Path) -> bool:
    """Whether ``folder`` exists and holds an entry (one look, whatever it holds)."""
    try:
        with os.scandir(folder) as entries:
            return next(entries, None) is not None
    except OSError:
        return False


class Vault:
    """An open vault: messages, summaries and the derived state that serves them."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        settings: Settings | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        clock: Callable[[], datetime] = _utcnow,
        notice: Callable[[str], None] | None = None,
    ) -> None:
        """Open the vault at ``root``.

        ``notice`` receives one line when a call is about to do long work nobody asked
        for (the catalog or the search index read again from the files, e.g. after an
        upgrade changed its format): the command line prints it on stderr; the library
        never prints.
        """
        root_path = VaultLayout(Path(root).resolve()).require_vault().root
        self.environ = os.environ if environ is None else environ
        state, reason = choose_state_dir(root_path, self.environ)
        #: Why the vault cannot be written (``None`` when it can); reading works either way.
        self.read_only: str | None = reason
        self.layout = VaultLayout(root_path, state)
        self.root = self.layout.root
        self.settings = settings or load_settings(self.layout.settings_path, environ)
        self.clock = clock
        self.catalog = Catalog(self.root, self.layout.catalog_path, busy_timeout=self.settings.lock_timeout_seconds)
        if notice is not None:
            if self.catalog.started_over:
                notice(f"the catalog at {self.layout.catalog_path} {self.catalog.started_over}: reading it again "
                       "from the files, once (a few minutes at a million messages)")
            elif self.catalog.created and _holds_anything(self.layout.conversations_dir):
                notice(f"there is no catalog at {self.layout.catalog_path} yet (a fresh clone, or its folder was "
                       "deleted): building it from the files, once (a few minutes at a million messages)")
        self.log = MessageLog(
            self.layout,
            self.catalog,
            large_payload_tokens=self.settings.large_payload_tokens,
            lock_timeout=self.settings.lock_timeout_seconds,
            clock=clock,
        )
        self.dag = Dag(self.layout, self.catalog)
        self.indexer = IndexKeeper(self.layout, self.settings, self.catalog, self.log, self.dag,
                                   conversations=self.conversations, sync=self.sync, redact=self._redact_text,
                                   notice=notice)
        self._compactor: Compactor | None = None
        # Its own lock, not the vault's: a thread holding the vault's lock may wait on one making it.
        self._compactor_lock = threading.Lock()
        self.assembler = Assembler(self.log, self.dag, self.settings)
        self._lock = threading.RLock()
        self._closed = False
        self._fully_synced: set[str] = set()
        self.created_files: list[str] = []
        self.init_report: InitReport | None = None
        self._redactor: Any = False  # built on first use (compiles the secret rules)

    @property
    def compactor(self) -> Compactor:
        """Compaction, made on first use: its module and the summarizers' (a tenth of a command's start-up)
        are not loaded by the commands that only read or append."""
        if self._compactor is None:
            with self._compactor_lock:
                if self._compactor is None:
                    from .compaction import Compactor

                    self._compactor = Compactor(self.log, self.dag, self.settings, self._make_summarizer, self.clock)
        return self._compactor

    def _redact_text(self, text: str) -> str:
        redactor = self.redactor
        return redactor.redact_text(text) if redactor is not None else text

    @property
    def redactor(self) -> "Redactor | None":
        """What replaces secrets before anything is written (``None`` with ``redact_secrets = false``)."""
        if self._redactor is False:
            from .secrets import make_redactor

            self._redactor = make_redactor(self.settings.redact_secrets, self.settings.redact_patterns)
        return self._redactor  # type: ignore[return-value]

    def _make_summarizer(self) -> Summarizer:
        from .summarizers import make_summarizer

        return make_summarizer(self.settings, self.environ, template_dir=self.layout.templates_dir)

    # -- life cycle --------------------------------------------------------------

    @classmethod
    def init(cls, root: str | os.PathLike[str], **kwargs: Any) -> "Vault":
        """Create a vault at ``root`` (safe to repeat) and open it.

        ``created_files`` on the result lists what this call wrote or added lines to (empty
        the second time); ``init_report`` says what it did in detail.
        """
        report = init_vault(Path(root), default_toml())
        vault = cls(root, **kwargs)
        vault.created_files = report.changed
        vault.init_report = report
        return vault

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.indexer.close()
            self.catalog.close()

    def __enter__(self) -> "Vault":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing -----------------------------------------------------------------

    def ingest(
        self, conversation: str, messages: Iterable[Message | Mapping[str, Any]], *, format: str = "native",
        dedupe: bool = False,
    ) -> list[str]:
        """Append messages to a conversation; returns their ids.

        ``messages`` are ``Message`` objects or records in ``format`` (native dicts by
        default; ``"anthropic"`` or ``"openai"`` for a provider's message shapes, such
        as a model's reply). All or nothing: every message is validated before the
        first byte is written, and the messages are durable (fsynced) when this
        returns. A record's own ``id`` is kept as data; the vault assigns its own ids.
        With ``dedupe``, messages already stored by an earlier call with the same list
        are not stored again (their existing ids are returned).
        """
        conv = checked_name(conversation)
        self._require_writable("ingest")
        incoming = incoming_from_api(messages, conv, keyed=dedupe, format=format)
        return self._store(conv, incoming, dedupe=dedupe, fmt=format).ids

    def ingest_bytes(
        self, conversation: str, data: bytes, *, format: str = "auto", source: str = "<input>",
        skip_bad_lines: bool = False, keep_bad_timestamps: bool = False, allow_duplicates: bool = False,
        progress: Progress | None = None, refresh_views: bool = True, git_commit: bool | None = None,
        resume: ParseState | None = None,
    ) -> IngestReport:
        """Parse a transcript (JSON Lines, a JSON array, or one object holding ``messages``) and ingest it.

        Re-importing a file, or a longer version of it, stores each record once
        (``allow_duplicates`` stores every record again). ``progress(done, total)``
        follows the work (for a progress bar). With ``refresh_views`` the home note
        and the vault's index note are brought up to date afterwards (a batch of
        imports passes False and calls :meth:`refresh_views` once). ``git_commit`` (default: the
        ``git_auto_commit`` setting) commits the new messages to git afterwards.

        ``resume`` (a :class:`vaultlcm.formats.ParseState`) reads a growing transcript a
        part at a time: a fresh one is filled in by this call; one that holds records
        takes ``data`` as the lines appended since (possibly none), gives them the keys,
        times and links a read of the whole would, and is brought forward. The report
        then counts only these lines.
        """
        conv = validate_conversation_name(conversation)
        self._require_writable("ingest")
        if git_commit:
            gitsync.require_repo(self.root)  # asked for explicitly: say so before anything is written
        fmt, incoming, skipped = incoming_from_document(
            data, source=source, format=format, skip_bad_lines=skip_bad_lines, keep_bad_timestamps=keep_bad_timestamps,
            resume=resume)
        report = self._store(conv, incoming, dedupe=not allow_duplicates, fmt=fmt, refresh=refresh_views,
                             progress=progress)
        report.skipped_lines = skipped
        if (self.settings.git_auto_commit if git_commit is None else git_commit) and report.new:
            done = f"ingested {gitsync.plural(report.new, 'message')} into {conv!r}"
            report.commit = self._commit(conv, [], f"ingest: {conv} +{gitsync.plural(report.new, 'message')}",
                                         explicit=bool(git_commit), done=done)
        return report

    def ingest_file(
        self, conversation: str, path: str | os.PathLike[str], *, format: str = "auto", skip_bad_lines: bool = False,
        keep_bad_timestamps: bool = False, allow_duplicates: bool = False, progress: Progress | None = None,
        git_commit: bool | None = None,
    ) -> IngestReport:
        """Ingest a transcript file (``-`` reads standard input); see :meth:`ingest_bytes`."""
        options = dict(format=format, skip_bad_lines=skip_bad_lines, keep_bad_timestamps=keep_bad_timestamps,
                       allow_duplicates=allow_duplicates, progress=progress, git_commit=git_commit)
        if str(path) == "-":
            return self.ingest_bytes(conversation, sys.stdin.buffer.read(), source="<stdin>", **options)  # type: ignore[arg-type]
        p = Path(path)
        try:
            data = p.read_bytes()
        except FileNotFoundError:
            raise InputFormatError("file not found; check the path", source=str(p)) from None
        except IsADirectoryError:
            raise InputFormatError("is a folder; give a transcript file", source=str(p)) from None
        except OSError as exc:
            raise InputFormatError(f"cannot be read ({exc.strerror})", source=str(p)) from None
        return self.ingest_bytes(conversation, data, source=str(p), **options)  # type: ignore[arg-type]

    def _store(self, conv: str, incoming: list[Incoming], *, dedupe: bool, fmt: str, refresh: bool = False,
               progress: Progress | None = None) -> IngestReport:
        self._require_writable("ingest")
        # Secrets are replaced before anything is written; the import keys stay those of the records as given.
        counts: list[Counter[str]] = []
        redactor = self.redactor
        if redactor is not None:
            # Records already stored will be skipped by the append: no need to scan them again.
            stored = self.catalog.existing_keys(conv, [i.key for i in incoming if i.key]) if dedupe else set()
            incoming, counts = redact_incoming(incoming, redactor, stored=stored)
        step = None
        if progress is not None:
            total, done = 2 * len(incoming), [0]
            progress(0, total)

            def step() -> None:
                done[0] += 1
                if done[0] % 64 == 0:
                    progress(min(done[0], total), total)

        try:
            result = self.log.append(conv, incoming, dedupe=dedupe, step=step)
        except UnicodeEncodeError:
            raise unencodable(conv, incoming) from None
        if progress is not None:
            progress(total, total)
        report = IngestReport(conv, fmt, new=len(result.stored), already_stored=result.skipped)
        if any(counts):
            stored_keys = {sm.key for sm in result.stored}
            found: Counter[str] = Counter()
            for inc, c in zip(incoming, counts):
                if not result.skipped or not inc.key or inc.key in stored_keys:
                    found.update(c)
            report.redacted = dict(sorted(found.items()))
        if result.skipped:
            # ids in input order, the already-stored ones looked up by their import keys
            by_key = self._ids_for_keys(conv, [i.key for i in incoming if i.key])
            new_ids = iter(sm.id for sm in result.stored)
            stored_keys = {sm.key for sm in result.stored}
            report.ids = [next(new_ids) if (not i.key or i.key in stored_keys) else by_key.get(i.key, "")
                          for i in incoming]
        else:
            report.ids = [sm.id for sm in result.stored]
        if refresh and result.stored:
            self._derived(lambda: self._on_new_day(conv))
        elif result.new_days:
            # Only messages and days were added: the home note's summaries and diagram stand.
            self._derived(lambda: self.refresh_views([conv], messages_only=True))
        return report

    def _ids_for_keys(self, conv: str, keys: list[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            q = f"SELECT key, id FROM messages WHERE conv=? AND key IN ({','.join('?' * len(chunk))})"
            out.update((k, v) for k, v in self.catalog.execute(q, (conv, *chunk)))
        return out

    def _derived(self, update: Callable[[], object]) -> None:
        """Update derived files (the home note) after a write that has already succeeded.

        A failure here (a full disk) must not turn a durable ingest into an error:
        the next write or ``doctor --fix`` regenerates them.
        """
        try:
            update()
        except (OSError, VaultLCMError):
            pass

    def _require_writable(self, doing: str) -> None:
        if self.read_only:
            raise StorageError(
                f"cannot {doing}: the vault {self.root} is read-only ({self.read_only}); reading commands "
                "(status, grep, show, export, describe, expand, assemble) still work"
            )

    def _on_new_day(self, conv: str) -> None:
        """Rewrite the conversation's home note and the vault's index note (derived views) if their text changed."""
        self.refresh_views([conv])

    def refresh_views(self, conversations: Iterable[str] | None = None, *, messages_only: bool = False) -> list[str]:
        """Bring the derived notes up to date: the home notes of ``conversations`` (default: all),
        the vault's index note, its Bases tables and property types (see :mod:`vaultlcm.bases`).
        ``messages_only`` says only messages were added since they were written (see
        :func:`vaultlcm.home.write_home`).

        Each is written only if its text changed; returns the vault-relative paths written.
        """
        from .bases import INDEX_NOTE, conversation_stats, write_views
        from .layout import merge_lines
        from .home import write_home

        if self.read_only:
            return []
        written: list[str] = []
        for conv in self.conversations() if conversations is None else conversations:
            if write_home(self.layout, self.catalog, self.dag, conv, messages_only=messages_only):
                written.append(self.layout.relative(self.layout.home_note(conv)))
        on_disk = self.conversations()
        stats = conversation_stats(self.catalog, self.layout, on_disk)
        missing = [s.name for s in stats if (not s.messages and s.days) or (
            not s.summaries and any(self.layout.summaries_dir(s.name).glob("*.md")))]
        if missing:  # the state folder was rebuilt: catch those conversations up first
            for conv in missing:
                self.sync(conv)
            stats = conversation_stats(self.catalog, self.layout, on_disk)
        written += write_views(self.layout, stats, self.log.home_link)
        if INDEX_NOTE in written and (self.root / ".gitignore").is_file():
            # derived like the home notes: kept out of git so two machines never conflict over it
            merge_lines(self.layout.inside(self.root / ".gitignore"), f"/{INDEX_NOTE}\n",
                        header="# vaultlcm: the index note is derived (regenerated, never merged)")
        return written

    def _after_compaction(self, conv: str, report: CompactionReport) -> None:
        if report.created or report.refreshed:
            self._derived(lambda: self._on_new_day(conv))

    def _count_redactions(self, conv: str) -> None:
        """Bring the redaction tally ``status`` reports up to date (only the bytes logged since it last looked),
        so that ``status`` itself never reads the history."""
        from .redaction_tally import RedactionTally

        tally = RedactionTally(self.layout)
        tally.counts(conv)
        tally.save()

    # -- reading -----------------------------------------------------------------

    def conversations(self) -> list[str]:
        return self.layout.conversations()

    def require_conversation(self, conversation: str) -> str:
        return self.layout.require_conversation(conversation)

    def messages(self, conversation: str) -> list[Message]:
        """Every message of a conversation, in order, exactly as ingested."""
        conv = self.require_conversation(conversation)
        return [m for _, m in self.log.read_conversation(conv)]

    def export(self, conversation: str, format: str = "native") -> list[dict[str, Any]]:
        """The conversation as records in ``format`` (native, openai or anthropic)."""
        if format not in EXPORT_FORMATS:
            raise UsageError(f"cannot export as {format!r}; choose one of {', '.join(EXPORT_FORMATS)}")
        return formats.to_records(format, self.messages(conversation))

    def get_message(self, message_id: str) -> Message:
        """One message, verbatim, by id."""
        return self.log.get(message_id)[1]

    def show(self, item_id: str) -> dict[str, Any]:
        """One message or summary, verbatim, as a JSON-ready dict."""
        if item_id.startswith("sum_"):
            row = self.history.summary(item_id)
            return {
                "kind": "summary",
                "id": row.id,
                "conversation": row.conv,
                "path": row.path,
                "text": read_file(self.layout.inside(self.root / row.path)).decode("utf-8", errors="replace"),
            }
        mrow, msg = self.log.get(item_id)
        return {"kind": "message", "id": mrow.id, "conversation": mrow.conv, "seq": mrow.seq, "at": mrow.at,
                "role": mrow.role, "path": mrow.path, "message": msg.to_native()}

    @functools.cached_property
    def history(self) -> "History":
        """The parts the recall commands read (:mod:`vaultlcm.history`)."""
        from .history import History

        return History(layout=self.layout, catalog=self.catalog, dag=self.dag, log=self.log, indexer=self.indexer,
                       settings=self.settings, sync=self.sync, summarizer=lambda: self.compactor.summarizer)

    # -- derived state -----------------------------------------------------------

    def sync(self, conversation: str, *, trust_folders: bool = False, full: bool = False) -> None:
        """Bring the derived state of a conversation up to date with its files.

        ``trust_folders`` (the readers: ``status``; ``assemble``, which then checks the notes it
        shows one by one, see :meth:`Dag.edited_since_read`) checks the notes by
        their folders alone, even in a new process: one ``stat`` per folder instead of one per
        note, so opening a vault costs the same whatever its history. A note added, removed or
        renamed changes its folder; an edit in place reaches the catalog through ``watch`` and
        the next writer (``compact``, ``doctor``, ``refresh``), which check every note.
        ``full`` checks every note and every log even if this process already did.
        """
        conv = self.require_conversation(conversation)
        with self._lock:
            # The logs: after the first sync in a process, the logs folder's stamp and the
            # newest log are checked (writers record what they append, and the folder's mtime when they
            # add a day; a git pull replaces files), not every day's log, so a long-running engine's turn
            # does not cost a look at every day of its history. An older log edited in place reaches
            # the catalog through `watch` (refresh) and the next process.
            changed = self.log.sync(conv, quick=not full and conv in self._fully_synced)
            if changed and (self.catalog.execute(
                f"SELECT 1 FROM messages WHERE covered IS NOT NULL AND id IN ({','.join('?' * min(len(changed), 900))}) LIMIT 1",
                tuple(changed[:900]),
            ) or self.dag.awaits_messages(conv, changed)):
                # An edited raw message makes the leaf above it stale. And a message the catalog did not
                # list (it lagged the logs after a kill) may be what a leaf's link was reported broken
                # for: the relations are settled again, so that the link is whole again.
                self.dag.recompute(conv)
            # The first sync in a process checks every note (a person may have edited one
            # since); later ones trust an unchanged folder, and `watch` reports edits.
            if trust_folders:
                self.dag.sync(conv)
                return
            self.dag.sync(conv, full=full or conv not in self._fully_synced)
            self._fully_synced.add(conv)

    def refresh(self, conversation: str) -> dict[str, Any]:
        """Re-read everything of a conversation that changed on disk (what `watch` calls after a save).

        Returns the ids whose derived state changed; the index and the home note follow.
        """
        conv = self.require_conversation(conversation)
        with self._lock:
            before = {r.id: r.body_hash for r in self.dag.all(conv)}
            changed_msgs = self.log.sync(conv)
            report = self.dag.sync(conv, full=True)
            if changed_msgs:
                self.dag.recompute(conv)
            self._fully_synced.add(conv)
            after = {r.id: r for r in self.dag.all(conv)}
            changed_sums = [i for i, r in after.items() if before.get(i) != r.body_hash]
            removed = [i for i in before if i not in after]
            if self.indexer.is_open:
                # Edited messages keep their seq, so index them by id; everything new
                # (from this process or another) is picked up by follow().
                rows = self.catalog.rows_by_ids(changed_msgs)
                self.indexer.on_messages(self.log.read_rows(list(rows.values())))
                for sid in changed_sums:
                    self.indexer.on_summary(after[sid])
                self.indexer.on_removed(removed)
                self.indexer.follow(conv)
            if changed_sums or removed:
                self._on_new_day(conv)
            return {
                "conversation": conv,
                "messages_changed": changed_msgs,
                "summaries_changed": changed_sums,
                "summaries_removed": removed,
                "problems": [p.detail for p in report.problems],
            }

    # -- LCM ---------------------------------------------------------------------

    def compact(
        self, conversation: str | None = None, *, force: bool = False, target_tokens: int | None = None,
        hard: bool = False, progress: Progress | None = None, git_commit: bool | None = None,
        budget: int | None = None, views: bool = True, prime_context: bool = True,
    ) -> list[CompactionReport]:
        """Summarize old messages of one conversation (or all) until under the soft threshold (all, with force).

        First, what people did to the notes is taken care of: links that moved notes
        left behind are rewritten, notes a git merge set aside are removed.
        ``hard``: the caller waits on it (a blocked model call), so a failing provider is
        replaced by the offline fallback instead of leaving the messages for later.
        ``git_commit`` (default: the ``git_auto_commit`` setting) commits what
        changed, one commit per conversation. ``progress(done, total)`` counts
        conversations. ``budget`` (default: the ``context_budget_tokens`` setting) is the
        budget the next context will be assembled at: what the new summaries cost in it is
        counted now, while the token table is loaded (see :meth:`Assembler.prime`);
        ``prime_context=False`` counts the new summaries only, for a caller that assembles
        the next context itself.
        ``views=False`` leaves the home note and the index note to the caller, which
        refreshes them at its own pace (:meth:`refresh_views`; a long-running :class:`Engine`).
        """
        convs = [self.require_conversation(conversation)] if conversation else self.conversations()
        want = self.settings.git_auto_commit if git_commit is None else git_commit
        prime_at = (budget or self.settings.context_budget_tokens) if prime_context else None
        if git_commit:
            gitsync.require_repo(self.root)
        reports = []
        for n, conv in enumerate(convs):
            if progress is not None:
                progress(n, len(convs))
            with self._lock:
                mark = len(self.dag.journal)
                # Logs before notes (what `sync` does): a leaf's sources are judged against the catalog's
                # messages, which a rebuilt catalog does not hold yet (tidy would take every note for emptied).
                self.sync(conv)
                tidied = tidy(self.dag, conv) if not self.read_only else []
                report = self.compactor.compact(conv, force=force, target_tokens=target_tokens, hard=hard, synced=True)
                report.tidied = tidied
                if report.created:
                    # The token table is loaded now: count what the next context meets (new notes, the
                    # newest messages as they render) for whichever process assembles it next.
                    self._derived(lambda: self.assembler.prime(conv, report.created, prime_at))
                if views:
                    self._derived(lambda: self._on_new_day(conv))
                self._derived(lambda: self._count_redactions(conv))
                if want:
                    report.commit = self._commit(conv, self.dag.journal[mark:], _compact_message(self, conv, report),
                                                 explicit=bool(git_commit), done=f"compacted {conv!r}")
                # Only this auto-commit reads the journal: a process that runs for months must not
                # keep every path it ever wrote.
                del self.dag.journal[:]
            reports.append(report)
        if progress is not None:
            progress(len(convs), len(convs))
        return reports

    def _commit(self, conv: str, notes: list[str], message: str, *, explicit: bool, done: str) -> str | None:
        """Commit ``notes`` and the conversation's logs, payloads and .gitignore; returns what happened.

        A failure raises :class:`GitError` when the commit was asked for explicitly
        (saying that the operation itself succeeded), and is only reported otherwise;
        with the setting alone, a vault outside git (or no git) is no failure: None.
        """
        if not explicit and gitsync.repo_problem(self.root):
            return None
        folder = self.layout.relative(self.layout.conversation_dir(conv))
        paths = [*notes, f"{folder}/logs", f"{folder}/files", f"{folder}/.gitignore"]
        try:
            return gitsync.commit(self.root, paths, message).describe()
        except GitError as exc:
            if explicit:
                raise GitError(f"{done}, but {exc}") from None
            return f"not committed ({exc})"

    def assemble(self, conversation: str, budget: int, *, format: str = "anthropic") -> AssembledContext:
        """The model context for the next call, never above ``budget`` tokens: a pure read.

        The context is the finest cut through the summary DAG that fits (see
        :mod:`vaultlcm.assembly`). Nothing is written and nothing is summarized here,
        whatever the budget: compaction (``compact``, the engine) writes summaries.
        Raises :class:`~vaultlcm.errors.BudgetTooSmallError` when the budget cannot hold
        the newest user message.
        """
        if format not in ("anthropic", "openai"):
            raise UsageError(f"cannot assemble as {format!r}; choose anthropic or openai")
        if budget <= 0:
            raise UsageError(f"budget must be a positive number of tokens, got {budget}")
        conv = self.require_conversation(conversation)
        with self._lock:
            self.sync(conv, trust_folders=True)
            ctx = self.assembler.assemble(conv, budget, format)
            # A correction a person saved in place in Obsidian leaves the folder as it was: the
            # notes this context shows are checked one by one, and on any change every note is,
            # and the cut is planned again from what they now say.
            if self.dag.edited_since_read(ctx.summary_ids):
                self.sync(conv, full=True)
                ctx = self.assembler.assemble(conv, budget, format)
            return ctx

    def status(self) -> dict[str, Any]:
        """Per conversation: messages, tokens, days, time span, summaries, and the cut at the configured budget
        (estimated from the catalog's counts, see :meth:`Assembler.estimate`)."""
        from .dag_rows import item_tokens
        from .redaction_tally import RedactionTally

        for conv in self.conversations():
            self.sync(conv, trust_folders=True)
        budget = self.settings.context_budget_tokens
        convs = []
        tally = RedactionTally(self.layout)
        redacted: Counter[str] = Counter()
        for conv, count, tokens, days, first, last in self.catalog.stats():
            n_summaries, max_depth = self.dag.counts(conv)  # aggregates: no summary body is read
            active = self.dag.active(conv)
            # Planned from the catalog's counts: assembling would measure up to the whole budget.
            cut = self.assembler.estimate(conv, budget)
            secrets = tally.counts(conv)
            redacted.update(secrets)
            convs.append({
                "conversation": conv, "messages": count, "tokens": tokens, "days": days, "first_at": first,
                "last_at": last, "summaries": n_summaries, "max_depth": max_depth,
                "active_items": len(active), "active_tokens": sum(item_tokens(i) for i in active),
                "context": {"budget": budget, **cut},
                "redacted": secrets,
            })
        tally.save()
        return {"vault": str(self.root), "conversations": convs, "redacted": dict(sorted(redacted.items()))}

    # -- recall ------------------------------------------------------------------

    def grep(
        self,
        pattern: str,
        *,
        conversation: str | None = None,
        regex: bool = False,
        scope: str = "both",
        since: str | float | None = None,
        before: str | float | None = None,
        limit: int = 20,
        offset: int = 0,
        sort: str = "relevance",
        count: bool = False,
        view: "ContextView | None" = None,
    ) -> dict[str, Any]:
        """Search history: full text through the index, or ``regex`` by a bounded scan.

        Returns ``{"hits", "total", "offset", "limit", "sort", "next_offset", "by_kind"}``
        (``by_kind`` splits ``total`` into messages and summaries; ``"partial": true``
        when a regex scan hit its time limit); with ``count``,
        ``{"total", "messages", "summaries", "per_day"}`` instead. ``view`` decides
        which node a hit is ``shown_as`` (see :mod:`vaultlcm.recall`).
        """
        from .grep import grep

        now = self.clock()
        t_since = parse_when(since, now) if isinstance(since, str) else since
        t_before = parse_when(before, now) if isinstance(before, str) else before
        result = grep(
            self.history, pattern, conversation=conversation, regex_mode=regex, scope=scope, since=t_since,
            before=t_before, limit=limit, offset=offset, sort=sort, count=count, view=view,
        )
        if result.counts is None:
            return result.to_dict()
        out = result.counts.to_dict()
        if result.partial:
            out["partial"] = True
        return out

    def describe(self, item_id: str) -> dict[str, Any]:
        """Metadata, content, sources and expansion cost of any id (message, summary or file)."""
        from .recall import describe

        return describe(self.history, item_id)

    def expand(
        self, item_id: str, *, max_tokens: int | None = None, depth: int | None = None,
        around: int | None = None, query: str | None = None,
    ) -> dict[str, Any]:
        """Exact history around an id within ``max_tokens``: a summary down to its sources
        (matches of ``query`` first), or a message with its turn (or ``around`` neighbours)."""
        from .expand import expand

        return expand(self.history, item_id, max_tokens=max_tokens, depth=depth, around=around, query=query)

    def ask(self, question: str, *, conversation: str | None = None, max_tokens: int | None = None) -> dict[str, Any]:
        """Answer a question from expanded history (LLM when configured, ranked excerpts offline)."""
        from .ask import ask

        return ask(self.history, question, conversation=conversation, max_tokens=max_tokens)

    def reindex(self, progress: Callable[[int, int], None] | None = None, *,
                backend: str | None = None) -> dict[str, Any]:
        """Rebuild the catalog and the full-text index from the Markdown files.

        ``progress(done, expected)`` is called as documents are indexed; ``expected`` is
        what the catalog held before (at least ``done``). ``backend`` ("whoosh" or
        "tantivy") switches the index to that backend: the index is rebuilt with it, then
        the choice is recorded as ``index_backend`` in ``vaultlcm.toml`` so every later
        process uses it.
        """
        from .settings import ENV_PREFIX, write_setting

        if backend is not None:
            from .index.base import BACKENDS

            if backend not in BACKENDS:
                raise UsageError(f"unknown index backend {backend!r}; use {' or '.join(BACKENDS)}")
            env = self.environ.get(ENV_PREFIX + "INDEX_BACKEND")
            if env is not None and env != backend:
                raise UsageError(
                    f"the environment variable {ENV_PREFIX}INDEX_BACKEND={env} overrides vaultlcm.toml, so a switch "
                    f"to {backend} would not last; unset it (or set it to {backend}) and run the command again")
            self._require_writable("switch the index backend")
        step: Callable[[int], None] | None = None
        if progress is not None:
            report, expected, done = progress, self.catalog.count() + self.dag.total(), 0

            def step(n: int) -> None:
                nonlocal done
                done += n
                report(done, max(expected, done))

        self.catalog.reset()
        self._fully_synced.clear()
        # The index is built as the catalog reads the logs (each parsed once for both), then each
        # conversation is synced as usual (its notes, the DAG) and its summaries indexed.
        count = self.indexer.rebuild(progress=step, backend=backend, logs_read=False)
        out: dict[str, Any] = {
            "documents": count, "conversations": len(self.conversations()),
            "messages": self.catalog.count(), "summaries": self.dag.total(),
            "backend": backend or self.settings.index_backend,
        }
        if backend is not None:
            # Recorded only once the new index is complete: a failed rebuild leaves the old choice in place.
            out["settings_changed"] = write_setting(self.layout.settings_path, "index_backend", backend)
            self.settings.index_backend = backend  # type: ignore[assignment]
        return out

    # -- people in the loop --------------------------------------------------------

    def doctor(self, *, fix: bool = False) -> dict[str, Any]:
        """Check the vault: problems, warnings and notes; with ``fix``, repair what is safe first.

        ``clean`` is true when there are no problems (warnings are routine work).
        """
        from .doctor import Doctor

        def resync(conv: str) -> None:
            self._fully_synced.discard(conv)  # a person may have edited any note since
            self.sync(conv)

        doctor = Doctor(self.layout, self.catalog, self.dag, self.log, self.indexer, self.compactor,
                        conversations=self.conversations, resync=resync, refresh_views=self.refresh_views)
        with self._lock:
            fixed: list[str] = []
            if fix:
                self._require_writable("repair the vault")
                self._fully_synced.clear()
                fixed = doctor.fix()
                fixed += [f"regenerated {path}" for path in self.refresh_views()]
            report = doctor.examine()
            report.fixed = fixed
            return report.to_dict()

    def resummarize(
        self, ids: Sequence[str] = (), *, conversation: str | None = None, stale: bool = False,
        fallback: bool = False, force: bool = False,
    ) -> list[CompactionReport]:
        """Regenerate summaries with the current summarizer: given ids, every stale one, or every fallback."""
        if not ids and not stale and not fallback:
            raise UsageError("name summary ids, or pass --stale or --fallback")
        convs = [self.require_conversation(conversation)] if conversation else self.conversations()
        reports = []
        with self._lock:
            for conv in convs:
                self.sync(conv)
                rows = self.dag.all(conv)
                wanted = [r.id for r in rows if r.id in set(ids)
                          or (stale and r.stale and r.parent != "!invalid")
                          or (fallback and (r.level == "truncated" or "fallback" in r.summarizer))]
                if (stale or fallback) and not force:
                    # Sweeping options skip a person's notes; a named id is refused loudly instead.
                    owned = {r.id for r in rows if r.human_owned}
                    wanted = [i for i in wanted if i not in owned]
                if wanted:
                    report = self.compactor.resummarize(conv, wanted, force=force)
                    if stale:
                        more = self.compactor.compact(conv, target_tokens=10**12)
                        report.refreshed += more.refreshed
                    self._after_compaction(conv, report)
                    reports.append(report)
            missing = [i for i in ids if self.dag.get(i) is None]
            if missing:
                raise NotFoundError(f"no summary with id {missing[0]!r}")
        return reports

    def watch(self, *, debounce_ms: int | None = None, rescan_threshold: int = 1000,
              on_sync: Callable[[dict[str, Any]], None] | None = None, index: bool = True) -> "VaultWatcher":
        """A started watcher that re-syncs the vault as files change (call ``stop()`` when done).

        ``debounce_ms`` defaults to the ``watch_debounce_ms`` setting; more than
        ``rescan_threshold`` pending paths fall back to a re-sync of everything; ``on_sync``
        gets each :meth:`refresh` report. The search index is opened and caught up first;
        ``index=False`` leaves it closed (notes and the catalog are still re-synced), for a
        caller that serves without it, such as the MCP server beside an index of the other backend."""
        from .sync import VaultWatcher

        if index:
            self.indexer.ready()
        debounce = self.settings.watch_debounce_ms if debounce_ms is None else debounce_ms
        return VaultWatcher(self.layout, self.refresh, debounce_ms=debounce, rescan_threshold=rescan_threshold,
                            on_sync=on_sync).start()


def _compact_message(vault: Vault, conv: str, report: CompactionReport) -> str:
    """``compact: research 2 leaf, 1 condensed`` (and what was refreshed or tidied)."""
    kinds = [row.kind for row in (vault.dag.get(i) for i in report.created) if row is not None]
    parts = [f"{kinds.count('leaf')} leaf", f"{kinds.count('condensed')} condensed"]
    if report.refreshed:
        parts.append(f"{len(report.refreshed)} refreshed")
    if report.tidied:
        parts.append(f"{len(report.tidied)} tidied")
    return f"compact: {conv} {', '.join(parts)}"
