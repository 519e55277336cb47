"""A bounded memo in two generations, for the digest's hottest lookups (word pieces, lines, identifiers).

When the young generation is full it becomes the old one and the one before is dropped;
a key found in the old generation is kept again in the young one. So what was asked for
lately stays, and the memo stays bounded in a process that runs for months. Plain dict
operations only: the engine's compaction thread and the agent's thread may both use one
(a race at a swap can only drop entries, never give a wrong value). Callers read
``young`` directly on their hot paths (``map(memo.young.get, keys)``) and decide
themselves what is worth keeping.
"""

from __future__ import annotations

from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Generations(Generic[K, V]):
    """Two dictionaries of at most ``size`` entries each (see the module docstring)."""

    __slots__ = ("size", "young", "old")

    def __init__(self, size: int) -> None:
        self.size = size
        self.young: dict[K, V] = {}
        self.old: dict[K, V] = {}

    def __contains__(self, key: object) -> bool:
        return key in self.young or key in self.old

    def keep(self, key: K, value: V) -> None:
        """Remember ``value`` in the young generation, which first ages when full."""
        if len(self.young) >= self.size:
            self.young, self.old = {}, self.young
        self.young[key] = value
