"""FunctionModel and TestModel stream: a stream function's items, or a response cut into deltas."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import (
    CanonicalMessage,
    ModelSettings,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolDefinition,
    ToolReturnPart,
)
from harness.core.effects import InProcessEffects, ModelRequestUnit
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
from harness.errors import ModelResponseError
from harness.models.function import FunctionInfo, FunctionModel, StreamItem, estimate_usage, response_deltas
from harness.models.test import TestModel

WEATHER = ToolDefinition(
    "get_weather",
    "Current weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
PROMPT = [CanonicalMessage.request(UserPromptPart("What is the weather in Paris?"))]


async def drain(
    model: FunctionModel | TestModel,
    messages: Sequence[CanonicalMessage] = PROMPT,
    tools: Sequence[ToolDefinition] = (),
) -> list[StreamDelta]:
    return [item async for item in model.request_stream(messages, tools, ModelSettings())]


def final(items: Sequence[StreamDelta]) -> CanonicalMessage:
    assert isinstance(items[-1], ResponseDone)
    assert not any(isinstance(item, ResponseDone) for item in items[:-1])
    return items[-1].message


def untimed(message: CanonicalMessage) -> CanonicalMessage:
    return message.replace(timestamp=None)


async def test_stream_function_items_become_deltas_and_the_response() -> None:
    seen: list[tuple[list[CanonicalMessage], FunctionInfo]] = []

    async def stream(messages: list[CanonicalMessage], info: FunctionInfo) -> AsyncIterator[StreamItem]:
        seen.append((messages, info))
        yield "Let me "
        yield "check."
        yield ToolCallDelta(1, "call_1", "get_weather", '{"city": ')
        yield ToolCallDelta(1, args_delta='"Paris"}')

    model = FunctionModel(stream_function=stream, model_name="gpt-4o")
    assert supports_streaming(model)
    items = await drain(model, tools=[WEATHER])
    assert items[:-1] == [
        TextDelta("Let me ", 0),
        TextDelta("check.", 0),
        ToolCallDelta(1, "call_1", "get_weather", '{"city": '),
        ToolCallDelta(1, args_delta='"Paris"}'),
    ]
    response = final(items)
    assert response.parts == (
        TextPart("Let me check."),
        ToolCallPart(tool_call_id="call_1", tool_name="get_weather", args={"city": "Paris"}),
    )
    assert response.model_name == "gpt-4o"
    assert response.timestamp is not None
    assert response.usage == estimate_usage("gpt-4o", PROMPT, response.replace(usage=None))
    assert model.requests == [PROMPT]
    assert seen[0][0] == PROMPT
    assert seen[0][1].tools == (WEATHER,)


async def test_only_a_stream_function_still_answers_request() -> None:
    async def stream(messages: list[CanonicalMessage], info: FunctionInfo) -> AsyncIterator[StreamItem]:
        yield "Hello"
        yield ", world"

    model = FunctionModel(stream_function=stream)
    response = await model.request(PROMPT, [], ModelSettings())
    assert response.parts == (TextPart("Hello, world"),)
    assert model.requests == [PROMPT]


async def test_text_after_another_part_starts_a_new_text_part() -> None:
    async def stream(messages: list[CanonicalMessage], info: FunctionInfo) -> AsyncIterator[StreamItem]:
        yield ThinkingDelta("Paris? ", 0)
        yield ThinkingDelta("Sunny.", 0)
        yield ThinkingDelta("", 0, signature="sig-1")
        yield "It is "
        yield "sunny."
        yield ToolCallDelta(2, None, "get_weather", "{}")
        yield "Anything else?"

    items = await drain(FunctionModel(stream_function=stream))
    text_indices = [i.index for i in items if isinstance(i, TextDelta)]
    assert text_indices == [1, 1, 3]
    start = next(i for i in items if isinstance(i, ToolCallDelta))
    assert start.tool_call_id is not None
    assert start.tool_call_id.startswith("call_")  # made up, and the same in the response
    assert final(items).parts == (
        ThoughtPart("Paris? Sunny.", signature="sig-1"),
        TextPart("It is sunny."),
        ToolCallPart(tool_call_id=start.tool_call_id, tool_name="get_weather", args={}),
        TextPart("Anything else?"),
    )


async def test_invalid_arguments_json_is_kept_raw() -> None:
    async def stream(messages: list[CanonicalMessage], info: FunctionInfo) -> AsyncIterator[StreamItem]:
        yield ToolCallDelta(0, "c1", "get_weather", '{"city": ')

    assert final(await drain(FunctionModel(stream_function=stream))).parts == (
        ToolCallPart(tool_call_id="c1", tool_name="get_weather", args='{"city": '),
    )


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ([42], "yielded int"),
        ([CanonicalMessage.response(TextPart("x"))], "yielded CanonicalMessage"),
        ([ToolCallDelta(0, "c1", None, "{}")], "first ToolCallDelta of index 0 has no tool_name"),
        (
            [TextDelta("a", 0), ToolCallDelta(0, "c1", "t")],
            "ToolCallDelta for index 0, which holds a TextDelta",
        ),
    ],
)
async def test_bad_stream_items_are_typed_errors(items: list[Any], message: str) -> None:
    async def stream(messages: list[CanonicalMessage], info: FunctionInfo) -> AsyncIterator[Any]:
        for item in items:
            yield item

    with pytest.raises(ModelResponseError, match=message) as caught:
        await drain(FunctionModel(stream_function=stream))
    assert "stream_function" in str(caught.value)


def test_a_model_without_any_function_is_refused() -> None:
    with pytest.raises(TypeError, match="needs fn"):
        FunctionModel()


async def test_stopping_early_closes_the_stream_function() -> None:
    closed: list[bool] = []

    async def stream(messages: list[CanonicalMessage], info: FunctionInfo) -> AsyncIterator[StreamItem]:
        try:
            for n in range(100):
                yield f"w{n} "
        finally:
            closed.append(True)

    items = FunctionModel(stream_function=stream).request_stream(PROMPT, [], ModelSettings())
    assert await anext(items) == TextDelta("w0 ", 0)
    await items.aclose()  # pyright: ignore[reportAttributeAccessIssue]
    assert closed == [True]


async def test_a_regular_function_streams_its_response_in_chunks() -> None:
    answer = CanonicalMessage.response(
        ThoughtPart("Think first.", signature="sig"),
        TextPart("The weather in Paris is sunny."),
        ToolCallPart(tool_call_id="call_7", tool_name="get_weather", args={"city": "Paris", "days": [1, 2]}),
    )
    model = FunctionModel(lambda messages, info: answer)
    items = await drain(model, tools=[WEATHER])
    texts = [i.text for i in items if isinstance(i, TextDelta)]
    assert texts == ["The ", "weather ", "in ", "Paris ", "is ", "sunny."]
    assert {i.index for i in items if isinstance(i, TextDelta)} == {1}
    thinking = [i for i in items if isinstance(i, ThinkingDelta)]
    assert thinking[-1] == ThinkingDelta("", 0, signature="sig")
    calls = [i for i in items if isinstance(i, ToolCallDelta)]
    assert calls[0] == ToolCallDelta(2, "call_7", "get_weather", "")
    assert len(calls) > 2  # the arguments come in fragments
    assert json.loads("".join(c.args_delta for c in calls)) == {"city": "Paris", "days": [1, 2]}
    streamed = final(items)
    plain = await model.request(PROMPT, [WEATHER], ModelSettings())
    assert untimed(streamed) == untimed(plain)
    assert streamed.parts == answer.parts
    assert len(model.requests) == 2


async def test_from_responses_streams_each_scripted_step() -> None:
    model = FunctionModel.from_responses("first answer", "second")
    assert final(await drain(model)).parts == (TextPart("first answer"),)
    assert [i for i in await drain(model) if not isinstance(i, ResponseDone)] == [TextDelta("second", 0)]


async def test_in_process_effects_stream_to_the_unit_sink() -> None:
    sink: list[object] = []
    model = FunctionModel(lambda messages, info: "streamed through effects")
    unit = ModelRequestUnit(1, "request", "agent", model, PROMPT, PROMPT, stream=sink.append)
    response = await InProcessEffects().model_request(unit)
    assert sink == [TextDelta("streamed ", 0), TextDelta("through ", 0), TextDelta("effects", 0)]
    assert response.parts == (TextPart("streamed through effects"),)


async def test_test_model_streams_calls_then_its_answer() -> None:
    plain_model, stream_model = TestModel(final_text="all done now"), TestModel(final_text="all done now")
    items = await drain(stream_model, tools=[WEATHER])
    assert items[:-1] == [
        ToolCallDelta(0, "test_call_1", "get_weather", ""),
        ToolCallDelta(0, args_delta='{"cit'),
        ToolCallDelta(0, args_delta='y": "'),
        ToolCallDelta(0, args_delta='a"}'),
    ]
    plain = await plain_model.request(PROMPT, [WEATHER], ModelSettings())
    assert untimed(final(items)) == untimed(plain)
    answered = [
        *PROMPT,
        final(items),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="get_weather", tool_name="sunny", content="test_call_1")
        ),
    ]
    items = await drain(stream_model, answered, [WEATHER])
    assert items[:-1] == [TextDelta("all ", 0), TextDelta("done ", 0), TextDelta("now", 0)]
    assert untimed(final(items)) == untimed(await plain_model.request(answered, [WEATHER], ModelSettings()))


async def test_collect_stream_of_a_test_model() -> None:
    seen: list[object] = []
    message = await collect_stream(
        TestModel(final_text="two words"), PROMPT, [], ModelSettings(), seen.append
    )
    assert seen == [TextDelta("two ", 0), TextDelta("words", 0)]
    assert message.parts == (TextPart("two words"),)


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
parts = st.one_of(
    st.text(max_size=40).map(TextPart),
    st.builds(
        ThoughtPart, st.text(max_size=30), signature=st.one_of(st.none(), st.text(min_size=1, max_size=9))
    ),
    st.builds(
        ToolCallPart,
        tool_call_id=st.from_regex(r"call_[a-z0-9]{1,8}", fullmatch=True),
        tool_name=st.just("get_weather"),
        args=st.dictionaries(st.text(max_size=6), json_values, max_size=4),
    ),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(parts, max_size=5))
def test_response_deltas_add_up_to_each_part(items: list[TextPart | ThoughtPart | ToolCallPart]) -> None:
    message = CanonicalMessage.response(*items)
    deltas = list(response_deltas(message))
    for index, part in enumerate(message.parts):
        mine = [d for d in deltas if d.index == index]
        if isinstance(part, TextPart):
            assert all(isinstance(d, TextDelta) for d in mine)
            assert "".join(d.text for d in mine if isinstance(d, TextDelta)) == part.content
        elif isinstance(part, ThoughtPart):
            assert "".join(d.text for d in mine if isinstance(d, ThinkingDelta)) == part.content
            assert [d.signature for d in mine if isinstance(d, ThinkingDelta) and d.signature] == (
                [part.signature] if part.signature else []
            )
        else:
            assert isinstance(part, ToolCallPart)
            calls = [d for d in mine if isinstance(d, ToolCallDelta)]
            assert (calls[0].tool_call_id, calls[0].tool_name) == (part.tool_call_id, part.tool_name)
            assert all(d.tool_call_id is None for d in calls[1:])
            assert json.loads("".join(d.args_delta for d in calls)) == part.args_as_dict()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=10), max_size=10))
def test_stream_function_chunks_add_up_to_the_text(chunks: list[str]) -> None:
    async def stream(messages: list[CanonicalMessage], info: FunctionInfo) -> AsyncIterator[StreamItem]:
        for chunk in chunks:
            yield chunk

    items = asyncio.run(drain(FunctionModel(stream_function=stream)))
    text = "".join(i.text for i in items if isinstance(i, TextDelta))
    assert text == "".join(chunks)
    assert final(items).parts == ((TextPart(text),) if text else ())
