"""Where :func:`vaultlcm.formats.parse` stopped in a document, so that lines appended later can be parsed alone.

What :func:`~vaultlcm.formats.parse` settles for a record depends on the records
before it: its import key counts the identical records before it, a record without
a time takes the time of the last one that had one, and a Claude Code subagent's
line is linked to its ``Task`` call through maps built from the whole document.
A :class:`ParseState` carries exactly that forward, so that parsing a document's
first part, then (with the same state) the lines appended to it, gives the
records of the appended lines the same keys, times and links as parsing the
whole document at once would.

Its size grows with the document by one 12-byte digest per distinct record (a
sorted packed array, looked up by bisection, never turned into a set); only the
digests seen more than once carry a count.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..messages import parse_timestamp

#: Bytes of a record's digest (the first 24 hex digits of its SHA-256: the digest of its import key).
DIGEST = 12
_VERSION = 1


def text_hash(text: str) -> str:
    """A short stand-in for a long text (a ``Task`` prompt) in the subagent link maps."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


@dataclass
class ParseState:
    """The running context of :func:`~vaultlcm.formats.parse` over one document (see the module docstring).

    ``records == 0`` means nothing was parsed yet: the document is read whole (and
    ``lines`` says whether it was read as JSON Lines, the only form that can be
    continued); after that, what is handed over is the lines that follow.
    """

    records: int = 0
    lines: bool = False
    #: Lines of the document before the part handed over next, set by whoever knows where it
    #: stopped (error messages then name the document's own line numbers); not saved.
    line: int = 0
    #: A record of the format itself was seen (``no claude-code records`` is checked on the whole document).
    has_kind: bool = False
    #: The time of the last record that had one (what the next record without a time takes).
    last: datetime | None = None
    #: Sorted 12-byte digests of every distinct record so far, and the counts of those seen more than once.
    packed: bytes = b""
    multi: dict[bytes, int] = field(default_factory=dict)
    #: Digests first seen in this session of parsing, with their counts (merged into ``packed`` by ``to_bytes``).
    added: dict[bytes, int] = field(default_factory=dict)
    #: :func:`~vaultlcm.formats.agents.link_subagents` maps: agent id -> Task call id (the last naming it),
    #: hash of a Task prompt -> call id (the first), agent id -> hash of the agent's first prompt.
    by_agent: dict[str, str] = field(default_factory=dict)
    by_prompt: dict[str, str] = field(default_factory=dict)
    first_prompt: dict[str, str] = field(default_factory=dict)

    def seen(self, digest: bytes) -> int:
        """How many records with ``digest`` came before (the counter of its import key)."""
        if digest in self.added:
            return self.added[digest]
        if digest in self.multi:
            return self.multi[digest]
        return 1 if self._find(digest) else 0

    def bump(self, digest: bytes) -> int:
        """Count one more record with ``digest``; returns how many came before it."""
        n = self.seen(digest)
        if n == 0:
            self.added[digest] = 1
        elif digest in self.added:
            self.added[digest] = n + 1
        else:
            self.multi[digest] = n + 1
        return n

    def _find(self, digest: bytes) -> bool:
        lo, hi = 0, len(self.packed) // DIGEST
        view = self.packed
        while lo < hi:
            mid = (lo + hi) // 2
            here = view[mid * DIGEST:(mid + 1) * DIGEST]
            if here == digest:
                return True
            if here < digest:
                lo = mid + 1
            else:
                hi = mid
        return False

    def _merged(self) -> bytes:
        """``packed`` with the digests first seen since it was loaded, still sorted (one pass, no re-sort)."""
        if not self.added:
            return self.packed
        parts: list[bytes] = []
        start = 0
        for digest in sorted(self.added):
            lo, hi = start // DIGEST, len(self.packed) // DIGEST
            while lo < hi:
                mid = (lo + hi) // 2
                if self.packed[mid * DIGEST:(mid + 1) * DIGEST] < digest:
                    lo = mid + 1
                else:
                    hi = mid
            parts += [self.packed[start:lo * DIGEST], digest]
            start = lo * DIGEST
        parts.append(self.packed[start:])
        return b"".join(parts)

    def to_bytes(self) -> bytes:
        """The state as bytes: one JSON line, then the packed digests."""
        multi = dict(self.multi)
        multi.update((d, n) for d, n in self.added.items() if n > 1)
        head = {
            "v": _VERSION, "records": self.records, "lines": self.lines, "has_kind": self.has_kind,
            "last": self.last.isoformat() if self.last else None,
            "multi": {d.hex(): n for d, n in sorted(multi.items())},
            "by_agent": self.by_agent, "by_prompt": self.by_prompt, "first_prompt": self.first_prompt,
        }
        return json.dumps(head, separators=(",", ":")).encode("utf-8") + b"\n" + self._merged()

    @classmethod
    def from_bytes(cls, data: bytes) -> "ParseState":
        """The state :meth:`to_bytes` wrote; ``ValueError`` when it is not one (or of another version)."""
        head_end = data.index(b"\n")
        head: dict[str, Any] = json.loads(data[:head_end])
        packed = data[head_end + 1:]
        if not isinstance(head, dict) or head.get("v") != _VERSION or len(packed) % DIGEST:
            raise ValueError("not a parse state of this version")
        try:
            return cls(
                records=int(head["records"]), lines=bool(head["lines"]), has_kind=bool(head["has_kind"]),
                last=parse_timestamp(head["last"]) if head["last"] else None, packed=packed,
                multi={bytes.fromhex(d): int(n) for d, n in head["multi"].items()},
                by_agent=dict(head["by_agent"]), by_prompt=dict(head["by_prompt"]),
                first_prompt=dict(head["first_prompt"]))
        except (KeyError, TypeError, AttributeError, ArithmeticError) as exc:
            raise ValueError(f"not a parse state: {exc}") from None
