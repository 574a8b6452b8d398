"""Pins and SlidingWindow: a pinned part is never dropped, a pinned pair bounds the cut."""

from __future__ import annotations

from harness_sliding_window import SlidingWindow, is_preserved_part
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import is_pinned, pin
from harness.capabilities import RequestContext
from harness.core import (
    CanonicalMessage,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    lost_pins,
    pinned_call_ids,
    pinned_parts,
)
from harness.history import check_invariants
from harness.run.compaction import compact
from harness.testing import HistoryBuilder
from harness.testing.strategies import histories
from harness.tokens import TokenCounter


def _ctx(messages: list[CanonicalMessage]) -> RequestContext:
    return RequestContext(messages=list(messages), token_counter=TokenCounter())


@st.composite
def _pinned_histories(draw: st.DrawFn) -> list[CanonicalMessage]:
    """Valid histories where random parts (never the request being sent) are pinned."""
    messages = draw(histories(min_messages=3, max_messages=31))
    out: list[CanonicalMessage] = []
    for index, message in enumerate(messages):
        if index == len(messages) - 1 or not message.parts:
            out.append(message)
            continue
        flags = draw(st.lists(st.booleans(), min_size=len(message.parts), max_size=len(message.parts)))
        weights = draw(st.integers(0, 5))
        parts = tuple(
            pin(part, "test") if flag and weights == 0 else part
            for part, flag in zip(message.parts, flags, strict=True)
        )
        out.append(message.replace(parts=parts) if parts != message.parts else message)
    return out


@st.composite
def _windows(draw: st.DrawFn) -> SlidingWindow:
    receipt = draw(st.booleans())
    preserve = draw(st.booleans())
    if draw(st.booleans()):
        keep = draw(st.integers(0, 8))
        return SlidingWindow(
            max_messages=keep + 1, keep_messages=keep, receipt=receipt, preserve_first_user_message=preserve
        )
    keep_tokens = draw(st.integers(0, 300))
    return SlidingWindow(
        max_tokens=keep_tokens + 1,
        keep_tokens=keep_tokens,
        receipt=receipt,
        preserve_first_user_message=preserve,
    )


@settings(max_examples=250, deadline=None)
@given(_pinned_histories(), _windows())
def test_random_pins_survive_the_window(messages: list[CanonicalMessage], window: SlidingWindow) -> None:
    ctx = _ctx(messages)
    window.apply(ctx, reason="property")
    result = ctx.messages
    assert lost_pins(messages, result) == []
    assert check_invariants(result) == []
    assert result[-1] is messages[-1]
    # a pinned pair stays whole: its call and every answer are still there
    kept_ids = {
        p.tool_call_id for m in result for p in m.parts if isinstance(p, ToolCallPart | ToolReturnPart)
    }
    assert pinned_call_ids(messages) <= kept_ids
    # idempotent
    again = _ctx(result)
    assert window.apply(again, reason="again") is None


@settings(max_examples=60, deadline=None)
@given(_pinned_histories(), _windows())
async def test_the_guard_accepts_every_window_edit_of_a_pinned_history(
    messages: list[CanonicalMessage], window: SlidingWindow
) -> None:
    """Through the plugin manager (the guard rejects an edit that loses a pin)."""
    result = await compact(messages, [window], force=True)
    assert lost_pins(messages, result.messages) == []
    assert len(list(pinned_parts(result.messages))) >= len(list(pinned_parts(messages)))


def _long_history() -> list[CanonicalMessage]:
    builder = HistoryBuilder().system("be brief").user("the task")
    for index in range(8):
        builder.call("run", {"cmd": f"step {index}"}, result=f"output {index} " * 20)
    return builder.user("go on").build()


def test_a_pinned_prompt_of_a_dropped_request_is_kept_at_the_front() -> None:
    messages = _long_history()
    # pin the result-bearing request's companion: add a pinned user note to request 4
    note = pin(UserPromptPart("remember: never touch setup.py"), "user")
    messages[4] = messages[4].replace(parts=(*messages[4].parts, note))
    ctx = _ctx(messages)
    event = SlidingWindow(max_messages=4, keep_messages=3).apply(ctx)
    assert event is not None
    front = ctx.messages[0]
    texts = [p.content for p in front.parts if isinstance(p, UserPromptPart | SystemPromptPart)]
    assert texts[:3] == ["be brief", "the task", "remember: never touch setup.py"]
    kept = next(p for p in front.parts if isinstance(p, UserPromptPart) and "setup.py" in p.content)
    assert is_pinned(kept)
    assert is_preserved_part(kept)
    # a second compaction carries it again, once
    again = _ctx(ctx.messages)
    SlidingWindow(max_messages=2, keep_messages=1).apply(again)
    carried = [
        p
        for m in again.messages
        for p in m.parts
        if isinstance(p, UserPromptPart) and "setup.py" in p.content
    ]
    assert len(carried) == 1


def test_a_pinned_tool_pair_bounds_the_cut() -> None:
    messages = _long_history()
    call = next(p for p in messages[3].parts if isinstance(p, ToolCallPart))
    messages[3] = messages[3].replace(parts=tuple(pin(p) if p is call else p for p in messages[3].parts))
    ctx = _ctx(messages)
    event = SlidingWindow(max_messages=4, keep_messages=3).apply(ctx)
    assert event is not None
    assert event.details["cut"] == 3  # not the 14 it would be without the pin
    ids = {p.tool_call_id for m in ctx.messages for p in m.parts if isinstance(p, ToolReturnPart)}
    assert call.tool_call_id in ids
    assert lost_pins(messages, ctx.messages) == []
    # nothing more can be freed while the pin stays
    assert SlidingWindow(max_messages=4, keep_messages=3).apply(_ctx(ctx.messages)) is None


def test_a_pinned_result_keeps_its_call() -> None:
    messages = _long_history()
    result = next(p for p in messages[6].parts if isinstance(p, ToolReturnPart))
    messages[6] = messages[6].replace(parts=tuple(pin(p) if p is result else p for p in messages[6].parts))
    ctx = _ctx(messages)
    event = SlidingWindow(max_messages=4, keep_messages=3).apply(ctx)
    assert event is not None
    assert event.details["cut"] == 5  # the response holding the call
    calls = {p.tool_call_id for m in ctx.messages for p in m.parts if isinstance(p, ToolCallPart)}
    assert result.tool_call_id in calls


def test_a_pinned_response_text_bounds_the_cut() -> None:
    messages = _long_history()
    messages[5] = messages[5].replace(parts=(pin(TextPart("plan: fix the parser first")), *messages[5].parts))
    ctx = _ctx(messages)
    event = SlidingWindow(max_messages=4, keep_messages=3).apply(ctx)
    assert event is not None
    assert event.details["cut"] == 5
    assert lost_pins(messages, ctx.messages) == []
