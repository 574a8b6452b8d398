"""ClearToolResults never clears a pinned part, nor the other half of a pinned pair."""

from __future__ import annotations

import asyncio
from typing import Any

from harness_clear_tool_results import DEFAULT_PLACEHOLDER, ClearToolResults
from hypothesis import event, given, settings
from hypothesis import strategies as st

from harness import is_pinned, pin
from harness.capabilities import RequestContext
from harness.core import (
    CanonicalMessage,
    RetryPromptPart,
    ToolCallPart,
    ToolReturnPart,
    lost_pins,
    pinned_call_ids,
    pinned_parts,
    replace,
)
from harness.history import check_invariants
from harness.hooks import PluginManager
from harness.run.compaction import compact_sync
from harness.testing import assert_memo_matches_fresh, assert_transformation_safe
from harness.testing.strategies import TOOL_NAMES, histories
from harness.tokens import TokenCounter

BIG = "output line\n" * 40


def steps(n: int) -> list[CanonicalMessage]:
    messages = [CanonicalMessage.user("task")]
    for i in range(n):
        messages.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"c{i}", tool_name="bash", args={"command": f"ls {i} " * 10})
            )
        )
        messages.append(
            CanonicalMessage.request(ToolReturnPart(tool_call_id=f"c{i}", tool_name="bash", content=BIG))
        )
    return messages


def pin_part(messages: list[CanonicalMessage], mi: int, pi: int) -> list[CanonicalMessage]:
    parts = list(messages[mi].parts)
    parts[pi] = pin(parts[pi], "test")
    out = list(messages)
    out[mi] = replace(messages[mi], parts=tuple(parts))
    return out


async def cleared(cap: ClearToolResults, messages: list[CanonicalMessage]) -> RequestContext:
    ctx = RequestContext(messages=list(messages), token_counter=TokenCounter())
    await cap.compact(ctx, reason="test")
    return ctx


def contents(messages: list[CanonicalMessage]) -> dict[str, Any]:
    return {p.tool_call_id: p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)}


def args(messages: list[CanonicalMessage]) -> dict[str, Any]:
    return {p.tool_call_id: p.args for m in messages for p in m.parts if isinstance(p, ToolCallPart)}


async def test_a_pinned_result_is_never_cleared() -> None:
    messages = pin_part(steps(5), 4, 0)  # the return of c1
    ctx = await cleared(ClearToolResults(max_messages=1, keep_pairs=1, clear_tool_inputs=True), messages)
    after, calls = contents(ctx.messages), args(ctx.messages)
    assert after["c1"] == BIG
    assert is_pinned(ctx.messages[4].parts[0])
    assert calls["c1"] == {"command": "ls 1 " * 10}  # its call keeps its arguments too
    assert all(after[c] == DEFAULT_PLACEHOLDER for c in ("c0", "c2", "c3"))
    assert "c1" not in ctx.events[0].cleared_tool_call_ids
    assert lost_pins(messages, ctx.messages) == []


async def test_a_pinned_call_protects_its_result() -> None:
    messages = pin_part(steps(5), 3, 0)  # the call c1
    ctx = await cleared(ClearToolResults(max_messages=1, keep_pairs=1, clear_tool_inputs=True), messages)
    assert contents(ctx.messages)["c1"] == BIG
    assert ctx.messages[3] is messages[3]
    assert contents(ctx.messages)["c0"] == DEFAULT_PLACEHOLDER


async def test_a_pinned_retry_prompt_protects_the_pair_it_answers() -> None:
    messages = steps(4)
    retry = pin(RetryPromptPart("try again", tool_name="bash", tool_call_id="c1"), "test")
    messages[4] = replace(messages[4], parts=(retry, *messages[4].parts))
    ctx = await cleared(ClearToolResults(max_messages=1, keep_pairs=0), messages)
    assert contents(ctx.messages)["c1"] == BIG
    assert contents(ctx.messages)["c0"] == DEFAULT_PLACEHOLDER


async def test_pins_in_appended_messages_reach_the_remembered_scan() -> None:
    """The memo path (only appended messages scanned) sees the pins of those messages."""
    cap = ClearToolResults(max_messages=1, keep_pairs=1)
    counter = TokenCounter()
    history = steps(3)
    ctx = RequestContext(messages=list(history), token_counter=counter)
    await cap.compact(ctx, reason="first")
    history = list(ctx.messages)
    more = steps(6)[len(history) :]
    history += more
    history = pin_part(history, 8, 0)  # the return of c3, appended after the first clear
    ctx = RequestContext(messages=list(history), token_counter=counter)
    await cap.compact(ctx, reason="second")
    assert contents(ctx.messages)["c3"] == BIG
    assert contents(ctx.messages)["c4"] == DEFAULT_PLACEHOLDER
    assert lost_pins(history, ctx.messages) == []


def test_the_guard_accepts_every_clear_of_a_pinned_history() -> None:
    """Through the plugin manager's guard (which rejects a lost pin): no CapabilityError."""
    messages = pin_part(pin_part(steps(6), 2, 0), 7, 0)
    result = compact_sync(
        messages, [ClearToolResults(max_messages=1, keep_pairs=0)], force=True, plugin_manager=PluginManager()
    )
    assert result.events
    assert lost_pins(messages, result.messages) == []
    assert_transformation_safe(messages, result.messages)


configs = st.builds(
    ClearToolResults,
    max_messages=st.integers(1, 30),
    keep_pairs=st.integers(0, 5),
    exclude_tools=st.frozensets(st.sampled_from(TOOL_NAMES), max_size=2),
    clear_tool_inputs=st.booleans(),
    min_clear_tokens=st.none() | st.integers(0, 40),
    keep_errors=st.booleans(),
    keep_paths=st.booleans(),
    keep_names=st.booleans(),
    keep_max_lines=st.integers(0, 8),
    keep_max_tokens=st.integers(0, 200),
    cache_aware=st.booleans(),
    expected_remaining_requests=st.none() | st.integers(1, 50),
)


@st.composite
def pinned_histories(draw: st.DrawFn) -> list[CanonicalMessage]:
    """Valid histories with a random subset of their parts pinned."""
    messages = draw(histories(min_messages=1, max_messages=30, max_output_chars=400))
    out: list[CanonicalMessage] = []
    for message in messages:
        flags = draw(st.lists(st.booleans(), min_size=len(message.parts), max_size=len(message.parts)))
        parts = tuple(pin(p, "property") if f else p for p, f in zip(message.parts, flags, strict=True))
        out.append(replace(message, parts=parts) if any(flags) else message)
    return out


@settings(max_examples=200, deadline=None)
@given(pinned_histories(), configs, st.booleans())
def test_random_pins_survive_any_configuration(
    messages: list[CanonicalMessage], cap: ClearToolResults, triggered: bool
) -> None:
    ids = pinned_call_ids(messages)
    ctx = RequestContext(messages=list(messages), token_counter=TokenCounter(), requests=3)
    if triggered:
        asyncio.run(cap.before_model_request(ctx))
    else:
        asyncio.run(cap.compact(ctx, reason="property"))
    after = ctx.messages
    event("pins" if ids else "no pinned pair")
    event("cleared" if ctx.events else "nothing cleared")
    assert check_invariants(after) == []
    assert lost_pins(messages, after) == []
    # Every pinned part is still there, unchanged, at its place.
    for mi, pi, part in pinned_parts(messages):
        assert after[mi].parts[pi] is part
    # Both halves of a pinned pair are untouched.
    for before_message, after_message in zip(messages, after, strict=True):
        for old, new in zip(before_message.parts, after_message.parts, strict=True):
            if isinstance(old, ToolCallPart | ToolReturnPart) and old.tool_call_id in ids:
                assert new is old
    for reported in ctx.events:
        assert not set(reported.cleared_tool_call_ids) & ids


@settings(max_examples=100, deadline=None)
@given(pinned_histories(), configs, st.booleans())
def test_remembered_scans_of_pinned_histories_match_fresh_scans(
    messages: list[CanonicalMessage], cap: ClearToolResults, forced: bool
) -> None:
    """Request by request, the memo (pins included) decides exactly as a fresh scan."""
    assert_memo_matches_fresh(cap, messages, forced=forced)
