"""Summaries from Anthropic models through the official ``anthropic`` SDK.

The SDK is an optional extra (``vaultlcm[anthropic]``) and takes about a second
to import, so it is imported on the first request, never at module import:
commands that never summarize stay fast. The key and the SDK's presence are
checked at construction so a misconfiguration is reported at once, not at the
first background compaction.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ProviderConfigError, SummarizerError
from ..settings import Settings
from .base import SummaryRequest, aggressive_target, output_cap, provider_error, sdk_installed
from .prompts import bounded_summary_prompt

DEFAULT_BASE_URL = "https://api.anthropic.com"
KEY_ENV = "ANTHROPIC_API_KEY"
_INSTALL_HINT = (
    "install it with `pip install 'vaultlcm[anthropic]'`, or set summarizer = \"extractive\" in vaultlcm.toml"
)


class AnthropicSummarizer:
    """Summarizer and ``ask`` backend calling ``POST /v1/messages``."""

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
        self._key = environ.get(KEY_ENV, "")
        if not self._key:
            raise ProviderConfigError(
                f"{KEY_ENV} is not set: export it, or set summarizer = \"extractive\" in vaultlcm.toml"
            )
        if not sdk_installed("anthropic"):
            raise ProviderConfigError(f"summarizer = \"anthropic\" needs the anthropic SDK: {_INSTALL_HINT}")
        # The SDK would read ANTHROPIC_BASE_URL from os.environ itself; resolving
        # it here keeps `environ` the single source (and testable).
        self.base_url = settings.anthropic_base_url or environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        self.timeout = settings.llm_timeout_seconds
        self.max_retries = settings.llm_max_retries
        self.max_input_tokens = max_input_tokens or settings.summary_max_input_tokens
        self.template_dir = template_dir
        self._client: Any = None
        self._sdk: Any = None
        self._lock = threading.Lock()  # compaction may run on a background thread

    # -- public API --------------------------------------------------------------

    def summarize(self, request: SummaryRequest, *, aggressive: bool = False) -> str:
        """One summary of ``request`` (bounded input); raises SummarizerError on any provider failure."""
        system, user = bounded_summary_prompt(
            request, aggressive=aggressive, max_input_tokens=self.max_input_tokens, override_dir=self.template_dir
        )
        target = aggressive_target(request.target_tokens) if aggressive else request.target_tokens
        return self.complete(system, user, output_cap(target))

    def complete(self, system: str, prompt: str, max_tokens: int) -> str:
        """Send one user ``prompt`` under ``system``; return the reply's text."""
        client, sdk = self._connect()
        try:
            reply = client.messages.create(
                model=self.model,
                max_tokens=max_tokens,
                system=system,
                messages=[{"role": "user", "content": prompt}],
            )
        except (sdk.AnthropicError, ValueError) as exc:  # ValueError: unparsable JSON body
            raise self._error(exc) from exc
        return self._text_of(reply)

    # -- internals ---------------------------------------------------------------

    def _connect(self) -> tuple[Any, Any]:
        with self._lock:
            if self._client is None:
                try:
                    import anthropic
                except ImportError as exc:
                    raise ProviderConfigError(f"cannot import the anthropic SDK ({exc}): {_INSTALL_HINT}") from exc
                try:
                    self._client = anthropic.Anthropic(
                        api_key=self._key,
                        base_url=self.base_url,
                        timeout=self.timeout,
                        max_retries=self.max_retries,
                    )
                except Exception as exc:  # e.g. an unusable base URL
                    raise ProviderConfigError(
                        f"cannot create the Anthropic client for {self.base_url}: {exc}; "
                        "check anthropic_base_url in vaultlcm.toml"
                    ) from exc
                self._sdk = anthropic
            return self._client, self._sdk

    def _error(self, exc: BaseException) -> SummarizerError:
        return provider_error(
            exc,
            self._sdk,
            provider="Anthropic",
            model=self.model,
            url=self.base_url,
            timeout=self.timeout,
            retries=self.max_retries,
            key_env=KEY_ENV,
        )

    def _text_of(self, reply: Any) -> str:
        """The text blocks of a reply, or SummarizerError when there are none."""
        where = f"Anthropic request to {self.base_url} (model {self.model!r})"
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
