"""``vaultlcm install claude-code``: the hook entries and the MCP server registration, merged in place.

Where Claude Code reads them (its settings and MCP documentation):

==========  =====================================  ==========================================
scope       hooks                                  MCP servers
==========  =====================================  ==========================================
``user``    ``~/.claude/settings.json``            ``~/.claude.json`` (``mcpServers``), what
                                                   ``claude mcp add --scope user`` writes
``project`` ``<project>/.claude/settings.json``    ``<project>/.mcp.json`` (shared with the
                                                   team; Claude Code asks before using it)
==========  =====================================  ==========================================

(``$CLAUDE_CONFIG_DIR`` moves ``~/.claude`` and the ``.claude.json`` in it.)

The merge touches only vaultlcm's own entries: a hook whose command runs
``vaultlcm … hook claude-code`` and the ``vaultlcm`` MCP server. Every other
hook, key and server stays as it was; an entry already right is left alone, so
running ``install`` twice changes nothing. A file that changes is first copied
to ``<name>.vaultlcm-backup``, then replaced atomically; a file that is not
valid JSON is never touched.
"""

from __future__ import annotations

import copy
import json
import shlex
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .claude_code import HOOK_EVENTS, claude_dir
from .errors import IntegrationError, UsageError
from .fsutil import atomic_write

MCP_NAME = "vaultlcm"
#: Claude Code's own limit for the hook command (seconds); the hook returns well before it.
HOOK_TIMEOUT_SECONDS = 30
BACKUP_SUFFIX = ".vaultlcm-backup"


@dataclass
class FileChange:
    """One settings file: what it holds now, what it would hold, and the changes in words."""

    path: Path
    before: dict[str, Any] | None
    after: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    #: What is merged in, as a JSON fragment a person could paste.
    fragment: dict[str, Any] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return bool(self.notes)


@dataclass(frozen=True)
class Launcher:
    """How Claude Code starts vaultlcm: the program and the arguments before the command."""

    program: str
    prefix: tuple[str, ...] = ()

    def argv(self, *args: str) -> list[str]:
        return [self.program, *self.prefix, *args]

    def shell(self, *args: str) -> str:
        return " ".join(shlex.quote(a) for a in self.argv(*args))


def launcher(scope: str) -> Launcher:
    """``vaultlcm`` for a project (every teammate has it on PATH); this installation's path for the user scope."""
    if scope == "project":
        return Launcher("vaultlcm")
    found = shutil.which("vaultlcm")
    if found:
        return Launcher(str(Path(found).absolute()))
    return Launcher(sys.executable, ("-m", "vaultlcm"))


def plan_install(scope: str, *, project: Path, vault: Path | None, vault_for_mcp: str,
                 environ: Mapping[str, str]) -> list[FileChange]:
    """What ``install claude-code`` would change: the settings file (hooks) and the MCP registration.

    ``vault`` is the vault the hook was told to use (``None``: the hook's default);
    ``vault_for_mcp`` the vault path the MCP server is started with.
    """
    if scope not in ("user", "project"):
        raise UsageError(f"unknown scope {scope!r}; choose user or project")
    run = launcher(scope)
    vault_args = ("--vault", str(vault)) if vault is not None else ()
    hook = {"type": "command", "command": run.shell(*vault_args, "hook", "claude-code"),
            "timeout": HOOK_TIMEOUT_SECONDS}
    mcp_args = run.argv("--vault", vault_for_mcp, "mcp")
    server = {"type": "stdio", "command": mcp_args[0], "args": mcp_args[1:], "env": {}}
    if scope == "user":
        base = claude_dir(environ)
        settings_path = base / "settings.json"
        mcp_path = base / ".claude.json" if environ.get("CLAUDE_CONFIG_DIR") else Path.home() / ".claude.json"
    else:
        settings_path = project / ".claude" / "settings.json"
        mcp_path = project / ".mcp.json"
    settings = _load(settings_path)
    hooks_change = FileChange(settings_path, settings, copy.deepcopy(settings) if settings is not None else {})
    merge_hooks(hooks_change, hook)
    mcp = _load(mcp_path)
    mcp_change = FileChange(mcp_path, mcp, copy.deepcopy(mcp) if mcp is not None else {})
    merge_mcp(mcp_change, server)
    return [hooks_change, mcp_change]


def _load(path: Path) -> dict[str, Any] | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise IntegrationError(f"{path}: cannot be read ({exc}); nothing was changed") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise IntegrationError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}); fix it first, nothing was changed"
                         ) from None
    if not isinstance(data, dict):
        raise IntegrationError(f"{path}: expected a JSON object at the top; nothing was changed")
    return data


def is_vaultlcm_hook(entry: Any) -> bool:
    command = entry.get("command") if isinstance(entry, dict) else None
    return isinstance(command, str) and "vaultlcm" in command and "hook claude-code" in command


def merge_hooks(change: FileChange, hook: dict[str, Any]) -> None:
    """Make each event run ``hook`` exactly once, leaving every other hook as it is."""
    hooks = change.after.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise IntegrationError(f"{change.path}: 'hooks' is not an object; fix it first, nothing was changed")
    change.fragment = {"hooks": {event: [{"hooks": [hook]}] for event in HOOK_EVENTS}}
    for event in HOOK_EVENTS:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise IntegrationError(f"{change.path}: 'hooks.{event}' is not a list; fix it first, nothing was changed")
        ours = [(g, h) for g in groups if isinstance(g, dict) and isinstance(g.get("hooks"), list)
                for h in g["hooks"] if is_vaultlcm_hook(h)]
        if not ours:
            groups.append({"hooks": [dict(hook)]})
            change.notes.append(f"+ hooks.{event}: {hook['command']}")
            continue
        group, entry = ours[0]
        if entry != hook:
            change.notes.append(f"~ hooks.{event}: {entry.get('command')} -> {hook['command']}")
            entry.clear()
            entry.update(hook)
        for g, h in ours[1:]:  # a second copy would ingest twice per event
            g["hooks"].remove(h)
            change.notes.append(f"- hooks.{event}: duplicate {h.get('command')}")
            if not g["hooks"]:
                groups.remove(g)


def merge_mcp(change: FileChange, server: dict[str, Any]) -> None:
    """Register the ``vaultlcm`` MCP server (replacing an older ``vaultlcm`` entry), nothing else."""
    servers = change.after.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise IntegrationError(f"{change.path}: 'mcpServers' is not an object; fix it first, nothing was changed")
    change.fragment = {"mcpServers": {MCP_NAME: server}}
    described = " ".join([server["command"], *server["args"]])
    current = servers.get(MCP_NAME)
    if current == server:
        return
    if current is None:
        change.notes.append(f"+ mcpServers.{MCP_NAME}: {described}")
    else:
        was = " ".join([str(current.get("command", "")), *map(str, current.get("args", []))]) if isinstance(
            current, dict) else json.dumps(current)
        change.notes.append(f"~ mcpServers.{MCP_NAME}: {was} -> {described}")
    servers[MCP_NAME] = server


def render(data: dict[str, Any]) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def apply(changes: list[FileChange]) -> list[tuple[Path, Path | None]]:
    """Write the files that change (a backup of each first); returns ``(file, backup)`` pairs."""
    done: list[tuple[Path, Path | None]] = []
    for change in changes:
        if not change.changed:
            continue
        target = change.path.resolve() if change.path.is_symlink() else change.path  # keep a dotfiles link
        backup = None
        if target.exists():
            backup = target.with_name(target.name + BACKUP_SUFFIX)
            shutil.copy2(target, backup)  # keeps the file's mode: ~/.claude.json is private
        atomic_write(target, render(change.after))
        done.append((change.path, backup))
    return done
