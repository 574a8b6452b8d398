"""Pins and SummarizingCompaction: pinned parts stay verbatim next to the summary."""

from __future__ import annotations

from harness_summarizing import SummarizingCompaction, find_summary_parts
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import pin
from harness.capabilities import RequestContext
from harness.core import (
    CanonicalMessage,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    lost_pins,
    pinned_call_ids,
)
from harness.history import check_invariants
from harness.run.compaction import compact
from harness.testing import HistoryBuilder
from harness.testing.strategies import histories
from harness.tokens import TokenCounter


@st.composite
def _pinned_histories(draw: st.DrawFn) -> list[CanonicalMessage]:
    """Valid histories where random parts (never the request being sent) are pinned."""
    messages = draw(histories(min_messages=3, max_messages=31))
    out: list[CanonicalMessage] = []
    for index, message in enumerate(messages):
        if index == len(messages) - 1 or not message.parts or draw(st.integers(0, 3)) != 0:
            out.append(message)
            continue
        flags = draw(st.lists(st.booleans(), min_size=len(message.parts), max_size=len(message.parts)))
        parts = tuple(
            pin(part, "test") if flag else part for part, flag in zip(message.parts, flags, strict=True)
        )
        out.append(message.replace(parts=parts))
    return out


def _ctx(messages: list[CanonicalMessage]) -> RequestContext:
    return RequestContext(messages=list(messages), token_counter=TokenCounter())


@settings(max_examples=200, deadline=None)
@given(_pinned_histories(), st.integers(0, 8))
async def test_random_pins_survive_summarizing(messages: list[CanonicalMessage], keep: int) -> None:
    cap = SummarizingCompaction(keep_messages=keep, summarizer="digest")
    ctx = _ctx(messages)
    await cap.compact(ctx)
    assert lost_pins(messages, ctx.messages) == []
    assert check_invariants(ctx.messages) == []
    assert ctx.messages[-1].parts[-len(messages[-1].parts) :] == messages[-1].parts
    kept_ids = {
        p.tool_call_id
        for m in ctx.messages
        for p in m.parts
        if isinstance(p, ToolCallPart | ToolReturnPart | RetryPromptPart)
    }
    assert pinned_call_ids(messages) <= kept_ids
    assert len(find_summary_parts(ctx.messages)) <= 1
    # compacting again keeps them too and never holds two summaries
    again = _ctx(ctx.messages)
    await cap.compact(again)
    assert lost_pins(messages, again.messages) == []
    assert len(find_summary_parts(again.messages)) <= 1


@settings(max_examples=60, deadline=None)
@given(_pinned_histories(), st.integers(0, 8))
async def test_the_guard_accepts_every_summarizing_edit_of_a_pinned_history(
    messages: list[CanonicalMessage], keep: int
) -> None:
    result = await compact(
        messages, [SummarizingCompaction(keep_messages=keep, summarizer="digest")], force=True
    )
    assert lost_pins(messages, result.messages) == []


def _history() -> list[CanonicalMessage]:
    builder = HistoryBuilder().system("be brief").user("fix the bug")
    for index in range(6):
        builder.call("bash", {"command": f"step {index}"}, result=f"output {index}")
    return builder.user("go on").build()


async def test_a_pinned_pair_stays_verbatim_after_the_summary() -> None:
    messages = _history()
    call = next(p for p in messages[3].parts if isinstance(p, ToolCallPart))
    messages[3] = messages[3].replace(parts=tuple(pin(p) for p in messages[3].parts))
    ctx = _ctx(messages)
    await SummarizingCompaction(keep_messages=2, summarizer="digest").compact(ctx)
    out = ctx.messages
    assert len(find_summary_parts(out)) == 1
    assert out[1].kind == "response"
    assert [p.tool_call_id for p in out[1].parts if isinstance(p, ToolCallPart)] == [call.tool_call_id]
    assert len(out[1].parts) == 1
    returns = [p for p in out[2].parts if isinstance(p, ToolReturnPart)]
    assert [r.tool_call_id for r in returns][:1] == [call.tool_call_id]
    assert lost_pins(messages, out) == []
    assert check_invariants(out) == []
    # the summarizer did not summarize it: "step 1" is not in the digest's commands
    summary = next(p for p in out[0].parts if isinstance(p, UserPromptPart) and "digest" in p.text)
    assert "step 1" not in summary.text
    assert "step 0" in summary.text


async def test_a_pinned_user_prompt_is_carried_verbatim_and_a_pinned_text_kept() -> None:
    messages = _history()
    note = pin(UserPromptPart("never edit the tests"))
    messages[4] = messages[4].replace(parts=(*messages[4].parts, note))
    messages[5] = messages[5].replace(parts=(pin(TextPart("plan: 1. reproduce 2. fix")), *messages[5].parts))
    ctx = _ctx(messages)
    await SummarizingCompaction(keep_messages=2, summarizer="digest").compact(ctx)
    out = ctx.messages
    front = [p.content for p in out[0].parts if isinstance(p, UserPromptPart)]
    assert "never edit the tests" in front
    texts = [p.content for m in out for p in m.parts if isinstance(p, TextPart)]
    assert "plan: 1. reproduce 2. fix" in texts
    assert lost_pins(messages, out) == []
    assert check_invariants(out) == []
    # once more: still one copy of each
    again = _ctx(out)
    await SummarizingCompaction(keep_messages=1, summarizer="digest").compact(again)
    assert (
        sum(
            1
            for m in again.messages
            for p in m.parts
            if getattr(p, "content", None) == "never edit the tests"
        )
        == 1
    )
    assert lost_pins(messages, again.messages) == []
