"""The cache-aware trigger of ClearToolResults: the arithmetic, by hand, and its use."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from harness_clear_tool_results import ClearToolResults, cache_pays, remaining_requests

from harness.capabilities import RequestContext
from harness.core import CanonicalMessage, ToolCallPart, ToolReturnPart
from harness.tokens import TokenCounter

BIG = "listing line\n" * 60


def test_the_arithmetic_by_hand() -> None:
    # S = 3000 saved, P = 1000 rewritten, R = 4: benefit 3000 * 4 * 0.1 = 1200, cost 1000 * 1.15 = 1150.
    verdict = cache_pays(3000, 1000, 4)
    assert verdict.benefit == pytest.approx(1200.0)
    assert verdict.cost == pytest.approx(1150.0)
    assert verdict.pays
    # R = 3: benefit 900 <= 1150.
    assert not cache_pays(3000, 1000, 3).pays
    # Break-even is not enough: 1150 == 1150 does not pay (S = 1150, P = 1000, R = 10).
    assert cache_pays(1150, 1000, 10, write_multiplier=1.25, read_multiplier=0.1).benefit == pytest.approx(
        1150
    )
    assert not cache_pays(1150, 1000, 10).pays
    # Other prices: writes at 2x, reads at 0.5x: benefit 100 * 2 * 0.5 = 100, cost 60 * 1.5 = 90.
    other = cache_pays(100, 60, 2, write_multiplier=2.0, read_multiplier=0.5)
    assert (other.benefit, other.cost, other.pays) == (pytest.approx(100.0), pytest.approx(90.0), True)
    # Free writes (no cache write premium): any saving pays.
    assert cache_pays(1, 10_000, 1, write_multiplier=0.1, read_multiplier=0.1).pays
    assert "saves 3000 tokens x 4 requests = 1200 > rewrites 1000 tokens = 1150" in verdict.describe()


def test_the_remaining_requests_estimate() -> None:
    counter = TokenCounter()
    assert remaining_requests(RequestContext(messages=[], token_counter=counter), 7) == 7
    assert remaining_requests(RequestContext(messages=[], token_counter=counter), None) == 1
    assert remaining_requests(RequestContext(messages=[], token_counter=counter, requests=12), None) == 12
    capped = RequestContext(messages=[], token_counter=counter, requests=12, max_iterations=15)
    assert remaining_requests(capped, None) == 3
    assert (
        remaining_requests(
            RequestContext(messages=[], token_counter=counter, requests=20, max_iterations=15), None
        )
        == 1
    )


def history(n: int) -> list[CanonicalMessage]:
    messages = [CanonicalMessage.user("task")]
    for i in range(n):
        messages.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"c{i}", tool_name="bash", args={"command": f"ls {i}"})
            )
        )
        messages.append(
            CanonicalMessage.request(ToolReturnPart(tool_call_id=f"c{i}", tool_name="bash", content=BIG))
        )
    return messages


def suffix_and_saving(messages: list[CanonicalMessage], counter: TokenCounter) -> tuple[int, int]:
    """P and S of clearing every return but the newest (``keep_pairs=1``), recomputed by hand."""
    cap = ClearToolResults(max_messages=1, keep_pairs=1)
    ctx = RequestContext(messages=list(messages), token_counter=counter)
    asyncio.run(cap.compact(ctx, reason="reference"))
    saved = counter.count_messages(messages) - counter.count_messages(ctx.messages)
    first = next(i for i, (a, b) in enumerate(zip(messages, ctx.messages, strict=True)) if a is not b)
    return counter.count_messages(ctx.messages[first:]), saved


def gated(expected: int, **kw: Any) -> ClearToolResults:
    return ClearToolResults(
        max_messages=1, keep_pairs=1, cache_aware=True, expected_remaining_requests=expected, **kw
    )


def test_the_trigger_fires_exactly_from_the_break_even_number_of_requests() -> None:
    counter = TokenCounter()
    messages = history(6)
    rewritten, saved = suffix_and_saving(messages, counter)
    # Smallest R with saved * R * 0.1 > rewritten * 1.15.
    needed = next(r for r in range(1, 1000) if saved * r * 0.1 > rewritten * 1.15)
    assert needed > 1
    ctx = RequestContext(messages=list(messages), token_counter=counter)
    assert gated(needed - 1).should_compact(ctx) is None
    verdict = gated(needed).cache_verdict(ctx)
    assert verdict is not None
    assert (verdict.saved_tokens, verdict.rewritten_tokens, verdict.remaining_requests) == (
        saved,
        rewritten,
        needed,
    )
    reason = gated(needed).should_compact(ctx)
    assert reason is not None
    assert "cache-aware" in reason
    assert "more than max_messages=1" in reason


def test_a_held_back_clear_changes_nothing_and_a_paying_one_is_reported() -> None:
    counter = TokenCounter()
    messages = history(6)
    ctx = RequestContext(messages=list(messages), token_counter=counter)
    asyncio.run(gated(1).before_model_request(ctx))
    assert ctx.events == []
    assert all(a is b for a, b in zip(ctx.messages, messages, strict=True))
    asyncio.run(gated(500).before_model_request(ctx))
    [event] = ctx.events
    assert "cache-aware" in event.reason
    assert event.details["cleared_results"] == 5


def test_a_forced_compact_is_never_held_back() -> None:
    ctx = RequestContext(messages=history(6), token_counter=TokenCounter())
    asyncio.run(gated(1).compact(ctx, reason="forced"))
    assert ctx.events
    assert ctx.events[0].details["cleared_results"] == 5


def test_the_estimate_follows_the_run() -> None:
    """With ``expected_remaining_requests=None``, a long run's clear pays where a young run's does not."""
    counter = TokenCounter()
    messages = history(6)
    cap = ClearToolResults(max_messages=1, keep_pairs=1, cache_aware=True)
    young = RequestContext(messages=list(messages), token_counter=counter, requests=1)
    old = RequestContext(messages=list(messages), token_counter=counter, requests=400)
    assert cap.should_compact(young) is None
    assert cap.should_compact(old) is not None


def test_nothing_to_clear_means_no_firing() -> None:
    ctx = RequestContext(messages=history(1), token_counter=TokenCounter())
    assert gated(1000).cache_verdict(ctx) is None
    assert gated(1000).should_compact(ctx) is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"expected_remaining_requests": 0},
            "expected_remaining_requests must be a positive integer or None",
        ),
        ({"expected_remaining_requests": True}, "expected_remaining_requests must be a positive integer"),
        ({"cache_write_multiplier": -1}, "cache_write_multiplier must be a finite, non-negative number"),
        (
            {"cache_read_multiplier": float("nan")},
            "cache_read_multiplier must be a finite, non-negative number",
        ),
        ({"cache_read_multiplier": "0.1"}, "cache_read_multiplier must be a finite, non-negative number"),
        ({"cache_aware": "yes"}, "cache_aware must be True or False"),
    ],
)
def test_bad_cache_settings_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ClearToolResults(max_messages=1, **kwargs)
