"""``expand``: recover exact history around an id, always within a token cap.

Modes, chosen by the id and the arguments:

* **a message, the turn** (default): the turn it belongs to, from the user
  message that starts it (the request) through the calls, results and replies up
  to the next user message. The hit itself, the message right after it (usually
  the reply or the result that answers it), the request and the turn's last
  message come first when the cap is tight, then the others by distance.
* **a message, ``around=N``**: the hit and ``N`` messages on each side, nearest
  first (after before before, at equal distance).
* **a summary with a ``query``**: its descendant messages ranked by the query;
  each match comes with the message right after it, matches first, then the
  rest in conversation order. With ``depth``, the summaries of that level that
  hold matches come first.
* **a summary**: down through its sources to the verbatim messages (or ``depth``
  levels down), in conversation order.

The cap always holds: each message counts its tokens plus :data:`MESSAGE_OVERHEAD`
for its header line; what does not fit is left out and named (``omitted``: ids
to expand next); a hit larger than the cap is cut and marked. The
result keeps the CLI's shape ``{"messages", "summaries", "truncated"}``; every
message carries its vault id (``m-…``) as ``id``, never a record's own id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import UsageError
from .messages import epoch_seconds
from .recall import id_kind, keywords, rank
from .tokens import count_tokens, truncate_to_tokens

if TYPE_CHECKING:
    from .catalog import MessageRow
    from .dag import SummaryRow
    from .messages import Message
    from .history import History

#: How far a turn is followed each way before it is cut (a turn of hundreds of tool calls).
MAX_TURN_MESSAGES = 400
SUMMARY_OVERHEAD = 20  # tokens of the wrapper around a summary in the output
#: Tokens of the line that introduces each message (id, role, time): part of what the cap counts,
#: so the text a model reads (see vaultlcm.tools) stays within it.
MESSAGE_OVERHEAD = 32
CUT_ROOM = 96  # fewest tokens worth showing of a message cut to fit (with its header)


def expand(
    history: "History",
    item_id: str,
    *,
    max_tokens: int | None = None,
    depth: int | None = None,
    around: int | None = None,
    query: str | None = None,
) -> dict[str, Any]:
    """Expand ``item_id`` (see the module docstring for the modes)."""
    cap = max_tokens or history.settings.max_expand_tokens
    if cap <= 0:
        raise UsageError("--max-tokens must be at least 1")
    if depth is not None and depth < 1:
        raise UsageError("--depth must be at least 1")
    if around is not None and around < 0:
        raise UsageError("--around must be 0 or more")
    kind = id_kind(item_id)
    if kind == "file":
        raise UsageError(f"{item_id} is a payload file, not a message or summary; `vaultlcm describe {item_id}` shows it")
    if kind == "message":
        if query or depth is not None:
            raise UsageError("--query and --depth apply to a summary; a message takes --around N (or its turn)")
        return _expand_message(history, item_id, cap, around)
    if around is not None:
        raise UsageError("--around applies to a message; a summary takes --query and --depth")
    return _expand_summary(history, item_id, cap, depth, (query or "").strip())


# -- the output ------------------------------------------------------------------------


def message_record(row: "MessageRow", msg: "Message") -> dict[str, Any]:
    """The message as exported, with the vault id as ``id`` (a record's own id becomes ``record_id``)."""
    rec = msg.to_export()
    own = rec.pop("id", None)
    out: dict[str, Any] = {"id": row.id}
    out.update(rec)
    if own is not None and own != row.id:
        out["record_id"] = own
    out.setdefault("timestamp", row.at)
    return out


class _Filler:
    """Puts items into the output in priority order until the cap is reached."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.used = 0
        self.kept: list[str] = []
        self.left: list[str] = []
        self.cut: dict[str, int] = {}  # id -> tokens kept of a message cut to fit

    def offer(self, item_id: str, tokens: int, *, cuttable: bool = False) -> bool:
        if self.used + tokens <= self.cap:
            self.used += tokens
            self.kept.append(item_id)
            return True
        room = self.cap - self.used
        if cuttable and room >= CUT_ROOM:
            self.cut[item_id] = room
            self.used = self.cap
            self.kept.append(item_id)
            return True
        self.left.append(item_id)
        return False


def _cut_record(rec: dict[str, Any], msg: "Message", tokens: int) -> dict[str, Any]:
    note = f" …[cut to fit the cap; `vaultlcm show {rec['id']}` prints all of it]"
    text = truncate_to_tokens(msg.searchable_text(), max(1, tokens - count_tokens(note) - 8)) + note
    out = {k: v for k, v in rec.items() if k not in ("content",)}
    out["content"] = text
    out["cut"] = True
    return out


def _messages_out(history: "History", rows: list["MessageRow"], filler: _Filler) -> list[dict[str, Any]]:
    kept = set(filler.kept)
    out = []
    for row, msg in history.log.read_rows([r for r in rows if r.id in kept]):
        rec = message_record(row, msg)
        if row.id in filler.cut:
            rec = _cut_record(rec, msg, filler.cut[row.id] - MESSAGE_OVERHEAD)
        out.append(rec)
    return out


# -- a message: its turn, or its neighbours -------------------------------------------


def _rows_between(history: "History", conv: str, lo: int, hi: int) -> list["MessageRow"]:
    """Messages of ``conv`` with ``lo <= seq <= hi``, in order."""
    ids = history.catalog.ids_between(conv, lo, hi)
    by_id = history.catalog.rows_by_ids(ids)
    return [by_id[i] for i in ids if i in by_id]


def _starts_turn(history: "History", row: "MessageRow", msg: "Message | None" = None) -> bool:
    """A user message with something besides tool results (those are user messages in Anthropic's format)."""
    if row.role != "user":
        return False
    if msg is None:
        msg = history.log.read_row(row)
    return any(b.get("type") != "tool_result" for b in msg.content) or not msg.content


def turn_of(history: "History", hit: "MessageRow") -> list["MessageRow"]:
    """The messages of the turn ``hit`` belongs to (at most :data:`MAX_TURN_MESSAGES` each way)."""
    before = _rows_between(history, hit.conv, hit.seq - MAX_TURN_MESSAGES, hit.seq)
    start = 0
    for i in range(len(before) - 1, -1, -1):
        if _starts_turn(history, before[i]):
            start = i
            break
    after = _rows_between(history, hit.conv, hit.seq + 1, hit.seq + MAX_TURN_MESSAGES)
    end = len(after)
    for i, row in enumerate(after):
        if _starts_turn(history, row):
            end = i
            break
    return before[start:] + after[:end]


def _by_distance(rows: list["MessageRow"], hit: "MessageRow") -> list["MessageRow"]:
    """Nearest to the hit first; at equal distance the later one (replies follow requests)."""
    return sorted(rows, key=lambda r: (abs(r.seq - hit.seq), r.seq < hit.seq))


def _expand_message(history: "History", item_id: str, cap: int, around: int | None) -> dict[str, Any]:
    hit, _ = history.log.get(item_id)
    if around is not None:
        rows = _rows_between(history, hit.conv, hit.seq - around, hit.seq + around)
        priority = _by_distance(rows, hit)
        mode = "around"
    else:
        rows = turn_of(history, hit)
        near = _by_distance(rows, hit)
        # The reply right after, the request that opened the turn and its last message first.
        firsts = [r for r in (near[:2] + [rows[0], rows[-1]]) if r is not None]
        priority = list({r.id: r for r in firsts + near}.values())
        mode = "turn"
    filler = _Filler(cap)
    for r in priority:
        filler.offer(r.id, r.tokens + MESSAGE_OVERHEAD, cuttable=r.id == hit.id)
    messages = _messages_out(history, rows, filler)
    return {
        "id": item_id,
        "mode": mode,
        "messages": messages,
        "summaries": [],
        "truncated": bool(filler.left or filler.cut),
        "omitted": [r.id for r in rows if r.id in set(filler.left)],
        "omitted_messages": len(filler.left),
        "tokens": filler.used,
        "first": rows[0].id,
        "last": rows[-1].id,
    }


# -- a summary ----------------------------------------------------------------------------


def _descend(history: "History", root: "SummaryRow", depth: int | None) -> tuple[list[str], list["SummaryRow"]]:
    """Message ids under ``root`` in order, and the summaries where ``depth`` stopped the descent."""
    frontier: list[SummaryRow] = [root]
    message_ids: list[str] = []
    level = 0
    while frontier:
        if depth is not None and level >= depth:
            return message_ids, frontier
        nxt: list[SummaryRow] = []
        for s in frontier:
            if s.kind == "leaf":
                message_ids.extend(s.sources)
            else:
                nxt.extend(history.dag.children(s.id))
        frontier = nxt
        level += 1
    return message_ids, []


def _summary_out(s: "SummaryRow", text: str) -> dict[str, Any]:
    return {"id": s.id, "kind": s.kind, "depth": s.depth, "descendant_count": s.descendant_count,
            "earliest_at": s.earliest_at, "latest_at": s.latest_at, "text": text}


def _matches(history: "History", root: "SummaryRow", query: str, wanted: set[str]) -> list[str]:
    """Messages of ``wanted`` (under ``root``) ranked by ``query``, best first."""
    history.sync(root.conv)
    history.indexer.ready()
    history.indexer.follow(root.conv)
    terms = keywords(query) or [query]
    ranked = rank(history, terms, conversations=[root.conv], kind="message",
                  since=epoch_seconds(root.earliest_at), before=epoch_seconds(root.latest_at) + 1.0, per_term=200)
    return [r.id for r in ranked if r.id in wanted]


def _expand_summary(history: "History", item_id: str, cap: int, depth: int | None, query: str) -> dict[str, Any]:
    root = history.summary(item_id)
    message_ids, stopped = _descend(history, root, depth)
    matched: list[str] = []
    if query:
        under = set(message_ids)
        if stopped:  # the messages under the summaries where the descent stopped
            for s in stopped:
                under.update(_descend(history, s, None)[0])
        matched = _matches(history, root, query, under)
    filler = _Filler(cap)
    summaries_out: list[dict[str, Any]] = []
    if stopped:
        if matched:  # the summaries holding the best matches first
            holder: dict[str, str] = {}
            for s in stopped:
                for mid in _descend(history, s, None)[0]:
                    holder.setdefault(mid, s.id)
            order = list(dict.fromkeys(holder[m] for m in matched if m in holder))
            stopped = sorted(stopped, key=lambda s: order.index(s.id) if s.id in order else len(order))
        for s in stopped:
            text = s.body
            if not filler.offer(s.id, s.token_count + SUMMARY_OVERHEAD):
                # Better the start of a summary than nothing: cut it, and say so (the notice counts too).
                notice = f" …[cut: expand {s.id} for the rest]"
                room = filler.cap - filler.used - 2 * SUMMARY_OVERHEAD - count_tokens(notice)
                if room < CUT_ROOM:
                    continue
                text = truncate_to_tokens(s.body, room) + notice
                cost = count_tokens(text) + SUMMARY_OVERHEAD
                if filler.used + cost > filler.cap:  # tokens at the seam may merge differently
                    continue
                filler.used += cost
            summaries_out.append(_summary_out(s, text))
    rows_by_id = history.catalog.rows_by_ids(message_ids)
    rows = [rows_by_id[i] for i in message_ids if i in rows_by_id]
    position = {r.id: n for n, r in enumerate(rows)}
    priority: list[str] = []
    for mid in matched:
        if mid in position:
            n = position[mid]
            priority += [mid] + ([rows[n + 1].id] if n + 1 < len(rows) else [])  # the match, then its reply
    priority = list(dict.fromkeys(priority + [r.id for r in rows]))
    for mid in priority:
        filler.offer(mid, rows_by_id[mid].tokens + MESSAGE_OVERHEAD)
    messages = _messages_out(history, rows, filler)
    if matched:
        rank_of = {mid: n for n, mid in enumerate(priority)}
        messages.sort(key=lambda m: rank_of[m["id"]])
    left_ids = set(filler.left)
    omitted = [s for s in filler.left if s.startswith("sum_")]
    for r in rows:  # name the leaves to expand for the messages left out
        if r.id in left_ids and r.covered and r.covered not in omitted:
            omitted.append(r.covered)
    out: dict[str, Any] = {
        "id": item_id,
        "mode": "query" if query else "summary",
        "messages": messages,
        "summaries": summaries_out,
        "truncated": bool(filler.left),
        "omitted": omitted,
        "omitted_messages": sum(1 for i in filler.left if not i.startswith("sum_")),
        "tokens": filler.used,
    }
    if query:
        out["query"] = query
        out["matched"] = [m for m in matched if m in set(filler.kept)]
    return out
