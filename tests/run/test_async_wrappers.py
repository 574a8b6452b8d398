"""Middleware wrappers as async generators: they await around the call and give results with Return."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator

import pytest

from harness import Agent, CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart
from harness.capabilities.calls import ModelCall, ToolCall
from harness.core.effects import ToolOutcome
from harness.errors import CapabilityError, ModelRateLimitError
from harness.hooks import PluginManager, Return, hookimpl
from harness.models.function import FunctionInfo, FunctionModel

ran: list[str] = []


def echo(text: str) -> str:
    """Echo.

    Args:
        text: The text.
    """
    ran.append(text)
    return text


def calls_then_answer(*calls: ToolCallPart) -> FunctionModel:
    def respond(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        del info
        if not any(isinstance(p, ToolReturnPart) for m in messages for p in m.parts):
            return CanonicalMessage.response(*calls)
        seen = [p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        return CanonicalMessage.response(TextPart(" | ".join(str(c) for c in seen)))

    return FunctionModel(respond)


def agent_with(plugin: object, *calls: ToolCallPart, model: FunctionModel | None = None) -> Agent:
    manager = PluginManager()
    manager.register(plugin)
    return Agent(model or calls_then_answer(*calls), tools=[echo], plugin_manager=manager)


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


async def test_an_async_wrapper_holds_a_lock_around_each_call_and_passes_results_on() -> None:
    class OneAtATime:
        def __init__(self) -> None:
            self.lock = asyncio.Lock()
            self.inside = 0
            self.most = 0

        @hookimpl(wrapper=True)
        async def wrap_tool_call(self, call: ToolCall) -> AsyncGenerator[object, ToolOutcome]:
            async with self.lock:
                self.inside += 1
                self.most = max(self.most, self.inside)
                await asyncio.sleep(0.01)  # an await across the call: the lock is held
                yield
                self.inside -= 1

    limiter = OneAtATime()
    calls = [ToolCallPart(tool_call_id=f"c{i}", tool_name="echo", args={"text": f"t{i}"}) for i in range(4)]
    result = await agent_with(limiter, *calls).run("go")
    assert result.output == "t0 | t1 | t2 | t3"
    assert limiter.most == 1
    assert sorted(ran) == ["t0", "t1", "t2", "t3"]


async def test_an_async_wrapper_replaces_the_result_with_return() -> None:
    class Shout:
        @hookimpl(wrapper=True)
        async def wrap_tool_call(self, call: ToolCall) -> AsyncGenerator[object, ToolOutcome]:
            outcome = yield
            yield Return(str(outcome.content).upper())

    result = await agent_with(
        Shout(), ToolCallPart(tool_call_id="c1", tool_name="echo", args={"text": "hi"})
    ).run("go")
    assert result.output == "HI"
    assert ran == ["hi"]


async def test_an_async_wrapper_short_circuits_with_return_before_its_first_yield() -> None:
    class Approver:
        @hookimpl(wrapper=True)
        async def wrap_tool_call(self, call: ToolCall) -> AsyncGenerator[object, ToolOutcome]:
            await asyncio.sleep(0)  # e.g. asking an approval service
            yield Return("refused by the approver")

    result = await agent_with(
        Approver(), ToolCallPart(tool_call_id="c1", tool_name="echo", args={"text": "hi"})
    ).run("go")
    assert result.output == "refused by the approver"
    assert ran == []


async def test_an_async_model_wrapper_retries_by_yielding_again_and_falls_back() -> None:
    attempts: list[str] = []

    def flaky(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        attempts.append("primary")
        raise ModelRateLimitError("fake", "slow down", status_code=429)

    backup = FunctionModel(
        lambda m, i: CanonicalMessage.response(TextPart("from backup")), model_name="backup"
    )

    class Fallback:
        @hookimpl(wrapper=True)
        async def wrap_model_request(self, request: ModelCall) -> AsyncGenerator[object, CanonicalMessage]:
            try:
                yield
            except ModelRateLimitError:
                await asyncio.sleep(0)  # a backoff that never blocks the loop
                request.model = backup
                yield

    result = await agent_with(Fallback(), model=FunctionModel(flaky, model_name="primary")).run("go")
    assert result.output == "from backup"
    assert attempts == ["primary"]


async def test_an_exception_an_async_wrapper_does_not_handle_propagates_unchanged() -> None:
    def failing(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        raise ModelRateLimitError("fake", "slow down", status_code=429)

    seen: list[str] = []

    class Observer:
        @hookimpl(wrapper=True)
        async def wrap_model_request(self, request: ModelCall) -> AsyncGenerator[object, CanonicalMessage]:
            try:
                yield
            finally:
                seen.append("after")

    with pytest.raises(ModelRateLimitError):
        await agent_with(Observer(), model=FunctionModel(failing)).run("go")
    assert seen == ["after"]


async def test_an_async_wrapper_that_yields_a_bare_value_is_refused_naming_return() -> None:
    class Wrong:
        @hookimpl(wrapper=True)
        async def wrap_tool_call(self, call: ToolCall) -> AsyncGenerator[object, ToolOutcome]:
            yield "not a Return"

    with pytest.raises(CapabilityError, match=r"yield Return\(value\)"):
        await agent_with(Wrong(), ToolCallPart(tool_call_id="c1", tool_name="echo", args={"text": "hi"})).run(
            "go"
        )


async def test_an_async_wrapper_that_ends_before_yielding_is_refused() -> None:
    class Ends:
        @hookimpl(wrapper=True)
        async def wrap_run(self) -> AsyncGenerator[object, object]:
            if False:  # an async generator that never yields
                yield

    with pytest.raises(CapabilityError, match="returned before it yielded"):
        await agent_with(Ends(), ToolCallPart(tool_call_id="c1", tool_name="echo", args={"text": "hi"})).run(
            "go"
        )


async def test_an_async_wrapper_awaiting_a_slow_service_never_blocks_other_coroutines() -> None:
    class SlowService:
        @hookimpl(wrapper=True)
        async def wrap_tool_call(self, call: ToolCall) -> AsyncGenerator[object, ToolOutcome]:
            await asyncio.sleep(0.3)
            yield

    gaps: list[float] = []

    async def heartbeat(stop: asyncio.Event) -> None:
        last = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(0.02)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    stop = asyncio.Event()
    beat = asyncio.create_task(heartbeat(stop))
    await agent_with(
        SlowService(), ToolCallPart(tool_call_id="c1", tool_name="echo", args={"text": "hi"})
    ).run("go")
    stop.set()
    await beat
    assert len(gaps) >= 10
    assert max(gaps) < 0.2
