"""harness.interop.pydantic_ai: a stack inside a pydantic-ai run sees its usage and limits, and charges it."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from harness_limit_warner import LimitWarner
from pydantic_ai import Agent
from pydantic_ai import messages as pai
from pydantic_ai.capabilities import AbstractCapability, ProcessHistory
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage, UsageLimits

from harness import Capability, RequestContext, Usage, hookimpl
from harness.interop.pydantic_ai import HarnessCapabilities, as_history_processor, run_limits

STEPS = 16


def _looper(sent: list[list[pai.ModelMessage]]) -> FunctionModel:
    """Calls a tool 16 times, then answers; the first response reports 10 tokens, the others 5."""

    def respond(messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        sent.append(list(messages))
        step = len(sent)
        usage = RequestUsage(input_tokens=8 if step == 1 else 4, output_tokens=2 if step == 1 else 1)
        if step <= STEPS:
            return pai.ModelResponse(parts=[pai.ToolCallPart("work", {"n": step}, f"c{step}")], usage=usage)
        return pai.ModelResponse(parts=[pai.TextPart("done")], usage=usage)

    return FunctionModel(respond)


def _warnings(messages: list[pai.ModelMessage]) -> list[str]:
    return [
        part.content
        for message in messages
        for part in message.parts
        if isinstance(part, pai.UserPromptPart)
        and isinstance(part.content, str)
        and part.content.startswith("[LimitWarner]")
    ]


def _agent(sent: list[list[pai.ModelMessage]], capability: AbstractCapability[Any]) -> Agent[None, str]:
    agent = Agent(_looper(sent), capabilities=[capability])

    @agent.tool_plain
    def work(n: int) -> str:  # pyright: ignore[reportUnusedFunction]
        return f"worked {n}"

    return agent


def _warner() -> LimitWarner:
    # No max_iterations of its own: it falls back to the run's request limit.
    return LimitWarner(max_total_tokens=100, warn_on=["iterations", "total_tokens"])


@pytest.mark.parametrize("kind", ["capability", "history processor"])
async def test_limit_warnings_fire_inside_a_pydantic_ai_run(kind: str) -> None:
    sent: list[list[pai.ModelMessage]] = []
    stack = [_warner()]
    capability = (
        HarnessCapabilities(stack) if kind == "capability" else ProcessHistory(as_history_processor(stack))
    )
    result = await _agent(sent, capability).run("do the work", usage_limits=UsageLimits(request_limit=20))
    assert result.output == "done"
    warnings = [_warnings(messages) for messages in sent]
    assert [len(w) for w in warnings] == [0] * 13 + [1] * (STEPS + 1 - 13)
    # Request 14: 70 of 100 tokens used (13 of 20 requests is below 70 %).
    assert "- Total tokens: 70/100 tokens used (70%)." in warnings[13][0]
    assert "Iterations" not in warnings[13][0]
    # Request 16: 15 of 20 requests and 80 of 100 tokens used.
    assert "- Iterations: 15/20 requests used (75%); 5 remaining." in warnings[15][0]
    assert "- Total tokens: 80/100 tokens used (80%)." in warnings[15][0]
    # HarnessCapabilities never stores a warning; a history processor's output is the stored
    # history, so its latest warning stays there until its next call removes it.
    assert len(_warnings(result.all_messages())) == (0 if kind == "capability" else 1)


async def test_without_usage_limits_the_default_request_limit_is_the_iteration_limit() -> None:
    seen: list[tuple[int, int, int | None]] = []

    class Probe(Capability):
        name = "probe"

        @hookimpl
        async def before_model_request(self, ctx: RequestContext) -> None:
            seen.append((ctx.requests, ctx.usage.total_tokens, ctx.max_iterations))

    await _agent([], HarnessCapabilities([Probe()])).run("do the work")
    assert seen[:3] == [(0, 0, 50), (1, 10, 50), (2, 15, 50)]
    assert len(seen) == STEPS + 1


async def test_tokens_a_capability_charges_are_added_to_the_runs_usage() -> None:
    class Charges(Capability):
        """Stands in for a summarizer: charges its request to the run."""

        name = "charges"

        @hookimpl
        async def before_model_request(self, ctx: RequestContext) -> None:
            ctx.add_usage(Usage(request_tokens=100, response_tokens=20, cached_tokens=30))

    plain = await _agent([], HarnessCapabilities([])).run("do the work")
    charged = await _agent([], HarnessCapabilities([Charges()])).run("do the work")
    extra = charged.usage - plain.usage
    requests = STEPS + 1
    assert (extra.input_tokens, extra.output_tokens, extra.cache_read_tokens) == (
        100 * requests,
        20 * requests,
        30 * requests,
    )
    assert extra.requests == 0  # harness usage counts tokens, not requests


async def test_run_limits_reads_a_run_context() -> None:
    captured: list[Any] = []

    class Capture(AbstractCapability[Any]):
        async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
            captured.append(run_limits(ctx))
            return request_context

    await _agent([], Capture()).run("do the work", usage_limits=UsageLimits(request_limit=30))
    assert captured[1].usage == Usage(request_tokens=8, response_tokens=2)
    assert (captured[1].requests, captured[1].max_iterations) == (1, 30)
    empty = run_limits(None)
    assert (empty.usage, empty.requests, empty.max_iterations) == (Usage(), 0, None)
