"""``check_model``: credentials and reachability, checked with one model-list request on a loopback server."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from harness.core import CanonicalMessage, ModelSettings
from harness.errors import ModelAuthenticationError, ModelTimeoutError, ModelUnavailableError
from harness.models.anthropic import AnthropicModel
from harness.models.check import check_model
from harness.models.function import FunctionModel
from harness.models.openai import OpenAIModel
from harness.models.test import TestModel


class ListServer:
    """Answers every GET with ``status`` (after ``delay`` seconds) and records the paths."""

    def __init__(self) -> None:
        self.status = 200
        self.delay = 0.0
        self.paths: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                server.paths.append(self.path)
                time.sleep(server.delay)
                body: dict[str, Any] = (
                    {"object": "list", "data": [], "has_more": False, "first_id": None, "last_id": None}
                    if server.status == 200
                    else {"type": "error", "error": {"type": "error", "message": f"status {server.status}"}}
                )
                payload = json.dumps(body).encode()
                try:
                    self.send_response(server.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.01,), daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


@pytest.fixture
def list_server() -> Iterator[ListServer]:
    server = ListServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def _no_provider_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def openai(server: ListServer) -> OpenAIModel:
    return OpenAIModel("gpt-4o-mini", api_key="sk-test", base_url=f"{server.url}/v1")


async def test_openai_lists_the_models_once_and_passes(list_server: ListServer) -> None:
    model = openai(list_server)
    await check_model(model)
    assert list_server.paths == ["/v1/models"]


@pytest.mark.parametrize("status", [401, 403])
async def test_a_refused_key_is_an_authentication_error_without_retry(
    list_server: ListServer, status: int
) -> None:
    list_server.status = status
    with pytest.raises(ModelAuthenticationError) as caught:
        await check_model(openai(list_server))
    assert caught.value.status_code == status
    assert caught.value.attempts == 1
    assert list_server.paths == ["/v1/models"]


@pytest.mark.parametrize("status", [404, 405, 429, 501])
async def test_any_other_answer_shows_the_server_is_there(list_server: ListServer, status: int) -> None:
    list_server.status = status
    await check_model(openai(list_server))
    assert list_server.paths == ["/v1/models"]


async def test_a_server_error_is_unavailable_naming_the_server(list_server: ListServer) -> None:
    list_server.status = 503
    with pytest.raises(ModelUnavailableError, match=r"cannot reach http://127\.0\.0\.1:\d+/v1/") as caught:
        await check_model(openai(list_server))
    assert caught.value.status_code == 503


async def test_no_answer_in_time_is_a_timeout(list_server: ListServer) -> None:
    list_server.delay = 2.0
    started = time.monotonic()
    with pytest.raises(ModelTimeoutError, match="cannot reach"):
        await check_model(openai(list_server), timeout=0.3)
    assert time.monotonic() - started < 1.8


async def test_a_closed_port_is_unavailable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    with pytest.raises(ModelUnavailableError, match=f"cannot reach http://127.0.0.1:{port}/v1/"):
        await check_model(
            OpenAIModel("gpt-4o-mini", api_key="sk-test", base_url=f"http://127.0.0.1:{port}/v1")
        )


async def test_openai_without_a_key_fails_before_any_request() -> None:
    with pytest.raises(ModelAuthenticationError, match="OPENAI_API_KEY"):
        await check_model(OpenAIModel("gpt-4o-mini"))


async def test_anthropic_without_a_key_fails_before_any_request(list_server: ListServer) -> None:
    with pytest.raises(ModelAuthenticationError, match="ANTHROPIC_API_KEY"):
        await check_model(AnthropicModel("claude-sonnet-4-6", base_url=list_server.url))
    assert list_server.paths == []


async def test_anthropic_lists_one_model_and_reports_a_refused_key(list_server: ListServer) -> None:
    model = AnthropicModel("claude-sonnet-4-6", api_key="sk-ant-test", base_url=list_server.url)
    await check_model(model)
    assert [path.split("?")[0] for path in list_server.paths] == ["/v1/models"]
    assert "limit=1" in list_server.paths[0]
    list_server.status = 401
    with pytest.raises(ModelAuthenticationError) as caught:
        await check_model(model)
    assert caught.value.status_code == 401


async def test_the_client_is_closed_so_the_next_request_opens_its_own(list_server: ListServer) -> None:
    model = openai(list_server)
    await check_model(model)
    assert model._client is None  # pyright: ignore[reportPrivateUsage]


async def test_offline_models_have_nothing_to_check() -> None:
    await check_model(TestModel())
    await check_model(FunctionModel(lambda messages, info: "hi"))


class _Checked:
    """A plugin's model with its own check."""

    def __init__(self) -> None:
        self.timeouts: list[float] = []

    @property
    def model_name(self) -> str:
        return "checked"

    @property
    def context_window(self) -> int | None:
        return 1000

    async def check(self, *, timeout: float) -> None:
        self.timeouts.append(timeout)
        raise ModelAuthenticationError("plugin", "nope", model_name="checked")

    async def request(self, messages: Any, tools: Any, settings: ModelSettings) -> CanonicalMessage:
        raise AssertionError("never sent")


async def test_a_models_own_check_is_awaited_with_the_timeout() -> None:
    model = _Checked()
    with pytest.raises(ModelAuthenticationError, match="nope"):
        await check_model(model, timeout=2.5)
    assert model.timeouts == [2.5]
