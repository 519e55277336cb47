"""Memory tools for agents: schemas in Anthropic or OpenAI form, and their execution.

``lcm_grep``, ``lcm_describe``, ``lcm_expand`` and ``lcm_expand_query`` let a
model recover exact detail from compacted history. Results are plain text,
capped at ``max_expand_tokens`` so a tool call can never flood the context.
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
            "Search this conversation's full stored history (raw messages and summaries), including "
            "everything compacted out of your context. Words match all together; use \"quoted phrases\", "
            "prefix*, or regex=true. Each hit gives an id and the top-level summary covering it."
        ),
        "schema": {
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Words, \"a phrase\", prefix*, or a regex with regex=true."},
                "regex": {"type": "boolean", "description": "Treat pattern as a regular expression.", "default": False},
                "scope": {"type": "string", "enum": ["messages", "summaries", "both"], "default": "both"},
                "since": {"type": "string", "description": "ISO date/time or age like 12h, 7d."},
                "before": {"type": "string", "description": "ISO date/time or age."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
            },
            "required": ["pattern"],
        },
    },
    {
        "name": "lcm_describe",
        "description": "Describe a message, summary or file id: metadata, content, sources, and what expanding it costs in tokens.",
        "schema": {
            "type": "object",
            "properties": {"id": {"type": "string", "description": "m-…, sum_… or file_… id."}},
            "required": ["id"],
        },
    },
    {
        "name": "lcm_expand",
        "description": (
            "Expand a summary into its sources, down to the verbatim original messages, within a token cap. "
            "Use depth=1 to see the summaries one level down first when a node covers a lot."
        ),
        "schema": {
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "sum_… id (or m-… to fetch one message verbatim)."},
                "max_tokens": {"type": "integer", "minimum": 64, "description": "Token cap (default 4000)."},
                "depth": {"type": "integer", "minimum": 1, "description": "Levels to descend."},
            },
            "required": ["id"],
        },
    },
    {
        "name": "lcm_expand_query",
        "description": "Answer a question from the expanded stored history, citing the ids used.",
        "schema": {
            "type": "object",
            "properties": {
                "question": {"type": "string"},
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
                limit=int(arguments.get("limit", 10)),
            )
            if not r["hits"]:
                return "No matches."
            lines = [
                f"{h['id']} ({h['kind']}{', under ' + h['covered_by'] if h.get('covered_by') else ''}): {h['snippet']}"
                for h in r["hits"]
            ]
            if r.get("partial"):
                lines.append("(regex scan hit its time limit; results may be incomplete)")
            return _cap("\n".join(lines), limit)
        if name == "lcm_describe":
            return _cap(json.dumps(vault.describe(str(arguments["id"])), ensure_ascii=False, indent=1), limit)
        if name == "lcm_expand":
            r = vault.expand(str(arguments["id"]), max_tokens=min(int(arguments.get("max_tokens", limit)), limit),
                             depth=arguments.get("depth"))
            parts = [f"<summary id=\"{s['id']}\" depth=\"{s['depth']}\">\n{s['text'].rstrip()}\n</summary>" for s in r["summaries"]]
            for m in r["messages"]:
                parts.append(f"[{m['id']}] {m['role']} {m.get('timestamp', '')}: {json.dumps(m.get('content'), ensure_ascii=False)}")
            if r["truncated"]:
                parts.append(f"(truncated: {r.get('omitted_messages', 0)} messages left out; expand {', '.join(r['omitted'][:8])} next)")
            return _cap("\n".join(parts) or "(nothing under this id)", limit + 200)
        if name == "lcm_expand_query":
            r = vault.ask(str(arguments["question"]), conversation=conversation,
                          max_tokens=min(int(arguments.get("max_tokens", limit)), limit))
            return _cap(r["answer"] + (f"\n(sources: {', '.join(r['citations'])})" if r["citations"] else ""), limit + 200)
    except KeyError as exc:
        return f"Error: missing argument {exc.args[0]!r} for {name}"
    except (VaultLCMError, ValueError, TypeError) as exc:
        return f"Error: {exc}"
    return f"Error: unknown tool {name!r}; the tools are {', '.join(t['name'] for t in TOOLS)}"
