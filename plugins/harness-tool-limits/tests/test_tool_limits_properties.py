"""Hypothesis properties of ToolLimits over whole runs."""

from __future__ import annotations

from collections import Counter
from typing import Any

from harness_tool_limits import ToolLimits
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import Agent, CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart
from harness.core import RetryPromptPart
from harness.history import check_invariants
from harness.models.function import FunctionInfo, FunctionModel

TOOLS = ("a", "b", "c")

# One call: (tool, valid arguments?); a response holds 1 to 4 calls.
batches_strategy = st.lists(
    st.lists(st.tuples(st.sampled_from(TOOLS), st.booleans()), min_size=1, max_size=4), min_size=1, max_size=6
)
limits_strategy = st.dictionaries(st.sampled_from(TOOLS), st.integers(0, 3), max_size=3)


def simulate(
    calls: list[tuple[str, str, bool]], per_tool: dict[str, int], per_run: int | None
) -> tuple[list[str], set[str]]:
    """The calls that run and the calls refused, one call after the other."""
    counts: Counter[str] = Counter()
    executed: list[str] = []
    blocked: set[str] = set()
    for call_id, tool, valid in calls:
        if counts[tool] >= per_tool.get(tool, 10**9) or (per_run is not None and counts.total() >= per_run):
            blocked.add(call_id)  # refused whatever its arguments
            continue
        if not valid:
            continue  # a retry prompt: never counted
        counts[tool] += 1
        executed.append(call_id)
    return executed, blocked


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=batches_strategy,
    per_tool=limits_strategy,
    per_run=st.none() | st.integers(0, 6),
    parallel=st.sampled_from([1, 4]),
)
async def test_no_tool_runs_more_often_than_its_limit_and_every_call_is_answered_once(
    batches: list[list[tuple[str, bool]]], per_tool: dict[str, int], per_run: int | None, parallel: int
) -> None:
    if not per_tool and per_run is None:
        per_run = 3
    ran: list[tuple[str, str]] = []

    def make_tool(name: str) -> Any:
        async def tool(n: int) -> str:
            ran.append((name, str(n)))
            return f"{name}{n}"

        tool.__name__ = name
        tool.__doc__ = "A tool.\n\nArgs:\n    n: A number.\n"
        return tool

    numbered: list[list[tuple[str, str, bool]]] = []
    counter = 0
    for batch in batches:
        numbered.append([])
        for tool, valid in batch:
            numbered[-1].append((f"c{counter}", tool, valid))
            counter += 1
    responses = iter(numbered)

    def respond(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        batch = next(responses, None)
        if batch is None:
            return CanonicalMessage.response(TextPart("done"))
        return CanonicalMessage.response(
            *(
                ToolCallPart(
                    tool_call_id=call_id,
                    tool_name=tool,
                    args={"n": int(call_id[1:])} if valid else {"wrong": "x"},
                )
                for call_id, tool, valid in batch
            )
        )

    agent = Agent(
        FunctionModel(respond),
        tools=[make_tool(name) for name in TOOLS],
        capabilities=[ToolLimits(per_tool=per_tool, per_run=per_run)],
        max_parallel_tools=parallel,
        tool_retry_budget=100,
        max_iterations=50,
    )
    result = await agent.run("go")
    assert result.output == "done"

    executed = Counter(name for name, _ in ran)
    for tool, limit in per_tool.items():
        assert executed[tool] <= limit
    if per_run is not None:
        assert executed.total() <= per_run

    answers: Counter[str] = Counter()
    for message in result.all_messages:
        for part in message.parts:
            if isinstance(part, ToolReturnPart | RetryPromptPart) and part.tool_call_id is not None:
                answers[part.tool_call_id] += 1
    every_call = [call_id for batch in numbered for call_id, _, _ in batch]
    assert answers == Counter(every_call), "every call is answered exactly once"
    assert check_invariants(result.all_messages) == []

    if parallel == 1:  # one call after the other: exactly what the rules say
        expected_run, expected_blocked = simulate([c for b in numbered for c in b], per_tool, per_run)
        assert [f"c{n}" for _, n in ran] == expected_run
        refused = {
            part.tool_call_id
            for message in result.all_messages
            for part in message.parts
            if isinstance(part, ToolReturnPart)
            and str(part.content).startswith("call refused by the tool-call")
        }
        assert refused == expected_blocked
