"""AnthropicModel.request_stream against a loopback server sending Messages API SSE bodies.

The bodies are shaped as the streaming reference documents them: ``message_start``,
``content_block_start`` / ``content_block_delta`` (``text_delta``, ``thinking_delta``,
``signature_delta``, ``input_json_delta``) / ``content_block_stop``, ``message_delta``
with the usage, ``message_stop``, ``ping`` events anywhere and ``error`` events.
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
    supports_streaming,
)
from harness.core.usage import Usage
from harness.errors import (
    ModelAuthenticationError,
    ModelBadRequestError,
    ModelRateLimitError,
    ModelTimeoutError,
    ModelUnavailableError,
)
from harness.models.anthropic import AnthropicModel, RetryPolicy
from tests.models.conftest import FakeServer, Sleeps, Stream, sse  # pyright: ignore[reportMissingTypeStubs]

WEATHER = ToolDefinition(
    "get_weather",
    "Current weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
MESSAGE_ID = "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY"
START_USAGE = {
    "input_tokens": 2095,
    "cache_creation_input_tokens": 1000,
    "cache_read_input_tokens": 5000,
    "output_tokens": 1,
}
FINAL_USAGE = {**START_USAGE, "output_tokens": 503}

Block = tuple[
    str, Any
]  # ("text", [chunks]) | ("thinking", ([chunks], signature)) | ("tool_use", (id, name, [fragments]))


def event(data: dict[str, Any]) -> str:
    return sse(data, data["type"])


def block_events(index: int, block: Block) -> list[str]:
    kind, value = block
    if kind == "text":
        start: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": t} for t in value]
    elif kind == "thinking":
        chunks, signature = value
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": t} for t in chunks]
        deltas.append({"type": "signature_delta", "signature": signature})
    else:
        call_id, name, fragments = value
        start = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": f} for f in ["", *fragments]]
    return [
        event({"type": "content_block_start", "index": index, "content_block": start}),
        *(event({"type": "content_block_delta", "index": index, "delta": d}) for d in deltas),
        event({"type": "content_block_stop", "index": index}),
    ]


def events(
    *blocks: Block, stop_reason: str = "end_turn", final_usage: dict[str, Any] | None = None
) -> list[str]:
    """A whole streamed message: message_start, a ping, each block, message_delta, message_stop."""
    start = {
        "id": MESSAGE_ID,
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": "claude-sonnet-4-6",
        "stop_reason": None,
        "stop_sequence": None,
        "usage": START_USAGE,
    }
    out = [event({"type": "message_start", "message": start}), event({"type": "ping"})]
    for index, block in enumerate(blocks):
        out += block_events(index, block)
    delta = {"stop_reason": stop_reason, "stop_sequence": None}
    out.append(
        event({"type": "message_delta", "delta": delta, "usage": final_usage or {"output_tokens": 503}})
    )
    out.append(event({"type": "message_stop"}))
    return out


def message(*blocks: Block, stop_reason: str = "end_turn") -> dict[str, Any]:
    """The non-streamed Message for the same answer."""
    content: list[dict[str, Any]] = []
    for kind, value in blocks:
        if kind == "text":
            content.append({"type": "text", "text": "".join(value)})
        elif kind == "thinking":
            content.append({"type": "thinking", "thinking": "".join(value[0]), "signature": value[1]})
        else:
            call_id, name, fragments = value
            content.append(
                {"type": "tool_use", "id": call_id, "name": name, "input": json.loads("".join(fragments))}
            )
    return {
        "id": MESSAGE_ID,
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": FINAL_USAGE,
    }


def error_event(kind: str, text: str) -> str:
    return event({"type": "error", "error": {"type": kind, "message": text}})


def user(text: str) -> CanonicalMessage:
    return CanonicalMessage.request(UserPromptPart(text))


PROMPT = [user("What is the weather in Paris?")]


def new_model(server: FakeServer, sleeps: Sleeps, *, timeout: float = 5.0) -> AnthropicModel:
    return AnthropicModel(
        "claude-sonnet-4-6",
        api_key="sk-ant-test",
        base_url=server.url,
        retry=RetryPolicy(max_retries=2, base_delay=0.25, jitter=0.0, sleep=sleeps),
        timeout=timeout,
    )


@pytest.fixture
async def model(fake_server: FakeServer, sleeps: Sleeps) -> AsyncIterator[AnthropicModel]:
    m = new_model(fake_server, sleeps)
    yield m
    await m.aclose()


async def drain(
    model: AnthropicModel,
    messages: Sequence[CanonicalMessage] = PROMPT,
    tools: Sequence[ToolDefinition] = (),
    settings: ModelSettings | None = None,
) -> list[StreamDelta]:
    return [item async for item in model.request_stream(messages, tools, settings or ModelSettings())]


async def collect_into(items: AsyncIterator[StreamDelta], received: list[StreamDelta]) -> None:
    async for item in items:
        received.append(item)


def final(items: Sequence[StreamDelta]) -> CanonicalMessage:
    assert isinstance(items[-1], ResponseDone)
    assert not any(isinstance(item, ResponseDone) for item in items[:-1])
    return items[-1].message


def same(a: CanonicalMessage, b: CanonicalMessage) -> bool:
    """Equal but for the timestamp (Anthropic sends none: both are the time of arrival)."""
    return a.replace(timestamp=None) == b.replace(timestamp=None)


async def requested(
    server: FakeServer, model: AnthropicModel, body: dict[str, Any], tools: Sequence[ToolDefinition] = ()
) -> CanonicalMessage:
    server.reply(body)
    return await model.request(PROMPT, tools, ModelSettings())


async def test_text_streams_in_order_and_ends_with_the_request_message(
    fake_server: FakeServer, model: AnthropicModel
) -> None:
    assert supports_streaming(model)
    text: Block = ("text", ["Hel", "lo", ", world!"])
    fake_server.reply(Stream(events(text)))
    items = await drain(model)
    assert items[:-1] == [TextDelta("Hel", 0), TextDelta("lo", 0), TextDelta(", world!", 0)]
    streamed = final(items)
    assert streamed.parts == (TextPart("Hello, world!"),)
    assert streamed.finish_reason == "stop"
    assert streamed.model_name == "claude-sonnet-4-6"
    assert streamed.provider_response_id == MESSAGE_ID
    assert same(streamed, await requested(fake_server, model, message(text)))
    assert fake_server.bodies[0]["stream"] is True
    assert "stream" not in fake_server.bodies[1]
    assert fake_server.requests[0].path == "/v1/messages"


async def test_usage_includes_cache_tokens(fake_server: FakeServer, model: AnthropicModel) -> None:
    fake_server.reply(Stream(events(("text", ["ok"]))))
    usage = final(await drain(model)).usage
    assert usage == Usage(
        request_tokens=2095 + 1000 + 5000, response_tokens=503, cached_tokens=5000, cache_write_tokens=1000
    )


async def test_message_delta_usage_overrides_message_start(
    fake_server: FakeServer, model: AnthropicModel
) -> None:
    # The current API repeats the whole usage in message_delta, with the final counts.
    later = {
        "input_tokens": 10,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 7,
        "output_tokens": 42,
    }
    fake_server.reply(Stream(events(("text", ["ok"]), final_usage=later)))
    usage = final(await drain(model)).usage
    assert usage == Usage(request_tokens=17, response_tokens=42, cached_tokens=7, cache_write_tokens=0)


async def test_thinking_streams_with_its_signature(fake_server: FakeServer, model: AnthropicModel) -> None:
    thinking: Block = ("thinking", (["Paris is ", "in France."], SIGNATURE))
    text: Block = ("text", ["It is sunny."])
    fake_server.reply(Stream(events(thinking, text)))
    settings = ModelSettings(extra={"thinking": {"type": "enabled", "budget_tokens": 2048}})
    items = await drain(model, settings=settings)
    assert items[:-1] == [
        ThinkingDelta("Paris is ", 0),
        ThinkingDelta("in France.", 0),
        ThinkingDelta("", 0, signature=SIGNATURE),
        TextDelta("It is sunny.", 1),
    ]
    streamed = final(items)
    assert streamed.parts == (
        ThoughtPart("Paris is in France.", signature=SIGNATURE, provider_name="anthropic"),
        TextPart("It is sunny."),
    )
    assert fake_server.bodies[0]["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert same(streamed, await requested(fake_server, model, message(thinking, text)))


async def test_tool_use_input_streams_as_json_fragments(
    fake_server: FakeServer, model: AnthropicModel
) -> None:
    text: Block = ("text", ["Let me check."])
    call: Block = (
        "tool_use",
        ("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather", ['{"ci', 'ty": "Pa', 'ris"}']),
    )
    fake_server.reply(Stream(events(text, call, stop_reason="tool_use")))
    items = await drain(model, tools=[WEATHER])
    assert items[:-1] == [
        TextDelta("Let me check.", 0),
        ToolCallDelta(1, "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather", ""),
        ToolCallDelta(1, args_delta='{"ci'),
        ToolCallDelta(1, args_delta='ty": "Pa'),
        ToolCallDelta(1, args_delta='ris"}'),
    ]
    streamed = final(items)
    assert streamed.parts == (
        TextPart("Let me check."),
        ToolCallPart(
            tool_call_id="toolu_01T1x1fJ34qAmk2tNTrN7Up6", tool_name="get_weather", args={"city": "Paris"}
        ),
    )
    assert streamed.finish_reason == "tool_call"
    assert same(
        streamed, await requested(fake_server, model, message(text, call, stop_reason="tool_use"), [WEATHER])
    )


async def test_parallel_tool_calls_each_keep_their_block_index(
    fake_server: FakeServer, model: AnthropicModel
) -> None:
    first: Block = ("tool_use", ("toolu_a", "get_weather", ['{"city": "Paris"}']))
    second: Block = ("tool_use", ("toolu_b", "get_weather", ['{"city"', ': "Oslo"}']))
    fake_server.reply(Stream(events(first, second, stop_reason="tool_use")))
    items = await drain(model, tools=[WEATHER])
    starts = [i for i in items if isinstance(i, ToolCallDelta) and i.tool_call_id]
    assert [(d.index, d.tool_call_id) for d in starts] == [(0, "toolu_a"), (1, "toolu_b")]
    assert final(items).tool_calls == (
        ToolCallPart(tool_call_id="toolu_a", tool_name="get_weather", args={"city": "Paris"}),
        ToolCallPart(tool_call_id="toolu_b", tool_name="get_weather", args={"city": "Oslo"}),
    )


async def test_tool_input_that_is_not_json_is_kept_raw(
    fake_server: FakeServer, model: AnthropicModel
) -> None:
    call: Block = ("tool_use", ("toolu_c", "get_weather", ['{"city": "Pa']))
    fake_server.reply(Stream(events(call, stop_reason="tool_use")))
    assert final(await drain(model, tools=[WEATHER])).tool_calls == (
        ToolCallPart(tool_call_id="toolu_c", tool_name="get_weather", args='{"city": "Pa'),
    )


async def test_tool_use_without_input_is_an_empty_object(
    fake_server: FakeServer, model: AnthropicModel
) -> None:
    call: Block = ("tool_use", ("toolu_d", "list_cities", []))
    fake_server.reply(Stream(events(call, stop_reason="tool_use")))
    assert final(await drain(model)).tool_calls == (
        ToolCallPart(tool_call_id="toolu_d", tool_name="list_cities", args={}),
    )


async def test_error_event_mid_stream_is_typed_and_not_retried(
    fake_server: FakeServer, model: AnthropicModel, sleeps: Sleeps
) -> None:
    body = events(("text", ["Once upon", " a time"]))
    cut = body.index(next(e for e in body if "a time" in e))
    fake_server.reply(Stream([*body[:cut], error_event("overloaded_error", "Overloaded"), *body[cut:]]))
    received: list[StreamDelta] = []
    with pytest.raises(ModelUnavailableError) as caught:
        await collect_into(model.request_stream(PROMPT, [], ModelSettings()), received)
    assert received == [TextDelta("Once upon", 0)]
    assert "Overloaded" in str(caught.value)
    assert "not retried" in str(caught.value)
    assert caught.value.status_code is None
    assert len(fake_server.requests) == 1
    assert sleeps.delays == []


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        ("rate_limit_error", ModelRateLimitError),
        ("api_error", ModelUnavailableError),
        ("timeout_error", ModelTimeoutError),
        ("invalid_request_error", ModelBadRequestError),
        ("authentication_error", ModelAuthenticationError),
    ],
)
async def test_error_event_types_map_to_typed_errors(
    fake_server: FakeServer, model: AnthropicModel, kind: str, error: type[Exception]
) -> None:
    body = events(("text", ["a", "b"]))
    fake_server.reply(Stream([*body[:5], error_event(kind, f"{kind} happened")]))
    with pytest.raises(error, match=f"{kind} happened"):
        await drain(model)
    assert len(fake_server.requests) == 1  # after a delta: never retried


async def test_overloaded_before_the_first_delta_is_retried(
    fake_server: FakeServer, model: AnthropicModel, sleeps: Sleeps
) -> None:
    body = events(("text", ["recovered"]))
    fake_server.reply(Stream([body[0], error_event("overloaded_error", "Overloaded")]))
    fake_server.reply(Stream(body))
    items = await drain(model)
    assert items[:-1] == [TextDelta("recovered", 0)]
    assert len(fake_server.requests) == 2
    assert sleeps.delays == [0.25]


async def test_connection_dropped_mid_stream_is_typed(
    fake_server: FakeServer, model: AnthropicModel, sleeps: Sleeps
) -> None:
    body = events(("text", ["partial", " answer", " never", " ends"]))
    fake_server.reply(Stream(body, drop_after=5))  # message_start, ping, block start, two deltas
    received: list[StreamDelta] = []
    with pytest.raises(ModelUnavailableError) as caught:
        await collect_into(model.request_stream(PROMPT, [], ModelSettings()), received)
    assert received == [TextDelta("partial", 0), TextDelta(" answer", 0)]
    assert caught.value.provider == "anthropic"
    assert len(fake_server.requests) == 1
    assert sleeps.delays == []


async def test_stream_ending_before_message_stop_is_typed(
    fake_server: FakeServer, model: AnthropicModel
) -> None:
    body = events(("text", ["cut", " short"]))
    fake_server.reply(Stream(body[:5]))  # a clean end of body, mid-message
    with pytest.raises(ModelUnavailableError, match="no message_stop") as caught:
        await drain(model)
    assert caught.value.attempts == 1
    assert len(fake_server.requests) == 1


async def test_a_stream_cut_before_its_first_delta_is_retried(
    fake_server: FakeServer, model: AnthropicModel, sleeps: Sleeps
) -> None:
    body = events(("text", ["full answer"]))
    fake_server.reply(Stream(body[:2]))  # message_start and a ping, then the end of the body
    fake_server.reply(Stream(body))
    assert final(await drain(model)).parts == (TextPart("full answer"),)
    assert len(fake_server.requests) == 2
    assert sleeps.delays == [0.25]


async def test_a_stalled_stream_times_out_typed(fake_server: FakeServer, sleeps: Sleeps) -> None:
    body = events(("text", ["slow", " answer"]))
    # message_start, ping, the block's start and its first delta arrive at once; then a stall
    fake_server.reply(Stream(["".join(body[:4]), *body[4:]], delay=1.0))
    received: list[StreamDelta] = []
    async with new_model(fake_server, sleeps, timeout=0.3) as m:
        with pytest.raises(ModelTimeoutError) as caught:
            await collect_into(m.request_stream(PROMPT, [], ModelSettings()), received)
    assert received == [TextDelta("slow", 0)]
    assert caught.value.attempts == 1
    assert len(fake_server.requests) == 1


async def test_rate_limit_before_the_stream_is_retried(
    fake_server: FakeServer, model: AnthropicModel, sleeps: Sleeps
) -> None:
    limited = {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "Number of requests has exceeded"},
    }
    fake_server.reply(limited, status=429, headers={"retry-after": "2"})
    fake_server.reply(Stream(events(("text", ["after the wait"]))))
    items = await drain(model)
    assert items[:-1] == [TextDelta("after the wait", 0)]
    assert sleeps.delays == [2.0]
    assert len(fake_server.requests) == 2
    assert fake_server.bodies[0] == fake_server.bodies[1]


async def test_overloaded_status_exhausts_retries(fake_server: FakeServer, model: AnthropicModel) -> None:
    for _ in range(3):
        fake_server.reply(
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, status=529
        )
    with pytest.raises(ModelUnavailableError) as caught:
        await drain(model)
    assert caught.value.status_code == 529
    assert caught.value.attempts == 3


async def test_missing_credentials_are_a_typed_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    async with AnthropicModel("claude-sonnet-4-6", base_url="http://127.0.0.1:9") as m:
        with pytest.raises(ModelAuthenticationError, match="ANTHROPIC_API_KEY"):
            await drain(m)


async def test_stopping_early_closes_the_http_response(
    fake_server: FakeServer, model: AnthropicModel
) -> None:
    stream = Stream(events(("text", [f"w{i} " for i in range(200)])), delay=0.01)
    fake_server.reply(stream)
    items = model.request_stream(PROMPT, [], ModelSettings())
    assert await anext(items) == TextDelta("w0 ", 0)
    await items.aclose()  # pyright: ignore[reportAttributeAccessIssue]
    assert await asyncio.to_thread(stream.finished.wait, 10)
    assert stream.disconnected.is_set()  # the server's writes failed: the client had closed it
    assert len(stream.sent) < 200
    fake_server.reply(Stream(events(("text", ["still works"]))))
    assert final(await drain(model)).parts == (TextPart("still works"),)


text_chunks = st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=8)
argument_values = st.dictionaries(
    st.text(min_size=1, max_size=6), st.one_of(st.integers(), st.text(max_size=8), st.booleans()), max_size=4
)


def cut(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(points) if text[a:b]]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    thinking=st.lists(st.text(min_size=1, max_size=12), max_size=4),
    chunks=text_chunks,
    arguments=st.lists(argument_values, max_size=3),
    cuts=st.lists(st.integers(0, 200)),
)
def test_deltas_add_up_to_the_final_message(
    fake_server: FakeServer,
    sleeps: Sleeps,
    thinking: list[str],
    chunks: list[str],
    arguments: list[dict[str, Any]],
    cuts: list[int],
) -> None:
    blocks: list[Block] = [("thinking", (thinking, SIGNATURE))] if thinking else []
    blocks.append(("text", chunks))
    blocks += [
        ("tool_use", (f"toolu_{n}", "get_weather", cut(json.dumps(args), cuts)))
        for n, args in enumerate(arguments)
    ]
    stop_reason = "tool_use" if arguments else "end_turn"
    fake_server.reply(Stream(events(*blocks, stop_reason=stop_reason)))

    async def run() -> tuple[list[StreamDelta], CanonicalMessage]:
        async with new_model(fake_server, sleeps) as m:
            items = await drain(m, tools=[WEATHER])
            return items, await requested(
                fake_server, m, message(*blocks, stop_reason=stop_reason), [WEATHER]
            )

    items, plain = asyncio.run(run())
    streamed = final(items)
    text_index = 1 if thinking else 0
    assert "".join(i.text for i in items if isinstance(i, TextDelta)) == "".join(chunks)
    assert streamed.parts[text_index] == TextPart("".join(chunks))
    if thinking:
        assert "".join(i.text for i in items if isinstance(i, ThinkingDelta)) == "".join(thinking)
        assert [i.signature for i in items if isinstance(i, ThinkingDelta) and i.signature] == [SIGNATURE]
    for n, args in enumerate(arguments):
        index = text_index + 1 + n
        deltas = [i for i in items if isinstance(i, ToolCallDelta) and i.index == index]
        assert deltas[0].tool_call_id == f"toolu_{n}"
        assert json.loads("".join(d.args_delta for d in deltas)) == args
        assert streamed.parts[index] == ToolCallPart(
            tool_call_id=f"toolu_{n}", tool_name="get_weather", args=args
        )
    assert same(streamed, plain)
