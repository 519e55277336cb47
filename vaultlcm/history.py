"""What the recall commands read: a vault's parts, gathered once, and how to bring a conversation up to date.

:mod:`vaultlcm.grep`, :mod:`vaultlcm.expand`, :mod:`vaultlcm.recall` and
:mod:`vaultlcm.ask` take a :class:`History`, not the :class:`~vaultlcm.Vault`:
they read the catalog, the DAG, the logs and the index, and ask ``sync`` to
catch a conversation up with its files first (the vault decides how).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import NotFoundError

if TYPE_CHECKING:
    from .catalog import Catalog
    from .dag import Dag, SummaryRow
    from .indexing import IndexKeeper
    from .layout import VaultLayout
    from .msglog import MessageLog
    from .settings import Settings
    from .summarizers import Summarizer


@dataclass(frozen=True)
class History:
    """The parts of one vault the recall commands read."""

    layout: "VaultLayout"
    catalog: "Catalog"
    dag: "Dag"
    log: "MessageLog"
    indexer: "IndexKeeper"
    settings: "Settings"
    #: Brings one conversation's derived state up to date with its files (:meth:`vaultlcm.Vault.sync`).
    sync: Callable[[str], None]
    #: The configured summarizer, made when first asked for (``ask`` with an LLM).
    summarizer: Callable[[], "Summarizer"]

    def conversations(self) -> list[str]:
        return self.layout.conversations()

    def require_conversation(self, conversation: str) -> str:
        return self.layout.require_conversation(conversation)

    def summary(self, summary_id: str) -> "SummaryRow":
        """The summary's row; when the catalog does not know it, after a sync of every conversation
        (a note a person or another process just added)."""
        row = self.dag.get(summary_id)
        if row is None:
            for conv in self.conversations():
                self.sync(conv)
            row = self.dag.get(summary_id)
        if row is None:
            raise NotFoundError(f"no summary with id {summary_id!r}; list summaries with `vaultlcm status` "
                                "or `vaultlcm grep --scope summaries`")
        return row
