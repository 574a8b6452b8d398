"""Properties over generated histories: a requested compaction keeps every invariant, pin and pair."""

from __future__ import annotations

import asyncio

from harness_clear_tool_results import ClearToolResults
from harness_compact_on_request import PERFORMED, CompactOnRequest, decide, status_of
from harness_sliding_window import SlidingWindow
from hypothesis import event, given, settings
from hypothesis import strategies as st

from harness import CanonicalMessage, Part, PluginManager, RequestContext, ToolCallPart, ToolReturnPart, pin
from harness.core import lost_pins, pinned_parts
from harness.history import check_invariants
from harness.testing import (
    assert_invariants,
    assert_no_split_tool_pairs,
    assert_request_kept,
    assert_user_prompts_kept,
    check_capability_invariants,
)
from harness.testing.strategies import histories


def with_request(
    messages: list[CanonicalMessage], call_id: str, text: str | None = None
) -> list[CanonicalMessage]:
    """``messages`` followed by a compact_context call and its answer (the request being sent)."""
    call = ToolCallPart(tool_call_id=call_id, tool_name="compact_context", args={"reason": "test"})
    parts: tuple[Part, ...] = (
        (call,)
        if text is None
        else (ToolCallPart(tool_call_id="x_" + call_id, tool_name="noop", args={}), call)
    )
    answer = ToolReturnPart(
        tool_call_id=call_id,
        tool_name="compact_context",
        content="The context will be compacted before your next turn.",
    )
    return [*messages, CanonicalMessage.response(*parts), CanonicalMessage.request(answer)]


def pinned(messages: list[CanonicalMessage], picks: list[int]) -> list[CanonicalMessage]:
    """Pin the parts at the flat positions ``picks`` (modulo the number of parts)."""
    flat = [(mi, pi) for mi, m in enumerate(messages) for pi in range(len(m.parts))]
    if not flat:
        return messages
    chosen = {flat[p % len(flat)] for p in picks}
    out: list[CanonicalMessage] = []
    for mi, message in enumerate(messages):
        parts = tuple(pin(p, "test") if (mi, pi) in chosen else p for pi, p in enumerate(message.parts))
        out.append(message.replace(parts=parts))
    return out


def run(capability: CompactOnRequest, messages: list[CanonicalMessage]) -> RequestContext:
    manager = PluginManager()
    manager.add_capabilities([capability])
    ctx = RequestContext(messages=list(messages), token_counter=manager.token_counter(None))
    asyncio.run(manager.run_before_model_request(ctx))
    return ctx


def last_status(ctx: RequestContext) -> str | None:
    [answer] = [
        p
        for p in ctx.messages[-1].parts
        if isinstance(p, ToolReturnPart) and p.tool_name == "compact_context"
    ]
    return status_of(answer)


def clearing() -> CompactOnRequest:
    return CompactOnRequest(stack=[ClearToolResults(max_messages=1, keep_pairs=1)])


def windowing() -> CompactOnRequest:
    return CompactOnRequest(
        stack=[ClearToolResults(max_messages=1, keep_pairs=1), SlidingWindow(max_messages=3, keep_messages=2)]
    )


@settings(max_examples=60, deadline=None)
@given(histories(min_messages=1, max_messages=30), st.lists(st.integers(0, 500), max_size=4), st.booleans())
def test_a_requested_compaction_is_safe(
    history: list[CanonicalMessage], picks: list[int], window: bool
) -> None:
    before = pinned(with_request(history, "k_req"), picks)
    assert not check_invariants(before)
    ctx = run(windowing() if window else clearing(), before)
    after = ctx.messages
    assert_invariants(after)
    assert_no_split_tool_pairs(before, after)
    assert_request_kept(before, after)
    if not window:  # only the sliding window drops prompts, as configured
        assert_user_prompts_kept(before, after)
    assert lost_pins(before, after) == []
    assert len(list(pinned_parts(after))) >= len(list(pinned_parts(before)))
    event(f"status {last_status(ctx)}, {len(list(pinned_parts(before)))} pinned")
    assert last_status(ctx) in ("compacted", "unchanged"), "the built-in stacks never trip the guard"
    assert (last_status(ctx) == "compacted") == bool(ctx.events)
    if ctx.events:
        assert ctx.events[-1].strategy == "compact_on_request"


@settings(max_examples=40, deadline=None)
@given(histories(min_messages=1, max_messages=24), st.booleans())
def test_never_twice_in_a_row(history: list[CanonicalMessage], with_work: bool) -> None:
    capability = clearing()
    first = run(capability, with_request(history, "k1"))
    assert last_status(first) in PERFORMED
    again = with_request(first.messages, "k2", text="work" if with_work else None)
    # the tool's answer (read before the return exists) and the capability's agree
    at_tool_time = decide(again[:-1], "k2", min_messages_between=capability.min_messages_between)
    at_request_time = decide(again, "k2", min_messages_between=capability.min_messages_between)
    assert at_tool_time == at_request_time
    assert not at_tool_time.accepted, "a response holding only a noop call is one message of work, not two"
    second = run(capability, again)
    assert last_status(second) == "refused"
    assert second.events == []
    assert second.messages[:-1] == again[:-1], "nothing but the answer's mark changed"


def test_idle_on_histories_without_a_request() -> None:
    check_capability_invariants(clearing, max_examples=40, idempotent=True)
