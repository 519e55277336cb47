"""Summaries from OpenAI-compatible endpoints (Ollama, vLLM, llama.cpp, DeepSeek, OpenAI).

Uses the official ``openai`` SDK (optional extra ``vaultlcm[openai]``),
imported on the first request (see :mod:`vaultlcm.summarizers.llm`). Only
``POST {base_url}/chat/completions`` is used, the one endpoint every compatible
server implements. A local endpoint (127.0.0.1, localhost, ::1) usually needs no
key, so a missing key is allowed there; anywhere else it is a configuration
error reported at construction.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import ProviderConfigError, SummarizerError
from ..settings import Settings
from .llm import LLMSummarizer

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
#: Sent as the key to local servers that ignore it (the SDK insists on one).
PLACEHOLDER_KEY = "not-needed"
_INSTALL_HINT = (
    "install it with `pip install 'vaultlcm[openai]'`, or set summarizer = \"digest\" in vaultlcm.toml"
)


def is_local_url(url: str) -> bool:
    """True when ``url`` points at this machine."""
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return False
    return (host or "").lower() in LOCAL_HOSTS


class OpenAISummarizer(LLMSummarizer):
    """Summarizer and ``ask`` backend calling ``POST {openai_base_url}/chat/completions``."""

    sdk_module = "openai"
    client_class = "OpenAI"
    sdk_error = "OpenAIError"
    provider = "OpenAI-compatible"
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
                    "summarizer = \"digest\" in vaultlcm.toml"
                )
            key = PLACEHOLDER_KEY
        super().__init__(settings, key, template_dir=template_dir, max_input_tokens=max_input_tokens)

    def _request(self, client: Any, system: str, prompt: str, max_tokens: int) -> Any:
        return client.chat.completions.create(
            model=self.model,
            # `max_tokens`, not `max_completion_tokens`: the one every
            # compatible server (Ollama, vLLM, llama.cpp) understands.
            max_tokens=max_tokens,
            messages=[{"role": "system", "content": system}, {"role": "user", "content": prompt}],
        )

    def _text_of(self, reply: Any) -> str:
        """The first choice's text, or SummarizerError when there is none."""
        where = self._where()
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
