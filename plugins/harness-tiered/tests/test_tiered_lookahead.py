"""TieredCompaction: the target reaches the tiers that aim at it; cheaper tiers are tried on a copy."""

from __future__ import annotations

import pytest
from harness_clear_tool_results import ClearToolResults
from harness_sliding_window import SlidingWindow
from harness_summarizing import SummarizingCompaction, find_summary_parts
from harness_tiered import TieredCompaction

from harness.capabilities import CompactionEvent, RequestContext
from harness.core import CanonicalMessage, SystemPromptPart, ToolCallPart, ToolReturnPart, UserPromptPart
from harness.history import check_invariants
from harness.tokens import TokenCounter


def _history(steps: int, size: int = 80) -> list[CanonicalMessage]:
    messages = [CanonicalMessage.request(SystemPromptPart("be brief"), UserPromptPart("the task"))]
    for i in range(steps):
        messages.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"c{i}", tool_name="bash", args={"command": f"run step_{i}"})
            )
        )
        output = f"<returncode>1</returncode>ValueError: step_{i} failed " + "word " * size
        messages.append(
            CanonicalMessage.request(ToolReturnPart(tool_call_id=f"c{i}", tool_name="bash", content=output))
        )
    return messages


class Aiming:
    """A tier that records the target it was given."""

    name = "aiming"

    def __init__(self) -> None:
        self.targets: list[int | None] = []

    async def compact(
        self, ctx: RequestContext, *, reason: str = "forced", target_tokens: int | None = None
    ) -> None:
        self.targets.append(target_tokens)


def _ctx(messages: list[CanonicalMessage], seen: list[CompactionEvent]) -> RequestContext:
    return RequestContext(
        messages=list(messages), token_counter=TokenCounter(), on_event=lambda _ctx, event: seen.append(event)
    )


async def test_a_tier_taking_target_tokens_gets_the_target() -> None:
    aiming = Aiming()
    ctx = _ctx(_history(10), [])
    await TieredCompaction([aiming], target_tokens=100).compact(ctx)
    assert aiming.targets == [100]


async def test_cheap_tiers_that_reach_the_target_are_kept() -> None:
    seen: list[CompactionEvent] = []
    ctx = _ctx(_history(30), seen)
    target = ctx.count_tokens() // 2
    tiers = [ClearToolResults(max_messages=1, keep_pairs=2), SummarizingCompaction(summarizer="digest")]
    await TieredCompaction(tiers, target_tokens=target, lookahead=True).compact(ctx)
    assert [e.strategy for e in seen] == ["clear_tool_results", "tiered"]
    assert ctx.count_tokens() <= target
    assert "lookahead" not in seen[-1].details


async def test_when_cheap_tiers_fall_short_the_summary_reads_the_untouched_history() -> None:
    seen: list[CompactionEvent] = []
    ctx = _ctx(_history(30), seen)
    target = ctx.count_tokens() // 6
    tiers = [
        ClearToolResults(max_messages=1, keep_pairs=2),
        SummarizingCompaction(summarizer="digest", summary_fraction=0.4),
        SlidingWindow(max_messages=10**6, keep_messages=2),
    ]
    await TieredCompaction(tiers, target_tokens=target, lookahead=True).compact(ctx)
    strategies = [e.strategy for e in seen]
    assert strategies[0] == "summarizing"  # the clearing tried on a copy was never reported
    assert "clear_tool_results" not in strategies[:1]
    details = seen[-1].details
    assert details["lookahead"]["tiers"] == ["clear_tool_results"]
    assert details["tiers_run"][0] == "summarizing"
    assert ctx.count_tokens() <= target
    assert check_invariants(ctx.messages) == []
    # the digest saw the real outputs: their failure lines are in the summary
    (index, part_index) = find_summary_parts(ctx.messages)[0]
    summary = ctx.messages[index].parts[part_index]
    assert isinstance(summary, UserPromptPart)
    assert "ValueError: step_" in summary.text
    assert "cleared" not in summary.text.lower()


@pytest.mark.parametrize("lookahead", [False, True])
async def test_every_summary_written_in_a_growing_run_is_sent(lookahead: bool) -> None:
    """Feed a run request by request: no summary is made and then thrown away."""
    full = _history(60)
    tiered = TieredCompaction(
        [
            ClearToolResults(max_messages=1, keep_pairs=3),
            SummarizingCompaction(summarizer="digest", summary_fraction=0.4),
            SlidingWindow(max_messages=10**6, keep_messages=2),
        ],
        target_tokens=900,
        max_tokens=1500,
        lookahead=lookahead,
    )
    seen: list[CompactionEvent] = []
    ctx = _ctx(full[:1], seen)
    written = 0
    sent: set[str] = set()
    for end in range(3, len(full) + 1, 2):
        ctx.messages.extend(full[end - 2 : end])
        ctx.events.clear()
        await tiered.before_model_request(ctx)
        written += sum(
            1 for e in ctx.events if e.strategy == "summarizing" and e.details.get("summary_chars")
        )
        for index, part_index in find_summary_parts(ctx.messages):
            part = ctx.messages[index].parts[part_index]
            assert isinstance(part, UserPromptPart)
            sent.add(part.text)
        assert check_invariants(ctx.messages) == []
    assert written > 0
    assert len(sent) == written
