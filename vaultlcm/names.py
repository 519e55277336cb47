"""Conversation names: safe as folder names and as Obsidian link targets."""

from __future__ import annotations

import re
import unicodedata

from .errors import InvalidNameError

MAX_NAME_LENGTH = 100
#: File systems limit a name to 255 bytes; the home note adds ".md" and git/Obsidian want headroom.
MAX_NAME_BYTES = 200
# Obsidian links break on # | ^ : [ ] ; the rest are unsafe in paths on some OS.
_FORBIDDEN = set('#|^:[]\\/*?"<>%')
_WINDOWS_RESERVED = re.compile(r"^(con|prn|aux|nul|com[0-9]|lpt[0-9])(\..*)?$", re.IGNORECASE)


def validate_conversation_name(name: str) -> str:
    """Return ``name`` if it can be a conversation folder, else raise :class:`InvalidNameError`."""
    hint = "use letters, digits, spaces, '.', '-' and '_' (e.g. support-bot or 2026-11-agent)"
    if not isinstance(name, str) or not name.strip():
        raise InvalidNameError(f"conversation name is empty; {hint}")
    if name != name.strip():
        raise InvalidNameError(f"conversation name {name!r} starts or ends with white space; {hint}")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidNameError(f"conversation name is {len(name)} characters long; the limit is {MAX_NAME_LENGTH}")
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        raise InvalidNameError(
            f"conversation name is {len(name.encode('utf-8'))} bytes in UTF-8; file systems allow {MAX_NAME_BYTES} "
            "here: use a shorter name")
    if name.startswith("."):
        raise InvalidNameError(f"conversation name {name!r} starts with '.', which hides the folder and allows '..'; {hint}")
    if name.startswith(("~", "-")):
        raise InvalidNameError(f"conversation name {name!r} starts with {name[0]!r}; {hint}")
    bad = sorted({ch for ch in name if ch in _FORBIDDEN})
    if bad:
        which = " ".join(bad)
        raise InvalidNameError(
            f"conversation name {name!r} contains {which}, which break paths or Obsidian links "
            f"(absolute paths and '..' are refused too); {hint}"
        )
    for ch in name:
        cat = unicodedata.category(ch)
        if cat.startswith("C") or cat in ("Zl", "Zp"):
            raise InvalidNameError(
                f"conversation name {name!r} contains the control or invisible character U+{ord(ch):04X}; {hint}"
            )
    if _WINDOWS_RESERVED.match(name):
        raise InvalidNameError(f"conversation name {name!r} is a reserved device name on Windows; {hint}")
    return name
