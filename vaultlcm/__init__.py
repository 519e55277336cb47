"""vaultlcm: lossless context management for AI agents, stored as an Obsidian vault.

The public API::

    from vaultlcm import Vault, Engine

    vault = Vault.init("my-vault")             # or Vault("my-vault")
    vault.ingest("demo", [{"role": "user", "content": "hello"}])
    vault.compact("demo", force=True)
    ctx = vault.assemble("demo", budget=8000)

    engine = Engine("my-vault", "demo")        # the agent-loop lifecycle
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .assembly import AssembledContext
    from .compaction import CompactionReport
    from .engine import Engine, SubagentHandle
    from .errors import (
        CorruptVaultError,
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
    from .messages import Message
    from .settings import Settings, load_settings
    from .vault import Vault

# Names resolve on first use (PEP 562), so `vaultlcm --help` does not pay for
# pydantic models and the engine it does not need.
_WHERE = {
    "AssembledContext": "assembly", "CompactionReport": "compaction", "Engine": "engine",
    "SubagentHandle": "engine", "Message": "messages", "Settings": "settings",
    "load_settings": "settings", "Vault": "vault",
}


def __getattr__(name: str) -> Any:
    import importlib

    if name in _WHERE:
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    if name.endswith("Error") or name == "ValidationProblem":
        errors = importlib.import_module(".errors", __name__)
        if hasattr(errors, name):
            return getattr(errors, name)
    raise AttributeError(f"module 'vaultlcm' has no attribute {name!r}")


__version__ = "0.1.0"

__all__ = [
    "AssembledContext",
    "CompactionReport",
    "CorruptVaultError",
    "Engine",
    "InputFormatError",
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
    "load_settings",
]
