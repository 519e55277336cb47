"""The ``vaultlcm`` command line: one command per :class:`~vaultlcm.Vault` method.

Heavy libraries are imported inside the commands that need them so that
``vaultlcm --help`` stays instant. Library errors become one ``Error: ...`` line
on stderr and exit code 1 (2 for usage errors).
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from .errors import VaultLCMError

F = TypeVar("F", bound=Callable[..., Any])


def _echo_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=None))


def _fail(message: str, code: int) -> None:
    # One line, whatever the message holds: scripts read the first line of stderr.
    click.echo("Error: " + " ".join(message.split()), err=True)
    sys.exit(code)


def handle_errors(func: F) -> F:
    """Turn every failure into one ``Error: ...`` line and an exit code (a traceback only with ``--debug``)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context(silent=True)
        found = ctx.find_object(Context) if ctx else None
        debug = bool(found is not None and found.debug)
        try:
            return func(*args, **kwargs)
        except BrokenPipeError:
            sys.exit(0)
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            sys.exit(130)
        except (click.exceptions.Exit, click.ClickException, SystemExit):
            raise
        except Exception as exc:  # noqa: BLE001 - the CLI's one place that turns errors into a line
            if debug:
                raise
            if isinstance(exc, VaultLCMError):
                _fail(str(exc), exc.exit_code)
            if isinstance(exc, OSError):
                from .errors import StorageError

                _fail(str(StorageError.from_os(exc, exc.filename or "a file", "use")), 1)
            _fail(f"internal error: {type(exc).__name__}: {exc} (run with --debug for the traceback, and please "
                  "report it)", 1)

    return wrapper  # type: ignore[return-value]


class Context:
    def __init__(self, vault_path: str | None, debug: bool = False) -> None:
        self.vault_path = Path(vault_path) if vault_path else Path.cwd()
        self.debug = debug
        #: Whether --vault or VAULTLCM_VAULT named the vault (agent integrations have their own default).
        self.explicit = vault_path is not None
        self._vault: Any = None

    def vault(self) -> Any:
        from . import Vault

        if self._vault is None:
            # On stderr: stdout is the answer (JSON, or the MCP protocol for `vaultlcm mcp`).
            self._vault = Vault(self.vault_path, notice=lambda line: click.echo(f"Note: {line}", err=True))
        return self._vault

    def close(self) -> None:
        if self._vault is not None:
            try:
                self._vault.close()
            except Exception as exc:  # noqa: BLE001 - the command's answer is out; say what failed after it
                if self.debug:
                    raise
                click.echo("Error: while closing the vault: " + " ".join(str(exc).split()), err=True)


pass_ctx = click.make_pass_decorator(Context)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="vaultlcm", prog_name="vaultlcm")
@click.option(
    "--vault",
    "vault_path",
    envvar="VAULTLCM_VAULT",
    type=click.Path(file_okay=False),
    help="Vault folder (default: VAULTLCM_VAULT, else the current directory).",
)
@click.option("--debug", is_flag=True, help="Show the full traceback of an error instead of one line.")
@click.pass_context
def cli(ctx: click.Context, vault_path: str | None, debug: bool) -> None:
    """vaultlcm: lossless memory for AI agents, kept as an Obsidian vault."""
    obj = Context(vault_path, debug)
    ctx.obj = obj
    ctx.call_on_close(obj.close)


@cli.command()
@click.argument("path", required=False, type=click.Path(file_okay=False))
@click.pass_context
@handle_errors
def init(ctx: click.Context, path: str | None) -> None:
    """Create a vault (settings, .gitignore, .gitattributes); safe to run twice.

    An existing .gitignore or .gitattributes only gains the lines it lacks; init
    says what it added, and how to turn on the CSS snippet when it did not.
    """
    from . import Vault

    root = Path(path) if path else ctx.obj.vault_path
    with Vault.init(root) as vault:
        report = vault.init_report
    assert report is not None
    if report.written:
        click.echo(f"Initialized vault in {root.resolve()} (wrote {', '.join(report.written)})")
    elif report.added_lines:
        click.echo(f"Vault in {root.resolve()} already initialized")
    else:
        click.echo(f"Vault in {root.resolve()} already initialized; nothing changed")
    for line in report.describe():
        click.echo(line)


GIT_COMMIT = click.option(
    "--git-commit/--no-git-commit", default=None,
    help="Commit what this command wrote to git afterwards (default: the git_auto_commit setting).")


def _echo_commit(commit: str | None) -> None:
    """What the auto-commit did: on stdout, or on stderr when it failed (the command itself succeeded)."""
    if commit is not None:
        click.echo(f"git: {commit}", err=commit.startswith("not committed") and commit != "not committed (nothing to commit)")


FORMAT_CHOICE = click.Choice(["auto", "native", "openai", "anthropic", "claude-code", "openclaw"])
QUIET = click.option("-q", "--quiet", is_flag=True, help="No progress bar (there is none when stderr is not a terminal).")
#: Inputs from this size on get a progress bar.
BIG_INPUT_BYTES = 1 << 20


@cli.command()
@click.argument("file", required=False, default="-", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("-c", "--conversation", required=True, help="Conversation to append to (created if new).")
@click.option("--format", "fmt", type=FORMAT_CHOICE, default="auto", show_default=True, help="Input format.")
@click.option("--skip-bad-lines", is_flag=True, help="Report and skip lines that are not valid JSON (a torn last line).")
@click.option("--keep-bad-timestamps", is_flag=True,
              help="Keep unreadable timestamps as data and place those records by their neighbours.")
@click.option("--allow-duplicates", is_flag=True, help="Store records again even if this conversation has them.")
@click.option("--json", "as_json", is_flag=True,
              help='Print {"ids": [...], "new": N, "already_stored": N, "redacted": {...}, ...} instead of a '
              'summary line.')
@QUIET
@GIT_COMMIT
@pass_ctx
@handle_errors
def ingest(obj: Context, file: str, conversation: str, fmt: str, skip_bad_lines: bool, keep_bad_timestamps: bool,
           allow_duplicates: bool, as_json: bool, quiet: bool, git_commit: bool | None) -> None:
    """Append a transcript FILE (JSON Lines, a JSON array or a JSON object with messages; - for stdin).

    Re-importing a file, or a longer version of it, stores each record once. Secrets
    (API keys, tokens, private keys, passwords in URLs) are replaced by
    [redacted: kind] before anything is written; the summary line counts them.
    """
    from .progress import progress_bar

    big = file != "-" and Path(file).is_file() and Path(file).stat().st_size >= BIG_INPUT_BYTES
    with progress_bar(f"Ingesting {Path(file).name}", quiet=quiet or not big) as bar:
        report = obj.vault().ingest_file(conversation, file, format=fmt, skip_bad_lines=skip_bad_lines,
                                         keep_bad_timestamps=keep_bad_timestamps, allow_duplicates=allow_duplicates,
                                         progress=bar, git_commit=git_commit)
    if as_json:
        _echo_json(report.to_dict())
    else:
        click.echo(f"Ingested {report.describe()}")
        _echo_commit(report.commit)
    for line, reason in report.skipped_lines:
        click.echo(f"skipped line {line}: {reason}", err=True)


@cli.command()
@click.option("-c", "--conversation", required=True, help="Conversation to export.")
@click.option(
    "--format", "fmt", type=click.Choice(["native", "openai", "anthropic", "claude-code", "openclaw"]),
    default="native", show_default=True,
    help="native keeps everything; claude-code and openclaw give back the session lines read from such files.",
)
@pass_ctx
@handle_errors
def export(obj: Context, conversation: str, fmt: str) -> None:
    """Write a conversation as JSON Lines on stdout (lossless for the format it came in).

    Secrets redacted at ingest stay redacted: what was kept comes back exactly.
    """
    for record in obj.vault().export(conversation, fmt):
        click.echo(json.dumps(record, ensure_ascii=False))


@cli.command()
@click.argument("item_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print the item as JSON.")
@pass_ctx
@handle_errors
def show(obj: Context, item_id: str, as_json: bool) -> None:
    """Print one message or summary verbatim."""
    item = obj.vault().show(item_id)
    if as_json:
        _echo_json(item)
        return
    if item["kind"] == "message":
        click.echo(f"{item['id']} · {item['role']} · {item['at']} · {item['conversation']}")
        m = obj.vault().get_message(item["id"])
        text = m.searchable_text() if not m.text else m.text
        click.echo(text)
    else:
        click.echo(item["text"])


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@pass_ctx
@handle_errors
def status(obj: Context, as_json: bool) -> None:
    """Conversations with their message counts, tokens and days."""
    st = obj.vault().status()
    if as_json:
        _echo_json(st)
        return
    click.echo(f"Vault: {st['vault']}")
    if not st["conversations"]:
        click.echo("No conversations yet. Add one with `vaultlcm ingest FILE -c NAME`.")
    for c in st["conversations"]:
        click.echo(
            f"{c['conversation']}: {c['messages']} messages, {c['tokens']} tokens, {c['days']} day(s), "
            f"{c['first_at']} .. {c['last_at']}"
        )
        depth = f", depth {c['max_depth']}" if c["max_depth"] is not None else ""
        click.echo(f"  {c['summaries']} summaries{depth}; active context {c['active_items']} items, {c['active_tokens']} tokens")
        context = c["context"]
        click.echo(f"  context at the configured budget of {context['budget']} tokens:")
        for line in _cut_lines(context):
            click.echo(f"    {line}")
        if c.get("redacted"):
            from .secrets import describe_counts

            click.echo(f"  {describe_counts(c['redacted'])}")


@cli.command()
@click.option("-c", "--conversation", help="Only this conversation (default: all).")
@click.option("--force", is_flag=True, help="Summarize everything eligible, not just down to the soft threshold.")
@click.option("--json", "as_json", is_flag=True, help="Print the reports as JSON.")
@QUIET
@GIT_COMMIT
@pass_ctx
@handle_errors
def compact(obj: Context, conversation: str | None, force: bool, as_json: bool, quiet: bool,
            git_commit: bool | None) -> None:
    """Summarize old messages into the summary DAG.

    First it rewrites links that notes moved outside Obsidian left behind and
    removes notes a git merge set aside (another note covers their messages).
    """
    from .progress import progress_bar

    with progress_bar("Compacting", quiet=quiet or bool(conversation)) as bar:
        reports = obj.vault().compact(conversation, force=force, progress=bar, git_commit=git_commit)
    if as_json:
        _echo_json({"reports": [r.to_dict() for r in reports]})
        return
    for r in reports:
        for line in r.tidied:
            click.echo(f"{r.conversation}: {line}")
        line = f"{r.conversation}: {len(r.created)} summaries written, {len(r.refreshed)} refreshed, context {r.tokens_before} -> {r.tokens_after} tokens"
        click.echo(line)
        _echo_commit(r.commit)
        if r.error:
            click.echo(f"  compaction stopped: {r.error}", err=True)
    if any(r.error for r in reports):
        sys.exit(1)


def _cut_lines(cut: dict[str, Any]) -> list[str]:
    """The cut as lines: which stretch of history is shown at which resolution."""
    if "error" in cut:
        return [cut["error"]]
    lines = []
    for span in cut["spans"]:
        what = {"raw": "raw", "omitted": "left out"}.get(span["kind"], f"{span['kind']} depth {span['depth']}")
        tail = ", protected tail" if span["tail"] else ""
        lines.append(f"{span['first_at']} .. {span['last_at']}: {span['messages']} messages as "
                     f"{span['items']} {what} item(s), {span['tokens']} tokens{tail}")
    if cut["stubbed"]:
        lines.append(f"{len(cut['stubbed'])} tool result(s) of the newest turn shown as stubs")
    return lines


@cli.command()
@click.option("-c", "--conversation", required=True, help="Conversation to assemble.")
@click.option("--budget", required=True, type=click.IntRange(min=1), help="Token budget the context must fit.")
@click.option("--format", "fmt", type=click.Choice(["anthropic", "openai"]), default="anthropic", show_default=True)
@click.option("--json", "as_json", is_flag=True, help='Print {"messages": [...], "estimated_tokens": N}.')
@pass_ctx
@handle_errors
def assemble(obj: Context, conversation: str, budget: int, fmt: str, as_json: bool) -> None:
    """The model context for the next turn: the finest cut through history that fits --budget tokens.

    A pure read: nothing is written or summarized (run `compact` for that).
    """
    ctx = obj.vault().assemble(conversation, budget, format=fmt)
    if as_json:
        _echo_json(ctx.to_dict())
        return
    click.echo(f"# {len(ctx.messages)} messages, {ctx.estimated_tokens} of {budget} tokens "
               f"({len(ctx.summary_ids)} summaries, {len(ctx.message_ids)} raw messages)")
    for line in _cut_lines(ctx.describe()):
        click.echo(f"# {line}")
    if ctx.omitted_ids:
        click.echo(f"# left out (over budget; run `vaultlcm compact`): {', '.join(ctx.omitted_ids)}")
    click.echo(f"## system\n{ctx.system_prompt_addition}")
    for m in ctx.messages:
        content = m.get("content")
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        click.echo(f"## {m.get('role')}\n{text}")


@cli.command()
@click.argument("pattern")
@click.option("-c", "--conversation", help="Only this conversation.")
@click.option("--regex", "use_regex", is_flag=True, help="PATTERN is a regular expression (bounded scan, newest first).")
@click.option("--scope", type=click.Choice(["messages", "summaries", "both"]), default="both", show_default=True)
@click.option("--since", metavar="WHEN", help="Only items at or after WHEN (ISO date/time, or an age: 30m, 12h, 7d).")
@click.option("--before", metavar="WHEN", help="Only items before WHEN.")
@click.option("--sort", type=click.Choice(["relevance", "newest", "oldest"]), default="relevance", show_default=True,
              help="relevance: best first, hits of about the same relevance newest first.")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True, help="Hits per page.")
@click.option("--offset", type=click.IntRange(min=0), default=0, show_default=True, help="Hits to skip (the next page).")
@click.option("--count", "count_only", is_flag=True, help="Print only the number of matches: in all, by kind, per day.")
@click.option("--json", "as_json", is_flag=True,
              help='Print {"hits": [...], "total": N, ...} (with --count: {"total", "messages", "summaries", "per_day"}).')
@pass_ctx
@handle_errors
def grep(obj: Context, pattern: str, conversation: str | None, use_regex: bool, scope: str, since: str | None,
         before: str | None, sort: str, limit: int, offset: int, count_only: bool, as_json: bool) -> None:
    """Search stored messages and summaries: words (stemmed), "phrases", prefix*, identifiers, or --regex.

    Each hit line gives its time (UTC), id, role, the summary covering it and the node shown
    in its place in the model's context. When few messages have every word, they come newest
    first, then the summaries, then messages with some of the words (each says which). When
    nothing has the words as written, a word naming a doer is tried as the prefix of its root
    (formatter: format*), and the output says so. Exits 1 when nothing matches, like grep.
    """
    from .tools import count_lines, hit_line, page_line

    result = obj.vault().grep(pattern, conversation=conversation, regex=use_regex, scope=scope, since=since,
                              before=before, limit=limit, offset=offset, sort=sort, count=count_only)
    partial = result.get("partial")
    if as_json:
        _echo_json(result)
    elif count_only:
        click.echo("\n".join(count_lines({**result, "partial": False})))
    else:
        if result.get("related_forms"):
            click.echo(f"Nothing has the words as written; these hits match {result['related_forms']} instead.",
                       err=True)
        if result.get("relaxed") and result["hits"]:
            click.echo(f"{result['total']} hits have every word; the {result['some_words']} others have some "
                       "of them (they say which).", err=True)
        for h in result["hits"]:
            click.echo(hit_line(h, with_conversation=True))
        if result.get("next_offset") is not None and result["hits"]:
            click.echo(page_line(result).replace("offset=", "--offset "), err=True)
        elif not result["total"]:
            click.echo("No matches.", err=True)
    if partial:
        click.echo("(regex scan stopped at its time limit; narrow it with -c, --since or --before)", err=True)
    if not result["total"]:
        sys.exit(1)


@cli.command()
@click.argument("item_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print the description as JSON.")
@pass_ctx
@handle_errors
def describe(obj: Context, item_id: str, as_json: bool) -> None:
    """What an id is (message, summary or file), where it sits, what expanding it costs."""
    d = obj.vault().describe(item_id)
    if as_json:
        _echo_json(d)
        return
    for key, value in d.items():
        if key == "content" or key == "exploration_summary":
            continue
        if isinstance(value, list):
            value = ", ".join(map(str, value)) or "-"
        click.echo(f"{key}: {value}")
    body = d.get("content") or d.get("exploration_summary")
    if body:
        click.echo("")
        click.echo(body)


@cli.command()
@click.argument("item_id", metavar="ID")
@click.option("--max-tokens", type=click.IntRange(min=1), help="Token cap (default: max_expand_tokens, 4000).")
@click.option("--depth", type=click.IntRange(min=1), help="Summary levels to descend (default: down to raw messages).")
@click.option("--around", type=click.IntRange(min=0), metavar="N",
              help="A message with N neighbours on each side (default: the turn it belongs to).")
@click.option("--query", metavar="TEXT", help="A summary's sources matching TEXT first (each with the message after it).")
@click.option("--json", "as_json", is_flag=True, help='Print {"messages": [...], "summaries": [...], "truncated": bool, ...}.')
@pass_ctx
@handle_errors
def expand(obj: Context, item_id: str, max_tokens: int | None, depth: int | None, around: int | None,
           query: str | None, as_json: bool) -> None:
    """Exact history around ID: a summary down to its verbatim sources, a message with its turn.

    A message expands to its turn (the request, tool calls and results, the reply) or,
    with --around N, to N messages on each side. Everything stays within --max-tokens;
    what was left out is named (ids to expand next).
    """
    from . import Message

    r = obj.vault().expand(item_id, max_tokens=max_tokens, depth=depth, around=around, query=query)
    if as_json:
        _echo_json(r)
        return
    for s in r["summaries"]:
        click.echo(f"== {s['id']} ({s['kind']}, depth {s['depth']}, {s['descendant_count']} messages)")
        click.echo(s["text"].rstrip())
    marked = set(r.get("matched", [])) | ({r["id"]} if r.get("mode") in ("turn", "around") else set())
    for m in r["messages"]:
        msg = Message.from_native({k: v for k, v in m.items() if k in ("role", "content")})
        mark = " <<" if m["id"] in marked else ""
        click.echo(f"== {m['id']} · {m['role']} · {m.get('timestamp', '')}{mark}")
        click.echo(msg.searchable_text())
    if r["truncated"]:
        left = f"{r.get('omitted_messages', 0)} messages left out; " if r.get("omitted_messages") else ""
        nxt = f"; expand these next: {', '.join(r['omitted'][:10])}" if r["omitted"] else ""
        click.echo(f"(cut at the {max_tokens or 'default'}-token cap after {r['tokens']} tokens; {left}"
                   f"the rest is in the vault{nxt})", err=True)


@cli.command()
@click.argument("question")
@click.option("-c", "--conversation", help="Only this conversation.")
@click.option("--max-tokens", type=click.IntRange(min=1), help="Token cap of the evidence (default 4000).")
@click.option("--json", "as_json", is_flag=True, help="Print the answer, citations and excerpts as JSON.")
@pass_ctx
@handle_errors
def ask(obj: Context, question: str, conversation: str | None, max_tokens: int | None, as_json: bool) -> None:
    """Answer QUESTION from expanded history (LLM with citations, or ranked excerpts offline)."""
    r = obj.vault().ask(question, conversation=conversation, max_tokens=max_tokens)
    if as_json:
        _echo_json(r)
        return
    click.echo(r["answer"])
    if r["citations"]:
        click.echo(f"\n(sources: {', '.join(r['citations'])}; mode: {r['mode']})")


@cli.command()
@click.option("--backend", type=click.Choice(["whoosh", "tantivy"]), default=None,
              help="Switch the full-text index to this backend: rebuild it with it and record "
              "index_backend in vaultlcm.toml (tantivy needs the extra vaultlcm[tantivy]).")
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
@QUIET
@pass_ctx
@handle_errors
def reindex(obj: Context, backend: str | None, as_json: bool, quiet: bool) -> None:
    """Rebuild the derived catalog and full-text index from the Markdown files."""
    from .progress import progress_bar

    vault = obj.vault()
    with progress_bar("Indexing", quiet=quiet) as bar:
        result = vault.reindex(progress=bar, backend=backend)
    if as_json:
        _echo_json(result)
        return
    click.echo(f"Reindexed {result['documents']} documents ({result['messages']} messages, "
               f"{result['summaries']} summaries in {result['conversations']} conversations) "
               f"with {result['backend']}")
    if result.get("settings_changed"):
        click.echo(f"Recorded index_backend = \"{result['backend']}\" in vaultlcm.toml")


@cli.command()
@click.option("--fix", "do_fix", is_flag=True, help="Repair what is safe first (marked [fix] below), then report.")
@click.option("--strict", is_flag=True, help="Exit 1 for warnings too, not only for problems.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_ctx
@handle_errors
def doctor(obj: Context, do_fix: bool, strict: bool, as_json: bool) -> None:
    """Check the vault: problems (exit 1), warnings (exit 1 with --strict) and notes."""
    r = obj.vault().doctor(fix=do_fix)
    failed = bool(r["problems"]) or (strict and bool(r["warnings"]))
    if as_json:
        _echo_json(r)
    else:
        for line in r["fixed"]:
            click.echo(f"fixed: {line}")
        for label, key in (("problem", "problems"), ("warning", "warnings"), ("note", "notes")):
            for f in r[key]:
                mark = " [fix]" if f["fixable"] and not do_fix else ""
                click.echo(f"{label} [{f['kind']}]{mark}: {f['detail']}")
        counts = f"{len(r['problems'])} problem(s), {len(r['warnings'])} warning(s)"
        fixable = sum(f["fixable"] for key in ("problems", "warnings") for f in r[key])
        hint = f"; `vaultlcm doctor --fix` repairs the {fixable} marked [fix]" if fixable and not do_fix else ""
        click.echo(("Vault is clean" if not r["problems"] else "Vault has problems") + f": {counts}{hint}.")
    if failed:
        sys.exit(1)


@cli.command()
@click.argument("ids", nargs=-1, metavar="[ID]...")
@click.option("-c", "--conversation", help="Only this conversation.")
@click.option("--stale", is_flag=True, help="Every stale summary (its sources changed).")
@click.option("--fallback", is_flag=True, help="Every summary made by truncation or a fallback summarizer.")
@click.option("--force", is_flag=True, help="Also replace summaries a person edited.")
@click.option("--json", "as_json", is_flag=True, help="Print the reports as JSON.")
@pass_ctx
@handle_errors
def resummarize(obj: Context, ids: tuple[str, ...], conversation: str | None, stale: bool, fallback: bool,
                force: bool, as_json: bool) -> None:
    """Regenerate summaries with the current summarizer (never a person's edit without --force)."""
    reports = obj.vault().resummarize(list(ids), conversation=conversation, stale=stale, fallback=fallback, force=force)
    if as_json:
        _echo_json({"reports": [r.to_dict() for r in reports]})
        return
    total = sum(len(r.refreshed) for r in reports)
    click.echo(f"Regenerated {total} summar{'y' if total == 1 else 'ies'}.")


@cli.command()
@pass_ctx
@handle_errors
def watch(obj: Context) -> None:
    """Re-sync the index and the DAG as notes are edited, until interrupted (Ctrl-C)."""
    import time

    def report(result: dict[str, Any]) -> None:
        changed = len(result["messages_changed"]) + len(result["summaries_changed"]) + len(result["summaries_removed"])
        if changed or result["problems"]:
            click.echo(f"{result['conversation']}: {len(result['summaries_changed'])} summaries and "
                       f"{len(result['messages_changed'])} messages re-synced, {len(result['summaries_removed'])} removed")
            for p in result["problems"]:
                click.echo(f"  problem: {p}", err=True)

    vault = obj.vault()
    watcher = vault.watch(on_sync=report)
    click.echo(f"Watching {vault.root} (Ctrl-C to stop)")
    try:
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        watcher.stop()


@cli.command()
@pass_ctx
@handle_errors
def mcp(obj: Context) -> None:
    """Serve grep, describe, expand and ask to MCP clients (Claude Code, Claude Desktop) on stdio."""
    from . import serve_mcp

    serve_mcp(obj.vault())


@cli.command()
@click.argument("path", required=False, type=click.Path(file_okay=False))
@pass_ctx
@handle_errors
def demo(obj: Context, path: str | None) -> None:
    """Build a demo vault from the shipped sample transcript (offline, digest summarizer)."""
    from . import demo as build_demo

    click.echo(build_demo(path or "vaultlcm-demo").describe())


# -- where agents already are ----------------------------------------------------------

AGENT = click.Choice(["claude-code"])


def _claude(obj: Context) -> Any:
    """Claude Code with the vault named by --vault / VAULTLCM_VAULT, else the integration's own default."""
    from . import ClaudeCode

    return ClaudeCode(obj.vault_path if obj.explicit else None)


@cli.command()
@click.argument("agent", type=AGENT, metavar="claude-code")
@click.option("--time-limit", type=click.FloatRange(min=0), default=1.0, show_default=True,
              help="Seconds before returning to the agent; longer work finishes in the background.")
@click.option("--foreground", is_flag=True, help="Work in this process, without a time limit (for debugging).")
@pass_ctx
def hook(obj: Context, agent: str, time_limit: float, foreground: bool) -> None:
    """Ingest what is new, from a Claude Code hook event on stdin (Stop, SubagentStop, PreCompact, SessionEnd).

    The session (with its subagents) goes into the conversation <project>-<session id, 8 characters>
    of the vault given by --vault or VAULTLCM_VAULT, else ~/.vaultlcm/claude-code (created if missing).
    It never blocks or breaks the agent: nothing on stdout, exit code 0 always, what it did and any
    error logged to hooks.log in the vault's state folder (.vaultlcm/). `vaultlcm install claude-code`
    registers it.
    """
    try:
        claude = _claude(obj)
        if sys.stdin is None or sys.stdin.isatty():
            click.echo("vaultlcm hook claude-code reads a Claude Code hook event on stdin; "
                       "`vaultlcm install claude-code` sets it up", err=True)
            data = b""
        else:
            data = sys.stdin.buffer.read(claude.max_event_bytes)
        claude.hook(data, time_limit=time_limit, foreground=foreground)
    except BaseException:  # noqa: BLE001 - whatever happens, the agent goes on
        pass
    sys.exit(0)


@cli.command()
@click.argument("agent", type=AGENT, metavar="claude-code")
@click.option("--write", "do_write", is_flag=True, help="Merge the entries into the files (default: only show them).")
@click.option("--scope", type=click.Choice(["user", "project"]), default="user", show_default=True,
              help="user: ~/.claude/settings.json and ~/.claude.json; project: .claude/settings.json and .mcp.json.")
@click.option("--project", "project_dir", type=click.Path(file_okay=False), help="Project folder for --scope project "
              "(default: the current directory).")
@pass_ctx
@handle_errors
def install(obj: Context, agent: str, do_write: bool, scope: str, project_dir: str | None) -> None:
    """The hook and MCP settings for Claude Code: show them, or merge them in with --write.

    Registers `vaultlcm hook claude-code` for the Stop, SubagentStop, PreCompact and SessionEnd
    events and the `vaultlcm mcp` server (recall tools inside Claude Code), without touching
    anything else in those files; running it twice changes nothing. A changed file is backed
    up first (<file>.vaultlcm-backup). With --write the vault is created if missing.
    """
    report = _claude(obj).install(scope, project=project_dir, write=do_write)
    click.echo(report.describe())
    if not report.mcp_available:
        click.echo("Note: the MCP server needs the mcp package: pip install 'vaultlcm[mcp]' "
                   "(or pipx install 'vaultlcm[mcp]').", err=True)


@cli.command("import")
@click.argument("agent", type=AGENT, metavar="claude-code")
@click.argument("folder", required=False, type=click.Path(exists=True))
@click.option("--json", "as_json", is_flag=True, help="Print a JSON report (per session: conversation, new, ...).")
@QUIET
@pass_ctx
@handle_errors
def import_sessions(obj: Context, agent: str, folder: str | None, as_json: bool, quiet: bool) -> None:
    """Every past Claude Code session (under ~/.claude/projects, or FOLDER), one conversation each.

    Safe to run again: what is already stored is not stored twice (a second run reports 0 new).
    The vault is --vault or VAULTLCM_VAULT, else ~/.vaultlcm/claude-code; it is created if missing.
    """
    from .progress import progress_bar

    with progress_bar("Importing sessions", quiet=quiet) as bar:
        report = _claude(obj).import_sessions(folder, progress=bar)
    if as_json:
        _echo_json(report.to_dict())
    else:
        click.echo(report.describe())
    for path, error in report.failed:
        click.echo(f"failed: {path}: {error}", err=True)
    if report.failed:
        sys.exit(1)


def main() -> None:  # pragma: no cover - console entry
    cli()
