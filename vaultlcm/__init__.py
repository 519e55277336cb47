"""vaultlcm: lossless context management for AI agents, stored as an Obsidian vault."""

__version__ = "0.1.0"
