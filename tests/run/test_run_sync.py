"""``Agent.run_sync`` takes what ``Agent.run`` takes, and refuses clearly inside a running loop."""

from __future__ import annotations

import asyncio
import inspect
import pickle
from collections.abc import Generator
from typing import Any

import pytest

from harness import Agent, CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart
from harness.capabilities.calls import ToolCall
from harness.core.effects import InProcessEffects, ModelRequestUnit, ToolOutcome
from harness.errors import EventLoopRunningError, HarnessError
from harness.hooks import PluginManager, hookimpl
from harness.models.function import FunctionInfo, FunctionModel
from harness.models.test import TestModel
from harness.run.compaction import compact_sync

sent_to: list[str] = []


def send_mail(to: str) -> str:
    """Send a mail.

    Args:
        to: The recipient.
    """
    sent_to.append(to)
    return f"sent to {to}"


class HoldMail:
    """Holds every send_mail call until a decision says "yes"."""

    @hookimpl(wrapper=True)
    def wrap_tool_call(self, call: ToolCall) -> Generator[None, ToolOutcome, object]:
        if call.decision is None:
            return ToolOutcome("deferred", error="needs a human")
        return (yield)


def _mail_model() -> FunctionModel:
    def respond(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        del info
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if not returns:
            call = ToolCallPart(tool_name="send_mail", args={"to": "ann"}, tool_call_id="m1")
            return CanonicalMessage.response(call)
        return CanonicalMessage.response(TextPart(content=str(returns[-1].content)))

    return FunctionModel(respond)


class CountingEffects(InProcessEffects):
    """In-process effects that count the model requests they make."""

    def __init__(self) -> None:
        self.requests = 0

    async def model_request(self, unit: ModelRequestUnit) -> CanonicalMessage:
        self.requests += 1
        return await super().model_request(unit)


def test_run_sync_has_the_parameters_of_run() -> None:
    run = inspect.signature(Agent.run)
    run_sync = inspect.signature(Agent.run_sync)
    assert list(run_sync.parameters.values()) == list(run.parameters.values())
    assert run_sync.return_annotation == "RunResult"


def test_run_sync_resumes_a_paused_run_with_approvals() -> None:
    sent_to.clear()
    manager = PluginManager()
    manager.register(HoldMail())
    agent = Agent(_mail_model(), tools=[send_mail], plugin_manager=manager)
    paused = agent.run_sync("mail ann")
    assert paused.status == "awaiting_approval"
    assert sent_to == []
    done = agent.run_sync(None, session=paused.session, approvals={"m1": "yes"})
    assert done.status == "completed"
    assert done.output == "sent to ann"
    assert sent_to == ["ann"]


def test_run_sync_uses_the_effects_it_is_given() -> None:
    effects = CountingEffects()
    result = Agent(TestModel(final_text="hi")).run_sync("hello", effects=effects)
    assert result.output == "hi"
    assert effects.requests == 1


def test_run_sync_inside_a_running_loop_names_what_to_await() -> None:
    agent = Agent(TestModel())

    async def in_a_notebook() -> None:
        agent.run_sync("hello")

    with pytest.raises(EventLoopRunningError, match=r"await agent\.run\(\.\.\.\)") as caught:
        asyncio.run(in_a_notebook())
    error = caught.value
    assert isinstance(error, HarnessError)
    assert isinstance(error, RuntimeError)
    assert error.function == "Agent.run_sync"
    assert "\n" not in str(error)
    assert agent._active == set()  # pyright: ignore[reportPrivateUsage] - nothing was started


def test_compact_sync_inside_a_running_loop_raises_the_same_error() -> None:
    async def in_a_notebook() -> Any:
        return compact_sync([CanonicalMessage.user("hi")], [])

    with pytest.raises(EventLoopRunningError, match=r"await harness\.compact\(\.\.\.\)"):
        asyncio.run(in_a_notebook())


def test_event_loop_running_error_round_trips_through_pickle() -> None:
    error = EventLoopRunningError("Agent.run_sync", "await agent.run(...)")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is EventLoopRunningError
    assert (copy.function, copy.instead, str(copy)) == (error.function, error.instead, str(error))
