"""SummarizingCompaction aiming at a token target (as TieredCompaction calls it)."""

from __future__ import annotations

import pytest
from harness_summarizing import SummarizingCompaction, find_summary_parts

from harness.capabilities import RequestContext
from harness.core import CanonicalMessage, SystemPromptPart, ToolCallPart, ToolReturnPart, UserPromptPart
from harness.history import check_invariants
from harness.tokens import TokenCounter


def _history(steps: int, size: int = 60, task: str = "fix the parser") -> list[CanonicalMessage]:
    messages = [CanonicalMessage.request(SystemPromptPart("be brief"), UserPromptPart(task))]
    for i in range(steps):
        messages.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"c{i}", tool_name="bash", args={"command": f"run step_{i}"})
            )
        )
        messages.append(
            CanonicalMessage.request(
                ToolReturnPart(tool_call_id=f"c{i}", tool_name="bash", content=f"out {i} " + "word " * size)
            )
        )
    return messages


def _ctx(messages: list[CanonicalMessage]) -> RequestContext:
    return RequestContext(messages=list(messages), token_counter=TokenCounter())


@pytest.mark.parametrize("target", [400, 800, 1600])
async def test_the_result_fits_the_target_and_keeps_as_much_as_fits(target: int) -> None:
    ctx = _ctx(_history(40))
    cap = SummarizingCompaction(keep_messages=2, summarizer="digest")
    await cap.compact(ctx, target_tokens=target)
    assert ctx.count_tokens() <= target
    assert check_invariants(ctx.messages) == []
    assert len(find_summary_parts(ctx.messages)) == 1
    kept = ctx.events[-1].details["kept_messages"]
    if target >= 800:
        assert kept > 2  # more than keep_messages: there was room for them
    # one more message would not have fitted beside the summary
    assert kept < 79


async def test_without_a_target_keep_messages_decides() -> None:
    ctx = _ctx(_history(40))
    await SummarizingCompaction(keep_messages=2, summarizer="digest").compact(ctx)
    assert ctx.events[-1].details["kept_messages"] == 2


async def test_no_summary_is_written_when_the_carried_parts_fill_the_target() -> None:
    ctx = _ctx(_history(10, task="the task " + "detail " * 400))
    before = list(ctx.messages)
    await SummarizingCompaction(keep_messages=2, summarizer="digest").compact(ctx, target_tokens=300)
    assert ctx.messages == before  # a summary could not fit beside the task: none is paid for
    assert ctx.events == []


def test_summary_fraction_is_checked() -> None:
    with pytest.raises(ValueError, match="summary_fraction"):
        SummarizingCompaction(summary_fraction=1.5)


async def test_the_digest_is_bounded_by_the_summary_budget() -> None:
    ctx = _ctx(_history(60, size=20))
    cap = SummarizingCompaction(keep_messages=2, summarizer="digest", summary_fraction=0.2)
    await cap.compact(ctx, target_tokens=1000)
    (index, part_index) = find_summary_parts(ctx.messages)[0]
    summary = ctx.messages[index].parts[part_index]
    assert ctx.token_counter.count_part(summary) <= 0.2 * 1000 + 60  # the header is on top
