"""Claude Code, as the public API names it: one object for the hook, the installer and the importer.

``vaultlcm hook|install|import claude-code`` call the methods of the same names
(:meth:`ClaudeCode.hook`, :meth:`ClaudeCode.install`, :meth:`ClaudeCode.import_sessions`);
a program that drives Claude Code itself can call them too::

    from vaultlcm import ClaudeCode

    claude = ClaudeCode()                      # the default vault, ~/.vaultlcm/claude-code
    print(claude.install(write=True).describe())
    print(claude.import_sessions().describe())

The work lives in :mod:`vaultlcm.claude_code` (sessions, the hook, the importer)
and :mod:`vaultlcm.claude_settings` (the settings merge); this module only holds
what the three share: which vault, whether it may be created, the environment.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path

from .claude_code import MAX_EVENT_BYTES, ImportReport, claude_dir, default_vault, import_sessions, open_hook_vault, run_hook
from .claude_settings import FileChange, apply, plan_install, render
from .errors import UsageError
from .layout import SETTINGS_FILE

__all__ = ["MAX_EVENT_BYTES", "ClaudeCode", "ImportReport", "InstallReport"]

#: The MCP registration's vault for ``--scope project`` when none was named: Claude Code expands
#: ``${HOME}`` in ``.mcp.json``, so a file shared with a team names no one's home folder.
SHARED_DEFAULT_VAULT = "${HOME}/.vaultlcm/claude-code"


@dataclass
class InstallReport:
    """What :meth:`ClaudeCode.install` found, and did with ``write``."""

    scope: str
    vault: Path
    changes: list[FileChange]
    #: Whether the files were changed (``write``) or only planned.
    written: bool
    #: Each file written and its backup (``None``: the file is new).
    applied: list[tuple[Path, Path | None]] = field(default_factory=list)
    #: Whether ``write`` created the vault.
    vault_created: bool = False
    #: Whether the vault exists (with ``write`` it always does afterwards).
    vault_exists: bool = True
    #: Whether the ``mcp`` package (the MCP server's SDK) is importable here.
    mcp_available: bool = True

    @property
    def pending(self) -> list[FileChange]:
        """The files that would change (or did)."""
        return [c for c in self.changes if c.changed]

    def describe(self) -> str:
        """The lines ``vaultlcm install claude-code`` prints (notes about the vault and MCP last)."""
        lines: list[str] = []
        if not self.pending:
            lines.append(f"vaultlcm is already set up for Claude Code ({self.scope} scope); nothing to change.")
        elif self.written:
            for path, backup in self.applied:
                lines.append(f"Updated {path}" + (f" (backup: {backup})" if backup else " (new file)"))
                change = next(c for c in self.changes if c.path == path)
                lines.extend(f"  {note}" for note in change.notes)
        else:
            lines.append(f"vaultlcm for Claude Code ({self.scope} scope) would change {len(self.pending)} file(s); "
                         "run again with --write to apply:")
            for change in self.pending:
                lines.append(f"\n{change.path}")
                lines.extend(f"  {note}" for note in change.notes)
                lines.append("merging in:")
                lines.append(render(change.fragment).decode("utf-8").rstrip())
        if self.written:
            lines.append(f"Vault: {self.vault}" + (" (created)" if self.vault_created else ""))
        else:
            lines.append(f"Vault: {self.vault}" + ("" if self.vault_exists else " (created by --write)"))
        if self.written and self.pending:
            lines.append("Restart Claude Code to load them; bring in past sessions with `vaultlcm import claude-code`.")
        return "\n".join(lines)


class ClaudeCode:
    """Claude Code sessions and settings, for one vault.

    ``vault``: the vault to use; ``None`` means the integration's own default
    (``~/.vaultlcm/claude-code``), which every method creates when missing. A vault
    named here is created only by :meth:`install` with ``write`` and by
    :meth:`import_sessions`; the hook never creates a vault a person named (a
    typo would otherwise scatter vaults). ``environ`` is where ``CLAUDE_CONFIG_DIR``
    and the hook's fallback log folder are read (the process environment by default).
    """

    #: Hook input larger than this is not a hook event (Claude Code sends a few hundred bytes).
    max_event_bytes = MAX_EVENT_BYTES

    def __init__(self, vault: str | Path | None = None, *, environ: Mapping[str, str] | None = None) -> None:
        self.explicit = vault is not None
        self.vault = Path(vault).absolute() if vault is not None else default_vault()
        self.environ: Mapping[str, str] = os.environ if environ is None else environ

    def hook(self, event: bytes, *, time_limit: float = 1.0, foreground: bool = False) -> None:
        """Ingest what is new in the session a hook event names (Stop, SubagentStop, PreCompact, SessionEnd).

        ``event`` is the JSON Claude Code writes on the hook's stdin (at most
        ``MAX_EVENT_BYTES``). Never raises and never prints: what it did, and any
        error, goes to ``hooks.log`` in the vault's state folder. The work runs in a
        detached process that outlives ``time_limit`` when it must, unless ``foreground``.
        """
        run_hook(event, root=self.vault, create=not self.explicit, environ=self.environ,
                 time_limit=time_limit, detach=not foreground)

    def install(self, scope: str = "user", *, project: str | Path | None = None, write: bool = False) -> InstallReport:
        """The hook entries and the MCP registration for Claude Code; merged into its files with ``write``.

        ``scope`` ``user`` (``~/.claude/settings.json``, ``~/.claude.json``) or ``project``
        (``<project>/.claude/settings.json``, ``<project>/.mcp.json``; ``project`` defaults to
        the current folder). Only vaultlcm's own entries are touched; a changed file is backed
        up first; running it twice changes nothing. With ``write`` the vault is created if missing.
        """
        folder = Path(project or ".").absolute()
        mcp_vault = str(self.vault) if self.explicit or scope == "user" else SHARED_DEFAULT_VAULT
        changes = plan_install(scope, project=folder, vault=self.vault if self.explicit else None,
                               vault_for_mcp=mcp_vault, environ=self.environ)
        report = InstallReport(scope=scope, vault=self.vault, changes=changes, written=write,
                               mcp_available=find_spec("mcp") is not None)
        if write:
            if report.pending:
                report.applied = apply(changes)
            with open_hook_vault(self.vault, create=True) as opened:
                report.vault_created = bool(opened.created_files)
        else:
            report.vault_exists = (self.vault / SETTINGS_FILE).is_file()
        return report

    def import_sessions(self, folder: str | Path | None = None, *,
                        progress: Callable[[int, int], None] | None = None) -> ImportReport:
        """Every past session under ``folder`` (default: Claude Code's ``projects`` folder), one conversation each.

        Safe to run again: what is stored already is not stored twice. ``progress(done, total)``
        counts transcript bytes. The vault is created if missing.
        """
        root = Path(folder) if folder is not None else claude_dir(self.environ) / "projects"
        if not root.exists():
            raise UsageError(f"{root} does not exist: no Claude Code sessions to import; give their folder as FOLDER")
        with open_hook_vault(self.vault, create=True) as vault:
            return import_sessions(vault, root, progress=progress)
