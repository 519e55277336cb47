"""The command-line reference (``docs/CLI.md``), generated from the click commands themselves.

``python -m vaultlcm.clidoc > docs/CLI.md`` regenerates it; ``tests/test_docs.py``
fails when the committed file and the commands drift apart. The output does not
depend on the terminal width, the program name or the environment.
"""

from __future__ import annotations

from typing import Any

import click

PROG = "vaultlcm"
WIDTH = 100
REGENERATE = "python -m vaultlcm.clidoc > docs/CLI.md"


def _context(command: click.Command, name: str, parent: click.Context | None) -> click.Context:
    settings: dict[str, Any] = dict(command.context_settings)
    settings.update(terminal_width=WIDTH, max_content_width=WIDTH, color=False)
    return command.context_class(command, info_name=name, parent=parent, **settings)


def command_help() -> list[tuple[str, str]]:
    """``(heading, help text)`` for the group, then every command sorted by name."""
    from .cli import cli

    root = _context(cli, PROG, None)
    sections = [(PROG, cli.get_help(root))]
    for name in sorted(cli.list_commands(root)):
        command = cli.get_command(root, name)
        if command is None or command.hidden:
            continue
        sections.append((f"{PROG} {name}", command.get_help(_context(command, name, root))))
    return sections


def _toml_default(value: Any) -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, str):
        return f'`"{value}"`'
    return f"`{value!r}`"


def settings_section() -> str:
    """A Markdown table of every setting: name, default, environment variable, description."""
    from .settings import ENV_PREFIX, Settings

    lines = [
        "## Settings",
        "",
        "Every setting can be set in the vault's `vaultlcm.toml` (`vaultlcm init` writes them all, with",
        "their defaults) and overridden by an environment variable. Precedence, lowest to highest: the",
        "default, `vaultlcm.toml`, the environment.",
        "",
        "| setting | default | environment variable | description |",
        "|---|---|---|---|",
    ]
    for name, field in Settings.model_fields.items():
        description = (field.description or "").replace("|", "\\|")
        env = f"`{ENV_PREFIX}{name.upper()}`"
        lines.append(f"| `{name}` | {_toml_default(field.default)} | {env} | {description} |")
    return "\n".join(lines)


def render_cli_reference() -> str:
    """The whole of ``docs/CLI.md``."""
    parts = [
        "# vaultlcm command-line reference",
        "",
        "This file is generated from the commands' own `--help` text (and, for the settings,",
        f"from the settings model) by `{REGENERATE}`; do not edit it by hand.",
        "`tests/test_docs.py` fails when it is out of date or when a command has no section here.",
        "`vaultlcm COMMAND --help` prints the same text.",
    ]
    for heading, text in command_help():
        parts += ["", f"## {heading}", "", "```text", text.rstrip("\n"), "```"]
    parts += ["", settings_section()]
    return "\n".join(parts) + "\n"


def main() -> None:
    click.echo(render_cli_reference(), nl=False)


if __name__ == "__main__":
    main()
