"""The loop's own overhead per iteration stays small on a long session.

A 1,000-message session runs one prompt for 40 model requests with three capabilities
registered (each checks a token trigger, as compaction capabilities do). The model's and
the tool's own time is subtracted. The target is well under 1 ms per iteration; the
assertion leaves a wide margin for slow CI machines.
"""

from __future__ import annotations

import time

from harness.capabilities import Capability, RequestContext, Trigger
from harness.core import CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
from harness.models.function import FunctionInfo, FunctionModel
from harness.run import Agent
from harness.session import Session

ITERATIONS = 40


_HISTORIES: dict[int, list[CanonicalMessage]] = {}


def build_history(size: int) -> list[CanonicalMessage]:
    """A long session (built once per size: a live session keeps its message objects)."""
    if size in _HISTORIES:
        return list(_HISTORIES[size])
    messages: list[CanonicalMessage] = []
    turn = 0
    while len(messages) < size:
        turn += 1
        messages.append(CanonicalMessage.request(UserPromptPart(f"question {turn} " + "word " * 20)))
        messages.append(
            CanonicalMessage.response(
                TextPart("looking"), ToolCallPart(tool_call_id=f"h{turn}", tool_name="read", args={"p": turn})
            )
        )
        messages.append(
            CanonicalMessage.request(
                ToolReturnPart(tool_call_id=f"h{turn}", tool_name="read", content="line\n" * 40)
            )
        )
        messages.append(CanonicalMessage.response(TextPart(f"answer {turn}")))
    _HISTORIES[size] = messages[:size]
    return list(_HISTORIES[size])


def make_capability(index: int) -> Capability:
    cls = type(f"Watcher{index}", (Capability,), {"name": f"watcher_{index}"})
    capability = cls()
    trigger = Trigger.create(max_tokens=10_000_000)

    def should_compact(ctx: RequestContext) -> str | None:
        return trigger.exceeded(ctx, cls.name)

    capability.should_compact = should_compact  # type: ignore[method-assign]
    return capability


async def overhead_per_iteration(size: int) -> float:
    outside = 0.0
    calls = 0

    def model_fn(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        nonlocal outside, calls
        start = time.perf_counter()
        calls += 1
        if calls >= ITERATIONS:
            reply = CanonicalMessage.response(TextPart("done"))
        else:
            reply = CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"b{calls}", tool_name="read", args={"p": calls})
            )
        outside += time.perf_counter() - start
        return reply

    async def read(p: int) -> str:
        """Fake read."""
        return f"contents {p}"

    model = FunctionModel(model_fn)
    agent = Agent(
        model,
        tools=[read],
        capabilities=[make_capability(i) for i in range(3)],
        max_iterations=ITERATIONS + 1,
    )
    session = Session(messages=build_history(size))
    # warm the token counter's caches as a live session would have them
    agent.plugin_manager.token_counter(model.model_name).count_messages(session.messages)
    start = time.perf_counter()
    await agent.run("Keep reading.", session=session)
    total = time.perf_counter() - start
    return (total - outside) / calls


async def test_overhead_per_iteration_at_1000_messages_is_small() -> None:
    samples = sorted([await overhead_per_iteration(1000) for _ in range(3)])
    median = samples[1]
    print(f"loop overhead per iteration at 1,000 messages: {median * 1e6:.0f} us")
    assert median < 0.005  # target well under 1 ms; generous bound for CI noise


async def test_overhead_does_not_grow_much_with_history() -> None:
    """Per-iteration cost at 2,000 messages stays close to the cost at 100 (best of 5 runs)."""
    small = min([await overhead_per_iteration(100) for _ in range(5)])
    large = min([await overhead_per_iteration(2000) for _ in range(5)])
    print(f"best per-iteration overhead: {small * 1e6:.0f} us at 100 messages, {large * 1e6:.0f} us at 2,000")
    assert large < small * 10 + 0.002
