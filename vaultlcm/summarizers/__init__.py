"""Summarizers: turn messages (or lower summaries) into summary text.

``make_summarizer(settings)`` returns the one chosen by ``settings.summarizer``:
the offline :class:`DigestSummarizer` (default; ``"extractive"``, its former
name, still selects it), :class:`AnthropicSummarizer` or :class:`OpenAISummarizer`. Compaction calls
:func:`summarize_with_escalation`, which guarantees a summary smaller than its
source. The provider classes import their SDK only on first use, and the
summarizers themselves load on first use too (the digest's phrase and fact
patterns, the prompts): a command that only counts a summary's lines through
:mod:`~vaultlcm.summarizers.linecount` does not pay for them.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..settings import Settings
from .base import (
    TRUNCATION_MARKER,
    SourceItem,
    Summarizer,
    SummaryRequest,
    SummaryResult,
    summarize_with_escalation,
    target_for,
    template_for_depth,
)
from .body import CORRECTION_PREFIX

if TYPE_CHECKING:
    from .anthropic import AnthropicSummarizer
    from .digest import DIGEST_NAME, DigestSummarizer
    from .openai_compat import OpenAISummarizer
    from .prompts import TEMPLATE_NAMES, ask_prompt, load_template, render_items, render_template

    #: The former name of the digest summarizer, kept so code written against it keeps working.
    ExtractiveSummarizer = DigestSummarizer

#: Names loaded on first use: name -> (module, attribute).
_LAZY = {
    "AnthropicSummarizer": ("anthropic", "AnthropicSummarizer"),
    "OpenAISummarizer": ("openai_compat", "OpenAISummarizer"),
    "DIGEST_NAME": ("digest", "DIGEST_NAME"),
    "DigestSummarizer": ("digest", "DigestSummarizer"),
    "ExtractiveSummarizer": ("digest", "DigestSummarizer"),
    "TEMPLATE_NAMES": ("prompts", "TEMPLATE_NAMES"),
    "ask_prompt": ("prompts", "ask_prompt"),
    "load_template": ("prompts", "load_template"),
    "render_items": ("prompts", "render_items"),
    "render_template": ("prompts", "render_template"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        return getattr(importlib.import_module(f".{module}", __name__), attr)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "CORRECTION_PREFIX",
    "DIGEST_NAME",
    "TEMPLATE_NAMES",
    "TRUNCATION_MARKER",
    "AnthropicSummarizer",
    "DigestSummarizer",
    "ExtractiveSummarizer",
    "OpenAISummarizer",
    "SourceItem",
    "Summarizer",
    "SummaryRequest",
    "SummaryResult",
    "ask_prompt",
    "load_template",
    "make_summarizer",
    "render_items",
    "render_template",
    "summarize_with_escalation",
    "target_for",
    "template_for_depth",
]


def make_summarizer(
    settings: Settings,
    environ: Mapping[str, str] | None = None,
    *,
    template_dir: Path | None = None,
) -> Summarizer:
    """The summarizer ``settings.summarizer`` names, bounded by ``summary_max_input_tokens``.

    ``environ`` (default ``os.environ``) supplies API keys; ``template_dir`` is
    the vault's ``templates/`` folder holding prompt overrides. Raises
    :class:`~vaultlcm.errors.ProviderConfigError` when the chosen provider
    cannot be used (missing key or SDK).
    """
    from .anthropic import AnthropicSummarizer
    from .digest import DigestSummarizer
    from .openai_compat import OpenAISummarizer

    env = os.environ if environ is None else environ
    limit = settings.summary_max_input_tokens
    if settings.summarizer == "anthropic":
        return AnthropicSummarizer(settings, env, template_dir=template_dir, max_input_tokens=limit)
    if settings.summarizer == "openai":
        return OpenAISummarizer(settings, env, template_dir=template_dir, max_input_tokens=limit)
    return DigestSummarizer(max_input_tokens=limit)

