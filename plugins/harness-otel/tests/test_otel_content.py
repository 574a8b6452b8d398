"""Content capture: off by default, on by the constructor or the conventions' variable, in their shape."""

from __future__ import annotations

import json
from typing import Any

import pytest
from harness_otel import CAPTURE_CONTENT_ENV, OTelPlugin, attributes, capture_content_from_env, plugin
from harness_otel._content import input_messages, output_messages, system_instructions
from harness_otel.testing import SpanRecorder
from hypothesis import given
from hypothesis import strategies as st

from harness import (
    Agent,
    CanonicalMessage,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from harness.models.function import FunctionModel
from harness.testing.strategies import histories

CONTENT = {
    attributes.INPUT_MESSAGES,
    attributes.OUTPUT_MESSAGES,
    attributes.SYSTEM_INSTRUCTIONS,
    attributes.TOOL_DEFINITIONS,
    attributes.TOOL_CALL_ARGUMENTS,
    attributes.TOOL_CALL_RESULT,
}
SECRET = "the secret is 42"


def lookup(key: str) -> str:
    """Look a key up."""
    return f"{key} => {SECRET}"


def agent_with(otel: OTelPlugin) -> Agent:
    model = FunctionModel.from_responses(
        CanonicalMessage.response(
            ThoughtPart("I should look it up"),
            ToolCallPart(tool_call_id="call_1", tool_name="lookup", args={"key": "answer"}),
        ),
        CanonicalMessage.response(TextPart(f"Found: {SECRET}"), finish_reason="stop"),
        model_name="m",
    )
    agent = Agent(model, tools=[lookup], system_prompt="Be brief.")
    agent.plugin_manager.register(otel)
    return agent


def captured(recorder: SpanRecorder) -> set[str]:
    return {key for span in recorder.finished for key in (span.attributes or {}) if key in CONTENT}


def leaked(recorder: SpanRecorder) -> list[str]:
    """The spans (and events) in which the secret appears anywhere."""
    found: list[str] = []
    for span in recorder.finished:
        values = [*(span.attributes or {}).values()]
        values += [v for event in span.events for v in (event.attributes or {}).values()]
        if any(SECRET in str(v) for v in values):
            found.append(span.name)
    return found


async def test_content_is_not_captured_by_default(spans: SpanRecorder) -> None:
    await agent_with(OTelPlugin(tracer_provider=spans.provider)).run(f"what is it? {SECRET}")
    assert len(spans.finished) == 4
    assert captured(spans) == set()
    assert leaked(spans) == []


async def test_content_is_captured_when_opted_in(spans: SpanRecorder) -> None:
    await agent_with(OTelPlugin(tracer_provider=spans.provider, capture_content=True)).run("what is it?")
    run = spans.one("invoke_agent").attributes or {}
    assert json.loads(str(run[attributes.INPUT_MESSAGES])) == [
        {"role": "user", "parts": [{"type": "text", "content": "what is it?"}]}
    ]
    assert json.loads(str(run[attributes.OUTPUT_MESSAGES]))[0]["parts"][0]["content"] == f"Found: {SECRET}"
    first, second = (s.attributes or {} for s in spans.named("chat"))
    assert json.loads(str(first[attributes.SYSTEM_INSTRUCTIONS])) == [
        {"type": "text", "content": "Be brief."}
    ]
    assert json.loads(str(first[attributes.INPUT_MESSAGES])) == [
        {"role": "user", "parts": [{"type": "text", "content": "what is it?"}]}
    ]
    [definition] = json.loads(str(first[attributes.TOOL_DEFINITIONS]))
    assert (definition["type"], definition["name"], definition["description"]) == (
        "function",
        "lookup",
        "Look a key up.",
    )
    assert json.loads(str(first[attributes.OUTPUT_MESSAGES])) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": "I should look it up"},
                {"type": "tool_call", "id": "call_1", "name": "lookup", "arguments": {"key": "answer"}},
            ],
            "finish_reason": "tool_call",
        }
    ]
    sent = json.loads(str(second[attributes.INPUT_MESSAGES]))
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[2]["parts"] == [
        {"type": "tool_call_response", "id": "call_1", "response": f"answer => {SECRET}"}
    ]
    tool = spans.one("execute_tool lookup").attributes or {}
    assert json.loads(str(tool[attributes.TOOL_CALL_ARGUMENTS])) == {"key": "answer"}
    assert tool[attributes.TOOL_CALL_RESULT] == f"answer => {SECRET}"


@pytest.mark.parametrize("value", ["true", "TRUE", " True ", "span_only", "SPAN_AND_EVENT"])
async def test_the_conventions_variable_turns_capture_on(
    spans: SpanRecorder, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    agent = agent_with(OTelPlugin(tracer_provider=spans.provider))  # built before the variable is set
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, value)
    await agent.run("what is it?")
    assert captured(spans) == CONTENT


@pytest.mark.parametrize("value", ["false", "", "no_content", "event_only"])
async def test_the_variable_off_leaves_capture_off(
    spans: SpanRecorder, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, value)
    await agent_with(OTelPlugin(tracer_provider=spans.provider)).run(SECRET)
    assert captured(spans) == set()


async def test_the_constructor_wins_over_the_variable(
    spans: SpanRecorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    await agent_with(OTelPlugin(tracer_provider=spans.provider, capture_content=False)).run(SECRET)
    assert captured(spans) == set()
    assert leaked(spans) == []


def test_an_unknown_value_leaves_capture_off_and_says_so_once(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="harness_otel"):
        assert capture_content_from_env({CAPTURE_CONTENT_ENV: "maybe"}) is False
        assert capture_content_from_env({CAPTURE_CONTENT_ENV: "maybe"}) is False
    assert caplog.text.count("'maybe' is neither true nor false") == 1


def test_the_entry_point_instance_follows_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert plugin.captures_content() is False
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    assert plugin.captures_content() is True


def test_a_request_mixing_roles_becomes_one_message_per_role() -> None:
    request = CanonicalMessage.request(
        SystemPromptPart("sys"),
        ToolReturnPart(tool_call_id="c1", tool_name="t", content={"rows": 3}),
        RetryPromptPart("bad arguments", tool_name="t", tool_call_id="c2"),
        UserPromptPart(("look at", {"type": "image_url", "url": "https://x/y.png"})),
        RetryPromptPart("answer in text"),
    )
    assert json.loads(input_messages([request])) == [
        {
            "role": "tool",
            "parts": [
                {"type": "tool_call_response", "id": "c1", "response": {"rows": 3}},
                {"type": "tool_call_response", "id": "c2", "response": "bad arguments"},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"type": "text", "content": "look at"},
                {"type": "image_url", "url": "https://x/y.png"},
                {"type": "text", "content": "answer in text"},
            ],
        },
    ]
    assert system_instructions([request]) == '[{"type":"text","content":"sys"}]'
    assert system_instructions([CanonicalMessage.user("hi")]) is None


def expected_types(part: Any) -> list[str]:
    if isinstance(part, SystemPromptPart):
        return []
    if isinstance(part, ToolReturnPart) or (isinstance(part, RetryPromptPart) and part.tool_call_id):
        return ["tool_call_response"]
    if isinstance(part, ToolCallPart):
        return ["tool_call"]
    if isinstance(part, ThoughtPart):
        return ["reasoning"]
    if isinstance(part, UserPromptPart | RetryPromptPart) and not isinstance(part.content, str):
        return ["text" if isinstance(item, str) else "unknown" for item in part.content]
    return ["text"]


@given(histories(min_messages=1, max_messages=12))
def test_every_part_is_written_once_in_order_in_valid_json(history: list[CanonicalMessage]) -> None:
    written = json.loads(input_messages(history))
    assert all(m["role"] in {"user", "assistant", "tool"} and m["parts"] for m in written)
    types = [part["type"] for message in written for part in message["parts"]]
    assert types == [t for message in history for part in message.parts for t in expected_types(part)]
    systems = [p for m in history for p in m.parts if isinstance(p, SystemPromptPart)]
    instructions = system_instructions(history)
    assert (json.loads(instructions) if instructions else []) == [
        {"type": "text", "content": p.content} for p in systems
    ]


@given(st.lists(st.sampled_from(["text", "thought", "call"]), min_size=1, max_size=6), st.booleans())
def test_an_output_message_always_has_a_finish_reason(kinds: list[str], reported: bool) -> None:
    parts = [
        TextPart("t")
        if kind == "text"
        else ThoughtPart("r")
        if kind == "thought"
        else ToolCallPart(tool_call_id=f"c{i}", tool_name="t", args={})
        for i, kind in enumerate(kinds)
    ]
    response = CanonicalMessage.response(*parts, finish_reason="length" if reported else None)
    [message] = json.loads(output_messages(response))
    assert message["role"] == "assistant"
    assert len(message["parts"]) == len(parts)
    expected = "length" if reported else "tool_call" if "call" in kinds else "stop"
    assert message["finish_reason"] == expected
