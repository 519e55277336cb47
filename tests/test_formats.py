"""Format adapters: exact round trips, sensible cross-format export, detection and errors."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vaultlcm import formats
from vaultlcm.errors import InputFormatError, UsageError
from vaultlcm.formats import FORMATS, detect_format, read_document, to_records
from vaultlcm.messages import ID_RE, Message


def parse(fmt: str, records: list[tuple[int, Any]], *, source: str, keep_bad_timestamps: bool = True) -> list[Message]:
    """The messages of ``formats.parse`` (junk in a ``timestamp`` field is kept as data, as with the CLI flag)."""
    return [i.message for i in formats.parse(fmt, records, source=source, keep_bad_timestamps=keep_bad_timestamps)]


def read_records(data: bytes, *, source: str) -> list[tuple[int, Any]]:
    return read_document(data, source=source).records

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ADVERSARIAL = [
    "", " ", "```python\nprint('x')\n```", "```", "---", "---\ntitle: x\n---", "a\r\nb", "\r", "\t\tx",
    "😀👩‍👩‍👧", "مرحبا بالعالم", "\u200b", "a\u200db", "\u2028\u2029", "\ufeff", "\\", '"', "null",
    '{"a": 1}', "[]", "<script>", "# heading", "[[link]]", "\x00", "\x7f",
]
TEXT = st.one_of(
    st.text(st.characters(exclude_categories=("Cs",)), max_size=12),
    st.sampled_from(ADVERSARIAL),
)
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False, allow_infinity=False), TEXT,
)
JSON = st.recursive(
    SCALARS, lambda c: st.lists(c, max_size=3) | st.dictionaries(TEXT, c, max_size=3), max_leaves=8
)
TIMESTAMPS = st.sampled_from(
    ["2025-01-02T03:04:05Z", "2025-01-02T03:04:05.123456+02:00", "2025-06-30", "2025-01-02 03:04:05"]
)
NATIVE_TYPES = ["text", "thinking", "tool_call", "tool_result", "image", "raw"]


def extras(*reserved: str, special: tuple[str, ...] = ()) -> st.SearchStrategy[dict[str, Any]]:
    keys = st.one_of(TEXT, st.sampled_from(special or ("x",))).filter(lambda k: k not in reserved)
    return st.dictionaries(keys, JSON | TIMESTAMPS, max_size=3)


def weird_blocks() -> st.SearchStrategy[Any]:
    """Parts no adapter knows, including ones that look like native blocks."""
    typed = st.builds(
        lambda t, rest: {**rest, "type": t},
        st.sampled_from([*NATIVE_TYPES, "refusal", "input_audio", "document", "x"]) | TEXT,
        st.dictionaries(TEXT, JSON, max_size=2),
    )
    return st.one_of(typed, JSON)


# -- OpenAI ------------------------------------------------------------------------

ARG_DUMPS = [
    lambda v: json.dumps(v),
    lambda v: json.dumps(v, separators=(",", ":")),
    lambda v: json.dumps(v, ensure_ascii=False),
    lambda v: json.dumps(v, indent=2),
]


@st.composite
def openai_part(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["text", "image_data", "image_http", "weird"]))
    if kind == "text":
        return {"type": "text", "text": draw(TEXT)} | draw(st.sampled_from([{}, {"cache": {"a": 1}}]))
    if kind.startswith("image"):
        url = (f"data:{draw(st.sampled_from(['image/png', 'image/jpeg', '']))};base64,{draw(TEXT)}"
               if kind == "image_data" else f"https://example.com/{draw(TEXT)}")
        inner = {"url": url} | draw(st.sampled_from([{}, {"detail": "high"}, {"detail": None}, {"other": 1}]))
        return {"type": "image_url", "image_url": inner}
    return draw(weird_blocks())


@st.composite
def openai_call(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 9)) == 0:
        return draw(JSON | st.builds(lambda i: {"id": i, "type": "custom", "custom": {"input": "x"}}, TEXT))
    args = draw(st.one_of(
        st.builds(lambda f, v: f(v), st.sampled_from(ARG_DUMPS), JSON),
        TEXT, st.sampled_from(['{"a": NaN}', '{"a": 1e400}', '"\\ud800"', '{"a":1,"a":2}', "[1.0, 1e5]", "{"]),
    ))
    return {"id": draw(TEXT), "type": "function", "function": {"name": draw(TEXT), "arguments": args}}


@st.composite
def openai_record(draw: st.DrawFn) -> dict[str, Any]:
    rec = draw(extras("role", "content", special=(
        "tool_calls", "tool_call_id", "name", "timestamp", "id", "refusal", "audio", "function_call")))
    rec["role"] = draw(st.sampled_from(["system", "user", "assistant", "tool", "developer"]) | TEXT.filter(bool))
    content = draw(st.sampled_from(["missing", "null", "str", "list"]))
    if content == "null":
        rec["content"] = None
    elif content == "str":
        rec["content"] = draw(TEXT)
    elif content == "list":
        rec["content"] = draw(st.lists(openai_part(), max_size=4))
    if draw(st.booleans()):
        rec["tool_calls"] = draw(st.lists(openai_call(), max_size=3))
    if rec["role"] == "tool" and draw(st.booleans()):
        rec["tool_call_id"] = draw(TEXT)
    return rec


# -- Anthropic ---------------------------------------------------------------------


@st.composite
def anthropic_block(draw: st.DrawFn, depth: int = 0) -> Any:
    kinds = ["text", "thinking", "redacted", "tool_use", "image_b64", "image_url", "weird"]
    kind = draw(st.sampled_from(kinds + ([] if depth else ["tool_result"])))
    extra = draw(st.sampled_from([{}, {"cache_control": {"type": "ephemeral"}}, {"citations": [{"x": 1}]}]))
    if kind == "text":
        return {"type": "text", "text": draw(TEXT)} | extra
    if kind == "thinking":
        return {"type": "thinking", "thinking": draw(TEXT), "signature": draw(TEXT)}
    if kind == "redacted":
        return {"type": "redacted_thinking", "data": draw(TEXT)}
    if kind == "tool_use":
        block = {"type": "tool_use", "id": draw(TEXT), "name": draw(TEXT), "input": draw(JSON)} | extra
        return block | draw(st.sampled_from([{}, {"arguments": 1}]))  # a name clash must stay exact
    if kind == "image_b64":
        return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": draw(TEXT)}} | extra
    if kind == "image_url":
        return {"type": "image", "source": {"type": "url", "url": draw(TEXT)}} | draw(
            st.sampled_from([{}, {"url": "clash"}]))
    if kind == "tool_result":
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": draw(TEXT)}
        inner = draw(st.sampled_from(["missing", "str", "list"]))
        if inner == "str":
            block["content"] = draw(TEXT)
        elif inner == "list":
            block["content"] = draw(st.lists(anthropic_block(depth=1), max_size=3))
        return block | draw(st.sampled_from([{}, {"is_error": True}, {"is_error": False}, {"is_error": "x"}]))
    return draw(weird_blocks())


@st.composite
def anthropic_record(draw: st.DrawFn) -> dict[str, Any]:
    rec = draw(extras("role", "content", special=("timestamp", "id", "model", "stop_reason", "usage", "type")))
    rec["role"] = draw(st.sampled_from(["user", "assistant"]) | TEXT.filter(bool))
    content = draw(st.sampled_from(["missing", "str", "list", "list"]))
    if content == "str":
        rec["content"] = draw(TEXT)
    elif content == "list":
        rec["content"] = draw(st.lists(anthropic_block(), max_size=4))
    return rec


# -- native ------------------------------------------------------------------------


@st.composite
def native_block(draw: st.DrawFn, depth: int = 0) -> dict[str, Any]:
    kinds = ["text", "thinking", "tool_call", "image", "other"] + ([] if depth else ["tool_result"])
    kind = draw(st.sampled_from(kinds))
    extra = draw(st.dictionaries(st.sampled_from(["meta", "cache_control"]), JSON, max_size=1))
    if kind == "text":
        return {"type": "text", "text": draw(TEXT)} | extra
    if kind == "thinking":
        return {"type": "thinking", "thinking": draw(TEXT)} | draw(st.sampled_from([{}, {"signature": "sig"}]))
    if kind == "tool_call":
        return {"type": "tool_call", "id": draw(TEXT), "name": draw(TEXT), "arguments": draw(JSON)}
    if kind == "image":
        return draw(st.sampled_from([{"type": "image", "media_type": "image/png", "data": "iVBORw0KGgo="},
                                     {"type": "image", "url": "https://example.com/a.png"}]))
    if kind == "tool_result":
        content = draw(TEXT | st.lists(native_block(depth=1), max_size=2))
        return {"type": "tool_result", "call_id": draw(TEXT), "content": content} | draw(
            st.sampled_from([{}, {"is_error": True}, {"name": "grep"}]))
    return {"type": draw(st.sampled_from(["document", "custom"])), "payload": draw(JSON)}


@st.composite
def native_record(draw: st.DrawFn) -> dict[str, Any]:
    rec = draw(extras("id", "role", "timestamp", "content", special=("tool_calls", "model", "name")))
    rec["role"] = draw(st.sampled_from(["system", "user", "assistant", "tool"]) | TEXT.filter(bool))
    if draw(st.booleans()):
        rec["id"] = draw(st.from_regex(ID_RE, fullmatch=True))
    if draw(st.booleans()):
        rec["timestamp"] = draw(TIMESTAMPS)
    content = draw(st.sampled_from(["missing", "str", "list", "list"]))
    if content == "str":
        rec["content"] = draw(TEXT)
    elif content == "list":
        rec["content"] = draw(st.lists(native_block(), max_size=4))
    return rec


STRATEGIES = {"native": native_record(), "openai": openai_record(), "anthropic": anthropic_record()}


def numbered(records: list[Any]) -> list[tuple[int, Any]]:
    return list(enumerate(records, start=1))


def roundtrip(fmt: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    expected = copy.deepcopy(records)  # a shared, mutated object must not make the check pass
    out = to_records(fmt, parse(fmt, numbered(records), source="t"))
    assert out == expected
    # and the records survive being written as JSON Lines or an array and read back
    for text in ("\n".join(json.dumps(r, ensure_ascii=False) for r in records), json.dumps(records, indent=1)):
        read = read_records(text.encode("utf-8"), source="t")
        assert [v for _, v in read] == expected
    return out


@pytest.mark.parametrize("fmt", ["native", "openai", "anthropic"])
def test_roundtrip_exact(fmt: str) -> None:
    @SETTINGS
    @given(st.lists(STRATEGIES[fmt], max_size=5))
    def check(records: list[dict[str, Any]]) -> None:
        roundtrip(fmt, records)

    check()


@pytest.mark.parametrize("fmt", ["native", "openai", "anthropic"])
def test_hints_are_json(fmt: str) -> None:
    @SETTINGS
    @given(st.lists(STRATEGIES[fmt], max_size=4))
    def check(records: list[dict[str, Any]]) -> None:
        for message in parse(fmt, numbered(records), source="t"):
            assert message.hints["format"] == fmt
            json.loads(json.dumps(message.hints, allow_nan=False))
            json.dumps(message.model_dump(), allow_nan=False)

    check()


def texts_and_calls(messages: list[Any]) -> tuple[list[str], list[tuple[Any, Any]]]:
    # an empty turn may come back as content "" (what the API wants), so empty texts do not count
    texts = [b["text"] for m in messages for b in m.content if b.get("type") == "text" and b["text"]]
    calls = [(b["name"], b.get("arguments")) for m in messages for b in m.content if b.get("type") == "tool_call"]
    return texts, calls


@pytest.mark.parametrize(("src", "dst"), [("openai", "anthropic"), ("anthropic", "openai"),
                                          ("native", "openai"), ("native", "anthropic")])
def test_cross_format_keeps_text_and_calls(src: str, dst: str) -> None:
    @SETTINGS
    @given(st.lists(STRATEGIES[src], max_size=5))
    def check(records: list[dict[str, Any]]) -> None:
        first = parse(src, numbered(records), source="t")
        exported = to_records(dst, first)
        again = parse(dst, numbered(json.loads(json.dumps(exported))), source="t")
        before, after = texts_and_calls(first), texts_and_calls(again)
        assert after[0] == before[0]
        if dst == "openai":  # arguments travel as JSON text; compare what they mean
            assert [n for n, _ in after[1]] == [n for n, _ in before[1]]
            assert [json.dumps(a) for _, a in after[1]] == [json.dumps(a) for _, a in before[1]]
        else:
            assert after[1] == before[1]
        assert detect_format(numbered(exported), source="t") in (dst, "openai", "native")

    check()


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_foreign_messages_export_to_valid_native(fmt: str) -> None:
    @SETTINGS
    @given(st.lists(STRATEGIES[fmt], max_size=4))
    def check(records: list[dict[str, Any]]) -> None:
        messages = parse(fmt, numbered(records), source="t")
        native = to_records("native", messages)
        again = parse("native", numbered(json.loads(json.dumps(native))), source="t")
        assert [m.content for m in again] == [m.content for m in messages]
        assert [m.role for m in again] == [m.role for m in messages]

    check()


# -- named cases -------------------------------------------------------------------


def test_openai_mapping() -> None:
    records = [
        {"role": "user", "content": [{"type": "text", "text": "look"},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                                     {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}}]},
        {"role": "assistant", "content": None, "refusal": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"q":"Zürich"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
        {"role": "assistant", "content": ""},
        {"role": "assistant"},
    ]
    messages = parse("openai", numbered(records), source="t")
    assert messages[0].content[1] == {"type": "image", "media_type": "image/png", "data": "AAAA"}
    assert messages[0].content[2] == {"type": "image", "url": "https://x/y.png", "detail": "low"}
    assert messages[1].content == [{"type": "tool_call", "id": "c1", "name": "f", "arguments": {"q": "Zürich"}}]
    assert messages[1].extra == {"refusal": None}
    assert messages[2].content == [{"type": "tool_result", "call_id": "c1", "content": "done"}]
    assert messages[2].tool_result_ids == ["c1"]
    assert messages[3].hints.get("content_string") and messages[4].hints.get("content_missing")
    assert to_records("openai", messages) == records
    anthropic = to_records("anthropic", messages)
    assert anthropic[0]["content"][1] == {"type": "image", "source": {
        "type": "base64", "media_type": "image/png", "data": "AAAA"}}
    assert anthropic[1] == {"role": "assistant", "content": [
        {"type": "tool_use", "id": "c1", "name": "f", "input": {"q": "Zürich"}}]}
    assert anthropic[2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "c1", "content": "done"}]}


def test_anthropic_response_and_parallel_results() -> None:
    records = [
        {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-x", "stop_reason": "tool_use",
         "usage": {"input_tokens": 3}, "content": [
             {"type": "thinking", "thinking": "hm", "signature": "s"},
             {"type": "tool_use", "id": "t1", "name": "a", "input": {}},
             {"type": "tool_use", "id": "t2", "name": "b", "input": {"x": [1]}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "A"}]},
            {"type": "tool_result", "tool_use_id": "t2", "content": "B", "is_error": True}]},
    ]
    assert detect_format(numbered(records), source="t") == "anthropic"
    messages = parse("anthropic", numbered(records), source="t")
    assert messages[0].extra["model"] == "claude-x" and messages[0].tool_call_ids == ["t1", "t2"]
    assert messages[1].content[1] == {"type": "tool_result", "call_id": "t2", "content": "B", "is_error": True}
    assert to_records("anthropic", messages) == records
    openai = to_records("openai", messages)
    assert [r["role"] for r in openai] == ["assistant", "tool", "tool"]
    assert openai[0]["content"] is None and openai[0]["tool_calls"][1]["function"]["arguments"] == '{"x": [1]}'
    assert openai[1] == {"role": "tool", "tool_call_id": "t1", "content": [{"type": "text", "text": "A"}]}
    native = to_records("native", messages)
    assert native[0]["id"] == "msg_01"  # the record's own id is data


CLAUDE_CODE = [
    {"type": "summary", "summary": "Fixing the build", "leafUuid": "u9"},
    {"parentUuid": None, "isSidechain": False, "cwd": "/repo", "sessionId": "s1", "version": "1.0",
     "type": "user", "message": {"role": "user", "content": "fix it"}, "uuid": "u1",
     "timestamp": "2025-06-01T10:00:00.000Z"},
    {"parentUuid": "u1", "sessionId": "s1", "type": "assistant", "uuid": "u2", "timestamp": "2025-06-01T10:00:05Z",
     "requestId": "r1", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
                                    "content": [{"type": "text", "text": "Running"},
                                                {"type": "tool_use", "id": "tu1", "name": "Bash",
                                                 "input": {"command": "make"}}],
                                    "stop_reason": "tool_use", "usage": {"output_tokens": 5}}},
    {"parentUuid": "u2", "sessionId": "s1", "type": "user", "uuid": "u3", "timestamp": "2025-06-01T10:00:09Z",
     "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "ok"}]},
     "toolUseResult": {"stdout": "ok"}},
    {"type": "file-history-snapshot", "messageId": "u3", "snapshot": {}},
]


def test_claude_code() -> None:
    records = numbered(CLAUDE_CODE)
    assert detect_format(records, source="t") == "claude-code"
    messages = parse("claude-code", records, source="t")
    assert [m.role for m in messages] == [
        "claude-code:summary", "user", "assistant", "user", "claude-code:file-history-snapshot"]
    assert messages[0].extra == CLAUDE_CODE[0]
    assert messages[1].timestamp == "2025-06-01T10:00:00.000Z" and messages[1].text == "fix it"
    assert messages[1].extra["uuid"] == "u1" and "timestamp" not in messages[1].extra
    assert messages[2].extra["message"]["model"] == "claude" and messages[2].tool_call_ids == ["tu1"]
    assert messages[3].tool_result_ids == ["tu1"]
    anthropic = to_records("anthropic", messages)
    assert anthropic == [
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "id": "msg_1", "type": "message", "model": "claude", "stop_reason": "tool_use",
         "usage": {"output_tokens": 5}, "content": CLAUDE_CODE[2]["message"]["content"]},
        {"role": "user", "content": CLAUDE_CODE[3]["message"]["content"]},
    ]
    native = to_records("native", messages)
    assert len(native) == 5 and native[2]["message"]["model"] == "claude" and native[2]["requestId"] == "r1"
    assert parse("native", numbered(native), source="t")[2].content == messages[2].content


OPENCLAW = [
    {"type": "session", "version": 3, "id": "sess-1", "timestamp": "2026-02-06T07:49:00.000Z", "cwd": "/w"},
    {"type": "model_change", "id": "m0", "parentId": None, "timestamp": "2026-02-06T07:49:00.100Z",
     "provider": "anthropic", "modelId": "claude"},
    {"type": "message", "id": "a1", "parentId": "m0", "timestamp": "2026-02-06T07:49:01.000Z",
     "message": {"role": "user", "content": [{"type": "text", "text": "list files"}], "timestamp": 1770364141000}},
    {"type": "message", "id": "a2", "parentId": "a1", "timestamp": "2026-02-06T07:49:02.000Z",
     "message": {"role": "assistant", "content": [
         {"type": "thinking", "thinking": "use ls", "thinkingSignature": "sig"},
         {"type": "toolCall", "id": "call_1", "name": "exec", "arguments": {"cmd": "ls"}}],
         "provider": "anthropic", "model": "claude", "stopReason": "toolUse"}},
    {"type": "message", "id": "a3", "parentId": "a2", "timestamp": "2026-02-06T07:49:03.000Z",
     "message": {"role": "toolResult", "toolCallId": "call_1", "toolName": "exec",
                 "content": [{"type": "text", "text": "a.txt"},
                             {"type": "image", "data": "AAAA", "mimeType": "image/png"}],
                 "isError": False, "details": {"exitCode": 0}}},
]


def test_openclaw() -> None:
    records = numbered(OPENCLAW)
    assert detect_format(records, source="t") == "openclaw"
    messages = parse("openclaw", records, source="t")
    assert [m.role for m in messages] == ["openclaw:session", "openclaw:model_change", "user", "assistant", "tool"]
    assert messages[0].extra == OPENCLAW[0] and messages[0].timestamp == OPENCLAW[0]["timestamp"]
    assert messages[3].content == [
        {"type": "thinking", "thinking": "use ls", "signature": "sig"},
        {"type": "tool_call", "id": "call_1", "name": "exec", "arguments": {"cmd": "ls"}}]
    assert messages[4].content == [{"type": "tool_result", "call_id": "call_1", "name": "exec", "is_error": False,
                                    "content": [{"type": "text", "text": "a.txt"},
                                                {"type": "image", "data": "AAAA", "media_type": "image/png"}]}]
    assert messages[4].extra["message"] == {"role": "toolResult", "details": {"exitCode": 0}}
    openai = to_records("openai", messages)
    assert [r["role"] for r in openai] == ["user", "assistant", "tool"]
    assert openai[2]["content"][1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    anthropic = to_records("anthropic", messages)
    assert anthropic[2]["content"][0]["tool_use_id"] == "call_1"
    assert parse("native", numbered(to_records("native", messages)), source="t")[4].content == messages[4].content


@pytest.mark.parametrize(("records", "expected"), [
    ([{"role": "user", "content": "hi"}], "openai"),
    ([{"role": "user", "content": "hi", "timestamp": "2025-01-01T00:00:00Z"}], "native"),
    ([{"role": "user", "content": "hi"}, {"id": "m1", "role": "assistant", "content": "yo"}], "native"),
    ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": []}], "openai"),
    ([{"role": "tool", "tool_call_id": "c", "content": "x"}], "openai"),
    ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}], "openai"),
    ([{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {}}]}], "anthropic"),
    ([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]}], "anthropic"),
    ([{"role": "assistant", "type": "message", "model": "m", "content": [], "stop_reason": "end_turn"}], "anthropic"),
    ([{"role": "assistant", "content": [{"type": "tool_call", "id": "t", "name": "n", "arguments": {}}]}], "native"),
    ([{"role": "tool", "content": [{"type": "tool_result", "call_id": "t", "content": "x"}]}], "native"),
    ([{"role": "user", "content": [{"type": "image", "media_type": "image/png", "data": "AA"}]}], "native"),
    ([], "native"),
])
def test_detect_format(records: list[Any], expected: str) -> None:
    assert detect_format(numbered(records), source="t") == expected


def test_detect_format_unknown() -> None:
    with pytest.raises(InputFormatError, match=r"^f\.json:2: .*'role'.*--format"):
        detect_format([(1, {"role": "user", "content": "x"}), (2, {"text": "hello"})], source="f.json")
    with pytest.raises(InputFormatError, match=r"^f\.json:4: expected a JSON object.*--format"):
        detect_format([(4, [1, 2])], source="f.json")


# -- reading and errors ------------------------------------------------------------


def test_read_records_shapes() -> None:
    jsonl = (b'\xef\xbb\xbf{"role": "user", "content": "a"}\r\n\n  \n'
             b'{"role": "assistant", "content": "b\xe2\x80\xa8c"}\n')
    assert read_records(jsonl, source="s") == [
        (1, {"role": "user", "content": "a"}), (4, {"role": "assistant", "content": "b\u2028c"})]
    array = b'\n[\n  {"role": "user",\n   "content": "a"},\n  {"role": "x"}\n]\n'
    assert read_records(array, source="s") == [(3, {"role": "user", "content": "a"}), (5, {"role": "x"})]
    assert read_records(b"[]", source="s") == []
    assert read_records(b"", source="s") == []
    assert read_records(b"[1]\n[2]\n", source="s") == [(1, [1]), (2, [2])]  # JSON Lines of arrays


@pytest.mark.parametrize(("data", "line", "pattern"), [
    (b'{"role": "user"}\n{"role": \n{"role": "x"}\n', 2, "not valid JSON"),
    (b'{"role": "user"}\n{"role": "user"} {"x": 1}\n', 2, "not valid JSON"),
    (b'{"role": "user"}\n\n{"content": "caf\xe9"}\n', 3, "not valid UTF-8"),
    (b'{"role": "user"}\n{"content": "\\ud800"}\n', 2, "lone surrogate"),
    (b'{"role": "user"}\n{"n": NaN}\n', 2, "not finite"),
    (b'{"n": -Infinity}\n', 1, "not finite"),
    (b'{"role": "user"}\n{"n": 1e400}\n', 2, "not finite"),
    (b'{"role": "user", "role": "x"}\n', 1, "appears twice"),
    (b'[\n {"role": "user"},\n {"role": "user", "content": NaN}\n]', 3, "not finite"),
    (b'[\n {"role": "user"},\n {"role": \n]', 4, "not valid JSON"),
    (b'[\n {"role": "user"}\n {"role": "user"}\n]', 3, "expected ','"),
    (b"[" * 100000, 1, "nested too deeply"),
])
def test_read_errors_name_the_line(data: bytes, line: int, pattern: str) -> None:
    with pytest.raises(InputFormatError, match=pattern) as info:
        read_records(data, source="in.jsonl")
    assert info.value.line == line and info.value.source == "in.jsonl"
    assert str(info.value).startswith(f"in.jsonl:{line}: ")


@pytest.mark.parametrize("fmt", ["native", "openai", "anthropic", "claude-code", "openclaw"])
def test_non_object_line(fmt: str) -> None:
    first = {"claude-code": CLAUDE_CODE[1], "openclaw": OPENCLAW[2]}.get(fmt, {"role": "user", "content": "x"})
    with pytest.raises(InputFormatError, match=r"^in:3: expected a JSON object.*--format") as info:
        parse(fmt, [(1, first), (3, "just text")], source="in")
    assert info.value.line == 3


@pytest.mark.parametrize("fmt", ["native", "openai", "anthropic"])
def test_missing_role(fmt: str) -> None:
    with pytest.raises(InputFormatError, match=r"^in:7: expected a JSON object with 'role'.*--format"):
        parse(fmt, [(7, {"content": "x"})], source="in")


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_bad_content(fmt: str) -> None:
    with pytest.raises(InputFormatError, match=r"^in:2: 'content' must be"):
        parse(fmt, [(2, {"role": "user", "content": 5})], source="in")


def test_native_errors_name_the_line() -> None:
    with pytest.raises(InputFormatError, match=r"^in:5: content\[0\]: a tool_call block needs"):
        parse("native", [(5, {"role": "assistant", "content": [{"type": "tool_call", "id": "x"}]})], source="in")


def test_unknown_formats() -> None:
    assert FORMATS == ("native", "openai", "anthropic", "claude-code", "openclaw")
    with pytest.raises(UsageError):
        parse("gemini", [], source="x")
    with pytest.raises(UsageError, match="native, openai, anthropic"):
        to_records("gemini", [])


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_an_api_record_whose_role_looks_like_an_agent_line_stays_a_message(fmt: str) -> None:
    """Roles are the record's own: ``openclaw:`` or ``claude-code:x`` from an API file is no transcript line."""
    for role in ("openclaw:", "claude-code:summary"):
        records = [{"role": role, "content": "kept as it came"}]
        assert roundtrip(fmt, records) == records
        [message] = parse(fmt, numbered(records), source="t")
        assert not message.is_line
