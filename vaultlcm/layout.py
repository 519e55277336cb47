"""Where everything lives in a vault, and how ``init`` creates one.

```
vault/
  vaultlcm.toml                  settings (versioned with the vault)
  .gitignore  .gitattributes     written by init
  .vaultlcm/                     derived: catalog, index, locks (git-ignored, deletable)
  templates/                     optional prompt overrides
  conversations/<conv>/
    <conv>.md                    home note
    logs/YYYY-MM-DD.md           raw messages, append-only
    summaries/sum_<hex>.md       one note per summary node
    files/file_<hex>.<ext>       externalized payloads
```
"""

from __future__ import annotations

import functools
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .errors import NotAVaultError, NotFoundError, OutsideVaultError, StorageError
from .fsutil import atomic_write, read_file
from .names import validate_conversation_name

SETTINGS_FILE = "vaultlcm.toml"
STATE_DIR = ".vaultlcm"
CONVERSATIONS_DIR = "conversations"

GITIGNORE = """\
# vaultlcm: derived state (index, catalog, locks); `vaultlcm reindex` rebuilds it
.vaultlcm/
# Obsidian per-device state
.obsidian/workspace.json
.obsidian/workspace-mobile.json
.obsidian/cache
.trash/
"""

GITATTRIBUTES = """\
# vaultlcm: logs are append-only, so concurrent appends merge by keeping both sides
conversations/*/logs/*.md merge=union text eol=lf
conversations/*/summaries/*.md text eol=lf
conversations/*/*.md text eol=lf
# externalized payloads are stored byte for byte
conversations/*/files/** -text -diff
"""


@dataclass(frozen=True)
class VaultLayout:
    """Paths of one vault rooted at ``root``.

    ``state`` overrides where derived state lives (a cache folder outside a
    read-only vault); by default it is ``.vaultlcm/`` inside the vault.
    """

    root: Path
    state: Path | None = None

    @property
    def settings_path(self) -> Path:
        return self.root / SETTINGS_FILE

    @property
    def state_dir(self) -> Path:
        return self.state or self.root / STATE_DIR

    @property
    def catalog_path(self) -> Path:
        return self.state_dir / "catalog.sqlite"

    @property
    def index_dir(self) -> Path:
        return self.state_dir / "index"

    @property
    def locks_dir(self) -> Path:
        return self.state_dir / "locks"

    @property
    def templates_dir(self) -> Path:
        return self.root / "templates"

    @property
    def conversations_dir(self) -> Path:
        return self.root / CONVERSATIONS_DIR

    def conversation_dir(self, conv: str) -> Path:
        return self.conversations_dir / checked_name(conv)

    def home_note(self, conv: str) -> Path:
        return self.conversation_dir(conv) / f"{conv}.md"

    def logs_dir(self, conv: str) -> Path:
        return self.conversation_dir(conv) / "logs"

    def log_path(self, conv: str, day: str) -> Path:
        return self.logs_dir(conv) / f"{day}.md"

    def summaries_dir(self, conv: str) -> Path:
        return self.conversation_dir(conv) / "summaries"

    def summary_path(self, conv: str, summary_id: str) -> Path:
        return self.summaries_dir(conv) / f"{summary_id}.md"

    def files_dir(self, conv: str) -> Path:
        return self.conversation_dir(conv) / "files"

    def lock_path(self, conv: str) -> Path:
        return self.locks_dir / f"{conv}.lock"

    def inside(self, path: Path) -> Path:
        """``path`` itself, after checking that it stays inside the vault through real folders.

        Every existing component below the root must be a real file or folder:
        a symlink (git stores them, so a cloned vault can carry one) is refused
        with :class:`OutsideVaultError`, whatever it points to. Components that do
        not exist yet are fine (they will be created as real folders).
        """
        # On strings, not path objects: this runs for every file an ingest call touches, and
        # building a Path per component cost more than the lstat calls themselves.
        text = os.fspath(path)
        root = os.fspath(self.root)
        base = root if root.endswith(os.sep) else root + os.sep
        if text == root:
            return path
        if not text.startswith(base):
            raise OutsideVaultError(f"{path} is outside the vault {self.root}; vaultlcm only reads and writes inside it")
        current = base[:-1] if base != os.sep else ""
        for part in text[len(base):].split(os.sep):
            if not part:
                continue
            if part in ("..", "."):
                raise OutsideVaultError(f"{path}: '..' is not allowed in a vault path")
            current = current + os.sep + part
            try:
                mode = os.lstat(current).st_mode
            except (FileNotFoundError, NotADirectoryError):
                break
            if stat.S_ISLNK(mode):
                raise OutsideVaultError(
                    f"{self.relative_raw(Path(current))} is a symlink; vaultlcm never reads or writes through "
                    "symlinks inside a vault (they may lead outside it). Replace it with a real file or folder, "
                    "or remove it"
                )
        return path

    def relative_raw(self, path: Path) -> str:
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    def relative(self, path: Path) -> str:
        """Vault-relative POSIX path (how paths are written in the catalog and docs)."""
        text, root = os.fspath(path), os.fspath(self.root)
        if os.sep == "/" and text.startswith(root + "/") and root != "/":
            return text[len(root) + 1:]  # the common case without building path objects
        return path.relative_to(self.root).as_posix()

    def conversations(self) -> list[str]:
        """Names of the conversations present on disk, sorted."""
        if not self.conversations_dir.is_dir():
            return []
        return sorted(
            p.name for p in self.conversations_dir.iterdir()
            if not p.name.startswith(".") and not p.is_symlink() and p.is_dir()
        )

    def require_conversation(self, conversation: str) -> str:
        """``conversation``'s checked name, when its folder exists; a :class:`NotFoundError` naming the
        conversations there are otherwise."""
        conv = validate_conversation_name(conversation)
        if not self.conversation_dir(conv).is_dir():
            known = ", ".join(self.conversations()) or "none yet"
            raise NotFoundError(f"no conversation {conv!r} in {self.root} (conversations: {known})")
        return conv

    def is_vault(self) -> bool:
        return self.settings_path.is_file()

    def require_vault(self) -> "VaultLayout":
        if not self.is_vault():
            raise NotAVaultError(self.root)
        return self


def checked_name(conv: str) -> str:
    """:func:`validate_conversation_name`, remembered for plain strings: every call of an agent's loop,
    and every path of a call, names the same conversation (an invalid name raises and is never remembered)."""
    return _remembered_name(conv) if type(conv) is str else validate_conversation_name(conv)


@functools.lru_cache(maxsize=1024)
def _remembered_name(conv: str) -> str:
    return validate_conversation_name(conv)


def choose_state_dir(root: Path, environ: "Mapping[str, str]") -> tuple[Path | None, str | None]:
    """Where derived state goes: ``(None, None)`` for the vault's own ``.vaultlcm/``.

    When that folder cannot be created or written (a read-only vault: a read-only
    mount, another user's files), derived state goes to a cache folder outside
    the vault, keyed by the vault's path, and the reason is returned: reading
    commands then work as usual and writing commands fail with one line.
    """
    import errno
    import hashlib

    state = root / STATE_DIR
    reasons = {errno.EROFS: "read-only file system", errno.EACCES: "permission denied",
               errno.EPERM: "operation not permitted"}
    reason = ""
    for _attempt in range(20):
        try:
            if state.is_symlink():
                raise OutsideVaultError(f"{STATE_DIR} is a symlink; vaultlcm keeps derived state inside the vault. "
                                        "Remove it")
            state.mkdir(exist_ok=True)
            probe = state / f".probe-{os.getpid()}"
            fd = os.open(probe, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600)
            os.close(fd)
            os.unlink(probe)
            if not os.access(root, os.W_OK):
                raise PermissionError(errno.EACCES, "vault folder not writable")
            return None, None
        except FileNotFoundError:
            continue  # the state folder was deleted between two steps (it is a cache): try again
        except OSError as exc:
            if exc.errno not in reasons:
                raise StorageError.from_os(exc, state, "use the state folder") from None
            reason = reasons[exc.errno]
            break
    base = Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vaultlcm"
    return base / hashlib.sha256(str(root).encode()).hexdigest()[:16], reason


CSS_SNIPPET = "vaultlcm"
CSS_HINT = ("To colour the log callouts in Obsidian, turn the snippet on: Settings → Appearance → CSS snippets → "
            f"{CSS_SNIPPET} (init leaves your Obsidian settings alone)")


@dataclass
class InitReport:
    """What ``init`` did: files written, lines added to a person's git files, and the CSS snippet's state."""

    written: list[str] = field(default_factory=list)
    #: Existing ``.gitignore`` / ``.gitattributes`` -> the lines init added (only what was missing).
    added_lines: dict[str, list[str]] = field(default_factory=dict)
    #: Whether Obsidian will use the log callout styles (False: a person has to turn the snippet on).
    css_enabled: bool = True

    @property
    def changed(self) -> list[str]:
        return [*self.written, *self.added_lines]

    def describe(self) -> list[str]:
        """Lines for people, after the one saying where the vault is."""
        lines = [f"added to {name}: {', '.join(added)}" for name, added in self.added_lines.items()]
        if not self.css_enabled:
            lines.append(CSS_HINT)
        return lines


def _same_rule(line: str) -> str:
    """A git file line as compared when merging: ``/.vaultlcm/`` and ``.vaultlcm`` say the same thing here."""
    return " ".join(line.strip().strip("/").split())


def merge_lines(path: Path, template: str, *, header: str = "# added by vaultlcm init") -> list[str]:
    """Add the rules of ``template`` that ``path`` lacks (after a marker comment); returns the lines added.

    Idempotent, and a person's lines are never changed or reordered: ours go at
    the end, where in ``.gitattributes`` they also win over an earlier line for
    the same pattern.
    """
    raw = read_file(path)
    text = raw.decode("utf-8", errors="surrogateescape")
    have = {_same_rule(line) for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")}
    missing = [line for line in template.splitlines()
               if line.strip() and not line.startswith("#") and _same_rule(line) not in have]
    if not missing:
        return []
    eol = "\r\n" if "\r\n" in text else "\n"
    block = eol.join([header, *missing]) + eol
    sep = "" if not text or text.endswith("\n") else eol
    if text and not text.endswith("\n\n") and not (eol == "\r\n" and text.endswith("\r\n\r\n")):
        sep += eol
    atomic_write(path, (text + sep + block).encode("utf-8", errors="surrogateescape"))
    return missing


def init_vault(root: Path, settings_text: str) -> InitReport:
    """Create the vault files that are missing, merge vaultlcm's rules into existing git files.

    Safe to run twice: existing files (a person's settings above all) are kept;
    a ``.gitignore`` or ``.gitattributes`` a person already has only gains the
    lines vaultlcm needs that it lacks.
    """
    root.mkdir(parents=True, exist_ok=True)
    layout = VaultLayout(root)
    report = InitReport()
    if not layout.settings_path.exists():
        atomic_write(layout.settings_path, settings_text.encode("utf-8"))
        report.written.append(SETTINGS_FILE)
    for name, template in ((".gitignore", GITIGNORE), (".gitattributes", GITATTRIBUTES)):
        path = layout.inside(root / name)
        if not path.exists():
            atomic_write(path, template.encode("utf-8"))
            report.written.append(name)
        elif added := merge_lines(path, template):
            report.added_lines[name] = added
    # Obsidian styling for the log callouts; appearance.json only when Obsidian has none yet,
    # so a person's own settings are never touched.
    from importlib import resources

    css = resources.files("vaultlcm.data").joinpath("vaultlcm.css").read_bytes()
    snippet = root / ".obsidian" / "snippets" / f"{CSS_SNIPPET}.css"
    if not snippet.exists():
        atomic_write(snippet, css)
        report.written.append(layout.relative(snippet))
    appearance = root / ".obsidian" / "appearance.json"
    if not appearance.exists():
        atomic_write(appearance, b'{\n  "enabledCssSnippets": [\n    "vaultlcm"\n  ]\n}\n')
        report.written.append(layout.relative(appearance))
    else:
        try:
            enabled = json.loads(read_file(appearance)).get("enabledCssSnippets") or []
        except (OSError, ValueError, AttributeError):
            enabled = []
        report.css_enabled = CSS_SNIPPET in enabled
    layout.conversations_dir.mkdir(exist_ok=True)
    layout.state_dir.mkdir(exist_ok=True)
    return report
