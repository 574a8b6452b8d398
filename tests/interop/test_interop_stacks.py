"""harness.interop.pydantic_ai: harness stacks inside pydantic-ai agents (history processor, capability)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import attrs
import pytest

pytest.importorskip("pydantic_ai")

from harness_clear_tool_results import ClearToolResults
from harness_limit_warner import LimitWarner
from harness_sliding_window import SlidingWindow
from pydantic_ai import Agent
from pydantic_ai import messages as pai
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.models.function import AgentInfo, FunctionModel

from harness import Capability, CapabilityError, CompactionEvent, RequestContext, hookimpl
from harness.core import CanonicalMessage, ToolReturnPart
from harness.interop.pydantic_ai import STASH_KEY, HarnessCapabilities, as_history_processor

STAMP = datetime(2025, 3, 4, 5, 6, 7, 890000, tzinfo=UTC)

LongHistory = Callable[[int], list[pai.ModelRequest | pai.ModelResponse]]
"""The ``long_history`` fixture (see conftest.py)."""


def _request(*parts: Any, **fields: Any) -> pai.ModelRequest:
    return pai.ModelRequest(parts=list(parts), timestamp=STAMP, **fields)


def _response(*parts: Any, **fields: Any) -> pai.ModelResponse:
    return pai.ModelResponse(parts=list(parts), timestamp=STAMP, **fields)


PLAN = (1, 3, 1, 2, 3, 1, 1, 3, 2, 1, 3, 1, 1, 3, 2, 2)  # 30 tool calls, some parallel
BIG = "x" * 400


def _check_sent_history(messages: list[pai.ModelMessage]) -> None:
    """What the model receives: the task first, every call answered, every answer called earlier."""
    first = messages[0]
    assert isinstance(first, pai.ModelRequest)
    assert any(isinstance(p, pai.UserPromptPart) and p.content == "the task" for p in first.parts)
    assert isinstance(messages[-1], pai.ModelRequest)
    called: set[str] = set()
    answered: set[str] = set()
    for message in messages:
        for part in message.parts:
            if isinstance(message, pai.ModelResponse) and isinstance(part, pai.ToolCallPart):
                called.add(part.tool_call_id)
            elif isinstance(part, pai.ToolReturnPart):
                assert part.tool_call_id in called, f"return {part.tool_call_id} without its call"
                answered.add(part.tool_call_id)
    assert called == answered, f"unanswered calls: {called - answered}"


def _scripted_model(seen: list[list[pai.ModelMessage]]) -> FunctionModel:
    def respond(messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        _check_sent_history(messages)
        seen.append(list(messages))
        step = len(seen) - 1
        if step < len(PLAN):
            calls = [
                pai.ToolCallPart("read", {"n": f"{step}.{i}"}, f"call-{step}-{i}") for i in range(PLAN[step])
            ]
            return pai.ModelResponse(parts=list(calls))
        return pai.ModelResponse(parts=[pai.TextPart("finished")])

    return FunctionModel(respond)


def _stack() -> list[object]:
    return [ClearToolResults(max_messages=6, keep_pairs=2), SlidingWindow(max_messages=12, keep_messages=6)]


def _agent(seen: list[list[pai.ModelMessage]], capability: Any, executed: list[str]) -> Agent[None, str]:
    agent = Agent(_scripted_model(seen), capabilities=[capability])

    @agent.tool_plain
    def read(n: str) -> str:  # pyright: ignore[reportUnusedFunction]
        executed.append(n)
        return f"{n}: {BIG}"

    return agent


@pytest.mark.parametrize("route", ["history_processor", "capability"])
async def test_agent_with_sliding_window_and_clearing_never_splits_tool_calls(route: str) -> None:
    seen: list[list[pai.ModelMessage]] = []
    executed: list[str] = []
    events: list[CompactionEvent] = []
    if route == "history_processor":
        capability: Any = ProcessHistory(as_history_processor(_stack(), on_event=events.append))
    else:
        capability = HarnessCapabilities(_stack(), on_compaction=events.append)
    result = await _agent(seen, capability, executed).run("the task")

    assert result.output == "finished"
    assert len(executed) == sum(PLAN) == 30
    assert len(seen) == len(PLAN) + 1
    sizes = [len(messages) for messages in seen]
    assert max(sizes) <= 13
    assert {event.strategy for event in events} >= {"clear_tool_results", "sliding_window"}
    cleared = [
        part
        for messages in seen
        for message in messages
        for part in message.parts
        if isinstance(part, pai.ToolReturnPart) and part.content == "[tool result cleared]"
    ]
    assert cleared
    chars = [
        sum(len(str(p.content)) for m in messages for p in m.parts if isinstance(p, pai.ToolReturnPart))
        for messages in seen
    ]
    assert max(chars) < 10 * len(BIG)  # 30 full results would be 30 x 400 characters
    # The stored history holds the edits too (pydantic-ai persists them), and stays valid.
    stored = result.all_messages()
    assert len(stored) <= 14
    _check_sent_history(stored[:-1])


async def test_limit_warning_is_sent_once_and_never_stored_by_the_capability() -> None:
    seen: list[list[pai.ModelMessage]] = []
    warner = LimitWarner(max_context_tokens=50)
    result = await _agent(seen, HarnessCapabilities([*_stack(), warner]), []).run("the task")
    assert result.output == "finished"
    for messages in seen[1:]:  # the first request (the task alone) is below the threshold
        warnings_sent = [_warnings_in(m) for m in messages]
        assert sum(warnings_sent) == 1
        assert warnings_sent[-1] == 1  # at the end of the request being sent
    assert sum(_warnings_in(m) for m in result.all_messages()) == 0


async def test_limit_warning_does_not_pile_up_with_the_history_processor() -> None:
    seen: list[list[pai.ModelMessage]] = []
    warner = LimitWarner(max_context_tokens=50)
    result = await _agent(seen, ProcessHistory(as_history_processor([*_stack(), warner])), []).run("the task")
    assert result.output == "finished"
    for messages in seen[1:]:
        assert [_warnings_in(m) for m in messages][-1] == 1
        assert sum(_warnings_in(m) for m in messages) == 1
    # pydantic-ai stores a processor's output: only the last request keeps its warning.
    stored = [_warnings_in(m) for m in result.all_messages()]
    assert sum(stored) <= 1
    # ... and the requests it was removed from keep no stash entry for it.
    for message in result.all_messages()[:-2]:
        stash: dict[str, Any] = (message.metadata or {}).get(STASH_KEY, {})
        assert all(int(index) < len(message.parts) for index in stash.get("parts", {}))


def _warnings_in(message: pai.ModelMessage) -> int:
    return sum(
        1
        for p in message.parts
        if isinstance(p, pai.UserPromptPart) and str(p.content).startswith("[LimitWarner]")
    )


class _DropsToolReturns(Capability):
    """Breaks the invariants on purpose: removes every tool return."""

    @hookimpl
    async def before_model_request(self, ctx: RequestContext) -> None:
        ctx.messages[:] = [
            m.replace(parts=tuple(p for p in m.parts if not isinstance(p, ToolReturnPart)))
            for m in ctx.messages
        ]


async def test_a_capability_that_breaks_the_history_fails_the_run(long_history: LongHistory) -> None:
    processor = as_history_processor([_DropsToolReturns()])
    history = long_history(2)
    with pytest.raises(CapabilityError, match="drops_tool_returns"):
        await processor.process(history)
    seen: list[list[pai.ModelMessage]] = []
    with pytest.raises(CapabilityError):
        await _agent(seen, HarnessCapabilities([_DropsToolReturns()]), []).run("the task")


async def test_idle_requests_cost_only_the_new_messages(
    dump_counter: list[int], long_history: LongHistory
) -> None:
    processor = as_history_processor([SlidingWindow(max_messages=10_000, keep_messages=10)])
    history = long_history(500)
    first = await processor.process(history)
    assert not first.changed
    assert all(a is b for a, b in zip(first.sent, history, strict=True))
    history.append(_response(pai.ToolCallPart("read", {}, "late")))
    history.append(_request(pai.ToolReturnPart("read", "late out", "late", timestamp=STAMP)))
    dump_counter.clear()
    second = await processor.process(history)
    assert dump_counter == [2]
    assert second.sent[-1] is history[-1]


async def test_capability_runs_get_their_own_state() -> None:
    capability = HarnessCapabilities(_stack(), context_window=100_000, model_name="gpt-4o")
    run_copy = await capability.for_run(None)  # pyright: ignore[reportArgumentType]
    assert isinstance(run_copy, HarnessCapabilities)
    assert run_copy.processor is not capability.processor
    assert (run_copy.context_window, run_copy.model_name) == (100_000, "gpt-4o")
    assert HarnessCapabilities.get_serialization_name() is None


class _SilentlyClears(Capability):
    """Edits the history without reporting an event: the edit must still be applied."""

    @hookimpl
    async def before_model_request(self, ctx: RequestContext) -> None:
        last = len(ctx.messages) - 1
        ctx.messages[:] = [m if i == last else _cleared(m) for i, m in enumerate(ctx.messages)]


def _cleared(message: CanonicalMessage) -> CanonicalMessage:
    if not any(isinstance(p, ToolReturnPart) for p in message.parts):
        return message
    parts = [attrs.evolve(p, content="gone") if isinstance(p, ToolReturnPart) else p for p in message.parts]
    return message.replace(parts=tuple(parts))


async def test_edits_without_events_are_applied_too(long_history: LongHistory) -> None:
    history = long_history(3)
    processed = await as_history_processor([_SilentlyClears()]).process(history)
    assert processed.changed
    assert not processed.result.events
    contents = [p.content for m in processed.sent for p in m.parts if isinstance(p, pai.ToolReturnPart)]
    assert contents == ["gone", "gone", "out 2"]
    assert processed.sent[0] is history[0]
