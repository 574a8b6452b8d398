"""A loopback server speaking the OpenAI API, for ``harness`` commands run as real subprocesses.

It answers ``GET /v1/models`` and ``POST /v1/chat/completions`` with the status each test
chooses, and records every request (method and path), so a test can tell whether the
command checked the server before starting, and what it sent.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


def chat_completion(text: str) -> dict[str, Any]:
    """A ``chat.completion`` object answering ``text``, as the API reference shows it."""
    return {
        "id": "chatcmpl-loopback",
        "object": "chat.completion",
        "created": 1741570283,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
    }


def completion_chunks(completion: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` events streaming ``completion`` (``stream=True``), as sent by the API."""
    choice = completion["choices"][0]
    message = choice["message"]
    base = {k: completion[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
    return [
        base | {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        base | {"choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]},
        *([base | {"choices": [], "usage": completion["usage"]}] if "usage" in completion else []),
    ]


class OpenAIServer:
    """Answers the model list and chat completions with the configured statuses.

    A request with ``"stream": true`` gets the same answer as server-sent events.

    Attributes:
        models_status: Status of ``GET /v1/models`` (200 answers a one-model list).
        chat_status: Status of ``POST /v1/chat/completions`` (200 answers ``chat_text``).
        chat_text: The assistant's answer.
        chat_replies: ``(status, body)`` answers for the next chat requests, used first.
        requests: ``"GET /v1/models"``-style lines, in order.
    """

    def __init__(self) -> None:
        self.models_status = 200
        self.chat_status = 200
        self.chat_text = "loopback answer"
        self.chat_replies: list[tuple[int, dict[str, Any]]] = []
        self.requests: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            streamed = False

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _answer(self, status: int, body: Any) -> None:
                if status == 200 and self.streamed and isinstance(body, dict) and "choices" in body:
                    events = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in completion_chunks(body))
                    payload = (events + "data: [DONE]\n\n").encode()
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _error(self, status: int) -> None:
                self._answer(status, {"error": {"message": f"loopback says {status}", "type": "error"}})

            def do_GET(self) -> None:
                server.requests.append(f"GET {self.path}")
                if server.models_status != 200:
                    self._error(server.models_status)
                    return
                self._answer(200, {"object": "list", "data": [{"id": "gpt-4o-mini", "object": "model"}]})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    self.streamed = bool(json.loads(raw or b"{}").get("stream"))
                except (ValueError, AttributeError):
                    self.streamed = False
                server.requests.append(f"POST {self.path}")
                if server.chat_replies:
                    self._answer(*server.chat_replies.pop(0))
                    return
                if server.chat_status != 200:
                    self._error(server.chat_status)
                    return
                self._answer(200, chat_completion(server.chat_text))

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.01,), daemon=True)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    """A running loopback OpenAI server, stopped after the test."""
    server = OpenAIServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
