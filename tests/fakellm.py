"""A scriptable fake LLM server for tests: real SDKs, real HTTP, 127.0.0.1 only.

Speaks just enough of Anthropic's ``POST /v1/messages`` and OpenAI's
``POST /v1/chat/completions`` for the summarizers. Each test scripts the
replies (:meth:`FakeLLM.reply`, :meth:`FakeLLM.fail`, ...) and then inspects
:attr:`FakeLLM.requests` to see exactly what the SDK sent (headers, JSON body).
Once the script is used up, the last reply repeats, so an SDK's retries see
the same failure.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


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

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
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
