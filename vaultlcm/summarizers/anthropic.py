"""Summaries from Anthropic models through the official ``anthropic`` SDK.

The SDK is an optional extra (``vaultlcm[anthropic]``), imported on the first
request (see :mod:`vaultlcm.summarizers.llm`). The key and the SDK's presence
are checked at construction so a misconfiguration is reported at once, not at
the first background compaction.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ProviderConfigError, SummarizerError
from ..settings import Settings
from .llm import LLMSummarizer

DEFAULT_BASE_URL = "https://api.anthropic.com"
KEY_ENV = "ANTHROPIC_API_KEY"
_INSTALL_HINT = (
    "install it with `pip install 'vaultlcm[anthropic]'`, or set summarizer = \"digest\" in vaultlcm.toml"
)


class AnthropicSummarizer(LLMSummarizer):
    """Summarizer and ``ask`` backend calling ``POST /v1/messages``."""

    sdk_module = "anthropic"
    client_class = "Anthropic"
    sdk_error = "AnthropicError"
    provider = "Anthropic"
    install_hint = _INSTALL_HINT

    def __init__(
        self,
        settings: Settings,
        environ: Mapping[str, str] = os.environ,
        *,
        template_dir: Path | None = None,
        max_input_tokens: int | None = None,
    ) -> None:
        """Check the configuration; the client itself is built on first use.

        ``template_dir`` is the vault's ``templates/`` folder (overrides);
        ``max_input_tokens`` defaults to ``settings.summary_max_input_tokens``.
        Raises :class:`ProviderConfigError` when the key or the SDK is missing.
        """
        self.model = settings.anthropic_model
        self.name = f"anthropic:{self.model}"
        self.key_env = KEY_ENV
        key = environ.get(KEY_ENV, "")
        if not key:
            raise ProviderConfigError(
                f"{KEY_ENV} is not set: export it, or set summarizer = \"digest\" in vaultlcm.toml"
            )
        # The SDK would read ANTHROPIC_BASE_URL from os.environ itself; resolving
        # it here keeps `environ` the single source (and testable).
        self.base_url = settings.anthropic_base_url or environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        super().__init__(settings, key, template_dir=template_dir, max_input_tokens=max_input_tokens)

    def _request(self, client: Any, system: str, prompt: str, max_tokens: int) -> Any:
        return client.messages.create(
            model=self.model,
            max_tokens=max_tokens,
            system=system,
            messages=[{"role": "user", "content": prompt}],
        )

    def _text_of(self, reply: Any) -> str:
        """The text blocks of a reply, or SummarizerError when there are none."""
        where = self._where()
        content = getattr(reply, "content", None)
        if not isinstance(content, list):
            raise SummarizerError(
                f"{where} returned a malformed reply (no content list; got {type(reply).__name__}); "
                "is anthropic_base_url really an Anthropic Messages API?"
            )
        texts = [
            block.text
            for block in content
            if getattr(block, "type", None) == "text" and isinstance(getattr(block, "text", None), str)
        ]
        text = "".join(texts).strip()
        if not text:
            stop = getattr(reply, "stop_reason", None)
            raise SummarizerError(
                f"{where} returned no text (stop_reason={stop!r}, {len(content)} content block(s)); "
                "compaction will retry later"
            )
        return text
