"""Memory tools for agents: schemas in Anthropic or OpenAI form, and their execution.

``lcm_grep``, ``lcm_describe``, ``lcm_expand`` and ``lcm_expand_query`` let a
model recover exact detail from compacted history. Results are plain text,
capped at ``max_expand_tokens`` so a tool call can never flood the context.

Hit lines read like ``[2026-11-29 10:04:12Z] m-… user, in sum_… (shown as sum_…
d2): snippet``: the time comes first because a newer statement supersedes an
older one, and the tool descriptions tell the model so.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .errors import UsageError, VaultLCMError
from .tokens import count_tokens, truncate_to_tokens

if TYPE_CHECKING:
    from .vault import Vault

TOOLS: list[dict[str, Any]] = [
    {
        "name": "lcm_grep",
        "description": (
            "Search the full stored history (raw messages and summaries), including everything compacted out "
            "of your context. Words must all match and also match their other forms (pinned/pin, "
            "retries/retry); identifiers (LEDG-482, src/app.py, v2.14.1, compute_due_date, "
            "call_0042) match exactly; use \"quoted phrases\" for exact wording, prefix*, or regex=true. When few "
            "messages have every word, they come newest first, then the summaries, then messages with some of "
            "the words (most first; those hits say which they have). When nothing has the words as written, a "
            "word naming a doer is tried as its root (formatter: format*), and the first line says so. "
            "When many match, every third hit from the "
            "second is a summary, shown at its best line (summaries mark a changed value `new (was old)`). "
            "Each hit line starts "
            "with its time (UTC), then id, role, the summary covering it and the node that stands for it in "
            "your context. Facts change over time: when hits disagree, the newer statement supersedes the "
            "older one (sort=\"newest\" lists the latest first). The first line says how many hits match in "
            "all; page on with offset. For 'how many times' questions use count=true: the total and a count "
            "per day. Then lcm_expand a hit's id to read the messages around it."
        ),
        "schema": {
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Words, \"a phrase\", prefix*, or a regex with regex=true."},
                "regex": {"type": "boolean", "description": "Treat pattern as a regular expression.", "default": False},
                "scope": {"type": "string", "enum": ["messages", "summaries", "both"], "default": "both",
                          "description": "Search raw messages, summaries, or both."},
                "since": {"type": "string", "description": "Only hits at or after this ISO date/time, or an age like 12h, 7d."},
                "before": {"type": "string", "description": "Only hits before this ISO date/time or age."},
                "sort": {"type": "string", "enum": ["relevance", "newest", "oldest"], "default": "relevance",
                         "description": "relevance (best first; hits of about the same relevance newest first), newest or oldest."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10, "description": "Hits per page."},
                "offset": {"type": "integer", "minimum": 0, "default": 0, "description": "Hits to skip (the next page)."},
                "count": {"type": "boolean", "default": False,
                          "description": "Only count the matches: the total, by kind, and per day."},
            },
            "required": ["pattern"],
        },
    },
    {
        "name": "lcm_describe",
        "description": (
            "Describe a message, summary or file id: metadata, content, sources, the summary covering it, "
            "and what expanding it costs in tokens."
        ),
        "schema": {
            "type": "object",
            "properties": {"id": {"type": "string", "description": "m-…, sum_… or file_… id."}},
            "required": ["id"],
        },
    },
    {
        "name": "lcm_expand",
        "description": (
            "Read exact original messages within a token cap. For a message id (m-…, e.g. a grep hit): the "
            "whole turn it belongs to (the request, the tool calls and results, the reply), so the answer "
            "that follows a hit comes with it; or around=N messages on each side. For a summary id (sum_…): "
            "its sources down to the verbatim messages; with query, the messages matching the query come "
            "first, each with the message after it; depth=1 shows the summaries one level down first. The "
            "output says what was left out and which ids to expand next."
        ),
        "schema": {
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "m-… (a message and its turn) or sum_… (a summary)."},
                "max_tokens": {"type": "integer", "minimum": 64, "description": "Token cap (default 4000)."},
                "depth": {"type": "integer", "minimum": 1, "description": "Summary levels to descend."},
                "around": {"type": "integer", "minimum": 0,
                           "description": "For a message: this many neighbours on each side instead of its turn."},
                "query": {"type": "string", "description": "For a summary: put the messages matching these words first."},
            },
            "required": ["id"],
        },
    },
    {
        "name": "lcm_expand_query",
        "description": (
            "Answer a question from the expanded stored history, citing the ids used: the best matching "
            "verbatim excerpts with their times (equally relevant ones newest first: a newer statement "
            "supersedes an older one), following identifiers one hop when the question asks for something "
            "named elsewhere (the commit of a bug named in a ticket)."
        ),
        "schema": {
            "type": "object",
            "properties": {
                "question": {"type": "string", "description": "The question, in words."},
                "max_tokens": {"type": "integer", "minimum": 64, "description": "Token cap of the evidence."},
            },
            "required": ["question"],
        },
    },
]


def tool_definitions(format: str = "anthropic") -> list[dict[str, Any]]:
    """The memory tools' schemas for ``format`` ``anthropic`` or ``openai``."""
    if format == "anthropic":
        return [{"name": t["name"], "description": t["description"], "input_schema": t["schema"]} for t in TOOLS]
    if format == "openai":
        return [
            {"type": "function", "function": {"name": t["name"], "description": t["description"], "parameters": t["schema"]}}
            for t in TOOLS
        ]
    raise UsageError(f"unknown tool format {format!r}; use anthropic or openai")


def _cap(text: str, limit: int) -> str:
    if count_tokens(text) <= limit:
        return text
    return truncate_to_tokens(text, limit - 20) + "\n…[output cut to fit the context; narrow the request]"


def _when(iso: str) -> str:
    return iso.replace("T", " ")


def hit_line(h: dict[str, Any], *, with_conversation: bool = False) -> str:
    """One grep hit as a line: time, id, role or depth, covering summary, context node, snippet."""
    what = h.get("role") or f"summary depth {h.get('depth')}"
    where = [what]
    if h.get("covered_by"):
        where.append(f"in {h['covered_by']}")
    shown = h.get("shown_as")
    if shown and shown != h["id"] and shown != h.get("covered_by"):
        where.append(f"shown as {shown}" + (f" d{h['shown_depth']}" if h.get("shown_depth") is not None else ""))
    elif shown == h["id"]:
        where.append("in your context")
    if with_conversation:
        where.append(f"conversation {h['conversation']}")
    if h.get("matched") is not None:
        where.append("has " + (", ".join(h["matched"]) or "a form of the words"))
    return f"[{_when(h['at'])}] {h['id']} ({', '.join(where)}): {h['snippet']}"


_SINGULAR = {"messages": "message", "summaries": "summary"}


def count_lines(r: dict[str, Any]) -> list[str]:
    """The totals of ``grep --count``: one line in all, then one per day."""
    days = r["per_day"]
    on = f", on {len(days)} day{'s' if len(days) != 1 else ''}" if days else ""
    head = f"{r['total']} matches: {r['messages']} messages, {r['summaries']} summaries{on}"
    lines = [head]
    for day, kinds in days.items():
        lines.append(f"{day}: " + ", ".join(f"{n} {_SINGULAR[k] if n == 1 else k}" for k, n in kinds.items()))
    if r.get("partial"):
        lines.append("(regex scan hit its time limit: these counts are a lower bound)")
    return lines


def page_line(r: dict[str, Any]) -> str:
    """How many hits match in all, which are shown, and how to see more."""
    n = len(r["hits"])
    first = r["offset"] + 1
    line = f"{r['total']} matches (sort {r['sort']})"
    if r.get("related_forms"):
        line = f"nothing has the words as written; {r['total']} matches of {r['related_forms']} (sort {r['sort']})"
    if r.get("relaxed"):
        line += f"; {r['some_words']} more hits have some of the words (listed after, most words first)"
    if n:
        line += f"; showing {first}-{r['offset'] + n}"
    if r.get("next_offset") is not None:
        line += f"; more with offset={r['next_offset']}"
    return line


def _message_text(m: dict[str, Any]) -> str:
    from .messages import message_from_native

    try:
        return message_from_native({k: v for k, v in m.items() if k in ("role", "content")}).searchable_text()
    except VaultLCMError:
        return json.dumps(m.get("content"), ensure_ascii=False)


def expand_text(r: dict[str, Any]) -> str:
    """An expansion for the model: summaries as blocks, messages with id, role and time."""
    parts = [f"<summary id=\"{s['id']}\" depth=\"{s['depth']}\">\n{s['text'].rstrip()}\n</summary>" for s in r["summaries"]]
    hit = r["id"] if r.get("mode") in ("turn", "around") else None
    matched = set(r.get("matched", []))
    for m in r["messages"]:
        mark = ">> " if m["id"] == hit or m["id"] in matched else ""
        parts.append(f"{mark}[{m['id']}] {m['role']} {_when(str(m.get('timestamp', '')))}: {_message_text(m)}")
    if r["truncated"]:
        left = r.get("omitted") or []
        parts.append(f"(cut at the token cap: {r.get('omitted_messages', 0)} messages left out"
                     + (f"; expand {', '.join(left[:8])} next" if left else "") + ")")
    return "\n".join(parts) or "(nothing under this id)"


def call_tool(vault: "Vault", conversation: str | None, name: str, arguments: dict[str, Any]) -> str:
    """Run one memory tool and return text for the model (errors come back as text too).

    ``conversation`` scopes ``lcm_grep`` and ``lcm_expand_query``; ``None`` searches
    every conversation of the vault. Ids are unique across the vault, so
    ``lcm_describe`` and ``lcm_expand`` do not need it.
    """
    limit = vault.settings.max_expand_tokens
    try:
        if name == "lcm_grep":
            r = vault.grep(
                str(arguments["pattern"]), conversation=conversation, regex=bool(arguments.get("regex", False)),
                scope=str(arguments.get("scope", "both")), since=arguments.get("since"), before=arguments.get("before"),
                limit=int(arguments.get("limit", 10)), offset=int(arguments.get("offset", 0)),
                sort=str(arguments.get("sort", "relevance")), count=bool(arguments.get("count", False)),
            )
            if "hits" not in r:
                return _cap("\n".join(count_lines(r)), limit)
            if not r["hits"]:
                return "No matches." if not r["total"] else f"No more matches: {r['total']} in all, offset {r['offset']}."
            lines = [page_line(r)] + [hit_line(h, with_conversation=conversation is None) for h in r["hits"]]
            if r.get("partial"):
                lines.append("(regex scan hit its time limit; results may be incomplete)")
            return _cap("\n".join(lines), limit)
        if name == "lcm_describe":
            return _cap(json.dumps(vault.describe(str(arguments["id"])), ensure_ascii=False, indent=1), limit)
        if name == "lcm_expand":
            around = arguments.get("around")
            cap = min(int(arguments.get("max_tokens", limit)), limit)
            r = vault.expand(
                str(arguments["id"]), max_tokens=cap, depth=arguments.get("depth"),
                around=int(around) if around is not None else None, query=arguments.get("query"),
            )
            return _cap(expand_text(r), cap + 100)  # the cap, plus the closing note
        if name == "lcm_expand_query":
            r = vault.ask(str(arguments["question"]), conversation=conversation,
                          max_tokens=min(int(arguments.get("max_tokens", limit)), limit))
            return _cap(r["answer"] + (f"\n(sources: {', '.join(r['citations'])})" if r["citations"] else ""), limit + 200)
    except KeyError as exc:
        return f"Error: missing argument {exc.args[0]!r} for {name}"
    except (VaultLCMError, ValueError, TypeError) as exc:
        return f"Error: {exc}"
    return f"Error: unknown tool {name!r}; the tools are {', '.join(t['name'] for t in TOOLS)}"
