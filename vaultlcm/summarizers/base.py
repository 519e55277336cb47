"""Summarizer data types, input bounding and the three-level escalation.

Every summary vaultlcm writes goes through :func:`summarize_with_escalation`:

1. the **normal** prompt of the node's depth;
2. if that reply is unusable, the **aggressive** prompt, aiming at about half
   the target;
3. if that fails too, **deterministic truncation** of the sources.

A reply is *acceptable* when it is not empty, is strictly smaller than its
source (``count_tokens`` of the item texts joined by blank lines) and is at
most ``target_tokens * 1.25`` tokens. Truncation always fits
``min(target_tokens, source_tokens - 1)`` tokens, so a summary never grows
and compaction always terminates. A :class:`~vaultlcm.errors.SummarizerError`
raised by the provider is *not* handled here: compaction decides whether to
fall back or wait, and no data is lost either way.

Bounding the input (``summary_max_input_tokens``) is the summarizer's job: it
is given ``max_input_tokens`` at construction, because only it knows how many
tokens its prompt adds around the items (see :func:`bound_items`).
"""

from __future__ import annotations

import functools
import importlib.util
import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import SummarizerError
from ..tokens import count_tokens, count_tokens_unshared, truncate_to_tokens
from .linecount import count_by_lines

if TYPE_CHECKING:
    from ..messages import Message

#: First line of every deterministically truncated summary; tells the reader
#: (person or model) that this is not a real summary and where detail lives.
TRUNCATION_MARKER = "[vaultlcm: deterministic truncation — expand the sources for detail]"
#: Appended to an item whose text was cut to fit a token cap.
CUT_MARK = " …[cut]"
#: A reply may overshoot its target by this factor before it is rejected;
#: models count tokens differently from cl100k, so an exact bound would reject
#: good summaries.
TARGET_SLACK = 1.25


@dataclass(frozen=True)
class SourceItem:
    """One thing being summarized: a raw message or a lower summary."""

    id: str
    """Message id (``m-...``) or summary id (``sum_...``)."""
    kind: str
    """``"message"`` or ``"summary"``."""
    text: str
    """Rendered text (the caller has already added the role prefix etc.)."""
    role: str | None = None
    at: str | None = None
    """ISO timestamp (the earliest covered one, for summaries)."""
    depth: int | None = None
    """Depth of a summary item."""
    edited: bool = False
    """A person corrected this summary (or one below it): its facts take precedence."""
    message: Message | None = None
    """The structured message (leaf items): blocks, tool calls and results, as stored."""
    link: str | None = None
    """Wikilink target of the source: ``conversations/c/logs/2026-11-02#^m-…`` or ``sum_…``."""
    latest_at: str | None = None
    """ISO timestamp of the newest covered message (summaries)."""
    corrections: tuple[str, ...] = ()
    """What a person changed in this summary, one line each; every summary above keeps it verbatim."""


@dataclass(frozen=True)
class SummaryRequest:
    """What to summarize, into what kind of node, at what size."""

    conversation: str
    depth: int
    """Depth of the node to produce: 0 = leaf over messages, >= 1 = condensed over depth-1 summaries."""
    items: tuple[SourceItem, ...]
    target_tokens: int
    previous: str | None = None
    """The newest earlier summary at the same depth, as context ("do not repeat what it says")."""


@dataclass(frozen=True)
class SummaryResult:
    """The text that becomes a summary node, and how it was obtained."""

    text: str
    level: str
    """``"normal"``, ``"aggressive"`` or ``"truncated"``."""
    summarizer: str
    """Name of the summarizer, e.g. ``"digest"`` or ``"anthropic:claude-haiku-4-5"``."""
    prompt: str
    """Template used: ``leaf``, ``depth-1``, ``depth-2``, ``depth-3plus``, ``aggressive`` or ``truncate``."""
    tokens: int


@runtime_checkable
class Summarizer(Protocol):
    """What compaction and ``ask`` need from a summarizer."""

    name: str

    def summarize(self, request: SummaryRequest, *, aggressive: bool = False) -> str:
        """Summarize ``request.items``; ``aggressive`` asks for about half the target.

        Raises :class:`~vaultlcm.errors.SummarizerError` when the provider fails.
        """
        ...

    def complete(self, system: str, prompt: str, max_tokens: int) -> str:
        """A free-form LLM call (used by ``ask``); the digest summarizer raises NotImplementedError."""
        ...


# -- helpers shared by the summarizers ---------------------------------------------


def template_for_depth(depth: int) -> str:
    """Name of the normal prompt template for a node of ``depth``."""
    if depth <= 0:
        return "leaf"
    if depth == 1:
        return "depth-1"
    if depth == 2:
        return "depth-2"
    return "depth-3plus"


#: Share of its source a summary aims at, by depth: a leaf a third, condensed nodes a third
#: (depth 1) to a quarter (above), so a summary always compresses what it covers.
TARGET_RATIO = {0: 1 / 3, 1: 1 / 3, 2: 0.3}
UPPER_TARGET_RATIO = 1 / 4
#: Smallest target worth asking for: three or four short lines with their links (a link alone costs
#: about 30 tokens), so a short stretch of history is not squeezed into a single line.
MIN_TARGET_TOKENS = 160


def target_for(depth: int, source: int, cap: int) -> int:
    """Target size of a summary of ``source`` tokens at ``depth``: it follows the input, up to ``cap``."""
    ratio = TARGET_RATIO.get(depth, UPPER_TARGET_RATIO)
    return max(1, min(cap, max(MIN_TARGET_TOKENS, math.floor(source * ratio))))


def aggressive_target(target_tokens: int) -> int:
    """The size the aggressive level aims at: about half the target."""
    return max(1, target_tokens // 2)


def source_tokens(items: tuple[SourceItem, ...] | list[SourceItem]) -> int:
    """Size of the source of a summary: the item texts joined by blank lines."""
    return _joined_tokens(tuple(item.text for item in items), any(item.kind == "summary" for item in items))


@functools.lru_cache(maxsize=8)
def _joined_tokens(texts: tuple[str, ...], by_lines: bool) -> int:
    """:func:`source_tokens` of these texts, remembered: compaction sizes a node's source to set its
    target and for its note, the summarizer to bound its input and to judge its reply (the same
    string objects each time, so a hit costs no more than comparing references).

    Summaries are counted line by line (their lines were counted when they were written);
    raw messages by their word pieces, remembered (:func:`~vaultlcm.tokens.count_tokens_unshared`):
    the digest counts their sentences next, made of the same words.
    """
    joined = "\n\n".join(texts)
    return count_by_lines(joined) if by_lines else count_tokens_unshared(joined)


def fair_shares(sizes: list[int], budget: int) -> list[int]:
    """Split ``budget`` over items of ``sizes`` (max-min fair).

    Small items keep all their tokens and the rest is split evenly among the
    large ones, so one huge tool output cannot crowd out every short message.
    The shares never sum to more than ``budget``.
    """
    shares = [0] * len(sizes)
    remaining = max(0, budget)
    order = sorted(range(len(sizes)), key=lambda i: (sizes[i], i))
    left = len(sizes)
    for i in order:
        take = min(sizes[i], remaining // left)
        shares[i] = take
        remaining -= take
        left -= 1
    return shares


def cut_text(text: str, max_tokens: int) -> str:
    """``text`` cut to at most ``max_tokens`` tokens, marked when something was cut."""
    if count_tokens(text) <= max_tokens:
        return text
    mark_cost = count_tokens(CUT_MARK)
    if max_tokens <= mark_cost:
        return truncate_to_tokens(text, max_tokens)
    return truncate_to_tokens(text, max_tokens - mark_cost).rstrip() + CUT_MARK


def fit_tokens(text: str, limit: int) -> str:
    """The longest prefix of ``text`` whose token count is at most ``limit``.

    ``truncate_to_tokens`` cuts at a token boundary, but re-encoding the cut can
    in rare cases merge differently; shrink until the count really fits so
    callers can rely on the bound.
    """
    if limit <= 0:
        return ""
    out = text
    step = 0
    while count_tokens(out) > limit:
        step += 1
        out = truncate_to_tokens(out, limit - step)
    return out


def bound_items(items: tuple[SourceItem, ...], max_tokens: int) -> tuple[SourceItem, ...]:
    """Items whose texts together fit ``max_tokens`` (heads kept, fair shares).

    Returns ``items`` itself when they already fit, so bounding is cheap and
    idempotent.
    """
    if sum(len(item.text.encode("utf-8", "surrogatepass")) for item in items) <= max_tokens:
        return items  # a token is at least one byte: they fit without counting
    sizes = [count_tokens(item.text) for item in items]
    if sum(sizes) <= max_tokens:
        return items
    shares = fair_shares(sizes, max_tokens)
    return tuple(
        item if share >= size else replace(item, text=cut_text(item.text, share))
        for item, size, share in zip(items, sizes, shares)
    )


# -- escalation --------------------------------------------------------------------


def _acceptable(text: str, source: int, target: int) -> bool:
    if not text.strip():
        return False
    tokens = count_by_lines(text)
    return tokens < source and tokens <= target * TARGET_SLACK


def truncate_summary(request: SummaryRequest) -> str:
    """Deterministic last resort: the marker line, then the head of each item.

    Fits ``min(target_tokens, source_tokens - 1)`` tokens (empty when even the
    marker does not fit). Every item gets a fair share of the room, each line
    names its source id, and the same request always gives the same bytes.
    """
    items = request.items
    limit = min(request.target_tokens, source_tokens(items) - 1)
    if limit <= 0:
        return ""
    flat = [" ".join(item.text.split()) for item in items]
    sizes = [count_tokens(text) for text in flat]

    def render(budget: int) -> str:
        lines = [TRUNCATION_MARKER]
        for item, text, share in zip(items, flat, fair_shares(sizes, budget)):
            head = truncate_to_tokens(text, share).rstrip() if share > 0 else ""
            lines.append(f"[{item.id}] {head}".rstrip())
        return "\n".join(lines)

    # Each line costs a few tokens for its id; the overflow check below corrects
    # the estimate, shrinking the room by the measured excess until it fits.
    budget = limit - count_tokens(render(0))
    while budget > 0:
        text = render(budget)
        excess = count_tokens(text) - limit
        if excess <= 0:
            return text
        budget -= excess
    skeleton = render(0)
    return fit_tokens(skeleton, limit)


def summarize_with_escalation(summarizer: Summarizer, request: SummaryRequest) -> SummaryResult:
    """Summarize ``request`` with normal, then aggressive, then truncation.

    Always terminates and never returns a summary as large as its source.
    :class:`~vaultlcm.errors.SummarizerError` from the summarizer propagates.
    """
    source = source_tokens(request.items)
    target = request.target_tokens

    text = summarizer.summarize(request).strip()
    if _acceptable(text, source, target):
        return SummaryResult(text, "normal", summarizer.name, template_for_depth(request.depth), count_by_lines(text))

    text = summarizer.summarize(request, aggressive=True).strip()
    if _acceptable(text, source, target):
        return SummaryResult(text, "aggressive", summarizer.name, "aggressive", count_by_lines(text))

    text = truncate_summary(request)
    return SummaryResult(text, "truncated", summarizer.name, "truncate", count_by_lines(text))


# -- shared by the LLM summarizers ---------------------------------------------------


def output_cap(target_tokens: int) -> int:
    """``max_tokens`` for a summary call: room to overshoot a little.

    A hard stop at the target would cut summaries mid-sentence; the escalation
    rejects replies that are really too long and asks again more firmly.
    """
    return int(target_tokens * 1.5) + 64


def sdk_installed(module: str) -> bool:
    """Whether ``module`` can be imported, without paying for the import."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # ValueError: a None placeholder in sys.modules
        return False


def _api_detail(exc: BaseException) -> str:
    """The provider's own explanation of an HTTP error, shortened, if it sent one."""
    body = getattr(exc, "body", None)
    detail: object = None
    if isinstance(body, dict):
        err = body.get("error")
        detail = err.get("message") if isinstance(err, dict) else body.get("message")
    if not isinstance(detail, str) or not detail:
        detail = getattr(exc, "message", None) or str(exc)
    text = " ".join(str(detail).split())
    return text if len(text) <= 200 else text[:199] + "…"


def provider_error(
    exc: BaseException,
    sdk: Any,
    *,
    provider: str,
    model: str,
    url: str,
    timeout: float,
    retries: int,
    key_env: str,
) -> SummarizerError:
    """Turn an SDK exception into a :class:`SummarizerError` a person can act on.

    ``sdk`` is the imported ``anthropic`` or ``openai`` module; both follow the
    same exception layout, and classes one of them lacks (``OverloadedError``)
    are looked up with ``getattr`` so either SDK version works. Every message
    says what failed, against which model and address, and what to do.
    """

    def cls(name: str) -> type[BaseException] | tuple[()]:
        found = getattr(sdk, name, None)
        return found if isinstance(found, type) else ()

    where = f"{provider} request to {url} (model {model!r})"
    status = getattr(exc, "status_code", None)
    after = f" after {retries} retr{'y' if retries == 1 else 'ies'}"
    if isinstance(exc, cls("APITimeoutError")):
        msg = (f"{where} timed out (limit {timeout:g}s per attempt,{after}); the provider is slow or "
               "unreachable: raise llm_timeout_seconds in vaultlcm.toml or try again later")
    elif isinstance(exc, cls("APIConnectionError")):
        msg = (f"{where} could not connect{after} ({_api_detail(exc)}); check the address and "
               "your network, or set summarizer = \"digest\" in vaultlcm.toml")
    elif isinstance(exc, cls("OverloadedError")) or status == 529:
        msg = (f"{where} failed: the provider is overloaded (HTTP 529){after}; "
               "compaction will retry later, or raise llm_max_retries")
    elif isinstance(exc, cls("RateLimitError")):
        msg = (f"{where} was rate limited (HTTP 429){after}: {_api_detail(exc)}; wait and run "
               "`vaultlcm compact` again, or raise llm_max_retries")
    elif isinstance(exc, cls("AuthenticationError")):
        msg = (f"{where} was refused: the API key was rejected (HTTP 401: {_api_detail(exc)}); "
               f"check {key_env}")
    elif isinstance(exc, cls("PermissionDeniedError")):
        msg = (f"{where} was refused: the key may not use this model (HTTP 403: {_api_detail(exc)}); "
               f"check {key_env} and the model setting")
    elif isinstance(exc, cls("NotFoundError")):
        msg = (f"{where} failed with HTTP 404 ({_api_detail(exc)}); check the model name "
               "and the base URL in vaultlcm.toml")
    elif isinstance(exc, cls("BadRequestError")):
        msg = (f"{where} was rejected as invalid (HTTP 400: {_api_detail(exc)}); check the model "
               "setting, or lower summary_max_input_tokens if the input is too long")
    elif isinstance(exc, cls("InternalServerError")):
        msg = (f"{where} failed with a server error (HTTP {status}){after}: {_api_detail(exc)}; "
               "compaction will retry later")
    elif isinstance(exc, cls("APIStatusError")):
        # Includes status 200: an error event in the middle of a streamed reply.
        msg = f"{where} failed with HTTP {status}: {_api_detail(exc)}"
    elif isinstance(exc, (cls("APIResponseValidationError"), ValueError)):
        msg = (f"{where} returned a malformed reply ({_api_detail(exc)}); check that the address is an "
               f"{provider} API endpoint")
    else:
        msg = f"{where} failed: {type(exc).__name__}: {_api_detail(exc)}"
    return SummarizerError(msg)
