"""Recall: grep, describe, expand and ask, for agents and people alike.

* ``grep``: full text through the index (words, phrases, prefixes), or a regular
  expression by a bounded, newest-first scan of the files (a time limit, so a
  pathological pattern cannot hang). Each hit names the top-level summary that
  covers it, as in the LCM paper's results grouped by covering summary.
* ``describe``: what an id is, where it sits, and what expanding it would cost.
* ``expand``: a summary down through its sources to the verbatim messages,
  bounded by tokens and depth, saying what was left out.
* ``ask``: answer a question from expanded history within a token cap: an LLM
  sub-call that must cite ids when a provider is configured, ranked verbatim
  excerpts when not.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import regex

from .errors import NotFoundError, SummarizerError, UsageError
from .tokens import count_tokens, truncate_to_tokens

if TYPE_CHECKING:
    from .catalog import MessageRow
    from .dag import SummaryRow
    from .vault import Vault

SCOPES = ("messages", "summaries", "both")
_STOP = frozenset(
    "a an and are as at be by did do does for from had has have how i in is it its of on or that the this to "
    "was were what when where which who why will with you we our they them there then than"
    .split()
)
_ID_RE = re.compile(r"\b(m-[A-Za-z0-9-]+|sum_[0-9a-f]{16})\b")


@dataclass
class Hit:
    id: str
    kind: str
    conversation: str
    snippet: str
    at: float
    score: float
    covered_by: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "kind": self.kind, "conversation": self.conversation, "snippet": self.snippet}
        if self.covered_by:
            d["covered_by"] = self.covered_by
        d["score"] = round(self.score, 4)
        return d


def _scope_kind(scope: str) -> str | None:
    if scope not in SCOPES:
        raise UsageError(f"unknown scope {scope!r}; use messages, summaries or both")
    return {"messages": "message", "summaries": "summary", "both": None}[scope]


def grep(
    vault: "Vault",
    pattern: str,
    *,
    conversation: str | None = None,
    regex_mode: bool = False,
    scope: str = "both",
    since: float | None = None,
    before: float | None = None,
    limit: int = 20,
) -> tuple[list[Hit], bool]:
    """Hits for ``pattern``; the flag is True when a regex scan stopped at its time limit."""
    kind = _scope_kind(scope)
    convs = [vault.require_conversation(conversation)] if conversation else None
    if limit <= 0:
        raise UsageError("--limit must be at least 1")
    if regex_mode:
        hits, partial = _regex_scan(vault, pattern, kind, convs, since, before, limit)
    else:
        index = vault.indexer.ready()
        for conv in convs or vault.conversations():
            vault.sync(conv)  # files changed since we last looked (appends, edits by people)
            vault.indexer.follow(conv)  # and into the index
        found = index.search(pattern, kind=kind, conversations=convs, since=since, before=before, limit=limit)
        hits = [Hit(h.id, h.kind, h.conversation, h.snippet, h.at, h.score) for h in found]
        partial = False
    parents: dict[str, str | None] = {}
    for h in hits:
        h.covered_by = vault.dag.ancestors_top(h.id, parents)
    return hits, partial


def _regex_scan(
    vault: "Vault", pattern: str, kind: str | None, convs: list[str] | None, since: float | None, before: float | None, limit: int
) -> tuple[list[Hit], bool]:
    try:
        rx = regex.compile(pattern, regex.IGNORECASE | regex.MULTILINE)
    except regex.error as exc:
        raise UsageError(f"invalid regular expression {pattern!r}: {exc}") from None
    budget = vault.settings.regex_timeout_seconds
    deadline = time.monotonic() + budget
    hits: list[Hit] = []

    def check(text: str) -> regex.Match[str] | None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        return rx.search(text, timeout=left)

    from .indexing import _ts

    try:
        for conv in convs or vault.conversations():
            vault.sync(conv)
        if kind in (None, "summary"):
            rows = vault.catalog.execute(
                "SELECT id, conv, body, latest_at FROM summaries WHERE parent IS NOT '!invalid' ORDER BY latest_at DESC"
            )
            for sid, conv, body, latest in rows:
                if convs and conv not in convs:
                    continue
                at = _ts(latest)
                if (since and at < since) or (before and at >= before):
                    continue
                m = check(body)
                if m:
                    hits.append(Hit(sid, "summary", conv, _snip(body, m.start(), m.end()), at, 1.0))
        if kind in (None, "message"):
            for conv in convs or vault.conversations():
                paths = [r[0] for r in vault.catalog.execute("SELECT path FROM logs WHERE conv=? ORDER BY path DESC", (conv,))]
                for rel in paths:  # newest day first
                    rows = vault.catalog.execute("SELECT * FROM messages WHERE path=? ORDER BY seq DESC", (rel,))
                    from .catalog import MessageRow

                    mrows = [MessageRow(*r) for r in rows]
                    mrows = [r for r in mrows if not ((since and _ts(r.at) < since) or (before and _ts(r.at) >= before))]
                    for row, msg in sorted(vault.log.read_rows(mrows), key=lambda p: -p[0].seq) if mrows else []:
                        text = msg.searchable_text()
                        m = check(text)
                        if m:
                            hits.append(Hit(row.id, "message", conv, _snip(text, m.start(), m.end()), _ts(row.at), 1.0))
                            if len(hits) >= limit * 4:
                                break
    except TimeoutError:
        hits.sort(key=lambda h: -h.at)
        return hits[:limit], True
    hits.sort(key=lambda h: -h.at)
    return hits[:limit], False


def _snip(text: str, start: int, end: int, width: int = 200) -> str:
    left = max(0, start - (width - (end - start)) // 2)
    s = text[left : left + max(width, end - start)]
    s = " ".join(s.split())
    return ("…" if left else "") + s + ("…" if left + width < len(text) else "")


# -- describe -------------------------------------------------------------------


def expand_cost(vault: "Vault", row: "SummaryRow") -> int:
    """Tokens of every raw message under a summary (what a full expand would return)."""
    if row.first_seq is None:
        return 0
    [(total,)] = vault.catalog.execute(
        "SELECT COALESCE(SUM(tokens), 0) FROM messages WHERE conv=? AND seq BETWEEN ? AND ?",
        (row.conv, row.first_seq, row.last_seq),
    )
    return int(total)


def describe(vault: "Vault", item_id: str) -> dict[str, Any]:
    if item_id.startswith("sum_"):
        row = vault._summary(item_id)
        parent = row.parent if row.parent != "!invalid" else None
        sources = row.sources
        if row.kind == "leaf":
            direct = vault.catalog.rows_by_ids(sources)
            direct_cost = sum(r.tokens for r in direct.values())
        else:
            direct_cost = sum(s.token_count for s in vault.dag.children(row.id))
        return {
            "id": row.id,
            "kind": "summary",
            "summary_kind": row.kind,
            "depth": row.depth,
            "conversation": row.conv,
            "path": row.path,
            "earliest_at": row.earliest_at,
            "latest_at": row.latest_at,
            "descendant_count": row.descendant_count,
            "token_count": row.token_count,
            "sources": sources,
            "parent": parent,
            "top": vault.dag.ancestors_top(row.id),
            "summarizer": row.summarizer,
            "level": row.level,
            "human_owned": row.human_owned,
            "stale": bool(row.stale),
            "content": row.body,
            "expand_cost_tokens": expand_cost(vault, row),
            "sources_cost_tokens": direct_cost,
        }
    if item_id.startswith("file_"):
        return _describe_file(vault, item_id)
    mrow, msg = vault.log.get(item_id)
    return {
        "id": mrow.id,
        "kind": "message",
        "role": mrow.role,
        "conversation": mrow.conv,
        "seq": mrow.seq,
        "at": mrow.at,
        "path": mrow.path,
        "link": f"[[{mrow.path[:-3]}#^{mrow.id}]]",
        "token_count": mrow.tokens,
        "sources": [],
        "covered_by": mrow.covered,
        "top": vault.dag.ancestors_top(mrow.id),
        "tool_calls": msg.tool_call_ids,
        "tool_results": msg.tool_result_ids,
        "content": msg.searchable_text(),
        "expand_cost_tokens": mrow.tokens,
    }


def _describe_file(vault: "Vault", file_id: str) -> dict[str, Any]:
    for conv in vault.conversations():
        folder = vault.layout.files_dir(conv)
        for p in sorted(folder.glob(f"{file_id}*")) if folder.is_dir() else []:
            data = p.read_bytes()
            info: dict[str, Any] = {
                "id": p.stem, "kind": "file", "conversation": conv, "path": vault.layout.relative(p),
                "bytes": len(data), "extension": p.suffix.lstrip("."), "sources": [],
            }
            if p.suffix in (".txt", ".json", ".md"):
                text = data.decode("utf-8", errors="replace")
                lines = text.split("\n")
                info["token_count"] = count_tokens(text)
                info["lines"] = len(lines)
                head = [ln[:160] for ln in lines if ln.strip()][:8]
                info["exploration_summary"] = (
                    f"{len(lines):,} lines, {info['token_count']:,} tokens. First lines:\n" + "\n".join(head)
                )
            else:
                info["token_count"] = 0
                info["exploration_summary"] = f"binary payload ({p.suffix.lstrip('.')}, {len(data):,} bytes)"
            return info
    raise NotFoundError(f"no payload file {file_id!r} in any conversation's files/ folder")


# -- expand ---------------------------------------------------------------------


def expand(vault: "Vault", item_id: str, *, max_tokens: int | None = None, depth: int | None = None) -> dict[str, Any]:
    cap = max_tokens or vault.settings.max_expand_tokens
    if cap <= 0:
        raise UsageError("--max-tokens must be at least 1")
    if depth is not None and depth < 1:
        raise UsageError("--depth must be at least 1")
    if not item_id.startswith("sum_"):
        mrow, msg = vault.log.get(item_id)
        record = msg.to_export()
        return {"id": item_id, "messages": [record], "summaries": [], "truncated": False, "omitted": [], "tokens": mrow.tokens}
    root = vault._summary(item_id)
    frontier: list[SummaryRow] = [root]
    message_ids: list[str] = []
    remaining_summaries: list[SummaryRow] = []
    level = 0
    while frontier:
        if depth is not None and level >= depth:
            remaining_summaries = frontier
            break
        nxt: list[SummaryRow] = []
        for s in frontier:
            if s.kind == "leaf":
                message_ids.extend(s.sources)
            else:
                nxt.extend(vault.dag.children(s.id))
        frontier = nxt
        level += 1
    used = 0
    summaries_out: list[dict[str, Any]] = []
    omitted: list[str] = []
    truncated = False
    for s in remaining_summaries:
        cost = s.token_count + 20
        text = s.body
        if used + cost > cap:
            truncated = True
            omitted.append(s.id)
            room = cap - used - 40
            if room < 64:
                continue
            # Better the start of a summary than nothing: cut it, and say so.
            text = truncate_to_tokens(s.body, room) + f" …[cut: expand {s.id} for the rest]"
            cost = count_tokens(text) + 20
        used += cost
        summaries_out.append({"id": s.id, "kind": s.kind, "depth": s.depth, "descendant_count": s.descendant_count,
                              "earliest_at": s.earliest_at, "latest_at": s.latest_at, "text": text})
    rows = vault.catalog.rows_by_ids(message_ids)
    ordered = [rows[i] for i in message_ids if i in rows]
    messages_out: list[dict[str, Any]] = []
    leaf_of = {}
    if ordered:
        for mid, leaf in vault.catalog.execute(
            f"SELECT msg_id, summary_id FROM coverage WHERE msg_id IN ({','.join('?' * min(len(ordered), 900))})",
            tuple(r.id for r in ordered[:900]),
        ):
            leaf_of[mid] = leaf
    fitting: list[MessageRow] = []
    for r in ordered:
        if used + r.tokens <= cap and not truncated:
            fitting.append(r)
            used += r.tokens
        else:
            truncated = True
            leaf = leaf_of.get(r.id) or vault.catalog.get(r.id).covered  # type: ignore[union-attr]
            if leaf and leaf not in omitted:
                omitted.append(leaf)
    messages_out.extend(msg.to_export() for _, msg in vault.log.read_rows(fitting))
    left = len(ordered) - len(fitting)
    return {
        "id": item_id,
        "messages": messages_out,
        "summaries": summaries_out,
        "truncated": truncated,
        "omitted": omitted,
        "omitted_messages": left,
        "tokens": used,
    }


# -- ask ------------------------------------------------------------------------


def keywords(question: str) -> list[str]:
    words = re.findall(r"[\w./:-]+", question)
    out: list[str] = []
    for w in words:
        w2 = w.strip(".:-/").lower()
        if len(w2) >= 3 and w2 not in _STOP and w2 not in out:
            out.append(w2)
    return out[:12]


def ask(vault: "Vault", question: str, *, conversation: str | None = None, max_tokens: int | None = None) -> dict[str, Any]:
    cap = max_tokens or vault.settings.max_expand_tokens
    if not question.strip():
        raise UsageError("the question is empty")
    convs = [vault.require_conversation(conversation)] if conversation else None
    index = vault.indexer.ready()
    for conv_name in convs or vault.conversations():
        vault.sync(conv_name)
        vault.indexer.follow(conv_name)
    scores: dict[str, float] = {}
    kinds: dict[str, tuple[str, str]] = {}
    terms = keywords(question)
    for term in terms:
        for h in index.search(term, conversations=convs, limit=40):
            # Several matching terms beat one strong one; raw messages beat summaries (they are exact).
            scores[h.id] = scores.get(h.id, 0.0) + 1.0 + min(h.score, 10.0) / 10.0 + (0.25 if h.kind == "message" else 0.0)
            kinds[h.id] = (h.kind, h.conversation)
    ranked = sorted(scores, key=lambda i: -scores[i])
    excerpts: list[dict[str, Any]] = []
    used = 0
    for item_id in ranked:
        kind, conv = kinds[item_id]
        if kind == "message":
            row, msg = vault.log.get(item_id)
            text = f"[{item_id}] {row.role} at {row.at}: {msg.searchable_text()}"
        else:
            s = vault.dag.get(item_id)
            if s is None:
                continue
            text = f"[{item_id}] summary ({s.earliest_at} .. {s.latest_at}): {s.body}"
        cost = count_tokens(text)
        room = cap - used
        if room <= 20:
            break
        if cost > room:
            text = truncate_to_tokens(text, room - 1) + "…"
            cost = count_tokens(text)
        excerpts.append({"id": item_id, "kind": kind, "conversation": conv, "score": round(scores[item_id], 3), "text": text})
        used += cost
    mode = "extractive"
    answer = "\n\n".join(e["text"] for e in excerpts) if excerpts else "No stored message matches the question."
    citations = [e["id"] for e in excerpts]
    if vault.settings.summarizer not in ("digest", "extractive") and excerpts:
        from .summarizers import SourceItem, ask_prompt

        summarizer = vault.compactor.summarizer
        items = tuple(SourceItem(id=e["id"], kind=e["kind"], text=e["text"]) for e in excerpts)
        prompt = ask_prompt(question, items, conversation=conversation or "", max_tokens=cap,
                            override_dir=vault.layout.templates_dir)
        try:
            reply = summarizer.complete("You answer questions from an agent's stored history, citing ids.", prompt, min(cap, 4096))
            cited = [i for i in dict.fromkeys(_ID_RE.findall(reply)) if i in set(citations)]
            if not cited:
                raise SummarizerError("the answer cited no ids from the excerpts")
            answer, citations, mode = reply.strip(), cited, "llm"
        except SummarizerError as exc:
            mode = f"extractive (llm failed: {exc})"
    return {"question": question, "answer": answer, "mode": mode, "citations": citations, "excerpts": excerpts, "tokens": used}
