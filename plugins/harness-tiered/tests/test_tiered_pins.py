"""Pins and TieredCompaction: a tier that loses a pinned part is undone, the next one runs."""

from __future__ import annotations

from harness_clear_tool_results import ClearToolResults
from harness_dedupe_file_reads import DeduplicateFileReads
from harness_sliding_window import SlidingWindow
from harness_summarizing import SummarizingCompaction
from harness_tiered import TieredCompaction
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import pin
from harness.capabilities import RequestContext
from harness.core import CanonicalMessage, ToolReturnPart, lost_pins
from harness.history import check_invariants, safe_cutoff
from harness.testing import HistoryBuilder
from harness.testing.strategies import histories
from harness.tokens import TokenCounter


class DropEverythingOld:
    """A careless tier: keeps the first request and the last exchange, pins or not."""

    name = "careless"

    async def compact(self, ctx: RequestContext, *, reason: str = "forced") -> None:
        cut = safe_cutoff(ctx.messages, 2)
        ctx.replace_messages([ctx.messages[0], *ctx.messages[cut:]], strategy=self.name, reason=reason)


async def test_a_tier_that_loses_a_pin_is_reverted_and_the_next_runs() -> None:
    builder = HistoryBuilder().user("the task")
    for index in range(6):
        builder.call("bash", {"command": f"step {index}"}, result=f"output {index} " * 50)
    messages = builder.user("go on").build()
    result = next(p for p in messages[4].parts if isinstance(p, ToolReturnPart))
    messages[4] = messages[4].replace(parts=tuple(pin(p) if p is result else p for p in messages[4].parts))
    result = next(p for p in messages[4].parts if isinstance(p, ToolReturnPart))
    ctx = RequestContext(messages=list(messages), token_counter=TokenCounter())
    tiered = TieredCompaction(
        [DropEverythingOld(), SlidingWindow(max_messages=10**6, keep_messages=2)],
        target_tokens=50,
        lookahead=False,  # run the careless tier on the real history
    )
    await tiered.compact(ctx)
    assert lost_pins(messages, ctx.messages) == []
    runs = ctx.events[-1].details["tiers"]
    assert runs[0]["reverted"] is True
    assert "pinned" in runs[0]["error"]
    assert runs[1]["changed"] is True
    assert any(p is result for m in ctx.messages for p in m.parts)


@st.composite
def _pinned_histories(draw: st.DrawFn) -> list[CanonicalMessage]:
    messages = draw(histories(min_messages=3, max_messages=31))
    out: list[CanonicalMessage] = []
    for index, message in enumerate(messages):
        if index == len(messages) - 1 or not message.parts or draw(st.integers(0, 3)) != 0:
            out.append(message)
            continue
        flags = draw(st.lists(st.booleans(), min_size=len(message.parts), max_size=len(message.parts)))
        parts = tuple(pin(p, "test") if flag else p for p, flag in zip(message.parts, flags, strict=True))
        out.append(message.replace(parts=parts))
    return out


@settings(max_examples=80, deadline=None)
@given(_pinned_histories(), st.floats(0.05, 1.0), st.integers(1, 8))
async def test_random_pins_survive_the_default_tiers(
    messages: list[CanonicalMessage], fraction: float, keep: int
) -> None:
    ctx = RequestContext(messages=list(messages), token_counter=TokenCounter())
    target = max(1, int(ctx.count_tokens() * fraction))
    tiers = [
        DeduplicateFileReads(),
        ClearToolResults(max_messages=1, keep_pairs=1),
        SummarizingCompaction(keep_messages=keep, summarizer="digest"),
        SlidingWindow(max_messages=10**6, keep_messages=keep),
    ]
    await TieredCompaction(tiers, target_tokens=target).compact(ctx)
    assert lost_pins(messages, ctx.messages) == []
    assert check_invariants(ctx.messages) == []
