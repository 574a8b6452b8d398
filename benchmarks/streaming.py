"""Streaming latency: from a delta's arrival in the SDK stream to its event at the consumer.

A loopback HTTP server (a thread of this process, so both sides read one
``time.perf_counter_ns`` clock) answers as the OpenAI Chat Completions and Anthropic
Messages streaming APIs do, one text delta per server-sent event, ``--spacing-ms`` apart,
and timestamps each event right after writing it to the socket. The consumer timestamps
each delta when it gets it:

* ``sdk``: iterating the SDK's own stream (``create(stream=True)``): the floor;
* ``request_stream``: the model's own stream (``OpenAIModel.request_stream`` /
  ``AnthropicModel.request_stream``), no agent;
* ``run_stream``: the :class:`~harness.run.events.TextDelta` events of
  ``Agent.run_stream`` over the real model (``OpenAIModel`` / ``AnthropicModel``): what a
  harness user sees.

The difference between the ``sdk`` and ``run_stream`` rows is harness's cost per delta:
mapping the chunk, the model's accumulator and retry wrapper, the run's sink and the
hop through the stream's queue to the consumer's task. Runs offline::

    uv run python benchmarks/streaming.py                 # 300 deltas x 3 streams per row
    uv run python benchmarks/streaming.py --deltas 500 --json out.json
"""

from __future__ import annotations

__all__ = ["Latency", "main", "measure_all"]

import argparse
import asyncio
import json
import statistics
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anthropic
import attrs
import openai

from harness import Agent
from harness.core.messages import CanonicalMessage, UserPromptPart
from harness.core.model import ModelSettings
from harness.core.streaming import TextDelta
from harness.models.anthropic import AnthropicModel
from harness.models.openai import OpenAIModel


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    text = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {text}\n\n".encode()


def _openai_body(count: int) -> list[tuple[bytes, int | None]]:
    """Events of a streamed chat completion; the second item is the delta number it carries."""
    head = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1741570283,
        "model": "gpt-4o-mini",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return _sse({**head, "choices": [choice], "usage": None})

    events: list[tuple[bytes, int | None]] = [(chunk({"role": "assistant", "content": ""}), None)]
    events += [(chunk({"content": f"d{n} "}), n) for n in range(count)]
    usage = {"prompt_tokens": 10, "completion_tokens": count, "total_tokens": 10 + count}
    events += [(chunk({}, "stop"), None), (_sse({**head, "choices": [], "usage": usage}), None)]
    return [*events, (_sse("[DONE]"), None)]


def _anthropic_body(count: int) -> list[tuple[bytes, int | None]]:
    def event(data: dict[str, Any]) -> bytes:
        return _sse(data, data["type"])

    message = {
        "id": "msg_bench",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": "claude-sonnet-4-6",
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }
    events: list[tuple[bytes, int | None]] = [
        (event({"type": "message_start", "message": message}), None),
        (
            event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            None,
        ),
        (event({"type": "ping"}), None),
    ]
    events += [
        (
            event(
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": f"d{n} "}}
            ),
            n,
        )
        for n in range(count)
    ]
    events += [
        (event({"type": "content_block_stop", "index": 0}), None),
        (
            event(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn"},
                    "usage": {"output_tokens": count},
                }
            ),
            None,
        ),
        (event({"type": "message_stop"}), None),
    ]
    return events


class _Server:
    """Streams the queued bodies, recording when each numbered delta was written."""

    def __init__(self) -> None:
        self.bodies: list[list[tuple[bytes, int | None]]] = []
        self.sent: dict[int, int] = {}
        self.spacing = 0.002
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                body = server.bodies.pop(0)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for data, number in body:
                    time.sleep(server.spacing)
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
                    if number is not None:
                        server.sent[number] = time.perf_counter_ns()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, args=(0.01,), daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}"

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()


@attrs.frozen
class Latency:
    """The delays of one provider and path, in microseconds."""

    provider: str
    path: str
    samples: tuple[float, ...]

    @property
    def median_us(self) -> float:
        return statistics.median(self.samples)

    @property
    def p95_us(self) -> float:
        return statistics.quantiles(self.samples, n=20)[-1]

    def as_json(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "path": self.path,
            "deltas": len(self.samples),
            "median_us": round(self.median_us, 1),
            "p95_us": round(self.p95_us, 1),
        }


def _number(text: str) -> int:
    return int(text.strip()[1:])


async def _sdk_openai(server: _Server, received: dict[int, int]) -> None:
    client = openai.AsyncOpenAI(api_key="sk-bench", base_url=server.url + "/v1", max_retries=0)
    stream = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "go"}], stream=True
    )
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            received[_number(chunk.choices[0].delta.content)] = time.perf_counter_ns()
    await client.close()


async def _sdk_anthropic(server: _Server, received: dict[int, int]) -> None:
    client = anthropic.AsyncAnthropic(api_key="sk-bench", base_url=server.url, max_retries=0)
    stream = await client.messages.create(
        model="claude-sonnet-4-6", max_tokens=1024, messages=[{"role": "user", "content": "go"}], stream=True
    )
    async for event in stream:
        if event.type == "content_block_delta" and event.delta.type == "text_delta":
            received[_number(event.delta.text)] = time.perf_counter_ns()
    await client.close()


def _request_stream(
    make: Callable[[_Server], OpenAIModel | AnthropicModel],
) -> Callable[[_Server, dict[int, int]], Any]:
    async def consume(server: _Server, received: dict[int, int]) -> None:
        prompt = [CanonicalMessage.request(UserPromptPart("go"))]
        async with make(server) as model:
            async for item in model.request_stream(prompt, [], ModelSettings()):
                if isinstance(item, TextDelta):
                    received[_number(item.text)] = time.perf_counter_ns()

    return consume


def _run_stream(
    make: Callable[[_Server], OpenAIModel | AnthropicModel],
) -> Callable[[_Server, dict[int, int]], Any]:
    async def consume(server: _Server, received: dict[int, int]) -> None:
        async with make(server) as model, Agent(model).run_stream("go") as stream:
            async for item in stream:
                if isinstance(item, TextDelta):
                    received[_number(item.text)] = time.perf_counter_ns()

    return consume


def _openai_model(server: _Server) -> OpenAIModel:
    return OpenAIModel("gpt-4o-mini", api_key="sk-bench", base_url=server.url + "/v1")


def _anthropic_model(server: _Server) -> AnthropicModel:
    return AnthropicModel("claude-sonnet-4-6", api_key="sk-bench", base_url=server.url)


_CASES: dict[tuple[str, str], tuple[Callable[[int], list[tuple[bytes, int | None]]], Any]] = {
    ("openai", "sdk"): (_openai_body, _sdk_openai),
    ("openai", "request_stream"): (_openai_body, _request_stream(_openai_model)),
    ("openai", "run_stream"): (_openai_body, _run_stream(_openai_model)),
    ("anthropic", "sdk"): (_anthropic_body, _sdk_anthropic),
    ("anthropic", "request_stream"): (_anthropic_body, _request_stream(_anthropic_model)),
    ("anthropic", "run_stream"): (_anthropic_body, _run_stream(_anthropic_model)),
}


def measure_all(deltas: int, runs: int, spacing_ms: float) -> Iterator[Latency]:
    """Measure every provider and path: ``runs`` streams of ``deltas`` deltas each.

    The rows take turns (one stream of each, then again), so a change in the machine's
    load falls on all of them alike; a first round warms up (imports, connections).
    """
    server = _Server()
    server.spacing = spacing_ms / 1000
    samples: dict[tuple[str, str], list[float]] = {case: [] for case in _CASES}
    try:
        for round_number in range(runs + 1):
            for case, (body, consume) in _CASES.items():
                server.bodies.append(body(deltas))
                server.sent.clear()
                received: dict[int, int] = {}
                asyncio.run(consume(server, received))
                if len(received) != deltas:
                    raise RuntimeError(f"{case}: got {len(received)} of {deltas} deltas")
                if round_number:
                    samples[case] += [(received[n] - server.sent[n]) / 1000 for n in range(deltas)]
    finally:
        server.close()
    for (provider, path), values in samples.items():
        yield Latency(provider, path, tuple(values))


def main() -> None:
    """Print the latencies as a Markdown table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--deltas", type=int, default=300, help="deltas per stream (default 300)")
    parser.add_argument("--runs", type=int, default=3, help="measured streams per row (default 3)")
    parser.add_argument("--spacing-ms", type=float, default=2.0, help="time between events (default 2 ms)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    # gpt-4o-mini's o200k_base file is not shipped offline: the run's usage estimate warns.
    warnings.filterwarnings("ignore", message="The o200k_base tokenizer")
    results = list(measure_all(args.deltas, args.runs, args.spacing_ms))
    print("| provider | path | deltas | median | p95 |")
    print("|---|---|---:|---:|---:|")
    for r in results:
        print(f"| {r.provider} | {r.path} | {len(r.samples)} | {r.median_us:,.0f} µs | {r.p95_us:,.0f} µs |")
    for provider in ("openai", "anthropic"):
        by_path = {r.path: r for r in results if r.provider == provider}
        overhead = by_path["run_stream"].median_us - by_path["sdk"].median_us
        print(f"\n{provider}: harness adds {overhead:,.0f} µs per delta at the median", end="")
    print()
    if args.json is not None:
        args.json.write_text(json.dumps([r.as_json() for r in results], indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
