"""A loopback HTTP server standing in for the OpenAI and Anthropic APIs.

The real SDKs talk to it over HTTP on 127.0.0.1 (ephemeral port). Tests queue replies
shaped as the providers' API references document them and read back every request the
SDK sent (method, path, headers, JSON body). A :class:`Stream` body is sent as
``text/event-stream``, one chunk per event, as the streaming APIs send it.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Reply:
    """One scripted HTTP answer."""

    body: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict[str, str])
    delay: float = 0.0


@dataclass
class Stream:
    """A ``text/event-stream`` body: each event is written and flushed on its own.

    Attributes:
        events: The raw events, each ending in a blank line (see :func:`sse`).
        delay: Seconds to wait before each event after the first.
        drop_after: Cut the connection after this many events (no end of body: the
            client sees the connection drop mid-stream).
        sent: ``time.perf_counter()`` right after each event was written.
        disconnected: Set when a write failed because the client had closed the connection.
        finished: Set when the server is done with the body (sent, dropped or refused).
    """

    events: list[str]
    delay: float = 0.0
    drop_after: int | None = None
    sent: list[float] = field(default_factory=list[float])
    disconnected: threading.Event = field(default_factory=threading.Event)
    finished: threading.Event = field(default_factory=threading.Event)


def sse(data: Any, event: str | None = None) -> str:
    """One server-sent event: an optional ``event:`` line and a JSON (or raw string) ``data:`` line."""
    text = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event is not None else ""
    return f"{head}data: {text}\n\n"


@dataclass
class Recorded:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeServer:
    """Answers POSTs with queued :class:`Reply` objects and records what it received."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                body: Any = json.loads(raw) if raw else None
                with server._lock:
                    server.requests.append(
                        Recorded("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                    )
                    reply = server.replies.popleft() if server.replies else None
                if reply is None:
                    reply = Reply({"error": {"message": "fake server: no reply queued"}}, status=500)
                if reply.delay:
                    time.sleep(reply.delay)
                if isinstance(reply.body, Stream):
                    self._stream(reply, reply.body)
                    return
                payload = json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                    return

            def _stream(self, reply: Reply, stream: Stream) -> None:
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "text/event-stream; charset=utf-8")
                    self.send_header("cache-control", "no-cache")
                    self.send_header("transfer-encoding", "chunked")
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    for number, event in enumerate(stream.events):
                        if stream.drop_after is not None and number >= stream.drop_after:
                            self.close_connection = True
                            self.wfile.flush()
                            self.connection.shutdown(socket.SHUT_RDWR)
                            return
                        if number and stream.delay:
                            time.sleep(stream.delay)
                        data = event.encode()
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                        self.wfile.flush()
                        stream.sent.append(time.perf_counter())
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):  # the client closed the response
                    self.close_connection = True
                    stream.disconnected.set()
                finally:
                    stream.finished.set()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.01,), daemon=True)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def queue(self, *replies: Reply) -> None:
        """Answer the next requests with ``replies``, in order."""
        self.replies.extend(replies)

    def reply(
        self, body: Any, *, status: int = 200, headers: dict[str, str] | None = None, delay: float = 0.0
    ) -> None:
        """Queue one answer."""
        self.queue(Reply(body, status, dict(headers or {}), delay))

    @property
    def bodies(self) -> list[Any]:
        """The JSON bodies received, in order."""
        return [r.body for r in self.requests]

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    """A running loopback server, stopped after the test."""
    server = FakeServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


class Sleeps:
    """Records backoff delays instead of sleeping."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


@pytest.fixture
def sleeps() -> Sleeps:
    """A ``RetryPolicy.sleep`` that records the delays, so retry tests never wait."""
    return Sleeps()
