"""A scriptable fake LLM server for tests: real SDKs, real HTTP, 127.0.0.1 only.

Speaks just enough of Anthropic's ``POST /v1/messages`` and OpenAI's
``POST /v1/chat/completions`` for the summarizers and for checking assembled
contexts. Each test scripts the replies (:meth:`FakeLLM.reply`,
:meth:`FakeLLM.fail`, ...) and then inspects :attr:`FakeLLM.requests` to see
exactly what the SDK sent (headers, JSON body). Once the script is used up, the
last reply repeats, so an SDK's retries see the same failure.

Requests are checked the way the real APIs check them (:func:`anthropic_problem`,
:func:`openai_problem`): unknown fields, unknown block types, empty messages,
broken tool pairing and (Anthropic) turns that do not alternate get a 400
``invalid_request_error`` naming the place, before any scripted reply.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# -- request validation, as strict as the real APIs ---------------------------------------

_TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_ANTHROPIC_TOP = {
    "model", "max_tokens", "messages", "system", "metadata", "stop_sequences", "stream", "temperature", "top_k",
    "top_p", "tools", "tool_choice", "thinking", "service_tier",
}
_ANTHROPIC_BLOCKS: dict[str, tuple[set[str], set[str]]] = {  # type: (required, allowed)
    "text": ({"type", "text"}, {"cache_control", "citations"}),
    "image": ({"type", "source"}, {"cache_control"}),
    "document": ({"type", "source"}, {"cache_control", "citations", "context", "title"}),
    "tool_use": ({"type", "id", "name", "input"}, {"cache_control"}),
    "tool_result": ({"type", "tool_use_id"}, {"cache_control", "content", "is_error"}),
    "thinking": ({"type", "thinking", "signature"}, set()),
    "redacted_thinking": ({"type", "data"}, set()),
}
_IMAGE_TYPES = {"image/jpeg", "image/png", "image/gif", "image/webp"}
_OPENAI_TOP = {
    "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "n", "stop", "stream",
    "tools", "tool_choice", "seed", "user", "response_format", "presence_penalty", "frequency_penalty",
}
_OPENAI_FIELDS = {
    "system": {"role", "content", "name"},
    "developer": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    "assistant": {"role", "content", "name", "tool_calls", "refusal"},
    "tool": {"role", "content", "tool_call_id"},
}


def _anthropic_block(block: Any, where: str, role: str, *, nested: bool = False) -> str | None:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        return f"{where}: Input should be a valid content block object"
    kind = block["type"]
    spec = _ANTHROPIC_BLOCKS.get(kind)
    if spec is None or (nested and kind not in ("text", "image", "document")):
        return f"{where}.type: Input tag '{kind}' found using 'type' does not match any of the expected tags"
    required, allowed = spec
    if missing := required - set(block):
        return f"{where}.{sorted(missing)[0]}: Field required"
    if extra := set(block) - required - allowed:
        return f"{where}.{sorted(extra)[0]}: Extra inputs are not permitted"
    if kind == "text" and (not isinstance(block["text"], str) or not block["text"].strip()):
        return f"{where}: text content blocks must contain non-whitespace text"
    if kind == "image":
        src = block["source"]
        ok = isinstance(src, dict) and (
            (src.get("type") == "base64" and set(src) == {"type", "media_type", "data"} and src["media_type"] in _IMAGE_TYPES)
            or (src.get("type") == "url" and set(src) == {"type", "url"}))
        if not ok:
            return f"{where}.source: invalid image source {src!r:.80}"
    if kind in ("tool_use", "thinking", "redacted_thinking") and role != "assistant":
        return f"{where}: {kind} blocks are only allowed in assistant messages"
    if kind == "tool_result" and role != "user":
        return f"{where}: tool_result blocks are only allowed in user messages"
    if kind == "tool_use":
        if not _TOOL_ID.match(str(block["id"])):
            return f"{where}.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
        if not isinstance(block["input"], dict):
            return f"{where}.input: Input should be a valid dictionary"
    if kind == "thinking" and not (isinstance(block["signature"], str) and block["signature"]):
        return f"{where}.signature: a thinking block needs its signature"
    if kind == "tool_result":
        inner = block.get("content", "")
        if isinstance(inner, list):
            for j, sub in enumerate(inner):
                if problem := _anthropic_block(sub, f"{where}.content.{j}", role, nested=True):
                    return problem
        elif not isinstance(inner, str):
            return f"{where}.content: Input should be a valid string or list"
    return None


def anthropic_problem(body: Any) -> str | None:
    """Why the Messages API would reject ``body`` (None when it would accept it)."""
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    if extra := set(body) - _ANTHROPIC_TOP:
        return f"{sorted(extra)[0]}: Extra inputs are not permitted"
    system = body.get("system")
    if system is not None and not isinstance(system, str):
        if not isinstance(system, list) or any(_anthropic_block(b, "system", "user") for b in system):
            return "system: Input should be a valid string or list of text blocks"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    seen_ids: set[str] = set()
    for i, msg in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(msg, dict) or set(msg) != {"role", "content"}:
            extra = sorted(set(msg) - {"role", "content"}) if isinstance(msg, dict) else []
            return f"{where}.{extra[0]}: Extra inputs are not permitted" if extra else f"{where}: role and content required"
        role, content = msg["role"], msg["content"]
        if role not in ("user", "assistant"):
            return f"{where}.role: Input should be 'user' or 'assistant'"
        if i == 0 and role != "user":
            return 'messages: first message must use the "user" role'
        if i and messages[i - 1].get("role") == role:
            return f"{where}: roles must alternate between \"user\" and \"assistant\""
        if isinstance(content, str):
            if not content.strip():
                return f"{where}: text content blocks must contain non-whitespace text"
            continue
        if not isinstance(content, list) or not content:
            return f"{where}.content: all messages must have non-empty content"
        for j, block in enumerate(content):
            if problem := _anthropic_block(block, f"{where}.content.{j}", role):
                return problem
        uses = [b["id"] for b in content if b["type"] == "tool_use"]
        if dup := [u for u in uses if u in seen_ids or uses.count(u) > 1]:
            return f"{where}: tool_use ids must be unique: {dup[0]}"
        seen_ids.update(uses)
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        if uses:
            blocks = nxt.get("content") if isinstance(nxt, dict) and nxt.get("role") == "user" else None
            got = {b.get("tool_use_id") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"} if isinstance(blocks, list) else set()
            if missing := [u for u in uses if u not in got]:
                return (f"{where}: tool_use ids were found without tool_result blocks immediately after: {missing[0]}. "
                        "Each tool_use block must have a corresponding tool_result block in the next message.")
        if role == "user":
            prev = messages[i - 1].get("content") if i else None
            calls = {b.get("id") for b in prev if isinstance(b, dict) and b.get("type") == "tool_use"} if isinstance(prev, list) else set()
            kinds = [b["type"] for b in content]
            for j, block in enumerate(content):
                if block["type"] == "tool_result":
                    if block["tool_use_id"] not in calls:
                        return (f"{where}.content.{j}: unexpected tool_use_id found in tool_result blocks: "
                                f"{block['tool_use_id']}. Each tool_result block must have a corresponding tool_use "
                                "block in the previous message.")
                    if any(k != "tool_result" for k in kinds[:j]):
                        return f"{where}.content.{j}: tool_result blocks must come first in a user message"
    return None


def _openai_text_parts(content: Any, where: str, allowed: set[str]) -> str | None:
    if isinstance(content, str):
        return None if content.strip() else f"{where}.content: message content must not be empty"
    if not isinstance(content, list) or not content:
        return f"{where}.content: expected a non-empty string or array of content parts"
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in allowed:
            return f"{where}.content.{j}.type: invalid content part type {kind!r}"
        keys = {"text": {"type", "text"}, "image_url": {"type", "image_url"}, "input_audio": {"type", "input_audio"},
                "file": {"type", "file"}, "refusal": {"type", "refusal"}}[kind]
        if set(part) != keys:
            return f"{where}.content.{j}: unexpected or missing fields {sorted(set(part) ^ keys)}"
        if kind == "text" and not (isinstance(part["text"], str) and part["text"]):
            return f"{where}.content.{j}.text: must be a non-empty string"
    return None


def openai_problem(body: Any) -> str | None:
    """Why the Chat Completions API would reject ``body`` (None when it would accept it)."""
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    if extra := set(body) - _OPENAI_TOP:
        return f"Unrecognized request argument supplied: {sorted(extra)[0]}"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: must be a non-empty array"
    pending: list[str] = []
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        role = msg.get("role") if isinstance(msg, dict) else None
        if role not in _OPENAI_FIELDS:
            return f"{where}.role: invalid role {role!r}"
        if extra := set(msg) - _OPENAI_FIELDS[role]:
            return f"{where}: Unrecognized field {sorted(extra)[0]!r}"
        if role == "tool":
            if msg.get("tool_call_id") not in pending:
                return (f"Invalid parameter: messages with role 'tool' must be a response to a preceeding message "
                        f"with 'tool_calls' ({where}, tool_call_id {msg.get('tool_call_id')!r})")
            pending.remove(msg["tool_call_id"])
            if not isinstance(msg.get("content"), (str, list)):
                return f"{where}.content: expected a string"
            continue
        if pending:
            return ("An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                    f"'tool_call_id'. The following tool_call_ids did not have response messages: {pending[0]}")
        if role == "assistant":
            calls = msg.get("tool_calls")
            if calls is not None:
                if not isinstance(calls, list) or not calls:
                    return f"{where}.tool_calls: expected a non-empty array"
                for j, call in enumerate(calls):
                    fn = call.get("function") if isinstance(call, dict) else None
                    if (not isinstance(call, dict) or set(call) != {"id", "type", "function"} or call["type"] != "function"
                            or not isinstance(fn, dict) or set(fn) != {"name", "arguments"}
                            or not isinstance(fn["arguments"], str)):
                        return f"{where}.tool_calls[{j}]: invalid tool call"
                    if call["id"] in pending:
                        return f"{where}.tool_calls[{j}].id: duplicate tool call id {call['id']}"
                    pending.append(call["id"])
            if msg.get("content") is None:
                if not calls:
                    return f"{where}: an assistant message needs content or tool_calls"
            elif problem := _openai_text_parts(msg["content"], where, {"text", "refusal"}):
                return problem
        elif problem := _openai_text_parts(
                msg.get("content"), where, {"text", "image_url", "input_audio", "file"} if role == "user" else {"text"}):
            return problem
    if pending:
        return ("An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                f"'tool_call_id'. The following tool_call_ids did not have response messages: {pending[0]}")
    return None


@dataclass
class Reply:
    """One scripted reply.

    ``kind`` is ``"text"`` (success with ``text``), ``"error"`` (HTTP
    ``status`` with a provider-shaped error body of ``error_type``),
    ``"raw"`` (``body`` sent as is with ``content_type``) or ``"json"``
    (``payload`` serialized, status 200).
    """

    kind: str = "text"
    text: str = "A summary."
    status: int = 200
    error_type: str = ""
    message: str = ""
    body: bytes = b""
    content_type: str = "application/json"
    payload: Any = None
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Recorded:
    """A request the fake received."""

    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    json: Any


_ANTHROPIC_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


class FakeLLM:
    """The server; use :func:`running` (or the ``fake_llm`` fixture) to get one."""

    def __init__(self, *, strict: bool = True) -> None:
        self.requests: list[Recorded] = []
        #: Check requests as the real APIs do (see :func:`anthropic_problem`); ``rejected`` lists the reasons.
        self.strict = strict
        self.rejected: list[str] = []
        self._script: list[Reply] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True  # a delayed reply must not block shutdown
        # A short poll interval makes shutdown (once per test) take milliseconds, not 0.5 s.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-llm", daemon=True
        )

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (append ``/v1`` for OpenAI-style clients)."""
        return f"http://127.0.0.1:{self._server.server_port}"

    # -- scripting ---------------------------------------------------------------

    def script(self, *replies: Reply) -> None:
        """Replace the script: the next requests get these replies, in order."""
        with self._lock:
            self._script = list(replies)

    def reply(self, text: str) -> None:
        """Every request succeeds with ``text``."""
        self.script(Reply("text", text=text))

    def fail(self, status: int, error_type: str | None = None, message: str = "", **headers: str) -> None:
        """Every request fails with HTTP ``status`` and a provider-shaped error body."""
        etype = error_type or _ANTHROPIC_ERRORS.get(status, "api_error")
        text = message or f"fake {etype}"
        self.script(Reply("error", status=status, error_type=etype, message=text, headers=headers))

    def delay(self, seconds: float, text: str = "late") -> None:
        """Every request is answered only after ``seconds`` (to trigger client timeouts)."""
        self.script(Reply("text", text=text, delay=seconds))

    def raw(self, body: bytes, content_type: str = "application/json", status: int = 200) -> None:
        """Every request gets ``body`` verbatim (malformed replies)."""
        self.script(Reply("raw", body=body, content_type=content_type, status=status))

    def json(self, payload: Any) -> None:
        """Every request gets ``payload`` as a 200 JSON body (wrong shapes)."""
        self.script(Reply("json", payload=payload))

    def _next(self) -> Reply:
        with self._lock:
            if not self._script:
                return Reply()
            return self._script.pop(0) if len(self._script) > 1 else self._script[0]

    # -- serving -----------------------------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"null")
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                headers = {k.lower(): v for k, v in self.headers.items()}
                with fake._lock:
                    fake.requests.append(Recorded("POST", self.path, headers, body))
                reply = fake._next()
                problem = fake._problem(self.path, body)
                if problem is not None:
                    reply = Reply("error", status=400, error_type="invalid_request_error", message=problem)
                if reply.delay and fake._stop.wait(reply.delay):
                    return  # server shutting down
                status, ctype, payload = fake._render(self.path, body, reply)
                try:
                    self.send_response(status)
                    self.send_header("content-type", ctype)
                    self.send_header("content-length", str(len(payload)))
                    for name, value in reply.headers.items():
                        self.send_header(name.replace("_", "-"), value)
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # the client gave up (timeout): nothing to answer

        return Handler

    def _problem(self, path: str, body: Any) -> str | None:
        if not self.strict:
            return None
        check = anthropic_problem if path.rstrip("/").endswith("/messages") else openai_problem
        problem = check(body)
        if problem is not None:
            with self._lock:
                self.rejected.append(problem)
        return problem

    def _render(self, path: str, body: Any, reply: Reply) -> tuple[int, str, bytes]:
        anthropic = path.rstrip("/").endswith("/messages")
        model = body.get("model", "fake-model") if isinstance(body, dict) else "fake-model"
        if reply.kind == "raw":
            return reply.status, reply.content_type, reply.body
        if reply.kind == "json":
            return 200, "application/json", json.dumps(reply.payload).encode()
        if reply.kind == "error":
            if anthropic:
                data: Any = {"type": "error", "error": {"type": reply.error_type, "message": reply.message}}
            else:
                data = {"error": {"message": reply.message, "type": reply.error_type, "code": None}}
            return reply.status, "application/json", json.dumps(data).encode()
        if anthropic:
            data = {
                "id": "msg_fake",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [{"type": "text", "text": reply.text}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 5},
            }
        else:
            data = {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": 0,
                "model": model,
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": reply.text}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
        return 200, "application/json", json.dumps(data).encode()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


@contextmanager
def running() -> Iterator[FakeLLM]:
    """A started :class:`FakeLLM`, stopped on exit."""
    fake = FakeLLM()
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()
