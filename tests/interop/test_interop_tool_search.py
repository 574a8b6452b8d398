"""harness.interop.pydantic_ai with pydantic-ai's real ``ToolSearch``: typed tool parts survive a stack."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from harness_clear_tool_results import ClearToolResults
from pydantic_ai import Agent, Tool
from pydantic_ai import messages as pai
from pydantic_ai.capabilities import ToolSearch
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.profiles import ModelProfile

from harness import Capability, RequestContext, hookimpl
from harness.core import (
    CanonicalMessage,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    replace,
)
from harness.interop.pydantic_ai import (
    HarnessCapabilities,
    messages_from_pydantic_ai,
    messages_to_pydantic_ai,
)

CITIES = ("Oslo", "Lima", "Pune", "Kobe", "Faro")


def get_weather(city: str) -> str:
    """The weather in a city (long, so that clearing it pays)."""
    return f"sunny in {city}; " * 40


def _agent(
    offered: list[list[str]], *capabilities: Any, cities: tuple[str, ...] = CITIES
) -> Agent[None, str]:
    """An agent whose model searches for ``get_weather`` (local ``search_tools``), then calls it per city."""

    def model(messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        offered.append(sorted(tool.name for tool in info.function_tools))
        step = len(offered)
        if step == 1:
            search = {"queries": ["weather"]}
            call = pai.ToolCallPart(tool_name="search_tools", args=search, tool_call_id="search")
            return pai.ModelResponse(parts=[call])
        if step <= len(cities) + 1:
            city = cities[step - 2]
            call = pai.ToolCallPart(tool_name="get_weather", args={"city": city}, tool_call_id=f"w{step}")
            return pai.ModelResponse(parts=[call])
        return pai.ModelResponse(parts=[pai.TextPart(content="done")])

    no_native = ModelProfile(supported_native_tools=frozenset())  # the local search_tools fallback
    agent: Agent[None, str] = Agent(
        FunctionModel(model, profile=no_native),
        tools=[Tool(get_weather, defer_loading=True)],
        capabilities=[ToolSearch(), *capabilities],
    )
    return agent


def _search_returns(messages: list[pai.ModelMessage]) -> list[pai.ToolReturnPart]:
    return _returns(messages, "search_tools")


def _returns(messages: list[pai.ModelMessage], tool: str) -> list[pai.ToolReturnPart]:
    return [p for m in messages for p in m.parts if isinstance(p, pai.ToolReturnPart) and p.tool_name == tool]


async def test_clear_tool_results_keeps_the_typed_tool_search_return() -> None:
    offered: list[list[str]] = []
    clear = ClearToolResults(max_messages=2, keep_pairs=0, clear_tool_inputs=True)
    result = await _agent(offered, HarnessCapabilities([clear])).run("the weather?")
    assert result.output == "done"
    history = result.all_messages()
    (search,) = _search_returns(history)
    assert isinstance(search, pai.ToolSearchReturnPart)
    assert search.content == {"discovered_tools": [{"name": "get_weather"}]}
    cleared = [p for p in _returns(history, "get_weather") if p.content == "[tool result cleared]"]
    assert len(cleared) >= 3  # the clearing did happen
    assert all("get_weather" in tools for tools in offered[1:])  # the discovery was never lost


def test_a_placeholder_in_typed_content_is_sent_as_a_plain_tool_return() -> None:
    history = [
        CanonicalMessage.request(UserPromptPart(content="q")),
        CanonicalMessage.response(
            ToolCallPart(
                tool_call_id="s",
                tool_name="search_tools",
                args={"_cleared": "[x]"},
                extra={"tool_kind": "tool-search"},
            )
        ),
        CanonicalMessage.request(
            ToolReturnPart(
                tool_call_id="s",
                tool_name="search_tools",
                content="[tool result cleared]",
                extra={"tool_kind": "tool-search", "outcome": "success"},
            )
        ),
    ]
    converted = messages_to_pydantic_ai(history)
    call, ret = converted[1].parts[0], converted[2].parts[0]
    assert type(call) is pai.ToolCallPart
    assert call.tool_kind is None
    assert type(ret) is pai.ToolReturnPart
    assert ret.tool_kind is None
    assert ret.content == "[tool result cleared]"
    assert messages_from_pydantic_ai(converted) == history  # the kind comes back from the stash


class _ClearsEverything(Capability):
    """Rewrites every tool return but the newest as text, ignoring declared kinds (a careless plugin)."""

    @hookimpl
    async def before_model_request(self, ctx: RequestContext) -> None:
        returns = [
            (mi, pi)
            for mi, m in enumerate(ctx.messages)
            for pi, p in enumerate(m.parts)
            if isinstance(p, ToolReturnPart) and p.content != "gone"
        ]
        messages = list(ctx.messages)
        for mi, pi in returns[:-1]:
            parts = list(messages[mi].parts)
            part = parts[pi]
            assert isinstance(part, ToolReturnPart)
            parts[pi] = replace(part, content="gone")
            messages[mi] = messages[mi].replace(parts=tuple(parts))
        ctx.messages[:] = messages


async def test_a_capability_that_clears_typed_content_does_not_abort_the_run() -> None:
    offered: list[list[str]] = []
    agent = _agent(offered, HarnessCapabilities([_ClearsEverything()]), cities=("Oslo",))
    result = await agent.run("the weather?")
    assert result.output == "done"
    assert len(offered) == 3  # the third request was sent with the search return cleared
    (search,) = _search_returns(result.all_messages())
    assert type(search) is pai.ToolReturnPart
    assert search.content == "gone"
