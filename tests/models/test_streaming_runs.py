"""``Agent.run_stream`` end to end on both real SDKs against the loopback server.

Streamed text reaches the consumer as deltas in order; tool-call runs stream their
arguments; the streamed run's history equals the non-streamed run's (modulo timestamps);
leaving the stream mid-answer keeps the partial text in the ``[INTERRUPTED]`` response of
the session saved in SQLite, and closes the HTTP response.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from harness import Agent, CanonicalMessage, TextPart, ToolCall, ToolOutcome, hookimpl
from harness.core.streaming import TextDelta, ThinkingDelta, ToolCallDelta
from harness.history import check_invariants
from harness.hooks import PluginManager
from harness.models.anthropic import AnthropicModel
from harness.models.anthropic import RetryPolicy as AnthropicRetry
from harness.models.openai import OpenAIModel, RetryPolicy
from harness.run import events as ev
from harness.session import Session
from harness.stores import open_store
from tests.models.conftest import FakeServer, Sleeps, Stream, sse  # pyright: ignore[reportMissingTypeStubs]


def get_weather(city: str) -> str:
    """Current weather in a city.

    Args:
        city: The city.
    """
    return f"sunny in {city}"


# -- OpenAI bodies -----------------------------------------------------------------------

HEAD = {
    "id": "chatcmpl-run",
    "object": "chat.completion.chunk",
    "created": 1741570283,
    "model": "gpt-4o-mini-2024-07-18",
}
OPENAI_USAGE = {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}


def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> str:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
    return sse({**HEAD, "choices": [choice], "usage": None})


def openai_text(chunks: Sequence[str]) -> list[str]:
    return [
        chunk({"role": "assistant", "content": ""}),
        *(chunk({"content": c}) for c in chunks),
        chunk({}, "stop"),
        sse({**HEAD, "choices": [], "usage": OPENAI_USAGE}),
        sse("[DONE]"),
    ]


def openai_call(call_id: str, fragments: Sequence[str]) -> list[str]:
    first = {
        "index": 0,
        "id": call_id,
        "type": "function",
        "function": {"name": "get_weather", "arguments": ""},
    }
    return [
        chunk({"role": "assistant", "content": None, "tool_calls": [first]}),
        *(chunk({"tool_calls": [{"index": 0, "function": {"arguments": f}}]}) for f in fragments),
        chunk({}, "tool_calls"),
        sse({**HEAD, "choices": [], "usage": OPENAI_USAGE}),
        sse("[DONE]"),
    ]


def openai_completion(message: dict[str, Any], finish_reason: str) -> dict[str, Any]:
    return {
        **HEAD,
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish_reason}
        ],
        "usage": OPENAI_USAGE,
    }


# -- Anthropic bodies --------------------------------------------------------------------


def event(data: dict[str, Any]) -> str:
    return sse(data, data["type"])


def anthropic_events(
    blocks: Sequence[tuple[dict[str, Any], list[dict[str, Any]]]], stop_reason: str
) -> list[str]:
    start = {
        "id": "msg_run",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": "claude-sonnet-4-6",
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 40, "cache_read_input_tokens": 8, "output_tokens": 1},
    }
    out = [event({"type": "message_start", "message": start}), event({"type": "ping"})]
    for index, (block, deltas) in enumerate(blocks):
        out.append(event({"type": "content_block_start", "index": index, "content_block": block}))
        out += [event({"type": "content_block_delta", "index": index, "delta": d}) for d in deltas]
        out.append(event({"type": "content_block_stop", "index": index}))
    delta = {"stop_reason": stop_reason, "stop_sequence": None}
    out.append(event({"type": "message_delta", "delta": delta, "usage": {"output_tokens": 12}}))
    out.append(event({"type": "message_stop"}))
    return out


def text_block(chunks: Sequence[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return {"type": "text", "text": ""}, [{"type": "text_delta", "text": c} for c in chunks]


def thinking_block(chunks: Sequence[str], signature: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    deltas = [{"type": "thinking_delta", "thinking": c} for c in chunks]
    return {"type": "thinking", "thinking": "", "signature": ""}, [
        *deltas,
        {"type": "signature_delta", "signature": signature},
    ]


def tool_block(call_id: str, fragments: Sequence[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    start = {"type": "tool_use", "id": call_id, "name": "get_weather", "input": {}}
    return start, [{"type": "input_json_delta", "partial_json": f} for f in ["", *fragments]]


def anthropic_message(content: list[dict[str, Any]], stop_reason: str) -> dict[str, Any]:
    return {
        "id": "msg_run",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 40, "cache_read_input_tokens": 8, "output_tokens": 12},
    }


# -- helpers -----------------------------------------------------------------------------


def openai_model(server: FakeServer, sleeps: Sleeps) -> OpenAIModel:
    retry = RetryPolicy(max_retries=1, base_delay=0.0, jitter=0.0, sleep=sleeps)
    return OpenAIModel("gpt-4o-mini", api_key="sk-test", base_url=server.url + "/v1", retry=retry, timeout=10)


def anthropic_model(server: FakeServer, sleeps: Sleeps) -> AnthropicModel:
    retry = AnthropicRetry(max_retries=1, base_delay=0.0, jitter=0.0, sleep=sleeps)
    return AnthropicModel("claude-sonnet-4-6", api_key="sk-ant", base_url=server.url, retry=retry, timeout=10)


def untimed(messages: Sequence[CanonicalMessage]) -> list[CanonicalMessage]:
    """The messages without their timestamps (and their parts')."""
    out: list[CanonicalMessage] = []
    for message in messages:
        parts = [attrs.evolve(p, timestamp=None) if hasattr(p, "timestamp") else p for p in message.parts]
        out.append(message.replace(timestamp=None, parts=tuple(parts)))
    return out


async def streamed_run(agent: Agent, prompt: str) -> tuple[list[object], Any]:
    seen: list[object] = []
    async with agent.run_stream(prompt) as stream:
        async for item in stream:
            seen.append(item)
    return seen, stream.result


# -- tests -------------------------------------------------------------------------------


async def test_openai_text_reaches_the_consumer_in_order(fake_server: FakeServer, sleeps: Sleeps) -> None:
    chunks = ["The ", "weather ", "is ", "fine."]
    fake_server.reply(Stream(openai_text(chunks)))
    async with openai_model(fake_server, sleeps) as model:
        seen, result = await streamed_run(Agent(model), "How is the weather?")
    assert [e.text for e in seen if isinstance(e, TextDelta)] == chunks
    assert isinstance(seen[0], ev.RequestStarted)
    assert isinstance(seen[-1], ev.RunFinished)
    finished = [e for e in seen if isinstance(e, ev.RequestFinished)]
    assert [f.usage.request_tokens for f in finished] == [50]
    assert seen.index(finished[0]) > max(i for i, e in enumerate(seen) if isinstance(e, TextDelta))
    assert result.output == "The weather is fine."
    assert fake_server.bodies[0]["stream"] is True


async def test_openai_tool_run_streams_and_equals_the_plain_run(
    fake_server: FakeServer, sleeps: Sleeps
) -> None:
    fake_server.reply(Stream(openai_call("call_1", ['{"city"', ': "Paris"}'])))
    fake_server.reply(Stream(openai_text(["It is ", "sunny in Paris."])))
    async with openai_model(fake_server, sleeps) as model:
        seen, streamed = await streamed_run(Agent(model, tools=[get_weather]), "Weather in Paris?")
    kinds = [type(e).__name__ for e in seen]
    assert kinds.index("ToolCallStarted") < kinds.index("ToolCallReady") < kinds.index("ToolResult")
    started = next(e for e in seen if isinstance(e, ev.ToolCallStarted))
    assert (started.tool_call_id, started.tool_name) == ("call_1", "get_weather")
    fragments = [e.args_delta for e in seen if isinstance(e, ToolCallDelta)]
    assert "".join(fragments) == '{"city": "Paris"}'
    result = next(e for e in seen if isinstance(e, ev.ToolResult))
    assert result.part.content == "sunny in Paris"
    assert streamed.output == "It is sunny in Paris."

    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
    fake_server.reply(openai_completion({"content": None, "tool_calls": [call]}, "tool_calls"))
    fake_server.reply(openai_completion({"content": "It is sunny in Paris."}, "stop"))
    async with openai_model(fake_server, sleeps) as model:
        plain = await Agent(model, tools=[get_weather]).run("Weather in Paris?")
    assert untimed(streamed.new_messages) == untimed(plain.new_messages)
    assert streamed.usage == plain.usage
    assert fake_server.bodies[1]["messages"] == fake_server.bodies[3]["messages"]  # the same second request


async def test_anthropic_thinking_tool_run_streams_and_equals_the_plain_run(
    fake_server: FakeServer, sleeps: Sleeps
) -> None:
    signature = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxB"
    fake_server.reply(
        Stream(
            anthropic_events(
                [
                    thinking_block(["Need the ", "weather."], signature),
                    text_block(["Checking."]),
                    tool_block("toolu_1", ['{"city": ', '"Oslo"}']),
                ],
                "tool_use",
            )
        )
    )
    fake_server.reply(Stream(anthropic_events([text_block(["Sunny ", "in Oslo."])], "end_turn")))
    async with anthropic_model(fake_server, sleeps) as model:
        seen, streamed = await streamed_run(Agent(model, tools=[get_weather]), "Weather in Oslo?")
    thinking = [e for e in seen if isinstance(e, ThinkingDelta)]
    assert "".join(e.text for e in thinking) == "Need the weather."
    assert thinking[-1].signature == signature
    assert [e.text for e in seen if isinstance(e, TextDelta)] == ["Checking.", "Sunny ", "in Oslo."]
    assert streamed.output == "Sunny in Oslo."
    # The thinking block goes back to Anthropic with its signature.
    assistant = fake_server.bodies[1]["messages"][1]
    assert assistant["content"][0] == {
        "type": "thinking",
        "thinking": "Need the weather.",
        "signature": signature,
    }

    first = [
        {"type": "thinking", "thinking": "Need the weather.", "signature": signature},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
    ]
    fake_server.reply(anthropic_message(first, "tool_use"))
    fake_server.reply(anthropic_message([{"type": "text", "text": "Sunny in Oslo."}], "end_turn"))
    async with anthropic_model(fake_server, sleeps) as model:
        plain = await Agent(model, tools=[get_weather]).run("Weather in Oslo?")
    assert untimed(streamed.new_messages) == untimed(plain.new_messages)
    assert streamed.usage == plain.usage


def slow(events: list[str]) -> Stream:
    return Stream(events, delay=0.15)


@pytest.mark.parametrize(
    ("make_model", "body"),
    [
        (openai_model, lambda: openai_text(["partial ", "answer", *[f" more{i}" for i in range(40)]])),
        (
            anthropic_model,
            lambda: anthropic_events(
                [text_block(["partial ", "answer", *[f" more{i}" for i in range(40)]])], "end_turn"
            ),
        ),
    ],
    ids=["openai", "anthropic"],
)
async def test_leaving_mid_stream_keeps_the_partial_text_in_the_saved_session(
    fake_server: FakeServer,
    sleeps: Sleeps,
    tmp_path: Path,
    make_model: Callable[[FakeServer, Sleeps], OpenAIModel | AnthropicModel],
    body: Callable[[], list[str]],
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    store = open_store(url)
    session = Session.create(store=store)
    stream_body = slow(body())
    fake_server.reply(stream_body)
    texts: list[str] = []
    model = make_model(fake_server, sleeps)
    async with model, Agent(model).run_stream("Tell me a long story", session=session) as stream:
        async for item in stream:
            if isinstance(item, TextDelta):
                texts.append(item.text)
                if len(texts) == 2:
                    break
    assert texts == ["partial ", "answer"]
    assert await asyncio.to_thread(stream_body.finished.wait, 10)
    assert stream_body.disconnected.is_set()  # the HTTP response was closed, not read to its end
    other = open_store(url)
    saved = Session.open(other, session.session_id)
    last = saved.messages[-1]
    assert last.kind == "response"
    assert [p.content for p in last.parts if isinstance(p, TextPart)] == ["partial answer", "[INTERRUPTED]"]
    assert check_invariants(saved.messages) == []
    assert len(fake_server.requests) == 1
    store.close()
    other.close()


# -- paused and resumed runs ---------------------------------------------------------------


class HoldWeather:
    """Holds get_weather back until a decision says "yes" (the core's pause mechanism, no plugin)."""

    @hookimpl(wrapper=True)
    def wrap_tool_call(self, call: ToolCall) -> Generator[None, ToolOutcome, object]:
        if call.decision is None:
            return ToolOutcome("deferred", error="a human decides")
        return (yield)


def holding_agent(model: OpenAIModel | AnthropicModel) -> Agent:
    manager = PluginManager()
    manager.register(HoldWeather(), name="hold_weather")
    return Agent(model, tools=[get_weather], plugin_manager=manager)


@pytest.mark.parametrize(
    ("make_model", "call_body", "answer_body", "call_id"),
    [
        (
            openai_model,
            lambda: openai_call("call_1", ['{"city"', ': "Paris"}']),
            lambda: openai_text(["It is ", "sunny."]),
            "call_1",
        ),
        (
            anthropic_model,
            lambda: anthropic_events([tool_block("toolu_1", ['{"city": ', '"Paris"}'])], "tool_use"),
            lambda: anthropic_events([text_block(["It is ", "sunny."])], "end_turn"),
            "toolu_1",
        ),
    ],
    ids=["openai", "anthropic"],
)
async def test_a_streamed_run_pauses_and_resumes_from_the_store(
    fake_server: FakeServer,
    sleeps: Sleeps,
    tmp_path: Path,
    make_model: Callable[[FakeServer, Sleeps], OpenAIModel | AnthropicModel],
    call_body: Callable[[], list[str]],
    answer_body: Callable[[], list[str]],
    call_id: str,
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    store = open_store(url)
    session = Session.create(store=store)
    fake_server.reply(Stream(call_body()))
    model = make_model(fake_server, sleeps)
    async with model, holding_agent(model).run_stream("Weather in Paris?", session=session) as first:
        seen = [event async for event in first]
    paused = first.result
    assert paused.status == "awaiting_approval"
    assert [c.tool_call_id for c in paused.pending_approvals] == [call_id]
    assert any(isinstance(e, ev.ApprovalNeeded) for e in seen)
    assert not any(isinstance(e, ev.ToolResult) for e in seen)

    # A new store handle, a new model and agent: only the stored session carries the pause.
    other = open_store(url)
    reopened = Session.open(other, session.session_id)
    assert check_invariants(reopened.messages) == []
    fake_server.reply(Stream(answer_body()))
    model = make_model(fake_server, sleeps)
    async with (
        model,
        holding_agent(model).run_stream(None, session=reopened, approvals={call_id: "yes"}) as stream,
    ):
        events = [event async for event in stream]
    results = [e for e in events if isinstance(e, ev.ToolResult)]
    assert [r.part.content for r in results] == ["sunny in Paris"]
    assert stream.result.output == "It is sunny."
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "It is sunny."
    assert len(fake_server.requests) == 2
    assert "awaiting approval" not in str(fake_server.bodies[1]).lower()  # the placeholder is never sent
    store.close()
    other.close()
