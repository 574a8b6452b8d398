"""The cache-aware option of DeduplicateFileReads: the arithmetic, by hand, and its use."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from harness_dedupe_file_reads import DeduplicateFileReads, cache_pays, remaining_requests

from harness.capabilities import RequestContext
from harness.core import CanonicalMessage, ToolCallPart, ToolReturnPart
from harness.tokens import TokenCounter

FILE = "line of the file\n" * 40
OTHER = "some other output\n" * 40


def test_the_arithmetic_by_hand() -> None:
    # S = 3000 saved, P = 1000 rewritten, R = 4: benefit 3000 * 4 * 0.1 = 1200 > cost 1000 * 1.15 = 1150.
    verdict = cache_pays(3000, 1000, 4)
    assert (verdict.benefit, verdict.cost, verdict.pays) == (
        pytest.approx(1200.0),
        pytest.approx(1150.0),
        True,
    )
    assert not cache_pays(3000, 1000, 3).pays  # 900 <= 1150
    # S = 500, P = 200, R = 5, writes 2.0, reads 0.25: benefit 500 * 5 * 0.25 = 625, cost 200 * 1.75 = 350.
    other = cache_pays(500, 200, 5, write_multiplier=2.0, read_multiplier=0.25)
    assert (other.benefit, other.cost, other.pays) == (pytest.approx(625.0), pytest.approx(350.0), True)


def test_the_remaining_requests_estimate() -> None:
    counter = TokenCounter()
    assert remaining_requests(RequestContext(messages=[], token_counter=counter, requests=9), None) == 9
    assert remaining_requests(RequestContext(messages=[], token_counter=counter, requests=9), 2) == 2
    limited = RequestContext(messages=[], token_counter=counter, requests=9, max_iterations=10)
    assert remaining_requests(limited, None) == 1


def history(tail_steps: int) -> list[CanonicalMessage]:
    """Two reads of ``a.py`` at the start, then ``tail_steps`` other tool steps."""
    messages = [CanonicalMessage.user("task")]
    steps = [("r0", "read_file", {"path": "a.py"}, FILE)]
    steps += [(f"o{i}", "bash", {"command": f"ls {i}"}, OTHER) for i in range(tail_steps)]
    steps += [("r1", "read_file", {"path": "a.py"}, FILE)]
    for call_id, tool, args, content in steps:
        messages.append(
            CanonicalMessage.response(ToolCallPart(tool_call_id=call_id, tool_name=tool, args=args))
        )
        messages.append(
            CanonicalMessage.request(ToolReturnPart(tool_call_id=call_id, tool_name=tool, content=content))
        )
    return messages


def by_hand(messages: list[CanonicalMessage], counter: TokenCounter) -> tuple[int, int]:
    """``(P, S)`` of the deduplication, recomputed from the result of a forced pass."""
    ctx = RequestContext(messages=list(messages), token_counter=counter)
    asyncio.run(DeduplicateFileReads().compact(ctx, reason="reference"))
    saved = counter.count_messages(messages) - counter.count_messages(ctx.messages)
    return counter.count_messages(ctx.messages[2:]), saved  # the superseded read is message 2


def gated(expected: int, **kw: Any) -> DeduplicateFileReads:
    return DeduplicateFileReads(cache_aware=True, expected_remaining_requests=expected, **kw)


def test_it_acts_exactly_from_the_break_even_number_of_requests() -> None:
    counter = TokenCounter()
    messages = history(5)
    rewritten, saved = by_hand(messages, counter)
    needed = next(r for r in range(1, 10_000) if saved * r * 0.1 > rewritten * 1.15)
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
    assert reason.startswith("every request (no trigger configured); cache-aware")


def test_a_held_back_duplicate_waits_and_is_superseded_once_it_pays() -> None:
    counter = TokenCounter()
    cap = DeduplicateFileReads(cache_aware=True)  # R estimated from ctx.requests
    messages = history(5)
    ctx = RequestContext(messages=list(messages), token_counter=counter, requests=1)
    asyncio.run(cap.before_model_request(ctx))
    assert ctx.events == []
    ctx = RequestContext(messages=list(messages), token_counter=counter, requests=10_000)
    asyncio.run(cap.before_model_request(ctx))
    [event] = ctx.events
    assert event.cleared_tool_call_ids == ("r0",)
    assert "cache-aware" in event.reason


def test_a_late_change_of_a_long_history_pays_sooner_than_an_early_one() -> None:
    """The cost is the rewritten suffix: the same saving pays with fewer requests near the end."""
    counter = TokenCounter()
    early = history(12)
    late = [*history(0)[:1], *list(history(12)[3:-2]), *history(0)[1:]]
    early_ctx = RequestContext(messages=early, token_counter=counter)
    late_ctx = RequestContext(messages=late, token_counter=counter)
    early_verdict = gated(1).cache_verdict(early_ctx)
    late_verdict = gated(1).cache_verdict(late_ctx)
    assert early_verdict is not None
    assert late_verdict is not None
    assert late_verdict.rewritten_tokens < early_verdict.rewritten_tokens
    assert late_verdict.saved_tokens == early_verdict.saved_tokens


def test_a_forced_compact_is_never_held_back() -> None:
    ctx = RequestContext(messages=history(5), token_counter=TokenCounter())
    asyncio.run(gated(1).compact(ctx, reason="forced"))
    assert [e.cleared_tool_call_ids for e in ctx.events] == [("r0",)]


def test_a_trigger_still_applies_first() -> None:
    ctx = RequestContext(messages=history(5), token_counter=TokenCounter())
    assert gated(10_000, max_messages=1000).should_compact(ctx) is None
    assert gated(10_000, max_messages=2).should_compact(ctx) is not None


def test_nothing_to_supersede_means_no_firing() -> None:
    messages = history(3)[:-2]
    assert (
        gated(10_000).should_compact(RequestContext(messages=messages, token_counter=TokenCounter())) is None
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"expected_remaining_requests": 0},
            "expected_remaining_requests must be a positive integer or None",
        ),
        (
            {"cache_write_multiplier": float("inf")},
            "cache_write_multiplier must be a finite, non-negative number",
        ),
        ({"cache_read_multiplier": -0.1}, "cache_read_multiplier must be a finite, non-negative number"),
        ({"cache_aware": 1}, "cache_aware must be True or False"),
    ],
)
def test_bad_cache_settings_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DeduplicateFileReads(**kwargs)
