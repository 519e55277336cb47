"""Fuzzing every parser: logs, note frontmatter, transcripts. Typed errors only, never a crash or a hang."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vaultlcm import Vault
from vaultlcm.errors import CorruptVaultError, InputFormatError, UsageError, ValidationProblem, VaultLCMError
from vaultlcm.formats import detect_format, parse, read_document
from vaultlcm.logcodec import ParsedEntry, StoredMessage, decode_entry, iter_entries, render_entry
from vaultlcm.messages import Message
from vaultlcm.summary_notes import parse_note
from vaultlcm.tokens import count_tokens

FUZZ = settings(max_examples=200, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
AT = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


class Store:
    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def put(self, data: bytes, ext: str) -> str:
        name = f"file_{len(self.files):016x}.{ext}"
        self.files[name] = data
        return name

    def get(self, name: str) -> bytes:
        if name not in self.files:
            raise CorruptVaultError(f"payload {name} missing")
        return self.files[name]


def _log(store: Store) -> bytes:
    out = b"---\nconversation: x\n---\n\n# x\n\n"
    contents = [
        [{"type": "text", "text": "hello\nworld"}],
        [{"type": "tool_call", "id": "c1", "name": "Edit", "arguments": {"file_path": "a.py", "old_string": "a\nb",
                                                                       "new_string": "c"}}],
        [{"type": "tool_result", "call_id": "c1", "content": "\x1b[31mFAILED\x1b[0m\r\nline two\nend"}],
        [{"type": "thinking", "thinking": "hmm", "signature": "s"}, {"type": "text", "text": "```\ncode\n```"}],
    ]
    for i, content in enumerate(contents, start=1):
        msg = Message(id=f"m-{i:016x}", role="assistant", content=content, extra={"n": i})
        out += render_entry(StoredMessage(msg, "x", i, AT, 3, prev=None), store, count_tokens=count_tokens,
                            large_tokens=25_000)
    return out


def _read_all(data: bytes, store: Store) -> None:
    for item in iter_entries(data, path="f.md"):
        if isinstance(item, ParsedEntry):
            try:
                decode_entry(item, store)
            except CorruptVaultError:
                pass


@FUZZ
@given(st.binary(max_size=3000))
def test_any_bytes_as_a_log(data: bytes) -> None:
    _read_all(data, Store())


@FUZZ
@given(st.data())
def test_a_damaged_log_never_crashes_the_reader(data: st.DataObject) -> None:
    store = Store()
    log = bytearray(_log(store))
    for _ in range(data.draw(st.integers(1, 6))):
        op = data.draw(st.sampled_from(["flip", "cut", "insert", "delete_line", "dup_line"]))
        pos = data.draw(st.integers(0, max(0, len(log) - 1)))
        if op == "flip" and log:
            log[pos] = data.draw(st.integers(0, 255))
        elif op == "cut":
            del log[pos:]
        elif op == "insert":
            log[pos:pos] = data.draw(st.sampled_from([b"\n", b"> ", b"<!-- lcm:", b"^m-0000000000000001\n", b"\r",
                                                      b'{"id":"m-x","parts":[]}', b"```"]))
        else:
            lines = bytes(log).split(b"\n")
            k = data.draw(st.integers(0, len(lines) - 1))
            lines[k:k + 1] = [] if op == "delete_line" else [lines[k], lines[k]]
            log = bytearray(b"\n".join(lines))
    _read_all(bytes(log), store)


yaml_ish = st.text(st.characters(exclude_categories=("Cs",)), max_size=300) | st.builds(
    lambda body, fields: "---\n" + "\n".join(f"{k}: {v}" for k, v in fields) + "\n---\n" + body,
    st.text(max_size=50),
    st.lists(st.tuples(st.sampled_from(["id", "kind", "depth", "sources", "tags", "x", "level", "- "]),
                       st.sampled_from(['"sum_0123456789abcdef"', "[[x]]", "[", "{a: 1}", "-1", "leaf", '"[[y]]"',
                                        "&a *a", "!!python/object:os.system", "\t", "1e999"])), max_size=8))


@FUZZ
@given(yaml_ish)
def test_any_note_text_gives_a_note_or_a_validation_problem(text: str) -> None:
    try:
        parse_note(text, "n.md")
    except ValidationProblem:
        pass


json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=10),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(
        st.sampled_from(["role", "content", "type", "uuid", "parentUuid", "message", "id", "parentId", "timestamp",
                         "tool_calls", "text", "isSidechain", "x"]), c, max_size=5),
    max_leaves=15,
)


@FUZZ
@given(st.lists(json_value, max_size=5), st.sampled_from(["auto", "native", "openai", "anthropic", "claude-code",
                                                          "openclaw"]))
def test_any_json_records_parse_or_fail_with_a_typed_error(records: list[Any], fmt: str) -> None:
    numbered = list(enumerate(records, start=1))
    try:
        chosen = detect_format(numbered, source="f") if fmt == "auto" else fmt
        parse(chosen, numbered, source="f")
    except (InputFormatError, UsageError):
        pass


@FUZZ
@given(st.binary(max_size=2000) | st.text(max_size=500).map(str.encode))
def test_any_bytes_as_a_transcript(data: bytes) -> None:
    try:
        doc = read_document(data, source="f")
        if doc.records:
            parse(detect_format(doc.records, source="f"), doc.records, source="f", document=doc)
    except (InputFormatError, UsageError):
        pass


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(st.binary(min_size=1, max_size=400))
def test_a_vault_with_garbage_in_a_log_still_answers(tmp_path: Path, garbage: bytes) -> None:
    root = tmp_path / "v"
    if not root.exists():
        with Vault.init(root) as v:
            v.ingest("a", [{"role": "user", "timestamp": "2026-11-01T10:00:00Z", "content": "kept message"}])
            v.ingest("b", [{"role": "user", "timestamp": "2026-11-01T10:00:00Z", "content": "other conversation"}])
    log = root / "conversations/a/logs/2026-11-01.md"
    original = log.read_bytes()
    log.write_bytes(original + garbage)
    try:
        with Vault(root) as v:
            assert [m.text for m in v.messages("b")] == ["other conversation"]
            try:
                texts = [m.text for m in v.messages("a")]
                assert "kept message" in texts
            except VaultLCMError:
                pass  # a typed error naming the damage is fine; anything else fails the test
            json.dumps(v.doctor())
    finally:
        log.write_bytes(original)
