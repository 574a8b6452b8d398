"""OTelPlugin in real runs: the span tree, its attributes, errors, retries, aborts and streaming."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Generator
from typing import Any

import pytest
from harness_otel import OTelPlugin, attributes
from harness_otel.testing import SpanRecorder
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from harness import (
    Agent,
    CanonicalMessage,
    HarnessError,
    ModelCall,
    ModelError,
    Session,
    TextPart,
    ToolCall,
    ToolCallPart,
    ToolOutcome,
    ToolRetry,
    Usage,
    UserAbort,
    hookimpl,
)
from harness.core import ModelSettings
from harness.core.streaming import TextDelta
from harness.errors import ModelRateLimitError
from harness.models.function import FunctionInfo, FunctionModel
from harness.models.test import TestModel

MODEL = "scripted-1"


def calls_response(*calls: ToolCallPart) -> CanonicalMessage:
    return CanonicalMessage.response(
        *calls,
        model_name=f"{MODEL}-0613",
        usage=Usage(request_tokens=100, response_tokens=20, cached_tokens=40, cache_write_tokens=7),
        finish_reason="tool_call",
        provider_response_id="resp_1",
        provider_name="scripted",
    )


def final_response(text: str = "5 and 20") -> CanonicalMessage:
    return CanonicalMessage.response(
        TextPart(text), usage=Usage(request_tokens=150, response_tokens=5), finish_reason="stop"
    )


TWO_CALLS = (
    ToolCallPart(tool_call_id="call_a", tool_name="add", args={"a": 2, "b": 3}),
    ToolCallPart(tool_call_id="call_b", tool_name="mul", args={"a": 4, "b": 5}),
)

tasks: list[asyncio.Task[Any] | None] = []


async def add(a: int, b: int) -> int:
    """Add two numbers."""
    tasks.append(asyncio.current_task())
    await asyncio.sleep(0.01)
    return a + b


async def mul(a: int, b: int) -> int:
    """Multiply two numbers."""
    tasks.append(asyncio.current_task())
    await asyncio.sleep(0.01)
    return a * b


def two_call_agent(recorder: SpanRecorder, **options: Any) -> Agent:
    model = FunctionModel.from_responses(calls_response(*TWO_CALLS), final_response(), model_name=MODEL)
    agent = Agent(model, tools=[add, mul], system_prompt="You add and multiply.")
    agent.plugin_manager.register(OTelPlugin(tracer_provider=recorder.provider, **options))
    return agent


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


async def test_a_run_with_two_tool_calls_is_one_tree(spans: SpanRecorder) -> None:
    tasks.clear()
    result = await two_call_agent(spans).run("add 2+3, multiply 4*5")
    assert result.output == "5 and 20"
    run = spans.one("invoke_agent")
    assert run.parent is None
    assert run.kind is SpanKind.INTERNAL
    children = spans.children(run)
    assert [s.name for s in children] == [
        f"chat {MODEL}",
        "execute_tool add",
        "execute_tool mul",
        f"chat {MODEL}",
    ]
    assert [s.kind for s in children] == [
        SpanKind.CLIENT,
        SpanKind.INTERNAL,
        SpanKind.INTERNAL,
        SpanKind.CLIENT,
    ]
    assert len(spans.finished) == 5, "nothing else: every span is the run's child"
    assert run.context is not None
    assert {s.context.trace_id for s in spans.finished if s.context} == {run.context.trace_id}
    # The two calls ran in parallel, each in a task of its own, and still nest under the run.
    assert len(tasks) == 2
    assert tasks[0] is not tasks[1]
    add_span, mul_span = children[1], children[2]
    assert add_span.start_time is not None
    assert add_span.end_time is not None
    assert mul_span.start_time is not None
    assert mul_span.end_time is not None
    assert add_span.start_time < mul_span.end_time, "overlapping"
    assert mul_span.start_time < add_span.end_time, "overlapping"
    assert all(s.status.status_code is StatusCode.UNSET for s in spans.finished)


async def test_the_spans_carry_the_conventions_attributes(spans: SpanRecorder) -> None:
    session = Session()
    result = await two_call_agent(spans, agent_name="calculator").run("go", session=session)
    run = spans.one("invoke_agent")
    assert run.name == "invoke_agent calculator"
    assert dict(run.attributes or {}) == {
        attributes.OPERATION_NAME: "invoke_agent",
        attributes.AGENT_NAME: "calculator",
        attributes.CONVERSATION_ID: session.session_id,
        attributes.REQUEST_MODEL: MODEL,
        attributes.RUN_REQUEST_ID: result.request_id,
        attributes.RUN_STATUS: "completed",
        attributes.RUN_ITERATIONS: 2,
        attributes.USAGE_INPUT_TOKENS: 250,
        attributes.USAGE_OUTPUT_TOKENS: 25,
    }
    first, second = spans.named("chat")
    assert dict(first.attributes or {}) == {
        attributes.OPERATION_NAME: "chat",
        attributes.PROVIDER_NAME: "scripted",  # the response's provider, once it answered
        attributes.REQUEST_MODEL: MODEL,
        attributes.RESPONSE_MODEL: f"{MODEL}-0613",
        attributes.RESPONSE_ID: "resp_1",
        attributes.RESPONSE_FINISH_REASONS: ("tool_call",),
        attributes.USAGE_INPUT_TOKENS: 100,
        attributes.USAGE_OUTPUT_TOKENS: 20,
        attributes.USAGE_CACHE_READ_INPUT_TOKENS: 40,
        attributes.USAGE_CACHE_CREATION_INPUT_TOKENS: 7,
        attributes.CONVERSATION_ID: session.session_id,
        attributes.REQUEST_PURPOSE: "request",
        attributes.REQUEST_SOURCE: "agent",
        attributes.REQUEST_ATTEMPT: 1,
        attributes.REQUEST_CALLS: 1,
    }
    second_attributes = second.attributes or {}
    assert (
        second_attributes[attributes.PROVIDER_NAME] == attributes.OTHER_PROVIDER
    )  # FunctionModel names none
    assert second_attributes[attributes.RESPONSE_FINISH_REASONS] == ("stop",)
    assert second_attributes[attributes.USAGE_INPUT_TOKENS] == 150
    assert attributes.USAGE_CACHE_READ_INPUT_TOKENS not in second_attributes
    assert attributes.COMPACTED not in second_attributes
    tool = spans.one("execute_tool add")
    assert dict(tool.attributes or {}) == {
        attributes.OPERATION_NAME: "execute_tool",
        attributes.TOOL_NAME: "add",
        attributes.TOOL_CALL_ID: "call_a",
        attributes.TOOL_TYPE: "function",
        attributes.TOOL_DESCRIPTION: "Add two numbers.",
        attributes.CONVERSATION_ID: session.session_id,
        attributes.TOOL_OUTCOME: "returned",
        attributes.TOOL_ATTEMPTS: 1,
    }


async def test_request_settings_are_recorded(spans: SpanRecorder) -> None:
    agent = Agent(TestModel(), settings=ModelSettings(max_tokens=256, temperature=0.2))
    agent.plugin_manager.register(OTelPlugin(tracer_provider=spans.provider))
    await agent.run("hi")
    chat = spans.one("chat test").attributes or {}
    assert chat[attributes.REQUEST_MAX_TOKENS] == 256
    assert chat[attributes.REQUEST_TEMPERATURE] == 0.2


def boom(text: str) -> str:
    """Fail."""
    raise ValueError(f"cannot handle {text}")


async def test_a_failing_tool_marks_its_span_and_not_the_run(spans: SpanRecorder) -> None:
    model = FunctionModel.from_responses(
        calls_response(ToolCallPart(tool_call_id="call_x", tool_name="boom", args={"text": "this"})),
        final_response("sorry"),
        model_name=MODEL,
    )
    agent = Agent(model, tools=[boom])
    agent.plugin_manager.register(OTelPlugin(tracer_provider=spans.provider))
    result = await agent.run("go")
    assert result.output == "sorry"
    tool = spans.one("execute_tool boom")
    assert tool.status.status_code is StatusCode.ERROR
    assert tool.status.description == "ValueError: cannot handle this"
    tool_attributes = tool.attributes or {}
    assert tool_attributes[attributes.TOOL_OUTCOME] == "failed"
    assert tool_attributes[attributes.ERROR_TYPE] == "ValueError"
    assert spans.one("invoke_agent").status.status_code is StatusCode.UNSET, "the model read the failure"


def stop_everything(text: str) -> str:
    """Stop the run."""
    raise HarnessError(f"refusing {text}")


async def test_a_tool_error_that_stops_the_run_fails_both_spans(spans: SpanRecorder) -> None:
    model = FunctionModel.from_responses(
        calls_response(ToolCallPart(tool_call_id="call_x", tool_name="stop_everything", args={"text": "it"})),
        model_name=MODEL,
    )
    agent = Agent(model, tools=[stop_everything])
    agent.plugin_manager.register(OTelPlugin(tracer_provider=spans.provider))
    with pytest.raises(HarnessError, match="refusing it"):
        await agent.run("go")
    tool = spans.one("execute_tool")
    run = spans.one("invoke_agent")
    for span in (tool, run):
        assert span.status.status_code is StatusCode.ERROR
        assert (span.attributes or {})[attributes.ERROR_TYPE] == "HarnessError"
        [event] = [e for e in span.events if e.name == "exception"]
        assert (event.attributes or {})["exception.message"] == "refusing it"


def ask_again(text: str) -> str:
    """Ask for a retry."""
    raise ToolRetry(f"say more than {text!r}")


async def test_a_retry_prompt_is_an_outcome_not_an_error(spans: SpanRecorder) -> None:
    model = FunctionModel.from_responses(
        calls_response(ToolCallPart(tool_call_id="call_r", tool_name="ask_again", args={"text": "x"})),
        final_response("ok"),
        model_name=MODEL,
    )
    agent = Agent(model, tools=[ask_again])
    agent.plugin_manager.register(OTelPlugin(tracer_provider=spans.provider))
    await agent.run("go")
    tool = spans.one("execute_tool ask_again")
    assert (tool.attributes or {})[attributes.TOOL_OUTCOME] == "retry"
    assert tool.status.status_code is StatusCode.UNSET


def rate_limited(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
    raise ModelRateLimitError("scripted", "slow down", status_code=429, model_name=info.model_name)


async def test_a_model_error_fails_the_chat_span_and_the_run(spans: SpanRecorder) -> None:
    agent = Agent(FunctionModel(rate_limited, model_name=MODEL), tools=[add])
    agent.plugin_manager.register(OTelPlugin(tracer_provider=spans.provider))
    with pytest.raises(ModelRateLimitError):
        await agent.run("go")
    chat = spans.one("chat")
    run = spans.one("invoke_agent")
    assert parent_id(chat) == span_id(run)
    for span in (chat, run):
        assert span.status.status_code is StatusCode.ERROR
        assert (span.attributes or {})[attributes.ERROR_TYPE] == "ModelRateLimitError"
        assert any(e.name == "exception" for e in span.events)
    assert attributes.RESPONSE_MODEL not in (chat.attributes or {})
    assert spans.named("execute_tool") == []


class FallBack:
    """A wrapper that sends a failed call to another model: the retry the contract allows."""

    def __init__(self, backup: FunctionModel) -> None:
        self.backup = backup

    @hookimpl(wrapper=True)
    def wrap_model_request(self, request: ModelCall) -> Generator[None, CanonicalMessage, CanonicalMessage]:
        try:
            return (yield)
        except ModelError:
            request.model = self.backup
            return (yield)


@pytest.mark.parametrize("otel_first", [True, False], ids=["otel-registered-first", "otel-registered-last"])
async def test_each_attempt_of_a_retried_request_is_its_own_chat_span(
    spans: SpanRecorder, otel_first: bool
) -> None:
    backup = FunctionModel.from_responses(final_response("from backup"), model_name="backup-model")
    agent = Agent(FunctionModel(rate_limited, model_name=MODEL))
    plugins: list[object] = [OTelPlugin(tracer_provider=spans.provider), FallBack(backup)]
    for plugin in plugins if otel_first else reversed(plugins):
        agent.plugin_manager.register(plugin)
    result = await agent.run("go")
    assert result.output == "from backup"
    run = spans.one("invoke_agent")
    failed, answered = spans.children(run)
    assert failed.name == f"chat {MODEL}"
    assert answered.name == "chat backup-model"
    assert failed.status.status_code is StatusCode.ERROR
    assert answered.status.status_code is StatusCode.UNSET
    assert [(s.attributes or {})[attributes.REQUEST_ATTEMPT] for s in (failed, answered)] == [1, 2]
    assert (answered.attributes or {})[attributes.RESPONSE_MODEL] == "backup-model"
    assert run.status.status_code is StatusCode.UNSET


class Cache:
    """Answers every model call itself: the model is never called."""

    @hookimpl(wrapper=True)
    def wrap_model_request(self) -> Generator[None, CanonicalMessage, CanonicalMessage]:
        return CanonicalMessage.response(TextPart("cached"))
        yield  # a generator that returns before it yields: a short-circuit


async def test_a_short_circuited_model_call_makes_no_chat_span(spans: SpanRecorder) -> None:
    agent = Agent(TestModel())
    agent.plugin_manager.register(OTelPlugin(tracer_provider=spans.provider))
    agent.plugin_manager.register(Cache())
    result = await agent.run("hi")
    assert result.output == "cached"
    assert [s.name for s in spans.finished] == ["invoke_agent"], "no model was called"


class Hold:
    """Holds back every call of ``hold`` and refuses every call of ``refused``."""

    @hookimpl(wrapper=True)
    def wrap_tool_call(self, call: ToolCall) -> Generator[None, ToolOutcome, object]:
        if call.tool_name == "mul":
            return ToolOutcome("deferred", error="needs a human")
        if call.tool_name == "add":
            return "refused by policy"
        return (yield)


async def test_tool_spans_show_what_other_wrappers_decided(spans: SpanRecorder) -> None:
    tasks.clear()
    agent = two_call_agent(spans)
    agent.plugin_manager.register(Hold())
    result = await agent.run("go")
    assert result.status == "awaiting_approval"
    assert tasks == [], "neither tool ran"
    refused = spans.one("execute_tool add").attributes or {}
    held = spans.one("execute_tool mul").attributes or {}
    assert refused[attributes.TOOL_OUTCOME] == "returned"
    assert held[attributes.TOOL_OUTCOME] == "deferred"
    run = spans.one("invoke_agent").attributes or {}
    assert run[attributes.RUN_STATUS] == "awaiting_approval"
    assert run[attributes.RUN_PENDING_APPROVALS] == 1


async def test_no_spans_once_the_plugin_is_unregistered(spans: SpanRecorder) -> None:
    agent = Agent(TestModel(), tools=[add])
    plugin = OTelPlugin(tracer_provider=spans.provider)
    agent.plugin_manager.register(plugin)
    await agent.run("hi")
    assert len(spans.finished) == 4
    spans.clear()
    agent.plugin_manager.unregister(plugin)
    await agent.run("hi")
    assert spans.finished == []
    other = Agent(TestModel(), tools=[add])  # another agent never had it
    await other.run("hi")
    assert spans.finished == []


async def test_the_run_span_is_current_inside_tools(spans: SpanRecorder) -> None:
    seen: list[int] = []

    def where() -> str:
        """Report the current span."""
        seen.append(trace.get_current_span().get_span_context().span_id)
        return "here"

    agent = Agent(TestModel(), tools=[where])
    agent.plugin_manager.register(OTelPlugin(tracer_provider=spans.provider))
    await agent.run("hi")
    assert seen == [span_id(spans.one("execute_tool where"))], "the tool's own span is current"
    assert trace.get_current_span() is trace.INVALID_SPAN, "every span was detached"


async def test_an_abort_during_a_tool_closes_every_span_with_an_error(spans: SpanRecorder) -> None:
    started = asyncio.Event()

    async def wait_forever() -> str:
        """Never return."""
        started.set()
        await asyncio.sleep(3600)
        return "never"

    agent = Agent(TestModel(), tools=[wait_forever])
    agent.plugin_manager.register(OTelPlugin(tracer_provider=spans.provider))
    run = asyncio.create_task(agent.run("hi"))
    await started.wait()
    agent.abort()
    with pytest.raises(UserAbort):
        await run
    run_span = spans.one("invoke_agent")
    tool = spans.one("execute_tool wait_forever")
    assert run_span.status.status_code is StatusCode.ERROR
    assert (run_span.attributes or {})[attributes.ERROR_TYPE] == "UserAbort"
    assert tool.status.status_code is StatusCode.ERROR
    assert (tool.attributes or {})[attributes.ERROR_TYPE] == "CancelledError", "cut short by the abort"
    assert all(s.end_time is not None for s in spans.finished)


async def test_a_streamed_run_left_early_closes_its_spans_with_an_error(spans: SpanRecorder) -> None:
    release = asyncio.Event()

    async def stream(messages: list[CanonicalMessage], info: FunctionInfo) -> AsyncIterator[str]:
        yield "partial "
        await release.wait()  # never set: the caller leaves first
        yield "never"

    agent = Agent(FunctionModel(stream_function=stream, model_name=MODEL))
    agent.plugin_manager.register(OTelPlugin(tracer_provider=spans.provider))
    async with agent.run_stream("hi") as events:
        async for event in events:
            if isinstance(event, TextDelta):
                break
    chat = spans.one("chat")
    run = spans.one("invoke_agent")
    assert parent_id(chat) == span_id(run)
    assert chat.status.status_code is StatusCode.ERROR
    assert run.status.status_code is StatusCode.ERROR
    assert (run.attributes or {})[attributes.ERROR_TYPE] == "UserAbort"


async def test_a_streamed_run_gives_the_same_tree(spans: SpanRecorder) -> None:
    agent = two_call_agent(spans)
    async with agent.run_stream("go") as events:
        async for _ in events:
            pass
    assert events.result.output == "5 and 20"
    run = spans.one("invoke_agent")
    assert [s.name for s in spans.children(run)] == [
        f"chat {MODEL}",
        "execute_tool add",
        "execute_tool mul",
        f"chat {MODEL}",
    ]


class Circular:
    """After the call ran, leaves arguments JSON cannot encode (a dict holding itself)."""

    @hookimpl(wrapper=True)
    def wrap_tool_call(self, call: ToolCall) -> Generator[None, ToolOutcome, object]:
        outcome = yield
        loop: dict[str, Any] = {}
        loop["self"] = loop
        call.args = loop
        return outcome


async def test_what_cannot_be_recorded_is_logged_and_the_run_goes_on(
    spans: SpanRecorder, caplog: pytest.LogCaptureFixture
) -> None:
    agent = Agent(TestModel(), tools=[add])
    agent.plugin_manager.register(OTelPlugin(tracer_provider=spans.provider, capture_content=True))
    agent.plugin_manager.register(Circular())
    with caplog.at_level("WARNING", logger="harness_otel"):
        result = await agent.run("hi")
    assert result.output == "done"
    assert "could not record the tool call's outcome" in caplog.text
    tool = spans.one("execute_tool add").attributes or {}
    assert tool[attributes.TOOL_OUTCOME] == "returned", "recorded before the failure"
    assert attributes.TOOL_CALL_ARGUMENTS not in tool
