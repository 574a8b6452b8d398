"""harness.interop.pydantic_ai: prompts changed between pydantic-ai runs move the context estimate."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent
from pydantic_ai import messages as pai
from pydantic_ai.capabilities import AbstractCapability, ProcessHistory
from pydantic_ai.models.function import AgentInfo, FunctionModel

from harness import Capability, RequestContext, hookimpl
from harness.interop.pydantic_ai import HarnessCapabilities, as_history_processor


class _Gauge(Capability):
    """Records the context estimate and the exact count before every request."""

    name = "gauge"

    def __init__(self) -> None:
        self.readings: list[tuple[int, int]] = []

    @hookimpl
    async def before_model_request(self, ctx: RequestContext) -> None:
        self.readings.append((ctx.context_tokens(), ctx.count_tokens()))


def _respond(messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
    last = messages[-1]
    if any(isinstance(part, pai.ToolReturnPart) for part in last.parts):
        return pai.ModelResponse(parts=[pai.TextPart("done")])
    return pai.ModelResponse(parts=[pai.ToolCallPart("look", {}, f"c{len(messages)}")])


async def _second_run_estimate(kind: str, repeat: int) -> tuple[int, int]:
    """Run twice with the same wrapper; the second run's prompts are ``repeat`` words long."""
    gauge = _Gauge()
    capability: AbstractCapability[Any] = (
        HarnessCapabilities([gauge])
        if kind == "capability"
        else ProcessHistory(as_history_processor([gauge]))
    )
    agent = Agent(FunctionModel(_respond), capabilities=[capability])
    words = {"n": 10}

    @agent.tool_plain
    def look() -> str:  # pyright: ignore[reportUnusedFunction]
        return "seen"

    @agent.system_prompt(dynamic=True)
    def today() -> str:  # pyright: ignore[reportUnusedFunction]
        return "date " * words["n"]

    @agent.instructions
    def rules() -> str:  # pyright: ignore[reportUnusedFunction]
        return "rule " * words["n"]

    first = await agent.run("start")
    words["n"] = repeat
    await agent.run("again", message_history=first.all_messages())
    return gauge.readings[2]  # the second run's first request: anchored on the first run's answer


@pytest.mark.parametrize("kind", ["capability", "history processor"])
async def test_prompts_changed_since_the_last_response_move_the_estimate(kind: str) -> None:
    same_estimate, same_exact = await _second_run_estimate(kind, 10)
    grown_estimate, grown_exact = await _second_run_estimate(kind, 4_000)
    # Both the dynamic system prompt and the instructions grew by 3,990 words each: the
    # estimate, anchored on the provider's figure, moves exactly as the exact count does.
    assert grown_exact - same_exact > 7_900
    assert grown_estimate - same_estimate == grown_exact - same_exact
