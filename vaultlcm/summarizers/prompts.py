"""Prompt templates: Markdown files a vault may override, rendered safely.

The packaged templates live in the repository's top-level ``templates/``
folder, installed as the package ``vaultlcm.templates``. A vault overrides any
of them by holding a file of the same name in its own ``templates/`` folder
(``<vault>/templates/leaf.md``); pass that folder as ``override_dir``.

Templates use :class:`string.Template` placeholders (``$items``,
``$target_tokens``, ...). Rendering uses ``safe_substitute``: a ``$`` the
template's author did not mean as a placeholder is left alone instead of
crashing compaction, and the substituted values are never scanned again, so a
transcript containing ``$items`` cannot inject anything. A leading HTML comment
(``<!-- ... -->``) documents the template and is stripped before sending.

Placeholders: summarization templates get ``$conversation``, ``$depth``,
``$target_tokens``, ``$source_tokens``, ``$item_count``, ``$span`` (the time
range covered), ``$previous`` (the summary written just before at the same
depth, wrapped in the untrusted-data markers, or a line saying there is none)
and ``$items``; ``ask.md`` gets ``$question``, ``$conversation``,
``$max_tokens`` and ``$items``.

Prompts are incremental: the previous summary at the same depth is context
the model is told not to repeat, so consecutive summaries read as one account
instead of restating the same background.
"""

from __future__ import annotations

import re
from dataclasses import replace
from importlib.resources import files
from pathlib import Path
from string import Template

from ..errors import SummarizerError
from ..tokens import count_tokens
from .base import (
    SourceItem,
    SummaryRequest,
    aggressive_target,
    bound_items,
    cut_text,
    source_tokens,
    template_for_depth,
)
from .body import CORRECTION_PREFIX
from .phrases import time_span

TEMPLATE_NAMES = ("system", "leaf", "depth-1", "depth-2", "depth-3plus", "aggressive", "ask")
#: The markers around untrusted content; every template refers to them by name.
BEGIN_MARK = "<<<BEGIN UNTRUSTED DATA>>>"
END_MARK = "<<<END UNTRUSTED DATA>>>"

#: The previous summary is context, not material: it is sent at most this long.
PREVIOUS_MAX_TOKENS = 1500
NO_PREVIOUS = "(none: this is the first summary at this depth)"

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_HEADER_RE = re.compile(r"\A\s*<!--.*?-->\s*", re.DOTALL)
# Defangs a marker that appears inside a transcript, so quoted text cannot end
# the untrusted block early and pose as instructions.
_MARK_RE = re.compile(r"<<<\s*(BEGIN|END) UNTRUSTED DATA\s*>>>", re.IGNORECASE)


def load_template(name: str, override_dir: Path | None = None) -> str:
    """Text of template ``name`` (no ``.md``): the vault's override if present, else the packaged one."""
    if not _NAME_RE.match(name):
        raise ValueError(f"invalid template name {name!r}")
    if override_dir is not None:
        path = override_dir / f"{name}.md"
        if path.is_file():
            try:
                return path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise SummarizerError(
                    f"{path}: cannot read this template override ({exc}); fix it, or delete it "
                    "to use the packaged template"
                ) from exc
    resource = files("vaultlcm.templates").joinpath(f"{name}.md")
    if not resource.is_file():
        raise SummarizerError(
            f"no template named {name!r} (known: {', '.join(TEMPLATE_NAMES)}); "
            "the installation may be incomplete: reinstall vaultlcm"
        )
    return resource.read_text(encoding="utf-8")


def render_template(name: str, override_dir: Path | None = None, **values: object) -> str:
    """Template ``name`` with its header comment stripped and ``$placeholders`` filled."""
    body = _HEADER_RE.sub("", load_template(name, override_dir), count=1)
    return Template(body).safe_substitute({k: str(v) for k, v in values.items()}).strip() + "\n"


def render_items(items: tuple[SourceItem, ...] | list[SourceItem]) -> str:
    """The items as the model sees them: one header line with id and metadata, then the text."""
    blocks = []
    for item in items:
        meta = [item.kind]
        if item.role:
            meta.append(f"role={item.role}")
        if item.depth is not None:
            meta.append(f"depth={item.depth}")
        if item.at:
            meta.append(f"at={item.at}")
        if item.latest_at and item.latest_at != item.at:
            meta.append(f"until={item.latest_at}")
        if item.edited:
            meta.append("corrected by a person: keep its facts, they override the others")
        text = _defang(item.text)
        fixes = "".join(f"\n{CORRECTION_PREFIX}{_defang(c)}" for c in item.corrections)
        blocks.append(f"--- id: {item.id} ({', '.join(meta)})\n{text.strip()}{fixes}")
    return "\n\n".join(blocks)


def _defang(text: str) -> str:
    return _MARK_RE.sub(lambda m: f"<<{m.group(1).upper()} UNTRUSTED DATA (quoted)>>", text)


def render_previous(previous: str | None) -> str:
    """The previous summary, bounded and between the untrusted-data markers (or a line saying there is none)."""
    if not previous or not previous.strip():
        return NO_PREVIOUS
    return wrap_untrusted(_defang(cut_text(previous.strip(), PREVIOUS_MAX_TOKENS)))


def wrap_untrusted(text: str) -> str:
    """``text`` between the untrusted-data markers the templates talk about."""
    return f"{BEGIN_MARK}\n{text}\n{END_MARK}"


def summary_prompt(
    request: SummaryRequest, *, aggressive: bool = False, override_dir: Path | None = None
) -> tuple[str, str]:
    """``(system, user)`` prompts for ``request`` at the normal or aggressive level."""
    name = "aggressive" if aggressive else template_for_depth(request.depth)
    target = aggressive_target(request.target_tokens) if aggressive else request.target_tokens
    system = render_template("system", override_dir)
    items = request.items
    user = render_template(
        name,
        override_dir,
        conversation=request.conversation,
        depth=request.depth,
        target_tokens=target,
        source_tokens=source_tokens(items),
        item_count=len(items),
        span=time_span(min((i.at for i in items if i.at), default=None),
                       max((i.latest_at or i.at for i in items if i.at), default=None)) or "unknown",
        previous=render_previous(request.previous),
        items=wrap_untrusted(render_items(items)),
    )
    return system, user


def ask_prompt(
    question: str,
    items: tuple[SourceItem, ...] | list[SourceItem],
    *,
    conversation: str = "",
    max_tokens: int,
    override_dir: Path | None = None,
) -> str:
    """The prompt of ``ask``: answer ``question`` from ``items`` only, citing ids."""
    return render_template(
        "ask",
        override_dir,
        question=question,
        conversation=conversation,
        max_tokens=max_tokens,
        items=wrap_untrusted(render_items(items)),
    )


def prompt_overhead_tokens(request: SummaryRequest, *, aggressive: bool, override_dir: Path | None) -> int:
    """Tokens the prompts add around the items (used to bound the input)."""
    empty = SummaryRequest(request.conversation, request.depth, (), request.target_tokens, request.previous)
    system, user = summary_prompt(empty, aggressive=aggressive, override_dir=override_dir)
    # Item headers ("--- id: m-... (message, role=user, at=...)") cost ~25 tokens each.
    return count_tokens(system) + count_tokens(user) + 25 * len(request.items)


def bounded_summary_prompt(
    request: SummaryRequest,
    *,
    aggressive: bool,
    max_input_tokens: int,
    override_dir: Path | None = None,
) -> tuple[str, str]:
    """``(system, user)`` prompts whose total size stays within ``max_input_tokens``.

    The room left after the template text goes to the items, each keeping its
    head (fair shares, see :func:`~vaultlcm.summarizers.base.bound_items`).
    At least 256 tokens of items are always kept, so a huge template override
    cannot starve the request to nothing.
    """
    overhead = prompt_overhead_tokens(request, aggressive=aggressive, override_dir=override_dir)
    items = bound_items(request.items, max(256, max_input_tokens - overhead))
    bounded = request if items is request.items else replace(request, items=items)
    return summary_prompt(bounded, aggressive=aggressive, override_dir=override_dir)
