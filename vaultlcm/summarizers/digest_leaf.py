"""A leaf digest: what was asked, done, found or decided, and what is open.

Reads each source message as structured blocks when the item carries its
:class:`~vaultlcm.messages.Message` (the rendered text otherwise: ``role:
text`` with ``-> tool call`` / ``<- tool result`` lines, as compaction writes
it). Thinking blocks are skipped. The user's sentences go to **Asked** (their
words, shortened), tool calls and their results to **Done** (one line per
action, see :mod:`.actions`), the other sentences to **Found / decided**, and
anything still to do to **Open**. Every line links to the block of the
message it came from.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .actions import Action, make_action, merge_actions, result_facts, tool_kind
from .base import SourceItem
from .body import ASKED, DONE, FOUND, LEAF_SECTIONS, OPEN, correction_line
from .digest import Draft, Unit
from .facts import CHITCHAT_RE, facts_of, prose_units, score
from .phrases import key_phrases

_ROLE_PREFIX = re.compile(r"^(system|user|assistant|tool|developer|function)\s*:\s?", re.I)
_CALL_LINE = re.compile(r"^-> tool call (\S+) \[([^\]]*)\]: (.*)$")
_RESULT_LINE = re.compile(r"^<- tool result \[([^\]]*)\]( \(error\))?: ?(.*)$")

#: The user's words frame everything else in a leaf.
USER_BONUS = 4
FIRST_ASK_BONUS = 8
ACTION_BONUS = 0
#: Tools whose results are read for facts, not only for an outcome.
READ_KINDS = frozenset({"read", "fetch", "websearch", "call", "task"})
#: A fact in a tool result counts a little less than the same fact said in the conversation.
RESULT_PENALTY = 0
#: An assistant sentence that names something right after the user asked a question answers it.
ANSWER_BONUS = 4
#: What a sentence loses when everything it names was said before.
ECHO_PENALTY = 8
_WEAK_KINDS = frozenset({"ident", "small", "relative", "time"})


def _blocks_from_text(item: SourceItem) -> tuple[str, list[dict[str, Any]]]:
    """``(role, blocks)`` recovered from the text form compaction gives summarizers."""
    text = item.text
    m = _ROLE_PREFIX.match(text)
    role = (item.role or (m.group(1) if m else "") or "").lower()
    if m:
        text = text[m.end():]
    blocks: list[dict[str, Any]] = []
    prose: list[str] = []
    current: dict[str, Any] | None = None

    def flush() -> None:
        if prose:
            blocks.append({"type": "text", "text": "\n".join(prose)})
            prose.clear()

    for line in text.splitlines():
        call = _CALL_LINE.match(line)
        result = _RESULT_LINE.match(line)
        if call:
            flush()
            try:
                args: Any = json.loads(call.group(3))
            except ValueError:
                args = {"input": call.group(3)}
            current = None
            blocks.append({"type": "tool_call", "name": call.group(1), "id": call.group(2), "arguments": args})
        elif result:
            flush()
            current = {"type": "tool_result", "call_id": result.group(1), "content": result.group(3),
                       "is_error": bool(result.group(2))}
            blocks.append(current)
        elif current is not None:
            current["content"] += "\n" + line
        else:
            prose.append(line)
    flush()
    return role, blocks


def _message_blocks(item: SourceItem) -> tuple[str, list[dict[str, Any]]]:
    if item.message is not None:
        return (item.role or item.message.role or "").lower(), list(item.message.content)
    return _blocks_from_text(item)


def leaf_draft(items: tuple[SourceItem, ...]) -> Draft:
    """Scored units of a leaf over ``items`` (raw messages)."""
    draft = Draft(order=LEAF_SECTIONS)
    parsed = [_message_blocks(item) for item in items]
    results: dict[str, dict[str, Any]] = {}
    for _, blocks in parsed:
        for block in blocks:
            if block.get("type") == "tool_result" and isinstance(block.get("call_id"), str):
                results.setdefault(block["call_id"], block)
    called: dict[str, str] = {}
    actions: list[Action] = []
    seen_text: set[str] = set()
    first_ask = True
    question_open = False
    for index, (item, (role, blocks)) in enumerate(zip(items, parsed)):
        draft.corrections.extend(correction_line(c, item.link) for c in item.corrections)
        if role == "user":
            said = " ".join(b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str))
            question_open = said.rstrip().endswith("?")
        answered = False
        order = 0
        for block in blocks:
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str) and role not in ("tool", "system"):
                # The system prompt frames the agent, it is not part of what happened.
                for text in prose_units(block["text"]):
                    order += 1
                    key = text.lower()
                    if key in seen_text:
                        continue  # said twice (a pasted log, a repeated answer): once is enough
                    seen_text.add(key)
                    unit = _sentence_unit(index, order, role, text, item.link, first_ask)
                    if unit is not None and question_open and role == "assistant" and facts_of(text).substance:
                        unit.score += ANSWER_BONUS  # the answer to what the user just asked
                        answered = True
                    if unit is not None:
                        if unit.section == ASKED and first_ask:
                            first_ask = False
                        draft.units.append(unit)
            elif kind == "tool_call":
                call_id = str(block.get("id") or "")
                called[call_id] = tool_kind(str(block.get("name") or ""))
                actions.append(make_action(block, results.get(call_id), index))
            elif kind == "tool_result" and called.get(str(block.get("call_id"))) in READ_KINDS:
                # What a document, a page or an API said (a runbook's limit, an owner's name) is
                # something learned; what a command printed is its outcome, on the Done line.
                for k, text in enumerate(result_facts(block.get("content"))):
                    if text.lower() not in seen_text:
                        seen_text.add(text.lower())
                        draft.units.append(Unit(FOUND, (FOUND, index), (index, 2, 1000 + k), text, item.link,
                                                score(text) - RESULT_PENALTY))
            elif kind == "tool_result" and str(block.get("call_id")) not in called:
                # A result whose call lies in an earlier leaf: say how it ended.
                name = str(block.get("name") or "tool")
                orphan = make_action({"name": name, "arguments": {}}, block, index)
                orphan.text = f"result of an earlier {name} call"
                actions.append(orphan)
        if answered:
            question_open = False
    _mark_echoes(draft.units)
    for n, action in enumerate(merge_actions(actions)):
        link = items[action.item].link
        draft.units.append(Unit(DONE, ("action", n), (action.item, 0, n), action.render(), link,
                                action.weight + ACTION_BONUS))
        for k, todo in enumerate(action.open_items):
            draft.units.append(Unit(OPEN, ("todo", n), (action.item, 1, n * 100 + k), todo, link, 6,
                                    joiner="; ", part="todo"))
    if not draft.units and items:
        roles = ", ".join(dict.fromkeys((it.role or it.kind) for it in items))
        draft.fallback = f"{len(items)} message{'s' if len(items) != 1 else ''} ({roles}) without text to summarize"
        draft.fallback_link = items[0].link
    return draft


def _mark_echoes(units: list[Unit]) -> None:
    """Sentences that only repeat facts said before ("Got it: the deadline is October 3") weigh little.

    Agents restate what they were told; keeping both costs a line and says nothing new.
    """
    seen: set[str] = set()
    for unit in sorted(units, key=lambda u: u.pos):
        facts = {p.lower() for p, kind in key_phrases(unit.text) if kind not in _WEAK_KINDS}
        if facts and facts <= seen:
            unit.score = max(1, unit.score - ECHO_PENALTY)
        seen |= facts


def _sentence_unit(index: int, order: int, role: str, text: str, target: str | None, first_ask: bool) -> Unit | None:
    facts = facts_of(text)
    value = score(text)
    section = FOUND
    if role == "user":
        if value == 0 and not facts.question and (CHITCHAT_RE.match(text) or len(text.split()) < 4):
            return None  # "Makes sense, continue."
        section = ASKED
        # The first request frames the leaf, when it asks for something ("How are you getting on?" does not);
        # a user's sentence that names nothing ("Where were we?") yields to one that does.
        value += (USER_BONUS + (FIRST_ASK_BONUS if first_ask else 0)) if value > 1 else 1
    if facts.open:
        section = OPEN
    if value <= 0:
        return None
    return Unit(section, (section, index), (index, 2, order), text, target, value)
