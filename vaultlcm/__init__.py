"""vaultlcm: lossless context management for AI agents, stored as an Obsidian vault.

The public API::

    from vaultlcm import Vault, Engine

    vault = Vault.init("my-vault")             # or Vault("my-vault")
    vault.ingest("demo", [{"role": "user", "content": "hello"}])
    vault.compact("demo", force=True)
    ctx = vault.assemble("demo", budget=8000)

    engine = Engine("my-vault", "demo")        # the agent-loop lifecycle

Each command of the ``vaultlcm`` CLI calls one name here: a ``Vault`` method of
the same name, ``Vault.init``, ``demo``, ``serve_mcp`` (``vaultlcm mcp``) or a
``ClaudeCode`` method (``hook``, ``install``, ``import_sessions``).
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .assembly import AssembledContext
    from .claude import ClaudeCode, ImportReport, InstallReport
    from .compaction import CompactionReport
    from .engine import Engine, SubagentHandle
    from .errors import (
        CorruptVaultError,
        IndexBackendError,
        InputFormatError,
        InvalidNameError,
        LockTimeoutError,
        NotAVaultError,
        NotFoundError,
        OutsideVaultError,
        ProviderConfigError,
        SettingsError,
        StorageError,
        SummarizerError,
        UsageError,
        ValidationProblem,
        VaultLCMError,
    )
    from .mcp_server import serve as serve_mcp
    from .messages import Message
    from .sample import DemoReport
    from .sample import build_sample_vault as demo
    from .settings import Settings, load_settings
    from .vault import Vault

# Names resolve on first use (PEP 562), so `vaultlcm --help` does not pay for
# pydantic models and the engine it does not need.
# A name is found in its module under the same name, unless given as "module:name".
_WHERE = {
    "AssembledContext": "assembly", "ClaudeCode": "claude", "CompactionReport": "compaction", "DemoReport": "sample",
    "Engine": "engine", "ImportReport": "claude", "InstallReport": "claude", "Message": "messages",
    "Settings": "settings", "SubagentHandle": "engine", "Vault": "vault", "demo": "sample:build_sample_vault",
    "load_settings": "settings", "serve_mcp": "mcp_server:serve",
}


def __getattr__(name: str) -> Any:
    import importlib

    if name in _WHERE:
        module, _, attr = _WHERE[name].partition(":")
        return getattr(importlib.import_module(f".{module}", __name__), attr or name)
    if name.endswith("Error") or name == "ValidationProblem":
        errors = importlib.import_module(".errors", __name__)
        if hasattr(errors, name):
            return getattr(errors, name)
    raise AttributeError(f"module 'vaultlcm' has no attribute {name!r}")


__version__ = "0.1.0"

__all__ = [
    "AssembledContext",
    "ClaudeCode",
    "CompactionReport",
    "CorruptVaultError",
    "DemoReport",
    "Engine",
    "ImportReport",
    "IndexBackendError",
    "InputFormatError",
    "InstallReport",
    "InvalidNameError",
    "LockTimeoutError",
    "Message",
    "NotAVaultError",
    "NotFoundError",
    "OutsideVaultError",
    "ProviderConfigError",
    "Settings",
    "SettingsError",
    "StorageError",
    "SubagentHandle",
    "SummarizerError",
    "UsageError",
    "ValidationProblem",
    "Vault",
    "VaultLCMError",
    "__version__",
    "demo",
    "load_settings",
    "serve_mcp",
]
