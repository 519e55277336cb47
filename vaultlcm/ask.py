"""``ask`` (the ``lcm_expand_query`` tool): answer a question from expanded history within a token cap.

Offline (the extractive summarizer), the answer is the ranked verbatim excerpts
themselves, each with its id, role and time, best first and newest first among
equally relevant ones (a newer statement supersedes an older one). Excerpts are
raw messages (exact, and what every summary is made of); summaries only when no
message matches. When the
question asks for something *of* a thing named elsewhere ("which commit fixed
the bug from LEDG-482?"), one hop follows: identifiers found in the first
excerpts (tickets, commit hashes, paths, function names) that the question does
not name are searched again, together with the question's words, and what they
find joins the ranking.

With a provider configured, the excerpts go to an LLM sub-call that must cite
the ids it used; when it fails or cites nothing, the excerpts are the answer.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .errors import SummarizerError, UsageError
from .recall import Ranked, iso_time, keywords, rank
from .tokens import count_tokens, truncate_to_tokens

if TYPE_CHECKING:
    from .history import History

_ID_RE = re.compile(r"\b(m-[A-Za-z0-9-]+|sum_[0-9a-f]{16})\b")

#: Words that ask for a thing that another thing names: follow identifiers one hop.
HOP_WORDS = frozenset(
    "commit commits hash sha fix fixed fixes fixing patch file files path paths function functions method "
    "methods ticket tickets issue issues pr branch version release bug bugs cause caused module test tests "
    "config setting endpoint service host port".split()
)
# What counts as an identifier worth a second search.
_IDENT = re.compile(
    r"\b[A-Z][A-Z0-9]+-\d+\b"  # tickets: LEDG-482
    r"|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b"  # commit hashes
    r"|[\w.-]*\w/[\w./-]*\w"  # paths: src/app.py
    r"|\b[A-Za-z]\w*_\w+\b"  # snake_case names
    r"|\b[a-z]+[A-Z]\w*\b"  # camelCase names
    r"|\b\w+(?:-\w+)+\b"  # dashed names: routing-api
)
HOP_FROM = 3  # excerpts whose identifiers are followed
HOP_IDENTIFIERS = 4  # identifiers followed at most


def _identifiers(text: str, skip: set[str]) -> list[str]:
    found = []
    for m in _IDENT.finditer(text):
        ident = m.group().strip(".-/")
        if len(ident) >= 4 and ident.lower() not in skip and ident not in found and not ident.startswith(("m-", "sum_")):
            found.append(ident)
    return found


def _hop(history: "History", question: str, terms: list[str], first: list[Ranked], convs: list[str] | None,
         texts: dict[str, str]) -> list[Ranked]:
    """Rank again with the identifiers the first excerpts name and the question does not."""
    words = {w.lower() for w in re.findall(r"[\w-]+", question)}
    if not words & HOP_WORDS:
        return []
    skip = {t.lower() for t in terms} | words
    idents: list[str] = []
    for r in first[:HOP_FROM]:
        for ident in _identifiers(texts.get(r.id, ""), skip):
            if ident not in idents:
                idents.append(ident)
    if not idents:
        return []
    asked = [w for w in terms if w in HOP_WORDS]  # what the question wants of the thing: a commit, a file ...
    found: list[Ranked] = []
    for ident in idents[:HOP_IDENTIFIERS]:
        found += rank(history, [ident, *asked], conversations=convs, kind="message")
    return found


def _excerpt_text(history: "History", r: Ranked) -> str | None:
    if r.kind == "message":
        row, msg = history.log.get(r.id)
        return f"[{r.id}] {row.role} at {iso_time(r.at)}: {msg.searchable_text()}"
    s = history.dag.get(r.id)
    if s is None:
        return None
    return f"[{r.id}] summary ({s.earliest_at} .. {s.latest_at}): {s.body}"


def ask(history: "History", question: str, *, conversation: str | None = None, max_tokens: int | None = None) -> dict[str, Any]:
    """Answer ``question`` from the stored history (see the module docstring)."""
    cap = max_tokens or history.settings.max_expand_tokens
    if cap <= 0:
        raise UsageError("--max-tokens must be at least 1")
    if not question.strip():
        raise UsageError("the question is empty")
    convs = [history.require_conversation(conversation)] if conversation else None
    history.indexer.ready()
    for conv_name in convs or history.conversations():
        history.sync(conv_name)
        history.indexer.follow(conv_name)
    terms = keywords(question)
    # Raw messages are the exact record, and every summary is made of them: excerpts are
    # messages, and summaries only when no message matches.
    ranked = rank(history, terms, conversations=convs, kind="message") if terms else []
    if not ranked and terms:
        ranked = rank(history, terms, conversations=convs, kind="summary")
    texts: dict[str, str] = {}
    for r in ranked[:HOP_FROM]:
        text = _excerpt_text(history, r)
        if text is not None:
            texts[r.id] = text
    hopped = _hop(history, question, terms, ranked, convs, texts)
    if hopped:
        # A hop result ranks after the first excerpts that led to it, ahead of the rest.
        merged = list(ranked[:HOP_FROM])
        seen = {r.id for r in merged}
        for r in hopped + ranked[HOP_FROM:]:
            if r.id not in seen:
                seen.add(r.id)
                merged.append(r)
        ranked = merged
    excerpts: list[dict[str, Any]] = []
    used = 0
    for r in ranked:
        room = cap - used
        if room <= 20:
            break
        text = texts.get(r.id) or _excerpt_text(history, r)
        if text is None:
            continue
        cost = count_tokens(text)
        if cost > room:
            text = truncate_to_tokens(text, room - 1) + "…"
            cost = count_tokens(text)
        excerpts.append({"id": r.id, "kind": r.kind, "conversation": r.conversation, "at": iso_time(r.at),
                         "role": r.role if r.kind == "message" else None, "score": round(r.score, 3), "text": text})
        used += cost
    mode = "extractive"
    answer = "\n\n".join(e["text"] for e in excerpts) if excerpts else "No stored message matches the question."
    citations = [e["id"] for e in excerpts]
    if history.settings.summarizer not in ("digest", "extractive") and excerpts:
        from .summarizers import SourceItem, ask_prompt

        summarizer = history.summarizer()
        items = tuple(SourceItem(id=e["id"], kind=e["kind"], text=e["text"]) for e in excerpts)
        prompt = ask_prompt(question, items, conversation=conversation or "", max_tokens=cap,
                            override_dir=history.layout.templates_dir)
        try:
            reply = summarizer.complete("You answer questions from an agent's stored history, citing ids.", prompt, min(cap, 4096))
            cited = [i for i in dict.fromkeys(_ID_RE.findall(reply)) if i in set(citations)]
            if not cited:
                raise SummarizerError("the answer cited no ids from the excerpts")
            answer, citations, mode = reply.strip(), cited, "llm"
        except SummarizerError as exc:
            mode = f"extractive (llm failed: {exc})"
    return {"question": question, "answer": answer, "mode": mode, "citations": citations, "excerpts": excerpts,
            "tokens": used, "hopped": bool(hopped)}
