"""Agent construction, options and the run_sync / abort entry points."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from harness.capabilities import Capability, RequestContext
from harness.core import CanonicalMessage, TextPart, ToolCallPart
from harness.errors import ToolDefinitionError
from harness.hooks import PluginManager, hookimpl
from harness.models.function import FunctionModel
from harness.run import Agent, RunResult
from harness.session import Session
from harness.tools import Tool


def ping() -> str:
    """Ping."""
    return "pong"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_iterations": 0}, "max_iterations must be at least 1"),
        ({"tool_max_retries": 0}, "tool_max_retries must be at least 1"),
        ({"max_parallel_tools": 0}, "max_parallel_tools must be at least 1"),
        ({"tool_retry_budget": -1}, "tool_retry_budget must be >= 0"),
        ({"max_empty_responses": -1}, "max_empty_responses must be >= 0"),
        ({"request_timeout": 0}, "request_timeout must be positive"),
        ({"tool_retry_base_delay": -0.1}, "tool_retry_base_delay must be >= 0"),
    ],
)
def test_invalid_options_rejected(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Agent(FunctionModel.from_responses(), **kwargs)


def test_tools_from_functions_and_tool_objects_and_duplicates() -> None:
    agent = Agent(FunctionModel.from_responses(), tools=[ping, Tool.from_function(ping, name="ping2")])
    assert list(agent.tools) == ["ping", "ping2"]
    assert [d.name for d in agent.tool_definitions] == ["ping", "ping2"]
    with pytest.raises(ToolDefinitionError, match="two tools are named 'ping'"):
        Agent(FunctionModel.from_responses(), tools=[ping, ping])


def test_defaults() -> None:
    agent = Agent(FunctionModel.from_responses())
    assert (agent.max_iterations, agent.tool_max_retries, agent.tool_retry_budget) == (25, 3, 3)
    assert (agent.max_parallel_tools, agent.max_empty_responses, agent.request_timeout) == (8, 2, None)
    assert agent.fallback_tool_calls is True
    assert isinstance(agent.plugin_manager, PluginManager)


def test_run_sync_returns_result() -> None:
    result = Agent(FunctionModel.from_responses("hello")).run_sync("hi")
    assert isinstance(result, RunResult)
    assert result.output == "hello"
    assert isinstance(result.session, Session)


async def test_given_plugin_manager_gets_the_capabilities_in_order() -> None:
    order: list[str] = []

    class First(Capability):
        name = "first"

        @hookimpl
        async def before_model_request(self, ctx: RequestContext) -> None:
            order.append("first")

    class Second(Capability):
        name = "second"

        @hookimpl
        async def before_model_request(self, ctx: RequestContext) -> None:
            order.append("second")

    pm = PluginManager()
    agent = Agent(FunctionModel.from_responses("x"), capabilities=[First(), Second()], plugin_manager=pm)
    assert agent.plugin_manager is pm
    assert [type(c).__name__ for c in pm.capabilities] == ["First", "Second"]
    await agent.run("go")
    assert order == ["first", "second"]


async def test_abort_without_runs_is_a_noop_and_concurrent_runs_are_independent() -> None:
    agent = Agent(FunctionModel.from_responses("a", "b"))
    agent.abort()
    results = await asyncio.gather(agent.run("one"), agent.run("two"))
    assert sorted(r.output or "" for r in results) == ["a", "b"]
    assert results[0].session is not results[1].session


async def test_blank_final_response_is_nudged_not_returned() -> None:
    from harness.core import ThoughtPart

    model = FunctionModel.from_responses(
        CanonicalMessage.response(ToolCallPart(tool_call_id="c", tool_name="ping")),
        CanonicalMessage.response(ThoughtPart("t"), TextPart("")),
        CanonicalMessage.response(TextPart("ok")),
    )
    result = await Agent(model, tools=[ping]).run("go")
    assert result.output == "ok"


async def test_fallback_can_be_disabled() -> None:
    text = "<function=ping>{}</function>"
    result = await Agent(FunctionModel.from_responses(text), tools=[ping], fallback_tool_calls=False).run(
        "go"
    )
    assert result.output == text


async def test_overlapping_runs_on_one_session_are_refused() -> None:
    from harness.errors import HarnessError

    release = asyncio.Event()

    async def wait(messages: list[CanonicalMessage], info: Any) -> str:
        await release.wait()
        return "first"

    session = Session()
    first = asyncio.create_task(Agent(FunctionModel(wait)).run("one", session=session))
    await asyncio.sleep(0.01)
    before = list(session.messages)
    with pytest.raises(HarnessError, match="already used by a run in progress"):
        await Agent(FunctionModel.from_responses("second")).run("two", session=session)
    assert session.messages == before
    release.set()
    assert (await first).output == "first"
    assert (
        await Agent(FunctionModel.from_responses("third")).run("three", session=session)
    ).output == "third"
