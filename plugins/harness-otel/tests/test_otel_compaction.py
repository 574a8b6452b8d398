"""Compactions: an event with the manifest on the run's span, and the flag on the next request's span."""

from __future__ import annotations

import json
from collections.abc import Generator

from harness_otel import OTelPlugin, attributes
from harness_otel.testing import SpanRecorder
from harness_sliding_window import SlidingWindow
from opentelemetry.trace import StatusCode

from harness import (
    Agent,
    CanonicalMessage,
    ModelCall,
    ModelError,
    Part,
    RequestContext,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    compact,
    hookimpl,
)
from harness.errors import ModelRateLimitError
from harness.models.function import FunctionInfo, FunctionModel


def echo(text: str) -> str:
    """Echo the text back."""
    return text * 20


def call(call_id: str, text: str = "hello") -> CanonicalMessage:
    return CanonicalMessage.response(
        ToolCallPart(tool_call_id=call_id, tool_name="echo", args={"text": text})
    )


class ClearResults:
    """Before request number ``at`` (1-based), replaces every tool result with a placeholder."""

    name = "clear_results"

    def __init__(self, at: int) -> None:
        self.at = at

    @hookimpl
    def before_model_request(self, ctx: RequestContext) -> None:
        if ctx.requests + 1 != self.at:
            return
        cleared: list[str] = []
        new: list[CanonicalMessage] = []
        for message in ctx.messages:
            parts: list[Part] = []
            for part in message.parts:
                if isinstance(part, ToolReturnPart):
                    cleared.append(part.tool_call_id)
                    part = ToolReturnPart(
                        tool_call_id=part.tool_call_id, tool_name=part.tool_name, content="[cleared]"
                    )
                parts.append(part)
            new.append(message.replace(parts=tuple(parts)))
        ctx.replace_messages(
            new,
            strategy=self.name,
            reason=f"request {self.at}",
            cleared_tool_call_ids=cleared,
            details={"placeholder": "[cleared]"},
        )


class ReportOnly:
    """Reports an attempt that changed nothing (as a summarizer whose model failed does)."""

    name = "report_only"

    @hookimpl
    def before_model_request(self, ctx: RequestContext) -> None:
        from harness import CompactionEvent

        n = len(ctx.messages)
        ctx.report(CompactionEvent("report_only", "tried", n, n, 10, 10, details={"applied": False}))


def agent_with(recorder: SpanRecorder, *capabilities: object, model: FunctionModel | None = None) -> Agent:
    model = model or FunctionModel.from_responses(call("call_1"), call("call_2"), "done", model_name="m")
    agent = Agent(model, tools=[echo], capabilities=list(capabilities))
    agent.plugin_manager.register(OTelPlugin(tracer_provider=recorder.provider))
    return agent


async def test_a_compaction_is_an_event_with_its_manifest(spans: SpanRecorder) -> None:
    await agent_with(spans, ClearResults(at=3)).run("go")
    run = spans.one("invoke_agent")
    [event] = [e for e in run.events if e.name == attributes.COMPACTION_EVENT]
    manifest = dict(event.attributes or {})
    before = int(str(manifest.pop(attributes.COMPACTION_TOKENS_BEFORE)))
    after = int(str(manifest.pop(attributes.COMPACTION_TOKENS_AFTER)))
    assert before > after
    assert manifest.pop(attributes.COMPACTION_TOKENS_SAVED) == before - after
    assert manifest == {
        attributes.COMPACTION_STRATEGY: "clear_results",
        attributes.COMPACTION_REASON: "request 3",
        attributes.COMPACTION_MESSAGES_BEFORE: 5,
        attributes.COMPACTION_MESSAGES_AFTER: 5,
        attributes.COMPACTION_REMOVED_IDS: (),
        attributes.COMPACTION_CLEARED_IDS: ("call_1", "call_2"),
        attributes.COMPACTION_DETAILS: json.dumps({"placeholder": "[cleared]"}, separators=(",", ":")),
    }


async def test_only_the_request_after_a_compaction_is_flagged(spans: SpanRecorder) -> None:
    await agent_with(spans, ClearResults(at=2)).run("go")
    flags = [(s.attributes or {}).get(attributes.COMPACTED) for s in spans.named("chat")]
    assert flags == [None, True, None]


async def test_an_attempt_that_changed_nothing_does_not_flag_the_request(spans: SpanRecorder) -> None:
    await agent_with(spans, ReportOnly()).run("go")
    run = spans.one("invoke_agent")
    assert len([e for e in run.events if e.name == attributes.COMPACTION_EVENT]) == 3, (
        "every report is an event"
    )
    assert all(attributes.COMPACTED not in (s.attributes or {}) for s in spans.named("chat"))


async def test_a_sliding_window_compaction_in_a_real_stack(spans: SpanRecorder) -> None:
    model = FunctionModel.from_responses(
        call("call_1"), call("call_2"), call("call_3"), "done", model_name="m"
    )
    agent = agent_with(spans, SlidingWindow(max_messages=4, keep_messages=2), model=model)
    await agent.run("go")
    run = spans.one("invoke_agent")
    events = [dict(e.attributes or {}) for e in run.events if e.name == attributes.COMPACTION_EVENT]
    assert events, "the window fired"
    assert {str(e[attributes.COMPACTION_STRATEGY]) for e in events} == {"sliding_window"}
    first = events[0]
    after = int(str(first[attributes.COMPACTION_MESSAGES_AFTER]))
    assert after < int(str(first[attributes.COMPACTION_MESSAGES_BEFORE]))
    assert first[attributes.COMPACTION_REMOVED_IDS], "the dropped calls are named"
    assert json.loads(str(first[attributes.COMPACTION_DETAILS]))["dropped_messages"] > 0
    flagged = [(s.attributes or {}).get(attributes.COMPACTED, False) for s in spans.named("chat")]
    assert flagged.count(True) == len(events)
    assert flagged[0] is False, "nothing was compacted before the first request"


class FallBack:
    @hookimpl(wrapper=True)
    def wrap_model_request(self, request: ModelCall) -> Generator[None, CanonicalMessage, CanonicalMessage]:
        try:
            return (yield)
        except ModelError:
            request.model = FunctionModel.from_responses("from backup", model_name="backup")
            return (yield)


async def test_every_attempt_of_the_request_after_a_compaction_is_flagged(spans: SpanRecorder) -> None:
    answers = [call("call_1")]

    def primary(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        if answers:
            return answers.pop()
        raise ModelRateLimitError("scripted", "slow down")

    agent = agent_with(spans, ClearResults(at=2), model=FunctionModel(primary, model_name="m"))
    agent.plugin_manager.register(FallBack())
    result = await agent.run("go")
    assert result.output == "from backup"
    chats = spans.named("chat")
    assert [s.name for s in chats] == ["chat m", "chat m", "chat backup"]
    assert chats[1].status.status_code is StatusCode.ERROR
    assert [(s.attributes or {}).get(attributes.COMPACTED) for s in chats] == [None, True, True]


async def test_a_compaction_outside_a_run_gets_a_span_of_its_own(spans: SpanRecorder) -> None:
    agent = agent_with(spans)
    history = [
        CanonicalMessage.user("go"),
        call("call_1"),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="call_1", tool_name="echo", content="hello" * 20)
        ),
        CanonicalMessage.response(TextPart("done")),
        CanonicalMessage.user("again"),
    ]
    result = await compact(history, [ClearResults(at=1)], plugin_manager=agent.plugin_manager)
    assert len(result.events) == 1
    span = spans.one("compaction clear_results")
    assert span.parent is None
    assert (span.attributes or {})[attributes.COMPACTION_CLEARED_IDS] == ("call_1",)
    assert [e.name for e in span.events] == [attributes.COMPACTION_EVENT]
