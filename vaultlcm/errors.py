"""The one exception hierarchy of vaultlcm.

Every error the library raises on purpose is a :class:`VaultLCMError`. Messages
are written for the person at the keyboard: they say what is wrong, where (file,
line, id) and what to do about it. Only the CLI turns them into ``Error: ...``
lines and exit codes.
"""

from __future__ import annotations

from pathlib import Path


class VaultLCMError(Exception):
    """Base class of every error vaultlcm raises on purpose."""

    exit_code: int = 1


class UsageError(VaultLCMError):
    """The caller asked for something that cannot mean anything (exit code 2)."""

    exit_code = 2


class NotAVaultError(VaultLCMError):
    """The folder given as the vault has no ``vaultlcm.toml``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        super().__init__(
            f"{path} is not a vaultlcm vault (no vaultlcm.toml). "
            f"Create one with `vaultlcm init {path}`, or point at an existing vault "
            "with --vault PATH or VAULTLCM_VAULT."
        )


class SettingsError(VaultLCMError):
    """A setting in ``vaultlcm.toml`` or a ``VAULTLCM_*`` variable is invalid."""


class InvalidNameError(VaultLCMError):
    """A conversation name cannot be used as a folder and link target."""


class InputFormatError(VaultLCMError):
    """A transcript given to ``ingest`` is malformed.

    ``source`` names the file (or ``<stdin>``) and ``line`` the 1-based line where
    the problem is, when there is one.
    """

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None) -> None:
        self.source = source
        self.line = line
        where = ""
        if source is not None:
            where = f"{source}:{line}: " if line is not None else f"{source}: "
        elif line is not None:
            where = f"line {line}: "
        super().__init__(f"{where}{message}")


class CorruptVaultError(VaultLCMError):
    """A file of the vault cannot be parsed; names the file and line."""

    def __init__(self, message: str, *, path: Path | str | None = None, line: int | None = None) -> None:
        self.path = path
        self.line = line
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(
            f"{where}{message}. Run `vaultlcm doctor` to see every problem in the vault."
        )


class NotFoundError(VaultLCMError):
    """No message, summary, file or conversation has the given id or name."""


class LockTimeoutError(VaultLCMError):
    """Another process held a conversation's lock for too long."""


class SummarizerError(VaultLCMError):
    """A summarizer could not produce a summary (provider down, bad reply, ...).

    Compaction catches it, leaves the messages uncovered and retries later; no
    data is lost.
    """


class ProviderConfigError(SummarizerError):
    """A provider is selected but cannot be used as configured (missing key, missing SDK)."""


class OutsideVaultError(VaultLCMError):
    """A path inside the vault is a symlink or resolves outside the vault root; vaultlcm never follows it."""


class StorageError(VaultLCMError):
    """The disk refused a read or write: full, read-only, permissions, a file in the way."""

    @classmethod
    def from_os(cls, exc: OSError, path: Path | str, doing: str) -> "StorageError":
        import errno

        hints = {
            errno.ENOSPC: "the disk is full; free some space and retry (nothing was half-written)",
            errno.EDQUOT: "the disk quota is exhausted; free some space and retry",
            errno.EROFS: "the file system is read-only; reading commands still work, writing needs a writable vault",
            errno.EACCES: "permission denied; check the owner and mode of the vault's files",
            errno.EPERM: "operation not permitted; check the owner and mode of the vault's files",
            errno.ENAMETOOLONG: "a file name is too long for this file system; use a shorter conversation name",
            errno.ELOOP: "the path is a symlink; vaultlcm never follows symlinks inside a vault",
            errno.ENOTDIR: "a file stands where a folder should be",
            errno.EISDIR: "a folder stands where a file should be",
        }
        why = hints.get(exc.errno or 0, exc.strerror or str(exc))
        return cls(f"cannot {doing} {path}: {why}")


class GitError(VaultLCMError):
    """An auto-commit could not be made: git missing, no repository, or git refused the commit."""


class IndexError_(VaultLCMError):
    """The full-text index failed; it can always be rebuilt with ``vaultlcm reindex``."""


class IndexBackendError(IndexError_):
    """The search index was built with one backend and the ``index_backend`` setting names the other.

    Raised instead of a silent rebuild (minutes at a million messages, with no word of it):
    ``vaultlcm reindex --backend`` switches with progress shown, or the setting goes back.
    """

    def __init__(self, path: Path, found: str, wanted: str) -> None:
        self.path = path
        self.found = found
        self.wanted = wanted
        super().__init__(
            f"the search index at {path} was built with {found}, but the index_backend setting says {wanted} "
            f"(vaultlcm.toml, or VAULTLCM_INDEX_BACKEND). To switch, run `vaultlcm reindex --backend {wanted}` "
            f"(it rebuilds the index from the files, showing progress); to keep the index, set "
            f"index_backend = \"{found}\"."
        )


class IndexBuildError(IndexError_):
    """The process building the index during ``vaultlcm reindex`` failed; the message says how."""


class ValidationProblem(VaultLCMError):
    """A hand-edited note failed validation; names the file and field."""


class IntegrationError(VaultLCMError):
    """An agent's own configuration (Claude Code's settings) cannot be read or merged; names the file."""


class BudgetTooSmallError(VaultLCMError):
    """The token budget cannot hold even the newest user message (or newest exchange) of a conversation."""

    def __init__(self, conversation: str, budget: int, message_id: str, needed: int, user_message: bool = True) -> None:
        self.conversation = conversation
        self.budget = budget
        self.message_id = message_id
        self.needed = needed
        what = "newest user message" if user_message else "newest message and the tool calls it answers"
        super().__init__(
            f"a budget of {budget:,} tokens cannot hold the {what} of conversation {conversation!r} "
            f"({message_id}), which alone needs {needed:,} tokens; give a budget of at least {needed:,} tokens"
        )
