"""SlidingWindow aiming at a token target, and a summary kept at the front."""

from __future__ import annotations

from harness_sliding_window import SlidingWindow

from harness.capabilities import RequestContext
from harness.core import (
    CanonicalMessage,
    SystemPromptPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    with_harness_mark,
)
from harness.history import check_invariants
from harness.tokens import TokenCounter


def _history(steps: int) -> list[CanonicalMessage]:
    messages = [CanonicalMessage.request(SystemPromptPart("be brief"), UserPromptPart("the task"))]
    for i in range(steps):
        messages.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"c{i}", tool_name="bash", args={"command": f"step {i}"})
            )
        )
        messages.append(
            CanonicalMessage.request(
                ToolReturnPart(tool_call_id=f"c{i}", tool_name="bash", content="word " * 50)
            )
        )
    return messages


def _ctx(messages: list[CanonicalMessage]) -> RequestContext:
    return RequestContext(messages=list(messages), token_counter=TokenCounter())


async def test_a_target_keeps_the_newest_messages_that_fit() -> None:
    ctx = _ctx(_history(20))
    await SlidingWindow(max_messages=10**6, keep_messages=2).compact(ctx, target_tokens=600)
    assert ctx.count_tokens() <= 600
    assert ctx.events[-1].details["kept_window"] > 2


async def test_a_summary_and_the_parts_it_carries_stay_at_the_front() -> None:
    summary = with_harness_mark(
        UserPromptPart("summary of steps 0-9"), kind="summary", strategy="summarizing"
    )
    messages = _history(20)
    messages[0] = messages[0].replace(parts=(*messages[0].parts, summary))
    ctx = _ctx(messages)
    await SlidingWindow(max_messages=10**6, keep_messages=4).compact(ctx)
    front = [getattr(p, "content", None) for p in ctx.messages[0].parts]
    assert front[:3] == ["be brief", "the task", "summary of steps 0-9"]
    assert check_invariants(ctx.messages) == []
    # and again: carried once, not duplicated
    again = _ctx(ctx.messages)
    await SlidingWindow(max_messages=10**6, keep_messages=2).compact(again)
    texts = [getattr(p, "content", None) for m in again.messages for p in m.parts]
    assert texts.count("summary of steps 0-9") == 1
    assert texts.count("the task") == 1
