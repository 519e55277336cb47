"""The demo: a vault built from the shipped sample transcript, fully offline.

``vaultlcm demo PATH`` (and README's first command) runs this; so does the test
that checks the committed ``sample-vault/`` is byte for byte what the project
produces.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

from .errors import UsageError
from .settings import Settings
from .vault import Vault

SAMPLE_CONVERSATION = "ledgerly-agent"
#: Stands in for "now" so that rebuilding the sample gives the same bytes.
SAMPLE_CLOCK = datetime(2026, 11, 5, 0, 0, tzinfo=UTC)


def sample_transcript() -> bytes:
    return resources.files("vaultlcm.data").joinpath("sample_transcript.jsonl").read_bytes()


@dataclass
class DemoReport:
    root: Path
    conversation: str
    messages: int
    summaries_by_depth: dict[int, int]
    top_ids: list[str]
    assembled_tokens: int
    budget: int
    files: int
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        depths = ", ".join(f"depth {d}: {n}" for d, n in sorted(self.summaries_by_depth.items()))
        return "\n".join(
            [
                f"Built {self.root} from the sample transcript (offline, digest summarizer):",
                f"  conversation  {self.conversation}: {self.messages} messages in daily logs",
                f"  summary DAG   {sum(self.summaries_by_depth.values())} notes ({depths})",
                f"  top level     {', '.join(self.top_ids)}",
                f"  payload files {self.files}",
                f"  assemble      {self.assembled_tokens} of {self.budget} tokens for the next turn",
                f"Open {self.root} in Obsidian, or try: vaultlcm --vault {self.root} status",
            ]
        )


def build_sample_vault(root: str | Path = "vaultlcm-demo", *, budget: int = 16_000) -> DemoReport:
    """Create a vault at ``root`` holding the compacted sample conversation (``vaultlcm demo [PATH]``;
    the public API's ``demo``). Safe to run twice on the same folder; refuses a folder that holds
    something other than a vault."""
    root = Path(root)
    if root.exists() and any(root.iterdir()) and not (root / "vaultlcm.toml").exists():
        raise UsageError(f"{root} exists and is not a vault; choose an empty or new folder for the demo")
    settings = Settings()
    with Vault.init(root, settings=settings, environ={}, clock=lambda: SAMPLE_CLOCK) as vault:
        # Safe to run twice: re-importing the transcript stores nothing new.
        ids = vault.ingest_bytes(SAMPLE_CONVERSATION, sample_transcript(), format="native",
                                 source="sample_transcript.jsonl").ids
        vault.compact(SAMPLE_CONVERSATION, force=True)
        ctx = vault.assemble(SAMPLE_CONVERSATION, budget)
        depths = Counter(s.depth for s in vault.dag.all(SAMPLE_CONVERSATION))
        files_dir = vault.layout.files_dir(SAMPLE_CONVERSATION)
        return DemoReport(
            root=root,
            conversation=SAMPLE_CONVERSATION,
            messages=len(ids),
            summaries_by_depth=dict(depths),
            top_ids=[s.id for s in vault.dag.roots(SAMPLE_CONVERSATION)],
            assembled_tokens=ctx.estimated_tokens,
            budget=budget,
            files=len(list(files_dir.iterdir())) if files_dir.is_dir() else 0,
        )

