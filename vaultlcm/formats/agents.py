"""Agent session transcripts: Claude Code and OpenClaw / pi session JSONL files.

Every line becomes one message, read losslessly (not exactly: the line's fields
live in ``extra``, the inner message's other fields in ``extra["message"]``):

* chat lines (Claude Code ``user``/``assistant`` entries, pi ``message``
  entries) become messages with native content blocks;
* every other line (a session title, a ``file-history-snapshot``, ``progress``,
  ``permission-mode``, ``queue-operation``, a pi ``compaction`` or
  ``model_change``) becomes a *non-chat line*, role ``claude-code:<type>`` or
  ``openclaw:<type>``, kept whole, shown in the log and searchable, and left out
  of the model's context.

Each record also says where it sits in the session: its *lane* (``side`` for a
Claude Code subagent's line, ``line`` for a non-chat line, ``None`` for the main
thread) and its *thread* links (``uuid``/``parentUuid``; pi's ``id``/``parentId``),
from which :mod:`vaultlcm.threads` works out which branch is the active one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..messages import Message
from .api import FORMAT_HINT, Fail, from_anthropic_block, keep_part, renamed, take_timestamp

if TYPE_CHECKING:
    from .resume import ParseState


@dataclass(frozen=True)
class Read:
    """One transcript line as read: the message, its lane and its thread links."""

    message: Message
    lane: str | None = None
    thread: dict[str, Any] | None = None


def _line_message(rec: Any, fail: Fail, fmt: str, role: str | None = None, content: list[Any] | None = None,
                  hints: dict[str, Any] | None = None, consumed: tuple[str, ...] = ()) -> Message:
    """A transcript line as a message: a chat line (``role`` given) or any other line, kept whole."""
    if not isinstance(rec, dict):
        raise fail(f"expected a JSON object (a {fmt} transcript line), got {type(rec).__name__}; {FORMAT_HINT}")
    hints = dict(hints or {"format": fmt})
    stamp = take_timestamp(rec, hints)
    if role is None:
        kind = rec.get("type")
        hints["line"] = True
        return Message(role=f"{fmt}:{kind if isinstance(kind, str) and kind else 'untyped'}", timestamp=stamp,
                       extra=dict(rec), hints=hints)
    # line fields in extra, the inner message's other fields in extra["message"]
    extra = {k: v for k, v in rec.items() if k != "message" and not (k == "timestamp" and stamp is not None)}
    extra["message"] = {k: v for k, v in rec["message"].items() if k not in consumed}
    return Message(role=role, timestamp=stamp, content=content or [], extra=extra, hints=hints)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def read_claude_code(rec: Any, fail: Fail) -> Read:
    inner: Any = rec.get("message") if isinstance(rec, dict) and rec.get("type") in ("user", "assistant") else None
    content = inner.get("content") if isinstance(inner, dict) else None
    thread: dict[str, Any] | None = None
    if isinstance(rec, dict) and _str(rec.get("uuid")):
        # A compaction boundary starts a new root; its logical parent keeps the session one tree.
        parent = _str(rec.get("parentUuid")) or _str(rec.get("logicalParentUuid"))
        thread = {"f": "cc", "u": rec["uuid"], "p": parent}
        if _str(rec.get("agentId")):
            thread["agent"] = rec["agentId"]
    if not isinstance(content, (str, list)):
        message = _line_message(rec, fail, "claude-code")
        if thread:
            thread["k"] = "line"
        return Read(message, "line", thread)
    hints = {"format": "claude-code"} | ({"content_string": True} if isinstance(content, str) else {})
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else [
        from_anthropic_block(b) for b in content]
    if isinstance(inner.get("role"), str) and inner["role"]:
        message = _line_message(rec, fail, "claude-code", inner["role"], blocks, hints, ("role", "content"))
    else:
        hints["role_from_type"] = True
        message = _line_message(rec, fail, "claude-code", rec["type"], blocks, hints, ("content",))
    if thread is not None:
        if rec["type"] == "assistant":
            thread["k"] = "asst"
            request = _str(rec.get("requestId")) or _str(inner.get("id"))
            if request:
                thread["r"] = request
        elif any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks):
            thread["k"] = "result"
        elif rec.get("isMeta") or rec.get("isCompactSummary"):
            thread["k"] = "meta"
        else:
            thread["k"] = "prompt"
    lane = "side" if rec.get("isSidechain") is True else None
    return Read(message, lane, thread)


def _from_openclaw_block(block: Any) -> Any:
    kind = block.get("type") if isinstance(block, dict) else None
    mapped: dict[str, Any] | None = None
    if kind == "text" and isinstance(block.get("text"), str):
        mapped = block
    elif kind == "thinking" and isinstance(block.get("thinking"), str):
        mapped = renamed(block, "thinking", {"thinkingSignature": "signature"})
    elif kind == "toolCall" and isinstance(block.get("id"), str) and isinstance(block.get("name"), str):
        mapped = renamed(block, "tool_call", {})
    elif kind == "image" and isinstance(block.get("data"), str) and isinstance(block.get("mimeType"), str):
        mapped = renamed(block, "image", {"mimeType": "media_type"})
    return mapped if mapped is not None else keep_part(block, "openclaw")


#: pi message roles that are summaries pi itself made, not turns: kept as lines, out of the context.
_PI_SUMMARY_ROLES = ("compactionSummary", "branchSummary")


def read_openclaw(rec: Any, fail: Fail) -> Read:
    inner: Any = rec.get("message") if isinstance(rec, dict) and rec.get("type") == "message" else None
    content = inner.get("content") if isinstance(inner, dict) and isinstance(inner.get("role"), str) else None
    thread = None
    if isinstance(rec, dict) and _str(rec.get("id")) and rec.get("type") != "session":
        thread = {"f": "pi", "u": rec["id"], "p": _str(rec.get("parentId"))}
    if not isinstance(content, (str, list)) or inner["role"] in _PI_SUMMARY_ROLES:
        return Read(_line_message(rec, fail, "openclaw"), "line", thread)
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else [
        _from_openclaw_block(b) for b in content]
    hints: dict[str, Any] = {"format": "openclaw"} | ({"content_string": True} if isinstance(content, str) else {})
    role, consumed = inner["role"], ["content"]
    if role == "toolResult" and isinstance(inner.get("toolCallId"), str):
        result: dict[str, Any] = {"type": "tool_result", "call_id": inner["toolCallId"],
                                  "content": content if isinstance(content, str) else blocks}
        consumed.append("toolCallId")  # role "toolResult" stays in extra["message"]
        for key, field, typ in (("toolName", "name", str), ("isError", "is_error", bool)):
            if isinstance(inner.get(key), typ):
                result[field] = inner[key]
                consumed.append(key)
        role, blocks = "tool", [result]
        hints.pop("content_string", None)  # the string lives inside the tool_result
    else:
        consumed.append("role")
    message = _line_message(rec, fail, "openclaw", role, blocks, hints, tuple(consumed))
    return Read(message, None, thread)


# -- writing: the session line each message came from ----------------------------------


def _line_base(message: Message) -> tuple[dict[str, Any], dict[str, Any]]:
    line = {k: v for k, v in message.extra.items() if k != "message"}
    if message.timestamp is not None and "timestamp" not in line:
        line["timestamp"] = message.timestamp
    inner = dict(message.extra.get("message") or {})
    return line, inner


def _content_back(message: Message, blocks: list[Any]) -> Any:
    if message.hints.get("content_string") and len(blocks) == 1 and isinstance(blocks[0], dict) and (
            blocks[0].keys() == {"type", "text"}):
        return blocks[0]["text"]
    return blocks


def to_claude_code(message: Message) -> dict[str, Any]:
    """The Claude Code session line a message was read from (equal as a JSON value)."""
    from .api import anthropic_block_back

    if message.is_line:
        return dict(message.extra)
    line, inner = _line_base(message)
    if not message.hints.get("role_from_type"):
        inner["role"] = message.role
    inner["content"] = _content_back(message, [anthropic_block_back(b) for b in message.content])
    line["message"] = inner
    return line


def _to_openclaw_block(block: Any) -> Any:
    kind = block.get("type") if isinstance(block, dict) else None
    mapped: Any = None
    if kind == "thinking":
        mapped = renamed(block, "thinking", {"signature": "thinkingSignature"})
    elif kind == "tool_call":
        mapped = renamed(block, "toolCall", {})
    elif kind == "image" and "data" in block:
        mapped = renamed(block, "image", {"media_type": "mimeType"})
    elif kind == "raw" and block.get("format") == "openclaw":
        return block.get("value")
    return mapped if mapped is not None else block


def to_openclaw(message: Message) -> dict[str, Any]:
    """The OpenClaw / pi session line a message was read from (equal as a JSON value)."""
    if message.is_line:
        return dict(message.extra)
    line, inner = _line_base(message)
    result = message.content[0] if len(message.content) == 1 and isinstance(message.content[0], dict) else {}
    if message.role == "tool" and result.get("type") == "tool_result" and inner.get("role") == "toolResult":
        inner["toolCallId"] = result.get("call_id")
        for key, field in (("toolName", "name"), ("isError", "is_error")):
            if field in result:
                inner[key] = result[field]
        body = result.get("content")
        inner["content"] = body if isinstance(body, str) else [_to_openclaw_block(b) for b in body or []]
    else:
        inner["role"] = message.role
        inner["content"] = _content_back(message, [_to_openclaw_block(b) for b in message.content])
    line["message"] = inner
    return line


_AGENT_ID = re.compile(r"\bagentId: ([A-Za-z0-9_-]+)")


def link_subagents(reads: list[Read], resume: "ParseState | None" = None) -> None:
    """Name, on each subagent line, the ``Task`` call that started its subagent.

    The Task result names the agent (``agentId: a4e80a2``, and in
    ``toolUseResult.agentId``); subagent lines carry that ``agentId``. Older
    transcripts are matched by the subagent's first prompt, which is the Task
    call's ``prompt``. The maps are built from every line given (a Task result
    after a subagent's lines still names it); ``resume`` holds them for the lines
    read before, and is updated (prompts by their hash: they can be long).
    """
    from .resume import ParseState

    # One way for both: a whole document links through a state of its own, thrown away after.
    _link_resumed(reads, resume if resume is not None else ParseState())


def _task_links(reads: list[Read]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """``(prompt, call id)`` of each Task call and ``(agent, call id)`` of each Task result, in order."""
    prompts: list[tuple[str, str]] = []
    agents: list[tuple[str, str]] = []
    for read in reads:
        if read.lane == "side":
            continue
        for block in read.message.content:
            if block.get("type") == "tool_call" and isinstance(block.get("arguments"), dict):
                prompt = block["arguments"].get("prompt")
                if isinstance(prompt, str):
                    prompts.append((prompt.strip(), str(block.get("id"))))
            if block.get("type") == "tool_result":
                inner = block.get("content")
                text = inner if isinstance(inner, str) else " ".join(
                    str(b.get("text", "")) for b in inner or [] if isinstance(b, dict))
                result = read.message.extra.get("toolUseResult")
                agent = result.get("agentId") if isinstance(result, dict) else None
                if not isinstance(agent, str):
                    found = _AGENT_ID.search(text)
                    agent = found.group(1) if found else None
                if agent:
                    agents.append((agent, str(block.get("call_id"))))
    return prompts, agents


def _link_resumed(reads: list[Read], resume: "ParseState") -> None:
    """:func:`link_subagents` with the maps of the lines read before kept in ``resume``."""
    from .resume import text_hash

    prompts, agents = _task_links(reads)
    for prompt, call in prompts:
        resume.by_prompt.setdefault(text_hash(prompt), call)
    resume.by_agent.update(agents)
    for read in reads:
        if read.lane != "side" or not read.thread:
            continue
        agent = str(read.thread.get("agent", ""))
        if agent not in resume.first_prompt and read.message.role == "user":
            resume.first_prompt[agent] = text_hash(read.message.text.strip())
        task = resume.by_agent.get(agent) or resume.by_prompt.get(resume.first_prompt.get(agent, text_hash("")))
        if task:
            read.thread["task"] = task


def is_claude_code_record(rec: Any) -> bool:
    """Whether a JSON value looks like a line of a Claude Code session file."""
    return isinstance(rec, dict) and isinstance(rec.get("type"), str) and (
        rec["type"] == "file-history-snapshot" or any(k in rec for k in ("uuid", "parentUuid", "sessionId", "leafUuid")))


def is_openclaw_record(rec: Any) -> bool:
    """Whether a JSON value looks like a line of an OpenClaw / pi session file."""
    return isinstance(rec, dict) and "role" not in rec and (
        rec.get("type") == "session" or (rec.get("type") == "message" and isinstance(rec.get("message"), dict))
        or (isinstance(rec.get("type"), str) and "parentId" in rec and "id" in rec))
