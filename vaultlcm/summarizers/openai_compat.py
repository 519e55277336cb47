"""Summaries from OpenAI-compatible endpoints (Ollama, vLLM, llama.cpp, DeepSeek, OpenAI).

Uses the official ``openai`` SDK (optional extra ``vaultlcm[openai]``),
imported on the first request. Only ``POST {base_url}/chat/completions`` is
used, the one endpoint every compatible server implements. A local endpoint
(127.0.0.1, localhost, ::1) usually needs no key, so a missing key is allowed
there; anywhere else it is a configuration error reported at construction.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import ProviderConfigError, SummarizerError
from ..settings import Settings
from .base import SummaryRequest, aggressive_target, output_cap, provider_error, sdk_installed
from .prompts import bounded_summary_prompt

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
#: Sent as the key to local servers that ignore it (the SDK insists on one).
PLACEHOLDER_KEY = "not-needed"
_INSTALL_HINT = (
    "install it with `pip install 'vaultlcm[openai]'`, or set summarizer = \"extractive\" in vaultlcm.toml"
)


def is_local_url(url: str) -> bool:
    """True when ``url`` points at this machine."""
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return False
    return (host or "").lower() in LOCAL_HOSTS


class OpenAISummarizer:
    """Summarizer and ``ask`` backend calling ``POST {openai_base_url}/chat/completions``."""

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
        Raises :class:`ProviderConfigError` when the key (non-local endpoint)
        or the SDK is missing.
        """
        self.model = settings.openai_model
        self.name = f"openai:{self.model}"
        self.base_url = settings.openai_base_url
        self.key_env = settings.openai_api_key_env
        key = environ.get(self.key_env, "")
        if not key:
            if not is_local_url(self.base_url):
                raise ProviderConfigError(
                    f"{self.key_env} is not set but {self.base_url} is not a local endpoint: export "
                    f"{self.key_env}, name another variable with openai_api_key_env, or set "
                    "summarizer = \"extractive\" in vaultlcm.toml"
                )
            key = PLACEHOLDER_KEY
        self._key = key
        if not sdk_installed("openai"):
            raise ProviderConfigError(f"summarizer = \"openai\" needs the openai SDK: {_INSTALL_HINT}")
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
            reply = client.chat.completions.create(
                model=self.model,
                # `max_tokens`, not `max_completion_tokens`: the one every
                # compatible server (Ollama, vLLM, llama.cpp) understands.
                max_tokens=max_tokens,
                messages=[{"role": "system", "content": system}, {"role": "user", "content": prompt}],
            )
        except (sdk.OpenAIError, ValueError) as exc:  # ValueError: unparsable JSON body
            raise self._error(exc) from exc
        return self._text_of(reply)

    # -- internals ---------------------------------------------------------------

    def _connect(self) -> tuple[Any, Any]:
        with self._lock:
            if self._client is None:
                try:
                    import openai
                except ImportError as exc:
                    raise ProviderConfigError(f"cannot import the openai SDK ({exc}): {_INSTALL_HINT}") from exc
                try:
                    self._client = openai.OpenAI(
                        api_key=self._key,
                        base_url=self.base_url,
                        timeout=self.timeout,
                        max_retries=self.max_retries,
                    )
                except Exception as exc:  # e.g. an unusable base URL
                    raise ProviderConfigError(
                        f"cannot create the OpenAI client for {self.base_url}: {exc}; "
                        "check openai_base_url in vaultlcm.toml"
                    ) from exc
                self._sdk = openai
            return self._client, self._sdk

    def _error(self, exc: BaseException) -> SummarizerError:
        return provider_error(
            exc,
            self._sdk,
            provider="OpenAI-compatible",
            model=self.model,
            url=self.base_url,
            timeout=self.timeout,
            retries=self.max_retries,
            key_env=self.key_env,
        )

    def _text_of(self, reply: Any) -> str:
        """The first choice's text, or SummarizerError when there is none."""
        where = f"OpenAI-compatible request to {self.base_url} (model {self.model!r})"
        choices = getattr(reply, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise SummarizerError(
                f"{where} returned a malformed reply (no choices; got {type(reply).__name__}); "
                "is openai_base_url really an OpenAI-compatible API (usually ending in /v1)?"
            )
        message = getattr(choices[0], "message", None)
        text = getattr(message, "content", None)
        if not isinstance(text, str) or not text.strip():
            finish = getattr(choices[0], "finish_reason", None)
            raise SummarizerError(
                f"{where} returned no text (finish_reason={finish!r}); compaction will retry later"
            )
        return text.strip()
