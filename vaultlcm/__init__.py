"""vaultlcm: lossless context management for AI agents, stored as an Obsidian vault.

The public API::

    from vaultlcm import Vault, Engine

    vault = Vault.init("my-vault")             # or Vault("my-vault")
    vault.ingest("demo", [{"role": "user", "content": "hello"}])
    vault.compact("demo", force=True)
    ctx = vault.assemble("demo", budget=8000)

    engine = Engine("my-vault", "demo")        # the agent-loop lifecycle
"""

from .assembly import AssembledContext
from .compaction import CompactionReport
from .engine import Engine, SubagentHandle
from .errors import (
    CorruptVaultError,
    DuplicateIdError,
    InputFormatError,
    InvalidNameError,
    LockTimeoutError,
    NotAVaultError,
    NotFoundError,
    ProviderConfigError,
    SettingsError,
    SummarizerError,
    UsageError,
    ValidationProblem,
    VaultLCMError,
)
from .messages import Message
from .settings import Settings, load_settings
from .vault import Vault

__version__ = "0.1.0"

__all__ = [
    "AssembledContext",
    "CompactionReport",
    "CorruptVaultError",
    "DuplicateIdError",
    "Engine",
    "InputFormatError",
    "InvalidNameError",
    "LockTimeoutError",
    "Message",
    "NotAVaultError",
    "NotFoundError",
    "ProviderConfigError",
    "Settings",
    "SettingsError",
    "SubagentHandle",
    "SummarizerError",
    "UsageError",
    "ValidationProblem",
    "Vault",
    "VaultLCMError",
    "__version__",
    "load_settings",
]
