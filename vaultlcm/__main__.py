"""``python -m vaultlcm`` runs the command line."""

from .cli import cli

cli()
