"""ModelFallback with the real OpenAI and Anthropic SDKs against loopback servers.

Each server answers as the provider's API reference documents (error bodies included) and
records the JSON body of every request the SDK sent, so the tests see what the fallback
model really received.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

pytest.importorskip("openai")
pytest.importorskip("anthropic")

from harness_model_fallback import ModelFallback

from harness import Agent, Session
from harness.core import ModelSettings, harness_mark
from harness.errors import ModelAuthenticationError, ModelRateLimitError
from harness.history import check_invariants
from harness.models.anthropic import AnthropicModel
from harness.models.anthropic import RetryPolicy as AnthropicRetry
from harness.models.openai import OpenAIModel, RetryPolicy


@dataclass
class Reply:
    """One scripted HTTP answer."""

    body: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict[str, str])


class Loopback:
    """Answers POSTs with queued replies and records every request's path and JSON body."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.paths: list[str] = []
        self.bodies: list[Any] = []
        lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                with lock:
                    server.paths.append(self.path)
                    server.bodies.append(json.loads(raw) if raw else None)
                    reply = server.replies.popleft() if server.replies else None
                if reply is None:
                    reply = Reply({"error": {"message": "loopback: no reply queued"}}, status=500)
                payload = json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.01,), daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def reply(self, body: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> None:
        """Queue one answer."""
        self.replies.append(Reply(body, status, dict(headers or {})))

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


@pytest.fixture
def openai_server() -> Iterator[Loopback]:
    """A loopback server answering as the OpenAI Chat Completions API."""
    server = Loopback()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def anthropic_server() -> Iterator[Loopback]:
    """A loopback server answering as the Anthropic Messages API."""
    server = Loopback()
    try:
        yield server
    finally:
        server.stop()


async def no_sleep(delay: float) -> None:
    del delay


def openai_error(message: str, kind: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def anthropic_error(kind: str, message: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": kind, "message": message},
        "request_id": "req_011CSHoEeqs5C35K",
    }


def completion(text: str) -> dict[str, Any]:
    """A chat.completion object as the API reference shows it."""
    return {
        "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "object": "chat.completion",
        "created": 1741570283,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None, "annotations": []},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 19, "completion_tokens": 10, "total_tokens": 29},
    }


def message(text: str) -> dict[str, Any]:
    """A Message object as the API reference shows it."""
    return {
        "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6-20250929",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 21, "output_tokens": 9},
    }


@pytest.fixture
async def gpt(openai_server: Loopback) -> AsyncIterator[OpenAIModel]:
    model = OpenAIModel(
        "gpt-4o-mini",
        api_key="sk-test-key",
        base_url=openai_server.url + "/v1",
        retry=RetryPolicy(max_retries=1, base_delay=0.0, jitter=0.0, sleep=no_sleep),
        timeout=5.0,
    )
    yield model
    await model.aclose()


@pytest.fixture
async def claude(anthropic_server: Loopback) -> AsyncIterator[AnthropicModel]:
    model = AnthropicModel(
        "claude-sonnet-4-6",
        api_key="sk-ant-test",
        base_url=anthropic_server.url,
        retry=AnthropicRetry(max_retries=1, base_delay=0.0, jitter=0.0, sleep=no_sleep),
        timeout=5.0,
    )
    yield model
    await model.aclose()


RATE_LIMITED = openai_error(
    "Rate limit reached for gpt-4o-mini in organization org-abc on requests per min (RPM): Limit 3, "
    "Used 3, Requested 1.",
    "requests",
    "rate_limit_exceeded",
)


async def test_openai_rate_limited_falls_back_to_anthropic_without_openai_settings(
    openai_server: Loopback, anthropic_server: Loopback, gpt: OpenAIModel, claude: AnthropicModel
) -> None:
    openai_server.reply(RATE_LIMITED, status=429, headers={"retry-after": "0"})
    openai_server.reply(RATE_LIMITED, status=429, headers={"retry-after": "0"})  # its own retry
    anthropic_server.reply(message("Bonjour from Claude."))
    settings = ModelSettings(
        max_tokens=512,
        temperature=0.3,
        extra={
            "reasoning_effort": "low",
            "logprobs": True,
            "parallel_tool_calls": False,
            "seed": 7,
            "top_p": 0.9,
        },
    )
    session = Session()
    agent = Agent(gpt, capabilities=[ModelFallback(models=[claude])], settings=settings)
    result = await agent.run("Say hello in French.", session=session)

    assert result.output == "Bonjour from Claude."
    assert len(openai_server.bodies) == 2  # the first model's retry policy ran first
    assert openai_server.bodies[0]["reasoning_effort"] == "low"  # the original got its settings
    (sent,) = anthropic_server.bodies
    assert anthropic_server.paths == ["/v1/messages"]
    for key in ("reasoning_effort", "logprobs", "parallel_tool_calls", "seed"):
        assert key not in sent
    assert sent["top_p"] == 0.9
    assert sent["temperature"] == 0.3
    assert sent["max_tokens"] == 512
    assert sent["model"] == "claude-sonnet-4-6"
    assert sent["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Say hello in French."}]}
    ]

    response = session.messages[-1]
    assert response.model_name == "claude-sonnet-4-6-20250929"  # the provider's name for it
    mark = harness_mark(response)
    assert mark is not None
    assert mark["answered_by"] == "claude-sonnet-4-6"
    assert mark["fallback_from"] == [{"model": "gpt-4o-mini", "kind": "rate_limit", "status": 429}]
    assert check_invariants(session.messages) == []


async def test_anthropic_overloaded_falls_back_to_openai_without_anthropic_settings(
    openai_server: Loopback, anthropic_server: Loopback, gpt: OpenAIModel, claude: AnthropicModel
) -> None:
    overloaded = anthropic_error("overloaded_error", "Overloaded")
    anthropic_server.reply(overloaded, status=529)
    anthropic_server.reply(overloaded, status=529)
    openai_server.reply(completion("Hello from GPT."))
    settings = ModelSettings(
        max_tokens=4000,
        extra={"thinking": {"type": "enabled", "budget_tokens": 2048}, "top_k": 40, "top_p": 0.8},
    )
    agent = Agent(claude, capabilities=[ModelFallback(models=[gpt])], settings=settings)
    result = await agent.run("hello")
    assert result.output == "Hello from GPT."
    assert anthropic_server.bodies[0]["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    (sent,) = openai_server.bodies
    assert openai_server.paths == ["/v1/chat/completions"]
    assert "thinking" not in sent
    assert "top_k" not in sent
    assert sent["top_p"] == 0.8
    assert sent["max_tokens"] == 4000  # a custom base_url: the OpenAIModel sends max_tokens
    assert sent["model"] == "gpt-4o-mini"


async def test_an_openai_context_length_refusal_falls_back_at_once(
    openai_server: Loopback, anthropic_server: Loopback, gpt: OpenAIModel, claude: AnthropicModel
) -> None:
    too_long = openai_error(
        "This model's maximum context length is 128000 tokens. However, your messages resulted in "
        "130542 tokens. Please reduce the length of the messages.",
        "invalid_request_error",
        "context_length_exceeded",
    )
    openai_server.reply(too_long, status=400)
    anthropic_server.reply(message("Fits in my window."))
    session = Session()
    result = await Agent(gpt, capabilities=[ModelFallback(models=[claude])]).run("long", session=session)
    assert result.output == "Fits in my window."
    assert len(openai_server.bodies) == 1  # a refusal is never retried
    mark = harness_mark(session.messages[-1])
    assert mark is not None
    assert mark["fallback_from"] == [{"model": "gpt-4o-mini", "kind": "context_length", "status": 400}]


async def test_an_authentication_error_propagates_without_calling_the_next_provider(
    openai_server: Loopback, anthropic_server: Loopback, gpt: OpenAIModel, claude: AnthropicModel
) -> None:
    openai_server.reply(
        openai_error("Incorrect API key provided: sk-test.", "invalid_request_error", "invalid_api_key"),
        status=401,
    )
    with pytest.raises(ModelAuthenticationError) as caught:
        await Agent(gpt, capabilities=[ModelFallback(models=[claude])]).run("hi")
    assert caught.value.status_code == 401
    assert anthropic_server.bodies == []


async def test_both_providers_failing_raise_the_last_error_naming_both(
    openai_server: Loopback, anthropic_server: Loopback, gpt: OpenAIModel, claude: AnthropicModel
) -> None:
    for _ in range(2):
        openai_server.reply(RATE_LIMITED, status=429, headers={"retry-after": "0"})
        anthropic_server.reply(
            anthropic_error(
                "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"
            ),
            status=429,
            headers={"retry-after": "0"},
        )
    with pytest.raises(ModelRateLimitError) as caught:
        await Agent(gpt, capabilities=[ModelFallback(models=[claude])]).run("hi")
    assert caught.value.provider == "anthropic"
    (note,) = caught.value.__notes__
    assert "tried 2 models (every model failed)" in note
    assert "'gpt-4o-mini' (rate_limit: openai model 'gpt-4o-mini' (HTTP 429) after 2 attempts" in note
    assert "'claude-sonnet-4-6' (rate_limit: anthropic model 'claude-sonnet-4-6' (HTTP 429)" in note
