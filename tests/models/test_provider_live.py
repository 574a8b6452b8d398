"""Live smoke tests against the real APIs; skipped unless the provider's API key is set.

They make one small request each (a tool call round trip) and check the mapping both ways
against the real service. Override the models with ``HARNESS_LIVE_OPENAI_MODEL`` /
``HARNESS_LIVE_ANTHROPIC_MODEL``.
"""

from __future__ import annotations

import os

import pytest

from harness import Agent
from harness.models.resolve import resolve_model


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def _smoke(model_string: str) -> None:
    model = resolve_model(model_string)
    agent = Agent(model, tools=[add], system_prompt="Use the add tool for arithmetic, then answer briefly.")
    try:
        result = await agent.run("What is 1234 + 4321? Use the tool.")
    finally:
        close = getattr(model, "aclose", None)
        if close is not None:
            await close()
    assert result.output is not None
    assert "5555" in result.output.replace(",", "")
    returns = [p for m in result.all_messages for p in m.parts if p.part_kind == "tool-return"]
    assert returns, "the model did not call the tool"
    assert result.usage.request_tokens > 0
    assert result.usage.response_tokens > 0


@pytest.mark.skipif(not os.environ.get("OPENAI_API_KEY"), reason="OPENAI_API_KEY is not set")
async def test_live_openai() -> None:
    await _smoke("openai:" + os.environ.get("HARNESS_LIVE_OPENAI_MODEL", "gpt-4o-mini"))


@pytest.mark.skipif(not os.environ.get("ANTHROPIC_API_KEY"), reason="ANTHROPIC_API_KEY is not set")
async def test_live_anthropic() -> None:
    await _smoke("anthropic:" + os.environ.get("HARNESS_LIVE_ANTHROPIC_MODEL", "claude-haiku-4-5"))
