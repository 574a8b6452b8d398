"""Built-in models: FunctionModel, TestModel, ReplayModel (and replaying the corpus)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Literal

import attrs
import pytest

from harness.core import (
    CanonicalMessage,
    Model,
    ModelSettings,
    Part,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolDefinition,
    ToolReturnPart,
    Usage,
    UserPromptPart,
)
from harness.errors import ModelResponseError, ReplayExhausted, ToolRetry
from harness.history import check_invariants, sanitize_for_resume
from harness.models.function import FunctionInfo, FunctionModel
from harness.models.test import TestModel, example_for_schema
from harness.replay import ReplayModel, ReplayTools, replay_history, user_turns
from harness.run import Agent
from harness.wire import load_messages


async def test_function_model_sync_async_and_string_results() -> None:
    def sync_fn(messages: list[CanonicalMessage], info: FunctionInfo) -> str:
        return f"{len(messages)} messages, {len(info.tools)} tools"

    async def async_fn(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        await asyncio.sleep(0)
        return CanonicalMessage.response(TextPart("async"), usage=Usage(request_tokens=5))

    tools = [ToolDefinition("t")]
    sync_model = FunctionModel(sync_fn, model_name="gpt-4", context_window=1000)
    response = await sync_model.request([CanonicalMessage.user("hi")], tools, ModelSettings())
    assert response.parts == (TextPart("1 messages, 1 tools"),)
    assert response.model_name == "gpt-4"
    assert response.timestamp is not None
    assert response.usage is not None
    assert response.usage.request_tokens > 0
    assert response.usage.response_tokens > 0
    assert sync_model.context_window == 1000
    assert isinstance(sync_model, Model)
    async_model = FunctionModel(async_fn)
    result = await async_model.request([CanonicalMessage.user("hi")], [], ModelSettings())
    assert result.usage == Usage(request_tokens=5)  # reported usage is kept
    assert async_model.requests == [[CanonicalMessage.user("hi")]]


async def test_function_model_rejects_non_responses() -> None:
    bads: list[Any] = [CanonicalMessage.user("x"), 42]
    for bad in bads:

        def fn(m: list[CanonicalMessage], i: FunctionInfo, bad: Any = bad) -> Any:
            return bad

        model = FunctionModel(fn)
        with pytest.raises(ModelResponseError, match="FunctionModel function must return"):
            await model.request([CanonicalMessage.user("hi")], [], ModelSettings())


async def test_from_responses_plays_steps_then_fails_clearly() -> None:
    model = FunctionModel.from_responses("a", lambda m, i: f"saw {len(m)}")
    settings = ModelSettings()
    assert (await model.request([CanonicalMessage.user("x")], [], settings)).parts == (TextPart("a"),)
    assert (await model.request([CanonicalMessage.user("x")] * 3, [], settings)).parts == (TextPart("saw 3"),)
    with pytest.raises(ModelResponseError, match="all 2 scripted responses were used"):
        await model.request([CanonicalMessage.user("x")], [], settings)


def kitchen_sink(
    name: str,
    count: int,
    ratio: float,
    flag: bool,
    items: list[int],
    mode: Literal["a", "b"],
    maybe: str | None = None,
) -> str:
    """Accepts many types."""
    return f"{name}|{count}|{ratio}|{flag}|{items}|{mode}|{maybe}"


def no_args() -> str:
    """No arguments."""
    return "none"


async def test_test_model_calls_each_tool_once_with_valid_args_then_answers() -> None:
    model = TestModel(final_text="all done")
    result = await Agent(model, tools=[kitchen_sink, no_args]).run("go")
    assert result.output == "all done"
    calls = result.all_messages[1].tool_calls
    assert [c.tool_name for c in calls] == ["kitchen_sink", "no_args"]
    assert calls[0].args == {
        "name": "a",
        "count": 0,
        "ratio": 0.0,
        "flag": False,
        "items": [],
        "mode": "a",
        "maybe": "a",
    }
    returns = result.all_messages[2].parts
    assert all(isinstance(p, ToolReturnPart) for p in returns)
    assert [getattr(p, "content", None) for p in returns] == ["a|0|0.0|False|[]|a|a", "none"]
    assert result.usage.request_tokens > 0


async def test_test_model_subset_and_no_tools() -> None:
    result = await Agent(TestModel(call_tools=["no_args"]), tools=[kitchen_sink, no_args]).run("go")
    assert [c.tool_name for c in result.all_messages[1].tool_calls] == ["no_args"]
    plain = await Agent(TestModel()).run("go")
    assert plain.output == "done"
    assert TestModel(context_window=5).context_window == 5
    assert TestModel().model_name == "test"


def test_example_for_schema() -> None:
    assert example_for_schema({"type": "object", "properties": {"x": {"type": "integer"}}}) == {"x": 0}
    assert example_for_schema({"anyOf": [{"type": "string"}, {"type": "null"}]}) == "a"
    assert example_for_schema({"type": ["null", "number"]}) == 0.0
    assert example_for_schema({"type": "array", "prefixItems": [{"type": "boolean"}]}) == [False]
    assert example_for_schema({"enum": ["z"]}) == "z"
    assert example_for_schema({}) is None


RECORDED = [
    CanonicalMessage.user("list and read"),
    CanonicalMessage.response(
        TextPart("listing"),
        ToolCallPart(tool_call_id="r1", tool_name="bash", args={"command": "ls"}),
        model_name="recorded-model",
    ),
    CanonicalMessage.request(ToolReturnPart(tool_call_id="r1", tool_name="bash", content="a.py")),
    CanonicalMessage.response(ToolCallPart(tool_call_id="r2", tool_name="read", args={"path": "a.py"})),
    CanonicalMessage.request(RetryPromptPart("no such file", tool_name="read", tool_call_id="r2")),
    CanonicalMessage.response(ToolCallPart(tool_call_id="r3", tool_name="read", args={"path": "./a.py"})),
    CanonicalMessage.request(
        ToolReturnPart(tool_call_id="r3", tool_name="read", content={"text": "print(1)"})
    ),
    CanonicalMessage.response(TextPart("it prints 1")),
    CanonicalMessage.user("thanks"),
    CanonicalMessage.response(TextPart("welcome")),
]


async def test_replay_model_replays_in_order_and_raises_when_exhausted() -> None:
    model = ReplayModel(RECORDED)
    assert model.model_name == "recorded-model"
    assert model.remaining == 5
    settings = ModelSettings()
    for expected in [m for m in RECORDED if m.kind == "response"]:
        assert await model.request([], [], settings) is expected
    with pytest.raises(ReplayExhausted, match="all 5 recorded responses were replayed; request 6"):
        await model.request([], [], settings)
    assert ReplayModel([], model_name="x", context_window=9).context_window == 9


def test_replay_tools_answer_by_call_id() -> None:
    tools = ReplayTools(RECORDED)
    assert tools.names == ["bash", "read"]
    assert tools.answer("r3") == {"text": "print(1)"}
    with pytest.raises(ToolRetry, match="no such file"):
        tools.answer("r2")
    assert tools.answer("unknown") == "[no recorded result]"
    assert [t.name for t in ReplayModel.replay_tools(RECORDED)] == ["bash", "read"]
    assert ReplayModel.user_prompts(RECORDED) == ["list and read", "thanks"]
    assert user_turns(RECORDED) == ["list and read", "thanks"]


def without_timestamps(messages: list[CanonicalMessage]) -> list[tuple[str, tuple[Part, ...]]]:
    def strip(part: Part) -> Part:
        if attrs.has(type(part)) and hasattr(part, "timestamp"):
            return attrs.evolve(part, timestamp=None)
        return part

    return [(m.kind, tuple(strip(p) for p in m.parts)) for m in messages]


async def test_replay_history_reproduces_the_recording() -> None:
    session, results = await replay_history(RECORDED)
    assert [r.output for r in results] == ["it prints 1", "welcome"]
    assert without_timestamps(session.messages) == without_timestamps(RECORDED)
    assert check_invariants(session.messages, persisted=True) == []


async def test_replay_with_a_capability_changes_history_but_not_responses() -> None:
    from harness.capabilities import Capability, RequestContext
    from harness.hooks import hookimpl

    class DropOldTurns(Capability):
        name = "drop_old_turns"

        @hookimpl
        async def before_model_request(self, ctx: RequestContext) -> None:
            from harness.history import safe_cutoff

            cut = safe_cutoff(ctx.messages, 3)
            ctx.replace_messages(ctx.messages[cut:], strategy="drop", reason="test")

    session, _ = await replay_history(RECORDED, capabilities=[DropOldTurns()])
    assert len(session.messages) < len(RECORDED)
    assert session.messages[-1].parts == (TextPart("welcome"),)
    assert check_invariants(session.messages, persisted=True) == []


async def test_replay_of_a_recording_cut_off_after_a_tool_result() -> None:
    recording = RECORDED[:3]
    session, results = await replay_history(recording)
    assert results == []
    assert without_timestamps(session.messages) == without_timestamps(recording)


async def test_replay_diverging_recording_raises() -> None:
    with pytest.raises(ReplayExhausted):
        await replay_history([CanonicalMessage.user("a"), CanonicalMessage.user("b")])


async def test_corpus_transcript_replays_identically(corpus_file: Path) -> None:
    """Responses, tool answers and user prompts come back identical (ids included).

    Parts a recording environment added on its own (e.g. a general retry prompt next to a
    tool result) are not reproduced: no tool or model produces them.
    """
    recorded = sanitize_for_resume(load_messages(corpus_file.read_bytes())).messages
    session, _ = await replay_history(recorded)
    replayed = session.messages

    def responses(messages: list[CanonicalMessage]) -> list[tuple[Part, ...]]:
        return [m.parts for m in messages if m.kind == "response"]

    def answers(messages: list[CanonicalMessage]) -> dict[str, Part]:
        found: dict[str, Part] = {}
        for message in without_timestamps(messages):
            for part in message[1]:
                if isinstance(part, ToolReturnPart) or (
                    isinstance(part, RetryPromptPart) and part.answers_tool_call
                ):
                    assert part.tool_call_id is not None
                    found[part.tool_call_id] = part
        return found

    assert responses(replayed) == responses(recorded)
    assert answers(replayed) == answers(recorded)
    assert user_turns(replayed) == user_turns(recorded)
    assert check_invariants(replayed, persisted=True) == []


def test_model_protocol_is_runtime_checkable() -> None:
    class Bare:
        model_name = "bare"
        context_window = None

        async def request(self, messages: Any, tools: Any, settings: Any) -> CanonicalMessage:
            return CanonicalMessage.response(TextPart("x"))

    assert isinstance(Bare(), Model)
    assert isinstance(ReplayModel(RECORDED), Model)
    assert isinstance(TestModel(), Model)
    assert not isinstance(object(), Model)
    assert UserPromptPart("x").text == "x"
