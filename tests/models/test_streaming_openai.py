"""OpenAIModel.request_stream against a loopback server sending Chat Completions SSE bodies.

The bodies are shaped as the API reference documents streamed chat completions:
``chat.completion.chunk`` objects (``usage: null`` on each one when ``include_usage`` is
on, then a last chunk with no choices carrying the usage) and ``data: [DONE]``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core import CanonicalMessage, ModelSettings, TextPart, ThoughtPart, ToolCallPart, ToolDefinition
from harness.core.messages import UserPromptPart
from harness.core.streaming import (
    ResponseDone,
    StreamDelta,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    collect_stream,
    supports_streaming,
)
from harness.core.usage import Usage
from harness.errors import (
    ModelBadRequestError,
    ModelRateLimitError,
    ModelTimeoutError,
    ModelUnavailableError,
)
from harness.models._openai_stream import REFUSAL_INDEX, TEXT_INDEX, THINKING_INDEX, TOOL_CALL_INDEX_OFFSET
from harness.models.openai import OpenAIModel, RetryPolicy
from tests.models.conftest import FakeServer, Sleeps, Stream, sse  # pyright: ignore[reportMissingTypeStubs]

WEATHER = ToolDefinition(
    "get_weather",
    "Current weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
USAGE = {
    "prompt_tokens": 1117,
    "completion_tokens": 46,
    "total_tokens": 1163,
    "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 12, "audio_tokens": 0},
}
HEAD = {
    "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
    "object": "chat.completion.chunk",
    "created": 1741570283,
    "model": "gpt-4o-mini-2024-07-18",
    "system_fingerprint": "fp_06737a9306",
    "service_tier": "default",
}

Call = tuple[str, str, list[str]]  # id, name, argument fragments


def chunk(delta: dict[str, Any] | None, finish_reason: str | None = None) -> str:
    """One ``data:`` event holding a chat.completion.chunk of choice 0."""
    choice = {"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish_reason}
    return sse({**HEAD, "choices": [choice], "usage": None})


def events(
    content: Sequence[str] = (),
    *,
    reasoning: Sequence[str] = (),
    refusal: Sequence[str] = (),
    calls: Sequence[Call] = (),
    finish_reason: str = "stop",
    usage: dict[str, Any] | None = USAGE,
    done: bool = True,
) -> list[str]:
    """A whole streamed completion: role chunk, fragments, finish chunk, usage chunk, [DONE]."""
    out = [chunk({"role": "assistant", "content": "", "refusal": None})]
    out += [chunk({"reasoning_content": text}) for text in reasoning]
    out += [chunk({"content": text}) for text in content]
    out += [chunk({"refusal": text}) for text in refusal]
    for position, (call_id, name, fragments) in enumerate(calls):
        first = {
            "index": position,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        out.append(chunk({"tool_calls": [first]}))
        out += [chunk({"tool_calls": [{"index": position, "function": {"arguments": f}}]}) for f in fragments]
    out.append(chunk({}, finish_reason))
    if usage is not None:
        out.append(sse({**HEAD, "choices": [], "usage": usage}))
    if done:
        out.append(sse("[DONE]"))
    return out


def completion(
    content: str | None = None,
    *,
    reasoning: str | None = None,
    calls: Sequence[Call] = (),
    finish_reason: str = "stop",
    usage: dict[str, Any] | None = USAGE,
) -> dict[str, Any]:
    """The non-streamed chat.completion for the same answer."""
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None, "annotations": []}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": "".join(f)}}
            for i, n, f in calls
        ]
    return {
        **HEAD,
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}],
        "usage": usage,
    }


def user(text: str) -> CanonicalMessage:
    return CanonicalMessage.request(UserPromptPart(text))


PROMPT = [user("What is the weather in Paris?")]


def new_model(server: FakeServer, sleeps: Sleeps, *, timeout: float = 5.0) -> OpenAIModel:
    return OpenAIModel(
        "gpt-4o-mini",
        api_key="sk-test-key",
        base_url=server.url + "/v1",
        retry=RetryPolicy(max_retries=2, base_delay=0.25, jitter=0.0, sleep=sleeps),
        timeout=timeout,
    )


@pytest.fixture
async def model(fake_server: FakeServer, sleeps: Sleeps) -> AsyncIterator[OpenAIModel]:
    m = new_model(fake_server, sleeps)
    yield m
    await m.aclose()


async def drain(
    model: OpenAIModel, messages: Sequence[CanonicalMessage] = PROMPT, tools: Sequence[ToolDefinition] = ()
) -> list[StreamDelta]:
    return [item async for item in model.request_stream(messages, tools, ModelSettings())]


def text_of(message: CanonicalMessage) -> str:
    return "".join(p.content for p in message.parts if isinstance(p, TextPart))


async def collect_into(items: AsyncIterator[StreamDelta], received: list[StreamDelta]) -> None:
    async for item in items:
        received.append(item)


def final(items: Sequence[StreamDelta]) -> CanonicalMessage:
    assert isinstance(items[-1], ResponseDone)
    assert not any(isinstance(item, ResponseDone) for item in items[:-1])
    return items[-1].message


async def test_text_streams_in_order_and_ends_with_the_request_message(
    fake_server: FakeServer, model: OpenAIModel
) -> None:
    assert supports_streaming(model)
    fake_server.reply(Stream(events(["Hel", "lo", ", wor", "ld!"])))
    items = await drain(model)
    assert items[:-1] == [TextDelta(t, TEXT_INDEX) for t in ["Hel", "lo", ", wor", "ld!"]]
    streamed = final(items)
    fake_server.reply(completion("Hello, world!"))
    requested = await model.request(PROMPT, [], ModelSettings())
    assert streamed == requested  # same parts, usage, finish reason, model, id and timestamp
    assert streamed.parts == (TextPart("Hello, world!"),)
    assert streamed.finish_reason == "stop"
    assert streamed.model_name == "gpt-4o-mini-2024-07-18"
    assert streamed.provider_response_id == HEAD["id"]
    sent = fake_server.bodies[0]
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}
    assert "stream" not in fake_server.bodies[1]


async def test_usage_comes_from_the_last_chunk(fake_server: FakeServer, model: OpenAIModel) -> None:
    fake_server.reply(Stream(events(["ok"])))
    message = final(await drain(model))
    assert message.usage == Usage(
        request_tokens=1117, response_tokens=46, cached_tokens=1024, extra={"reasoning_tokens": 12}
    )


async def test_tool_call_arguments_stream_as_fragments(fake_server: FakeServer, model: OpenAIModel) -> None:
    fragments = ['{"ci', 'ty": "Pa', 'ris"}']
    calls = [("call_abc123", "get_weather", fragments)]
    fake_server.reply(Stream(events(calls=calls, finish_reason="tool_calls")))
    items = await drain(model, tools=[WEATHER])
    index = TOOL_CALL_INDEX_OFFSET
    assert items[:-1] == [
        ToolCallDelta(index, "call_abc123", "get_weather", ""),
        *(ToolCallDelta(index, args_delta=f) for f in fragments),
    ]
    streamed = final(items)
    assert streamed.parts == (
        ToolCallPart(tool_call_id="call_abc123", tool_name="get_weather", args={"city": "Paris"}),
    )
    assert streamed.finish_reason == "tool_call"
    fake_server.reply(completion(calls=calls, finish_reason="tool_calls"))
    assert streamed == await model.request(PROMPT, [WEATHER], ModelSettings())
    assert fake_server.bodies[0]["tools"][0]["function"]["name"] == "get_weather"


async def test_parallel_tool_calls_interleaved_keep_their_own_indices(
    fake_server: FakeServer, model: OpenAIModel
) -> None:
    def call_chunk(position: int, **fields: Any) -> str:
        return chunk({"tool_calls": [{"index": position, **fields}]})

    body = [
        chunk({"role": "assistant", "content": None}),
        call_chunk(0, id="call_1", type="function", function={"name": "get_weather", "arguments": ""}),
        call_chunk(1, id="call_2", type="function", function={"name": "get_weather", "arguments": '{"ci'}),
        call_chunk(0, function={"arguments": '{"city": "Paris"}'}),
        call_chunk(1, function={"arguments": 'ty": "Oslo"}'}),
        chunk({}, "tool_calls"),
        sse({**HEAD, "choices": [], "usage": USAGE}),
        sse("[DONE]"),
    ]
    fake_server.reply(Stream(body))
    items = await drain(model, tools=[WEATHER])
    first, second = TOOL_CALL_INDEX_OFFSET, TOOL_CALL_INDEX_OFFSET + 1
    assert items[:-1] == [
        ToolCallDelta(first, "call_1", "get_weather", ""),
        ToolCallDelta(second, "call_2", "get_weather", '{"ci'),
        ToolCallDelta(first, args_delta='{"city": "Paris"}'),
        ToolCallDelta(second, args_delta='ty": "Oslo"}'),
    ]
    assert final(items).parts == (
        ToolCallPart(tool_call_id="call_1", tool_name="get_weather", args={"city": "Paris"}),
        ToolCallPart(tool_call_id="call_2", tool_name="get_weather", args={"city": "Oslo"}),
    )


async def test_text_then_tool_call_do_not_collide(fake_server: FakeServer, model: OpenAIModel) -> None:
    calls = [("call_9", "get_weather", ['{"city": "Rome"}'])]
    fake_server.reply(Stream(events(["Let me check."], calls=calls, finish_reason="tool_calls")))
    items = await drain(model, tools=[WEATHER])
    assert {type(i).__name__: i.index for i in items[:-1] if not isinstance(i, ResponseDone)} == {
        "TextDelta": TEXT_INDEX,
        "ToolCallDelta": TOOL_CALL_INDEX_OFFSET,
    }
    assert final(items).parts == (
        TextPart("Let me check."),
        ToolCallPart(tool_call_id="call_9", tool_name="get_weather", args={"city": "Rome"}),
    )


async def test_a_call_sent_whole_without_index_is_one_delta(
    fake_server: FakeServer, model: OpenAIModel
) -> None:
    # Some compatible servers (Ollama) send each call whole, in one chunk, without "index".
    whole = {
        "id": "call_x",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city":"Nice"}'},
    }
    fake_server.reply(Stream([chunk({"role": "assistant", "tool_calls": [whole]}), chunk({}, "tool_calls")]))
    items = await drain(model, tools=[WEATHER])
    assert items[:-1] == [ToolCallDelta(TOOL_CALL_INDEX_OFFSET, "call_x", "get_weather", '{"city":"Nice"}')]
    message = final(items)
    assert message.parts == (
        ToolCallPart(tool_call_id="call_x", tool_name="get_weather", args={"city": "Nice"}),
    )
    assert message.usage is None  # no usage chunk: the server sent none (as a request without usage)


async def test_reasoning_and_refusal_stream_as_their_own_parts(
    fake_server: FakeServer, model: OpenAIModel
) -> None:
    fake_server.reply(Stream(events(reasoning=["Think", "ing."], refusal=["I can't ", "help."])))
    items = await drain(model)
    assert items[:-1] == [
        ThinkingDelta("Think", THINKING_INDEX),
        ThinkingDelta("ing.", THINKING_INDEX),
        TextDelta("I can't ", REFUSAL_INDEX),
        TextDelta("help.", REFUSAL_INDEX),
    ]
    assert final(items).parts == (ThoughtPart("Thinking.", provider_name="openai"), TextPart("I can't help."))


async def test_collect_stream_feeds_the_sink_and_returns_the_message(
    fake_server: FakeServer, model: OpenAIModel
) -> None:
    fake_server.reply(Stream(events(["a", "b"])))
    seen: list[object] = []
    message = await collect_stream(model, PROMPT, [], ModelSettings(), seen.append)
    assert seen == [TextDelta("a", TEXT_INDEX), TextDelta("b", TEXT_INDEX)]
    assert text_of(message) == "ab"


async def test_error_event_mid_stream_is_typed_and_not_retried(
    fake_server: FakeServer, model: OpenAIModel, sleeps: Sleeps
) -> None:
    error = {
        "error": {"message": "The server had an error while processing your request.", "type": "server_error"}
    }
    body = [*events(["Once upon"])[:2], sse(error), *events([" a time"])[1:]]
    fake_server.reply(Stream(body))
    received: list[StreamDelta] = []
    with pytest.raises(ModelUnavailableError) as caught:
        await collect_into(model.request_stream(PROMPT, [], ModelSettings()), received)
    assert received == [TextDelta("Once upon", TEXT_INDEX)]
    assert "The server had an error while processing your request." in str(caught.value)
    assert "not retried" in str(caught.value)
    assert caught.value.attempts == 1
    assert len(fake_server.requests) == 1
    assert sleeps.delays == []


async def test_error_event_before_the_first_delta_is_retried(
    fake_server: FakeServer, model: OpenAIModel, sleeps: Sleeps
) -> None:
    fake_server.reply(Stream([sse({"error": {"message": "Overloaded", "type": "server_error"}})]))
    fake_server.reply(Stream(events(["second try"])))
    items = await drain(model)
    assert text_of(final(items)) == "second try"
    assert len(fake_server.requests) == 2
    assert fake_server.bodies[0] == fake_server.bodies[1]
    assert sleeps.delays == [0.25]


async def test_invalid_request_error_event_is_a_bad_request(
    fake_server: FakeServer, model: OpenAIModel
) -> None:
    fake_server.reply(
        Stream([sse({"error": {"message": "bad tool schema", "type": "invalid_request_error"}})])
    )
    with pytest.raises(ModelBadRequestError, match="bad tool schema"):
        await drain(model)
    assert len(fake_server.requests) == 1


async def test_connection_dropped_mid_stream_is_typed(
    fake_server: FakeServer, model: OpenAIModel, sleeps: Sleeps
) -> None:
    fake_server.reply(Stream(events(["partial", " answer", " never", " ends"]), drop_after=3))
    received: list[StreamDelta] = []
    with pytest.raises(ModelUnavailableError) as caught:
        await collect_into(model.request_stream(PROMPT, [], ModelSettings()), received)
    assert received == [TextDelta("partial", TEXT_INDEX), TextDelta(" answer", TEXT_INDEX)]
    assert caught.value.provider == "openai"
    assert len(fake_server.requests) == 1
    assert sleeps.delays == []


async def test_stream_ending_without_finish_reason_is_typed(
    fake_server: FakeServer, model: OpenAIModel
) -> None:
    # A proxy cut the body cleanly: no finish chunk, no usage, no [DONE].
    fake_server.reply(Stream(events(["cut", " short"])[:3]))
    with pytest.raises(ModelUnavailableError, match="no finish_reason") as caught:
        await drain(model)
    assert caught.value.attempts == 1
    assert len(fake_server.requests) == 1


async def test_an_empty_stream_is_retried(
    fake_server: FakeServer, model: OpenAIModel, sleeps: Sleeps
) -> None:
    fake_server.reply(Stream([]))  # headers, then the end of the body: nothing was received
    fake_server.reply(Stream(events(["full answer"])))
    assert text_of(final(await drain(model))) == "full answer"
    assert len(fake_server.requests) == 2
    assert sleeps.delays == [0.25]


async def test_rate_limit_before_the_stream_is_retried(
    fake_server: FakeServer, model: OpenAIModel, sleeps: Sleeps
) -> None:
    limited = {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}
    fake_server.reply(limited, status=429, headers={"retry-after-ms": "10"})
    fake_server.reply(Stream(events(["after", " the wait"])))
    items = await drain(model)
    assert text_of(final(items)) == "after the wait"
    assert sleeps.delays == [pytest.approx(0.01)]
    assert len(fake_server.requests) == 2


async def test_rate_limit_exhausts_retries_with_typed_error(
    fake_server: FakeServer, model: OpenAIModel, sleeps: Sleeps
) -> None:
    for _ in range(3):
        fake_server.reply({"error": {"message": "Rate limit reached", "type": "requests"}}, status=429)
    with pytest.raises(ModelRateLimitError) as caught:
        await drain(model)
    assert caught.value.attempts == 3
    assert sleeps.delays == [0.25, 0.5]


async def test_a_stalled_stream_times_out_typed(fake_server: FakeServer, sleeps: Sleeps) -> None:
    fake_server.reply(Stream(events(["slow", " answer"])[1:], delay=1.0))
    received: list[StreamDelta] = []
    async with new_model(fake_server, sleeps, timeout=0.3) as m:
        with pytest.raises(ModelTimeoutError) as caught:
            await collect_into(m.request_stream(PROMPT, [], ModelSettings()), received)
    assert received == [TextDelta("slow", TEXT_INDEX)]
    assert caught.value.attempts == 1  # the stream had started: no retry
    assert len(fake_server.requests) == 1


async def test_a_stream_stalling_before_its_first_delta_is_retried(
    fake_server: FakeServer, sleeps: Sleeps
) -> None:
    fake_server.reply(Stream(events(["slow"]), delay=1.0))  # the role chunk carries no delta
    fake_server.reply(Stream(events(["fast"])))
    async with new_model(fake_server, sleeps, timeout=0.3) as m:
        assert text_of(final(await drain(m))) == "fast"
    assert len(fake_server.requests) == 2
    assert sleeps.delays == [0.25]


async def test_stopping_early_closes_the_http_response(
    fake_server: FakeServer, model: OpenAIModel, sleeps: Sleeps
) -> None:
    stream = Stream(events([f"w{i} " for i in range(200)]), delay=0.01)
    fake_server.reply(stream)
    items = model.request_stream(PROMPT, [], ModelSettings())
    first = await anext(items)
    assert first == TextDelta("w0 ", TEXT_INDEX)
    await items.aclose()  # pyright: ignore[reportAttributeAccessIssue]
    assert await asyncio.to_thread(stream.finished.wait, 10)
    assert stream.disconnected.is_set()  # the server's writes failed: the client had closed it
    assert len(stream.sent) < 200
    fake_server.reply(Stream(events(["still works"])))  # the client is still usable
    assert text_of(final(await drain(model))) == "still works"


async def test_a_consumer_leaving_collect_stream_early_closes_the_response(
    fake_server: FakeServer, model: OpenAIModel
) -> None:
    stream = Stream(events([f"w{i} " for i in range(200)]), delay=0.01)
    fake_server.reply(stream)

    class StopError(Exception):
        pass

    def sink(delta: object) -> None:
        raise StopError

    with pytest.raises(StopError):
        await collect_stream(model, PROMPT, [], ModelSettings(), sink)
    assert await asyncio.to_thread(stream.finished.wait, 10)
    assert stream.disconnected.is_set()


text_chunks = st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=8)
argument_values = st.dictionaries(
    st.text(min_size=1, max_size=6), st.one_of(st.integers(), st.text(max_size=8), st.booleans()), max_size=4
)


def cut(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(points) if text[a:b]]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    chunks=text_chunks, arguments=st.lists(argument_values, max_size=3), cuts=st.lists(st.integers(0, 200))
)
def test_deltas_add_up_to_the_final_message(
    fake_server: FakeServer,
    sleeps: Sleeps,
    chunks: list[str],
    arguments: list[dict[str, Any]],
    cuts: list[int],
) -> None:
    calls: list[Call] = [
        (f"call_{n}", "get_weather", cut(json.dumps(args), cuts)) for n, args in enumerate(arguments)
    ]
    fake_server.reply(Stream(events(chunks, calls=calls, finish_reason="tool_calls" if calls else "stop")))

    async def run() -> list[StreamDelta]:
        async with new_model(fake_server, sleeps) as m:
            return await drain(m, tools=[WEATHER])

    items = asyncio.run(run())
    message = final(items)
    text = "".join(i.text for i in items if isinstance(i, TextDelta))
    assert [p.content for p in message.parts if isinstance(p, TextPart)] == ["".join(chunks)]
    assert text == "".join(chunks)
    for position, (call_id, _, _) in enumerate(calls):
        deltas = [
            i for i in items if isinstance(i, ToolCallDelta) and i.index == TOOL_CALL_INDEX_OFFSET + position
        ]
        assert deltas[0].tool_call_id == call_id
        assert json.loads("".join(d.args_delta for d in deltas)) == arguments[position]
        assert message.tool_calls[position].args_as_dict() == arguments[position]
