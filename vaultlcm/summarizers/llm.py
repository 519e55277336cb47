"""What the SDK-backed summarizers share: configuration, the lazy client, errors.

A provider subclass sets ``model``, ``name``, ``base_url`` and ``key_env`` and
checks its key, then calls :meth:`LLMSummarizer.__init__`; it names its SDK
(:attr:`~LLMSummarizer.sdk_module`, :attr:`~LLMSummarizer.client_class`,
:attr:`~LLMSummarizer.sdk_error`) and implements two hooks: :meth:`_request`
(send one prompt through the client) and :meth:`_text_of` (the text of a reply).

The SDKs take about a second to import, so they are imported on the first
request, never at module import: commands that never summarize stay fast. Only
the SDK's presence is checked at construction, so a misconfiguration is
reported at once, not at the first background compaction.
"""

from __future__ import annotations

import importlib
import threading
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from ..errors import ProviderConfigError, SummarizerError
from ..settings import Settings
from .base import SummaryRequest, aggressive_target, output_cap, provider_error, sdk_installed
from .prompts import bounded_summary_prompt


class LLMSummarizer(ABC):
    """Summarizer and ``ask`` backend on a provider SDK (see the module docstring)."""

    #: The SDK's module, imported on first use; also the ``summarizer`` setting's value.
    sdk_module: ClassVar[str]
    #: The SDK's client class; also how errors name the client.
    client_class: ClassVar[str]
    #: The SDK's base exception class.
    sdk_error: ClassVar[str]
    #: How error messages name the provider.
    provider: ClassVar[str]
    #: How to install the SDK (or do without it).
    install_hint: ClassVar[str]

    model: str
    name: str
    base_url: str
    key_env: str

    def __init__(
        self,
        settings: Settings,
        key: str,
        *,
        template_dir: Path | None,
        max_input_tokens: int | None,
    ) -> None:
        """The shared part of construction: raises :class:`ProviderConfigError` without the SDK."""
        self._key = key
        if not sdk_installed(self.sdk_module):
            raise ProviderConfigError(
                f"summarizer = \"{self.sdk_module}\" needs the {self.sdk_module} SDK: {self.install_hint}"
            )
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
            reply = self._request(client, system, prompt, max_tokens)
        except (getattr(sdk, self.sdk_error), ValueError) as exc:  # ValueError: unparsable JSON body
            raise self._error(exc) from exc
        return self._text_of(reply)

    # -- provider hooks ----------------------------------------------------------

    @abstractmethod
    def _request(self, client: Any, system: str, prompt: str, max_tokens: int) -> Any:
        """Send one request through the SDK ``client``; return its reply object."""

    @abstractmethod
    def _text_of(self, reply: Any) -> str:
        """The text of ``reply``, or SummarizerError when it has none."""

    # -- internals ---------------------------------------------------------------

    def _where(self) -> str:
        """Names the request in error messages."""
        return f"{self.provider} request to {self.base_url} (model {self.model!r})"

    def _connect(self) -> tuple[Any, Any]:
        with self._lock:
            if self._client is None:
                try:
                    sdk = importlib.import_module(self.sdk_module)
                except ImportError as exc:
                    raise ProviderConfigError(
                        f"cannot import the {self.sdk_module} SDK ({exc}): {self.install_hint}"
                    ) from exc
                try:
                    self._client = getattr(sdk, self.client_class)(
                        api_key=self._key,
                        base_url=self.base_url,
                        timeout=self.timeout,
                        max_retries=self.max_retries,
                    )
                except Exception as exc:  # e.g. an unusable base URL
                    raise ProviderConfigError(
                        f"cannot create the {self.client_class} client for {self.base_url}: {exc}; "
                        f"check {self.sdk_module}_base_url in vaultlcm.toml"
                    ) from exc
                self._sdk = sdk
            return self._client, self._sdk

    def _error(self, exc: BaseException) -> SummarizerError:
        return provider_error(
            exc,
            self._sdk,
            provider=self.provider,
            model=self.model,
            url=self.base_url,
            timeout=self.timeout,
            retries=self.max_retries,
            key_env=self.key_env,
        )
