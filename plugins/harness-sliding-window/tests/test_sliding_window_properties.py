"""Hypothesis properties of SlidingWindow over generated histories and configurations."""

from __future__ import annotations

from typing import Any

from harness_sliding_window import SlidingWindow, is_preserved_part, is_receipt_part
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.capabilities import RequestContext
from harness.core import CanonicalMessage, SystemPromptPart, UserPromptPart
from harness.history import check_invariants, is_safe_cutoff, safe_cutoff
from harness.testing.strategies import histories, messy_histories
from harness.tokens import TokenCounter


@st.composite
def _configs(draw: st.DrawFn) -> SlidingWindow:
    preserve = draw(st.booleans())
    receipt = draw(st.booleans())
    if draw(st.booleans()):
        keep = draw(st.integers(0, 12))
        return SlidingWindow(
            max_messages=keep + draw(st.integers(1, 5)),
            keep_messages=keep,
            preserve_first_user_message=preserve,
            receipt=receipt,
        )
    keep_tokens = draw(st.integers(0, 400))
    return SlidingWindow(
        max_tokens=keep_tokens + draw(st.integers(1, 200)),
        keep_tokens=keep_tokens,
        preserve_first_user_message=preserve,
        receipt=receipt,
    )


@st.composite
def _inputs(draw: st.DrawFn) -> list[CanonicalMessage]:
    """Valid histories; sometimes the first request holds only the system prompt."""
    messages = draw(histories(min_messages=1, max_messages=31))
    first = messages[0]
    system = [p for p in first.parts if isinstance(p, SystemPromptPart)]
    if system and len(messages) > 1 and draw(st.booleans()):
        messages[0] = CanonicalMessage.request(*system)
    return messages


def _ctx(messages: list[CanonicalMessage]) -> RequestContext:
    return RequestContext(messages=list(messages), token_counter=TokenCounter())


def _user_prompts(messages: list[CanonicalMessage]) -> list[Any]:
    return [p for m in messages for p in m.parts if isinstance(p, UserPromptPart)]


def _tokens(messages: list[CanonicalMessage]) -> int:
    counter = TokenCounter()
    return sum(counter.count_message(m) for m in messages)


def _no_smaller_window(messages: list[CanonicalMessage], cut: int, *, front: bool) -> bool:
    """True when no safe cut after ``cut`` exists (ignoring a lone request being sent when
    a front must stand before the window)."""
    n = len(messages)
    last = n - 2 if front and messages[-1].is_request else n - 1
    return not any(is_safe_cutoff(messages, c) for c in range(cut + 1, last + 1))


@settings(max_examples=200, deadline=None)
@given(_inputs(), _configs())
def test_compaction_keeps_the_history_sendable_and_loses_only_the_dropped_range(
    messages: list[CanonicalMessage], window: SlidingWindow
) -> None:
    ctx = _ctx(messages)
    event = window.apply(ctx, reason="property")
    result = ctx.messages
    n = len(messages)

    assert check_invariants(result) == []
    assert result[-1] is messages[-1]  # the request being sent is kept, unmodified
    receipts = [p for m in result for p in m.parts if is_receipt_part(p)]

    if event is None:
        assert result == messages
        assert ctx.events == []
        assert not receipts
        # a no-op only when the history already fits, or nothing but the first request
        # (all of it preserved) could go
        if window.keep_tokens is None:
            expected = safe_cutoff(messages, max(window.keep_messages, 1))
            extended = safe_cutoff(messages, 2)
            assert expected <= 1 or (expected == n - 1 and messages[-1].is_request and extended <= 1)
        else:
            assert _tokens(messages) <= window.keep_tokens or _no_smaller_window(messages, 1, front=True)
        return

    cut = event.details["cut"]
    assert is_safe_cutoff(messages, cut)
    window_messages = messages[cut:]
    assert event.details["kept_window"] == len(window_messages)

    # the window is kept as-is (only its first request may receive the front parts)
    offset = len(result) - len(window_messages)
    assert offset in (0, 1)
    assert all(a is b for a, b in zip(result[offset + 1 :], window_messages[1:], strict=True))
    front_parts = [p for p in result[0].parts if is_preserved_part(p) or is_receipt_part(p)]
    if offset == 0:
        assert result[0].parts[len(front_parts) :] == window_messages[0].parts
    else:
        assert result[1] is window_messages[0]
        assert len(front_parts) == len(result[0].parts)
    assert len(front_parts) == event.details["preserved_parts"] + (1 if window.receipt else 0)
    has_front = bool(front_parts)

    # receipts: exactly one when asked for
    assert len(receipts) == (1 if window.receipt else 0)

    # instructions of a leading system-only request are never dropped
    instructions = [p.content for p in messages[0].parts if isinstance(p, SystemPromptPart)]
    if messages[0].is_request and messages[0].parts and len(instructions) == len(messages[0].parts):
        kept_system = [p.content for p in result[0].parts if isinstance(p, SystemPromptPart)]
        assert instructions == kept_system[: len(instructions)]

    # user prompts: all of the window survive; of the dropped range only the task (if kept)
    survivors = {id(p) for p in _user_prompts(result)}
    survivor_texts = [p.content for p in _user_prompts(result) if not is_receipt_part(p)]
    for prompt in _user_prompts(window_messages):
        assert id(prompt) in survivors
    first_user = next((i for i, m in enumerate(messages) if _user_prompts([m])), None)
    if window.preserve_first_user_message and first_user is not None:
        for prompt in _user_prompts([messages[first_user]]):
            assert prompt.content in survivor_texts
    if not window.preserve_first_user_message:
        assert len(survivor_texts) == len(_user_prompts(window_messages))

    # the result fits the keep target whenever that is achievable
    if window.keep_tokens is None:
        keep = max(window.keep_messages, 1)
        assert len(window_messages) >= keep
        # the cut walked back only as far as tool pairs (or a front before a lone request) needed
        assert not any(is_safe_cutoff(messages, c) for c in range(cut + 1, n - keep + 1)) or (
            keep == 1 and has_front
        )
    else:
        assert _tokens(result) <= window.keep_tokens or _no_smaller_window(messages, cut, front=has_front)

    # idempotent: compacting its own output changes nothing and reports nothing
    again = _ctx(result)
    assert window.apply(again, reason="again") is None
    assert all(a is b for a, b in zip(again.messages, result, strict=True))


@settings(max_examples=100, deadline=None)
@given(_inputs(), _configs())
async def test_the_hook_fires_only_over_the_trigger_and_then_settles(
    messages: list[CanonicalMessage], window: SlidingWindow
) -> None:
    ctx = _ctx(messages)
    fired = window.should_compact(ctx)
    await window.before_model_request(ctx)
    if fired is None:
        assert ctx.messages == messages
        assert ctx.events == []
    assert check_invariants(ctx.messages) == []
    settled = list(ctx.messages)
    await window.before_model_request(ctx)
    if fired is not None:
        await window.compact(ctx)  # forced, on its own output: nothing left to do
    assert all(a is b for a, b in zip(ctx.messages, settled, strict=True))
    assert len(ctx.messages) == len(settled)


@settings(max_examples=150, deadline=None)
@given(messy_histories(min_messages=1, max_messages=20), _configs())
def test_messy_histories_never_crash_or_gain_violations(
    messages: list[CanonicalMessage], window: SlidingWindow
) -> None:
    ctx = _ctx(messages)
    window.apply(ctx, reason="messy")
    assert ctx.messages[-1] is messages[-1]
    before = {v.kind for v in check_invariants(messages)}
    after = {v.kind for v in check_invariants(ctx.messages)}
    assert after <= before
    again = list(ctx.messages)
    window.apply(ctx, reason="again")
    assert len(ctx.messages) == len(again)
    assert all(a is b for a, b in zip(ctx.messages, again, strict=True))


@settings(max_examples=80, deadline=None)
@given(histories(min_messages=3, max_messages=41, distant_returns=False, retries=False), _configs())
async def test_a_growing_run_stays_sendable_and_keeps_one_front(
    full: list[CanonicalMessage], window: SlidingWindow
) -> None:
    """Feed the history two messages at a time, as a run does, running the hook each time."""
    ctx = _ctx(full[:1])
    task = [p.content for p in _user_prompts(full[:1])]
    for end in range(3, len(full) + 1, 2):
        ctx.messages.extend(full[end - 2 : end])
        await window.before_model_request(ctx)
        assert check_invariants(ctx.messages) == []
        assert ctx.messages[-1] is full[end - 1]
        assert sum(1 for m in ctx.messages for p in m.parts if is_receipt_part(p)) <= 1
        front = [p for p in ctx.messages[0].parts if is_preserved_part(p)]
        assert len(front) <= len(full[0].parts)
        if window.preserve_first_user_message:
            texts = [p.content for p in _user_prompts(ctx.messages)]
            assert all(t in texts for t in task)
