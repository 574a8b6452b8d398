"""Cache friendliness: ClearToolResults clears in batches over a long scripted run.

The reference implementation, once over a ``max_messages`` trigger, cleared one more
result on every following request (so the provider's prompt cache missed on every
request). Here a firing clears everything but the kept pairs and the trigger counts only
the messages after the newest cleared result, so the prefix changes once per batch.
"""

from __future__ import annotations

import asyncio

from harness_clear_tool_results import ClearToolResults

from harness.capabilities import RequestContext
from harness.core import CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart
from harness.tokens import TokenCounter

OUTPUT = "line of tool output\n" * 40


def simulate(cap: ClearToolResults, steps: int) -> tuple[list[int], list[int], list[CanonicalMessage]]:
    """Append one tool step per request; return the steps whose request changed the prefix."""
    messages: list[CanonicalMessage] = [CanonicalMessage.user("fix the bug")]
    changed: list[int] = []
    cleared: list[int] = []
    counter = TokenCounter()
    for i in range(steps):
        before = list(messages)
        messages.append(
            CanonicalMessage.response(
                TextPart(f"step {i}"), ToolCallPart(tool_call_id=f"c{i}", tool_name="bash", args={"i": i})
            )
        )
        messages.append(
            CanonicalMessage.request(ToolReturnPart(tool_call_id=f"c{i}", tool_name="bash", content=OUTPUT))
        )
        sent_before = list(messages)
        ctx = RequestContext(messages=messages, token_counter=counter)
        asyncio.run(cap.before_model_request(ctx))
        assert ctx.messages[-1] is sent_before[-1]
        prefix_changed = any(a is not b for a, b in zip(before, ctx.messages, strict=False))
        if prefix_changed:
            changed.append(i)
            [event] = ctx.events
            cleared.append(len(event.cleared_tool_call_ids))
        else:
            assert ctx.events == []
    return changed, cleared, messages


def test_message_trigger_clears_in_batches() -> None:
    changed, cleared, messages = simulate(ClearToolResults(max_messages=10, keep_pairs=3), 60)
    # After step i the history holds 2i + 3 messages. First firing at step 4 (11 > 10), then
    # every third step: 6 messages follow the newest cleared result after a clear, and 12 > 10
    # three steps later. The reference changes the prefix on all 56 requests from step 4 on.
    assert changed == list(range(4, 60, 3))
    assert len(changed) == 19
    assert cleared == [2] + [3] * 18
    returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    # After the last firing (step 58) the three newest results then were kept, plus step 59.
    assert [r.content == OUTPUT for r in returns] == [False] * 56 + [True] * 4


def test_a_larger_trigger_gives_larger_batches() -> None:
    changed, cleared, _ = simulate(ClearToolResults(max_messages=40, keep_pairs=3), 60)
    assert changed == [19, 37, 55]
    assert cleared == [17, 18, 18]


def test_token_trigger_clears_in_batches() -> None:
    counter = TokenCounter()
    per_step = counter.count_text(OUTPUT)
    # Room for about 12 results: after a clear only 3 remain, so ~9 steps pass before the next.
    cap = ClearToolResults(max_tokens=per_step * 12, keep_pairs=3)
    changed, cleared, _ = simulate(cap, 30)
    assert changed[:3] == [10, 17, 24]
    assert cleared[:3] == [8, 7, 7]


def test_min_clear_tokens_enforces_a_minimum_batch() -> None:
    # As the uncleared remainder (texts, calls, placeholders) approaches a token limit, a
    # plain token trigger fires more and more often; min_clear_tokens keeps batches large.
    counter = TokenCounter()
    per_step = counter.count_text(OUTPUT)
    plain = ClearToolResults(max_tokens=per_step * 12, keep_pairs=3)
    batched = ClearToolResults(max_tokens=per_step * 12, keep_pairs=3, min_clear_tokens=per_step * 5)
    plain_changed, _, _ = simulate(plain, 60)
    batched_changed, batched_cleared, _ = simulate(batched, 60)
    assert len(batched_changed) < len(plain_changed)
    assert all(n >= 5 for n in batched_cleared)


def test_reference_like_configuration_still_batches_with_keep_zero() -> None:
    changed, _, _ = simulate(ClearToolResults(max_messages=4, keep_pairs=0), 30)
    # keep_pairs=0 still keeps the current step: 2 messages follow the newest cleared result
    # after a clear, so the next firing is two steps later rather than on every request.
    assert changed == list(range(1, 30, 2))
