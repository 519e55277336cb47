"""Render -> parse is the identity for any message (property-based and adversarial)."""

from __future__ import annotations

import string
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vaultlcm.logcodec import (
    Damaged,
    Foreign,
    ParsedEntry,
    StoredMessage,
    TornTail,
    decode_entry,
    decode_skel_consuming,
    entry_from_render,
    iter_entries,
    render_entry,
    render_entry_meta,
    skel_message,
)
from vaultlcm.errors import CorruptVaultError
from vaultlcm.messages import Message, format_timestamp
from vaultlcm.tokens import count_tokens


class MemStore:
    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def put(self, data: bytes, ext: str) -> str:
        import hashlib

        name = f"file_{hashlib.sha256(data).hexdigest()[:16]}.{ext}"
        self.files[name] = data
        return name

    def get(self, name: str) -> bytes:
        return self.files[name]


AT = datetime(2026, 11, 29, 10, 0, 5, tzinfo=UTC)


def roundtrip(msg: Message, large_tokens: int = 25_000) -> tuple[Message, bytes, MemStore]:
    store = MemStore()
    sm = StoredMessage(message=msg, conversation="c", seq=1, at=AT, tokens=1)
    data = render_entry(sm, store, count_tokens=count_tokens, large_tokens=large_tokens)
    entries = list(iter_entries(data, path="t.md"))
    assert len(entries) == 1 and isinstance(entries[0], ParsedEntry)
    return decode_entry(entries[0], store), data, store


ADVERSARIAL = [
    "",
    " ",
    "\t\t",
    "   \n  \n",
    "```",
    "````python\ncode\n````",
    "```\nunclosed fence",
    "~~~\ntilde\n~~~",
    "---",
    "---\ntitle: fake frontmatter\n---\n",
    "# Heading\n## Another",
    "> [!note] fake callout\n> body",
    "> [!user] **user** · 2026-11-29 10:00:00",
    '<!-- lcm:{"id":"m-x","seq":1,"parts":[]} -->',
    "-->",
    "^m-deadbeef",
    "text ^block-id",
    "line\r\nwindows\r\nlines",
    "mixed\r\nand\nunix\r",
    "lone\rcarriage",
    "trailing spaces   \nand tabs\t",
    "emoji 🦜🚀 and ZWJ 👩‍👩‍👧",
    "RTL \u202eevil\u202c and Hebrew שלום, Arabic مرحبا",
    "zero\u200bwidth\u200c\u200d\ufeff",
    "nul\x00byte and \x07 bell and \x1b[31m ansi",
    "line\u2028separator\u2029para\x85nel",
    "\n",
    "\n\n\n",
    "x" * 1_000_000,
    "|table|\n|---|\n|a|",
    "[[wikilink]] and ![[embed.png]] and %%comment%%",
]


@pytest.mark.parametrize("text", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_adversarial_text_roundtrips(text: str) -> None:
    msg = Message(
        id="m-1",
        role="assistant",
        timestamp="2026-11-29T10:00:05Z",
        content=[
            {"type": "text", "text": text},
            {"type": "thinking", "thinking": text},
            {"type": "tool_call", "id": "call_1", "name": "run", "arguments": {"cmd": text}},
            {"type": "tool_result", "call_id": "call_1", "content": text, "is_error": False},
        ],
        extra={"weird": text},
    )
    back, data, _ = roundtrip(msg)
    assert back == msg
    assert b"\r" not in data  # logs hold LF line ends only
    assert data.endswith(b"\n")


@pytest.mark.parametrize("n", range(3, 12))
def test_code_fences_of_every_length(n: int) -> None:
    fence = "`" * n
    text = f"{fence}python\nprint(1)\n{fence}\n" + "`" * (n + 1)
    msg = Message(id="m-1", role="user", content=[{"type": "text", "text": text}])
    assert roundtrip(msg)[0] == msg
    msg2 = Message(id="m-2", role="tool", content=[{"type": "tool_call", "id": "x", "name": "n", "arguments": text}])
    assert roundtrip(msg2)[0] == msg2


def test_large_payload_is_externalized_and_read_back() -> None:
    big = "word " * 30_000
    msg = Message(id="m-1", role="tool", content=[{"type": "tool_result", "call_id": "c", "content": big}])
    back, data, store = roundtrip(msg)
    assert back == msg
    assert len(data) < 2000 and len(store.files) == 1


def test_image_is_stored_as_a_file() -> None:
    import base64

    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256))).decode()
    msg = Message(id="m-1", role="user", content=[{"type": "image", "media_type": "image/png", "data": png}])
    back, data, store = roundtrip(msg)
    assert back == msg
    (name, raw), = store.files.items()
    assert name.endswith(".png") and raw.startswith(b"\x89PNG")
    assert f"![[{name}]]".encode() in data


def test_noncanonical_base64_kept_exactly() -> None:
    msg = Message(id="m-1", role="user", content=[{"type": "image", "media_type": "image/png", "data": "aGk=\n"}])
    assert roundtrip(msg)[0] == msg


def test_torn_tail_is_reported_not_parsed() -> None:
    msg = Message(id="m-1", role="user", content=[{"type": "text", "text": "a\nb\nc"}])
    store = MemStore()
    sm = StoredMessage(message=msg, conversation="c", seq=1, at=AT, tokens=1)
    data = render_entry(sm, store, count_tokens=count_tokens, large_tokens=25_000)
    for cut in range(1, len(data) - 1):
        items = list(iter_entries(data + data[:cut], path="t.md"))
        assert isinstance(items[0], ParsedEntry)
        assert items[-1] == TornTail(len(data), items[-1].line) or (len(items) == 2 and isinstance(items[1], ParsedEntry))


json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
# Any code point (lone surrogates cannot be UTF-8), and any mix of line endings inside one string.
any_char = st.characters(exclude_categories=("Cs",))
mixed_endings = st.lists(
    st.tuples(st.text(alphabet=any_char, max_size=12), st.sampled_from(["\n", "\r\n", "\r", "\n\r", "\r\r\n"])),
    max_size=8,
).map(lambda pairs: "".join(a + b for a, b in pairs))
texts = st.text(alphabet=any_char, max_size=200) | mixed_endings | st.sampled_from(ADVERSARIAL[:-2])
block = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, texts),
    st.builds(lambda t, s: {"type": "thinking", "thinking": t, "signature": s}, texts, st.text(max_size=10)),
    st.builds(
        lambda i, n, a: {"type": "tool_call", "id": i, "name": n, "arguments": a},
        st.text(max_size=12), st.text(max_size=12), json_values,
    ),
    st.builds(
        lambda c, t, e: {"type": "tool_result", "call_id": c, "content": t, "is_error": e},
        st.text(max_size=12), texts, st.booleans(),
    ),
    st.builds(
        lambda c, t: {"type": "tool_result", "call_id": c, "content": [{"type": "text", "text": t}]},
        st.text(max_size=12), texts,
    ),
    st.builds(lambda u: {"type": "image", "url": u}, st.text(max_size=30)),
    st.builds(lambda k, v: {"type": "x-" + k, "value": v}, st.text(string.ascii_letters, max_size=6), json_values),
)
messages = st.builds(
    lambda role, ts, content, extra: Message(id="m-abc", role=role, timestamp=ts, content=content, extra=extra),
    st.sampled_from(["user", "assistant", "tool", "system"]) | st.text(min_size=1, max_size=20),
    st.none() | st.just("2026-11-29T10:00:05Z"),
    st.lists(block, max_size=5),
    st.dictionaries(st.text(max_size=10).filter(lambda k: k not in ("role", "timestamp", "content")), json_values, max_size=3),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages)
def test_render_parse_identity(msg: Message) -> None:
    back, data, _ = roundtrip(msg)
    assert back == msg
    assert b"\r" not in data
    text = data.decode("utf-8")
    # every callout line starts with '>' so content can never forge structure
    body = text.split("\n")[1:]
    end = body.index("")
    assert all(line.startswith(">") for line in body[:end])


@settings(max_examples=100, deadline=None)
@given(st.lists(messages, min_size=1, max_size=5))
def test_many_entries_in_one_file(msgs: list[Message]) -> None:
    store = MemStore()
    blob = b"---\nfrontmatter: x\n---\n\n# title\n\n"
    for i, m in enumerate(msgs):
        m = m.model_copy(update={"id": f"m-{i}"})
        blob += render_entry(StoredMessage(m, "c", i, AT, 1), store, count_tokens=count_tokens, large_tokens=25_000)
    entries = [e for e in iter_entries(blob, path="t.md")]
    assert [e.id for e in entries] == [f"m-{i}" for i in range(len(msgs))]  # type: ignore[union-attr]
    for i, (m, e) in enumerate(zip(msgs, entries)):
        assert decode_entry(e, store) == m.model_copy(update={"id": f"m-{i}"})  # type: ignore[arg-type]


def _entry(msg: Message, *, lane: str | None = None, store: MemStore | None = None, seq: int = 1) -> bytes:
    sm = StoredMessage(message=msg, conversation="c", seq=seq, at=AT, tokens=1, lane=lane)
    return render_entry(sm, store or MemStore(), count_tokens=count_tokens, large_tokens=25_000)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages, st.sampled_from([None, "line", "side"]), st.sampled_from(["none", "replace", "insert", "unquote"]),
       st.integers(min_value=2, max_value=12), texts)
def test_decoding_in_place_gives_what_decoding_a_copy_gives(msg: Message, lane: str | None, edit: str, at: int,
                                                            text: str) -> None:
    """A reindex decodes each entry inside its own parsed metadata (no copy): the same message, or the same
    error, as :func:`decode_entry` gives for the same bytes, whatever a person did to the entry's lines."""
    store = MemStore()
    lines = _entry(msg, lane=lane, store=store).split(b"\n")
    at = min(at, max(2, len(lines) - 4))  # a body line when there is one (else the blank line before the id)
    line = text.encode("utf-8")
    if edit == "replace":
        lines[at] = b"> " + line
    elif edit == "insert":
        lines.insert(at, b">" + line)
    elif edit == "unquote":
        lines[at] = lines[at].lstrip(b">")
    data = b"\n".join(lines)

    def decoded(decode: object) -> object:
        found = [e for e in iter_entries(data, path="t.md") if isinstance(e, ParsedEntry)]
        if not found:
            return None
        try:
            return decode(found[0], store)  # type: ignore[operator]
        except CorruptVaultError as exc:
            return ("error", str(exc), exc.line)

    copied = decoded(decode_entry)
    assert decoded(lambda e, s: skel_message(e, decode_skel_consuming(e, s))) == copied
    if edit == "none":
        assert copied == msg


@pytest.mark.parametrize("text", [
    "line one\nline two\r\nline three",  # the case from the real-transcripts issue
    "a\r\nb\nc\r\n",
    "\r\n\n\r",
    "progress 10%\rprogress 100%\r\ndone\n",
])
def test_mixed_line_endings_roundtrip_and_every_line_is_quoted(text: str) -> None:
    msg = Message(id="m-1", role="user", content=[{"type": "text", "text": text}])
    back, data, _ = roundtrip(msg)
    assert back == msg
    lines = data.decode().split("\n")
    body = lines[1 : lines.index("")]
    assert all(line.startswith(">") for line in body)


@settings(max_examples=300, deadline=None)
@given(mixed_endings | st.text(alphabet=any_char, max_size=300))
def test_any_text_with_any_line_endings_roundtrips(text: str) -> None:
    msg = Message(id="m-1", role="tool", content=[
        {"type": "text", "text": text},
        {"type": "tool_result", "call_id": "c", "content": text},
        {"type": "thinking", "thinking": text},
    ])
    back, data, _ = roundtrip(msg)
    assert back == msg
    assert b"\r" not in data and data.endswith(b"\n")


def test_ansi_codes_are_hidden_in_the_callout_and_kept_in_the_data() -> None:
    text = "\x1b[32mPASSED\x1b[0m tests/test_a.py::test_x\n\x1b]8;;http://x\x07link\x1b]8;;\x07 \x1b[1;31mFAILED\x1b[0m"
    msg = Message(id="m-1", role="tool", content=[{"type": "tool_result", "call_id": "c", "content": text}])
    back, data, _ = roundtrip(msg)
    assert back == msg
    callout = data.decode().split("\n", 1)[1]
    assert "\x1b" not in callout and "\\u001b" not in callout
    assert "PASSED tests/test_a.py::test_x" in callout and "FAILED" in callout


@pytest.mark.parametrize("args", [
    {"file_path": "src/app.py", "old_string": "def f():\n    return 1", "new_string": "def f():\n    return 2\n"},
    {"command": "str_replace", "path": "/repo/x.py", "old_str": "", "new_str": "print('```')"},
    {"path": "a.md", "oldText": "x", "newText": ""},
    {"file_path": "b.py", "edits": [{"old_string": "a", "new_string": "b"}, {"old_string": "c\nd", "new_string": "e",
                                                                            "replace_all": True}]},
])
def test_edit_calls_read_as_a_diff_and_roundtrip(args: dict) -> None:
    msg = Message(id="m-1", role="assistant", content=[{"type": "tool_call", "id": "toolu_1", "name": "Edit",
                                                       "arguments": args}])
    back, data, _ = roundtrip(msg)
    assert back == msg
    callout = data.decode().split("\n", 1)[1]
    assert "diff\n" in callout
    assert '"old_string"' not in callout and '"new_str"' not in callout  # no JSON-escaped edit in the visible text


def test_large_metadata_goes_to_a_payload_file() -> None:
    big = {"file": {"filePath": "/repo/big.py", "content": "x = 1\n" * 2000}}
    msg = Message(id="m-1", role="user", content=[{"type": "text", "text": "ok"}],
                  extra={"toolUseResult": big, "uuid": "u-1"})
    back, data, store = roundtrip(msg)
    assert back == msg
    assert len(data) < 1500 and len(store.files) == 1


def test_non_chat_line_shows_its_title_as_a_heading() -> None:
    msg = Message(id="m-1", role="claude-code:summary",
                  extra={"type": "summary", "summary": "Fix the login bug", "leafUuid": "u-9"}, hints={"line": True})
    data = _entry(msg, lane="line")
    assert "> #### Fix the login bug" in data.decode()
    entry = next(iter_entries(data, path="t.md"))
    assert isinstance(entry, ParsedEntry) and decode_entry(entry, MemStore()) == msg


def test_text_a_person_adds_is_reported_never_mistaken_for_an_entry() -> None:
    a = _entry(Message(id="m-1", role="user", content=[{"type": "text", "text": "one"}]))
    b = _entry(Message(id="m-2", role="user", content=[{"type": "text", "text": "two"}]), seq=2)
    data = a + b"my own note\n<!-- lcm: person's comment -->\n" + b + b"typed at the end, no newline"
    items = list(iter_entries(data, path="t.md"))
    assert [i.id for i in items if isinstance(i, ParsedEntry)] == ["m-1", "m-2"]
    foreign = [i for i in items if isinstance(i, Foreign)]
    assert [f.final_newline for f in foreign] == [True, True, False]
    assert not any(isinstance(i, (TornTail, Damaged)) for i in items)


def test_a_damaged_entry_does_not_hide_the_next_one() -> None:
    a = _entry(Message(id="m-1", role="user", content=[{"type": "text", "text": "one"}]))
    b = _entry(Message(id="m-2", role="user", content=[{"type": "text", "text": "two"}]), seq=2)
    broken = a.replace(b'"parts":', b'"parts":!', 1)
    items = list(iter_entries(broken + b, path="t.md"))
    assert isinstance(items[0], Damaged) and items[0].line == 1
    assert [i.id for i in items if isinstance(i, ParsedEntry)] == ["m-2"]
    lost_id = a.replace(b"\n^m-1\n", b"\n", 1)
    items = list(iter_entries(lost_id + b, path="t.md"))
    assert isinstance(items[0], Damaged) and items[0].id == "m-1"
    assert [i.id for i in items if isinstance(i, ParsedEntry)] == ["m-2"]


def test_missing_final_newline_after_an_entry_is_not_an_edit() -> None:
    msg = Message(id="m-1", role="user", content=[{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
    data = _entry(msg).rstrip(b"\n")
    (entry,) = list(iter_entries(data, path="t.md"))
    assert isinstance(entry, ParsedEntry) and not entry.edited
    assert decode_entry(entry, MemStore()) == msg


stored_messages = st.builds(
    lambda m, seq, at, prev, key, batch, lane, thread: StoredMessage(
        m, "c", seq, at, 1, prev=prev, key=key, batch=batch, lane=lane, thread=thread),
    messages,
    st.integers(1, 10**9),
    st.datetimes(timezones=st.just(UTC)),
    st.none() | st.text(max_size=20),
    st.none() | st.text(max_size=20),
    st.none() | st.tuples(st.text(max_size=8), st.integers(1, 99), st.integers(1, 99)).map(list),
    st.sampled_from([None, "side", "line"]),
    st.none() | st.dictionaries(st.sampled_from(["uuid", "parentUuid", "agentId"]), st.text(max_size=12), max_size=3),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(stored_messages, min_size=1, max_size=4), st.binary(max_size=40))
def test_a_writer_knows_what_parsing_its_entries_back_would_find(sms: list[StoredMessage], before: bytes) -> None:
    """The writer records its own entries from what it rendered (entry_from_render) instead of parsing them
    again: the catalog must get exactly what a later parse of the file gives, wherever the entries start."""
    store = MemStore()
    head = b"---\nfrontmatter: x\n---\n\n# title\n\n" + before.replace(b"\r", b"") + b"\n\n"
    blob, made = head, []
    for i, sm in enumerate(sms):
        sm = StoredMessage(sm.message.model_copy(update={"id": f"m-{i}"}), sm.conversation, sm.seq, sm.at,
                           sm.tokens, prev=sm.prev, key=sm.key, batch=sm.batch, lane=sm.lane, thread=sm.thread)
        data, meta = render_entry_meta(sm, store, count_tokens=count_tokens, large_tokens=25_000)
        assert data == render_entry(sm, store, count_tokens=count_tokens, large_tokens=25_000)
        # the writer hands over the timestamp it formatted for the id: the same bytes
        assert render_entry_meta(replace(sm, stamp=format_timestamp(sm.at)), store, count_tokens=count_tokens,
                                 large_tokens=25_000) == (data, meta)
        made.append(entry_from_render(data, meta, len(blob)))
        blob += data
    parsed = [e for e in iter_entries(blob, path="t.md") if isinstance(e, ParsedEntry)]
    assert [replace(e, line=0) for e in parsed[-len(made):]] == made


@given(st.datetimes())
def test_log_days_and_titles_render_any_date_as_strftime_does(at: datetime) -> None:
    sm = StoredMessage(Message(id="m-1", role="user", content=[]), "c", 1, at, 1)
    assert sm.day == at.strftime("%Y-%m-%d")
    data = render_entry(sm, MemStore(), count_tokens=count_tokens, large_tokens=25_000)
    assert f"{at.strftime('%Y-%m-%d %H:%M:%S')}".encode() in data


def test_the_first_and_last_naive_datetimes_render_as_utc() -> None:
    # Found by the property test above in one CI run: a naive datetime was converted through the
    # machine's local time, which fails at year 1 (and would shift the stamp off the log's day elsewhere).
    for at in (datetime.min, datetime.max, datetime(2026, 3, 29, 1, 30)):
        sm = StoredMessage(Message(id="m-1", role="user", content=[]), "c", 1, at, 1)
        data = render_entry(sm, MemStore(), count_tokens=count_tokens, large_tokens=25_000)
        assert at.strftime("%Y-%m-%d %H:%M:%S").encode() in data
        assert format_timestamp(at).startswith(at.strftime("%Y-%m-%dT%H:%M:%S"))
