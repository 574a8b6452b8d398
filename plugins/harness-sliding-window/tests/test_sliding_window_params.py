"""Construction, validation messages and the trigger of SlidingWindow."""

from __future__ import annotations

import re
from typing import Any

import pytest
from harness_sliding_window import SlidingWindow

from harness.capabilities import Capability, RequestContext, Trigger
from harness.core import CanonicalMessage, TextPart, UserPromptPart
from harness.errors import CapabilityError
from harness.tokens import TokenCounter


def _ctx(n: int, *, text: str = "hello", context_window: int | None = None) -> RequestContext:
    messages: list[CanonicalMessage] = []
    for i in range(n):
        if i % 2 == 0:
            messages.append(CanonicalMessage.request(UserPromptPart(f"{text} {i}")))
        else:
            messages.append(CanonicalMessage.response(TextPart(f"{text} {i}")))
    return RequestContext(messages=messages, token_counter=TokenCounter(), context_window=context_window)


def test_defaults() -> None:
    window = SlidingWindow(max_messages=100)
    assert window.keep_messages == 40
    assert window.keep_tokens is None
    assert window.preserve_first_user_message is True
    assert window.receipt is False
    assert window.max_tokens is None
    assert window.max_fraction is None
    assert window.context_window is None
    assert window.trigger == Trigger(max_messages=100)
    assert window.name == "sliding_window"
    assert isinstance(window, Capability)


def test_parameters_are_keyword_only_and_frozen() -> None:
    with pytest.raises(TypeError):
        SlidingWindow(100)  # pyright: ignore[reportCallIssue]
    window = SlidingWindow(max_messages=100)
    with pytest.raises(AttributeError):
        window.keep_messages = 3  # pyright: ignore[reportAttributeAccessIssue]


def test_instances_compare_by_identity() -> None:
    # pluggy refuses to register an object equal to one already registered.
    assert SlidingWindow(max_messages=10, keep_messages=5) != SlidingWindow(max_messages=10, keep_messages=5)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "At least one of max_messages, max_tokens or max_fraction must be set."),
        ({"keep_messages": 3}, "At least one of max_messages, max_tokens or max_fraction must be set."),
        ({"max_messages": 0}, "max_messages must be positive."),
        ({"max_messages": -5}, "max_messages must be positive."),
        ({"max_tokens": 0}, "max_tokens must be positive."),
        ({"max_fraction": 0.0}, "max_fraction must be in (0, 1]."),
        ({"max_fraction": 1.5}, "max_fraction must be in (0, 1]."),
        ({"max_tokens": 10, "max_fraction": 0.5}, "Set at most one of max_tokens or max_fraction."),
        ({"max_fraction": 0.5, "context_window": 0}, "context_window must be positive."),
        ({"max_messages": 50, "keep_messages": -1}, "keep_messages must be non-negative."),
        ({"max_messages": 50, "keep_tokens": -1}, "keep_tokens must be non-negative."),
    ],
)
def test_validation_messages(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        SlidingWindow(**kwargs)


def test_keep_messages_must_be_below_max_messages() -> None:
    with pytest.raises(ValueError, match=r"keep_messages \(40\) must be less than max_messages \(40\)"):
        SlidingWindow(max_messages=40)
    with pytest.raises(ValueError, match=r"keep_messages \(10\) must be less than max_messages \(5\)"):
        SlidingWindow(max_messages=5, keep_messages=10)
    assert SlidingWindow(max_messages=41).keep_messages == 40


def test_keep_messages_is_not_checked_against_max_messages_in_token_mode() -> None:
    window = SlidingWindow(max_messages=10, keep_tokens=500)
    assert window.keep_messages == 40  # ignored when keep_tokens is set


def test_keep_tokens_must_be_below_max_tokens() -> None:
    with pytest.raises(ValueError, match=r"keep_tokens \(1000\) must be less than max_tokens \(1000\)"):
        SlidingWindow(max_tokens=1000, keep_tokens=1000)
    assert SlidingWindow(max_tokens=1000, keep_tokens=999).keep_tokens == 999


def test_keep_tokens_must_be_below_the_fraction_limit_when_the_window_is_known() -> None:
    message = r"keep_tokens \(800\) must be less than max_fraction x context_window"
    with pytest.raises(ValueError, match=message):
        SlidingWindow(max_fraction=0.8, context_window=1000, keep_tokens=800)
    assert SlidingWindow(max_fraction=0.8, context_window=1000, keep_tokens=799).keep_tokens == 799


def test_keep_tokens_against_the_models_window_is_checked_at_request_time() -> None:
    window = SlidingWindow(max_fraction=0.5, keep_tokens=600)
    ctx = _ctx(3, context_window=1000)
    with pytest.raises(CapabilityError, match=r"keep_tokens \(600\) must be less than max_fraction"):
        window.should_compact(ctx)
    ok = SlidingWindow(max_fraction=0.5, keep_tokens=400)
    assert ok.should_compact(ctx) is None


def test_max_fraction_without_any_window_names_the_fix() -> None:
    window = SlidingWindow(max_fraction=0.5)
    with pytest.raises(CapabilityError, match=r"context_window=\.\.\."):
        window.should_compact(_ctx(3))


@pytest.mark.parametrize(
    ("kwargs", "bad"),
    [
        ({"max_messages": 50, "keep_messages": 2.5}, "keep_messages"),
        ({"max_messages": 50, "keep_messages": True}, "keep_messages"),
        ({"max_messages": 50, "keep_tokens": "10"}, "keep_tokens"),
    ],
)
def test_wrong_types_name_the_parameter(kwargs: dict[str, Any], bad: str) -> None:
    with pytest.raises(TypeError, match=f"^{bad} must be an int"):
        SlidingWindow(**kwargs)


def test_trigger_max_messages_is_strictly_greater() -> None:
    window = SlidingWindow(max_messages=5, keep_messages=2)
    assert window.should_compact(_ctx(5)) is None
    assert window.should_compact(_ctx(6)) == "6 messages > max_messages 5"


def test_trigger_max_tokens() -> None:
    ctx = _ctx(5, text="word " * 50)
    tokens = ctx.context_tokens()
    assert SlidingWindow(max_tokens=tokens, keep_tokens=10).should_compact(ctx) is None
    reason = SlidingWindow(max_tokens=tokens - 1, keep_tokens=10).should_compact(ctx)
    assert reason == f"{tokens} tokens > limit {tokens - 1}"


def test_trigger_max_fraction_uses_override_then_model_window() -> None:
    ctx = _ctx(5, text="word " * 50, context_window=10_000)
    tokens = ctx.context_tokens()
    assert SlidingWindow(max_fraction=0.5).should_compact(ctx) is None
    # the override wins over the model's window
    small = SlidingWindow(max_fraction=0.5, context_window=tokens)
    assert small.should_compact(ctx) == f"{tokens} tokens > limit {tokens // 2}"


async def test_idle_hook_does_nothing() -> None:
    ctx = _ctx(5)
    before = list(ctx.messages)
    await SlidingWindow(max_messages=5, keep_messages=2).before_model_request(ctx)
    assert ctx.messages == before
    assert ctx.events == []


async def test_hook_cuts_when_the_trigger_fires() -> None:
    ctx = _ctx(7)
    window = SlidingWindow(max_messages=6, keep_messages=3, preserve_first_user_message=False)
    await window.before_model_request(ctx)
    assert len(ctx.messages) == 3
    assert [e.reason for e in ctx.events] == ["7 messages > max_messages 6"]
