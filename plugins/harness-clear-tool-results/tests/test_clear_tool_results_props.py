"""Property tests of ClearToolResults over generated histories and configurations."""

from __future__ import annotations

import asyncio
import itertools

from harness_clear_tool_results import CLEARED_ARGS_KEY, ClearToolResults, excerpt
from harness_clear_tool_results.excerpt import text_of
from hypothesis import event, given, settings
from hypothesis import strategies as st

from harness.capabilities import RequestContext
from harness.core import (
    CanonicalMessage,
    RetryPromptPart,
    SystemPromptPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    harness_mark,
)
from harness.history import check_invariants, tool_pairs
from harness.testing import assert_memo_matches_fresh, clearable_returns
from harness.testing.strategies import TOOL_NAMES, histories
from harness.tokens import TokenCounter

configs = st.builds(
    ClearToolResults,
    max_messages=st.integers(1, 30),
    keep_pairs=st.integers(0, 5),
    placeholder=st.sampled_from(["[tool result cleared]", "x", "{braces} and 'quotes'"]),
    exclude_tools=st.frozensets(st.sampled_from(TOOL_NAMES), max_size=2),
    clear_tool_inputs=st.booleans(),
    min_clear_tokens=st.none() | st.integers(0, 40),
)


counter = TokenCounter()


def compact(cap: ClearToolResults, messages: list[CanonicalMessage]) -> RequestContext:
    ctx = RequestContext(messages=list(messages), token_counter=counter)
    asyncio.run(cap.compact(ctx, reason="property"))
    return ctx


def returns_in_order(messages: list[CanonicalMessage]) -> list[tuple[int, int, ToolReturnPart]]:
    pairs = tool_pairs(messages)
    found: list[tuple[int, int, ToolReturnPart]] = []
    for mi, message in enumerate(messages):
        for pi, part in enumerate(message.parts):
            if isinstance(part, ToolReturnPart) and part.tool_call_id in pairs:
                found.append((mi, pi, part))
    return found


def call_names(messages: list[CanonicalMessage]) -> dict[str, str]:
    return {p.tool_call_id: p.tool_name for m in messages for p in m.parts if isinstance(p, ToolCallPart)}


@settings(max_examples=150, deadline=None)
@given(histories(min_messages=1, max_messages=30), configs)
def test_clearing_keeps_the_history_valid_and_the_protected_parts(
    messages: list[CanonicalMessage], cap: ClearToolResults
) -> None:
    ctx = compact(cap, messages)
    result = ctx.messages
    assert check_invariants(result) == []
    # Nothing removed: same messages, same part kinds, same ids.
    assert len(result) == len(messages)
    for before, after in zip(messages, result, strict=True):
        assert [type(p) for p in before.parts] == [type(p) for p in after.parts]
        assert [getattr(p, "tool_call_id", None) for p in before.parts] == [
            getattr(p, "tool_call_id", None) for p in after.parts
        ]
    # The request being sent is untouched.
    assert result[-1] is messages[-1]
    # Prompts and retry prompts are never changed.
    for before, after in zip(messages, result, strict=True):
        for old, new in zip(before.parts, after.parts, strict=True):
            if isinstance(old, (UserPromptPart, SystemPromptPart, RetryPromptPart)):
                assert new is old
    # The newest keep_pairs returns and excluded tools' returns are intact.
    old_returns = returns_in_order(messages)
    new_returns = returns_in_order(result)
    kept = old_returns[len(old_returns) - cap.keep_pairs :] if cap.keep_pairs else []
    for mi, pi, part in kept:
        assert result[mi].parts[pi] is part
    names = call_names(messages)
    for mi, pi, part in old_returns:
        if names[part.tool_call_id] in cap.exclude_tools:
            assert result[mi].parts[pi] is part
    # Every changed return is the placeholder, marked; every changed call has the JSON placeholder.
    changed: set[str] = set()
    for (_, _, old), (_, _, new) in zip(old_returns, new_returns, strict=True):
        if new is not old:
            changed.add(old.tool_call_id)
            # The placeholder, then what the cleared result keeps (usually nothing here).
            kept = excerpt(
                text_of(old.content),
                max_lines=cap.keep_max_lines,
                max_tokens=cap.keep_max_tokens,
                count=counter.count_text,
            ).render()
            assert new.content == (f"{cap.placeholder}\n{kept}" if kept else cap.placeholder)
            assert harness_mark(new) == {"cleared": "clear_tool_results"}
    for before, after in zip(messages, result, strict=True):
        for old, new in zip(before.parts, after.parts, strict=True):
            if isinstance(old, ToolCallPart) and new is not old:
                assert isinstance(new, ToolCallPart)
                assert cap.clear_tool_inputs
                changed.add(old.tool_call_id)
                assert new.args_as_dict() == {CLEARED_ARGS_KEY: cap.placeholder}
    # The event reports exactly what changed; a no-op reports nothing.
    event("cleared something" if changed else "nothing cleared")
    if changed:
        [reported] = ctx.events
        assert set(reported.cleared_tool_call_ids) == changed
        assert reported.tokens_after < reported.tokens_before
    else:
        assert ctx.events == []
        assert all(a is b for a, b in zip(result, messages, strict=True))


@settings(max_examples=150, deadline=None)
@given(histories(min_messages=1, max_messages=30), configs)
def test_clearing_is_idempotent(messages: list[CanonicalMessage], cap: ClearToolResults) -> None:
    first = compact(cap, messages).messages
    again = compact(cap, first)
    assert again.events == []
    assert all(a is b for a, b in zip(again.messages, first, strict=True))


@settings(max_examples=100, deadline=None)
@given(histories(min_messages=1, max_messages=30, end_with_request=False), configs)
def test_histories_ending_with_a_response_stay_valid(
    messages: list[CanonicalMessage], cap: ClearToolResults
) -> None:
    result = compact(cap, messages).messages
    assert check_invariants(result) == []
    assert len(result) == len(messages)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_trigger_batches_over_a_generated_run(data: st.DataObject) -> None:
    """Over a run of appended steps, a message trigger never fires on two requests in a row.

    After a firing only the kept pairs (``2 * max(keep_pairs, 1)`` messages) follow the
    newest cleared result, so with ``max_messages >= 2 * max(keep_pairs, 1) + 2`` the next request
    (two more messages) cannot fire again.
    """
    keep = data.draw(st.integers(0, 4))
    max_messages = data.draw(st.integers(2 * max(keep, 1) + 2, 2 * keep + 12))
    cap = ClearToolResults(max_messages=max_messages, keep_pairs=keep)
    steps = data.draw(st.integers(5, 40))
    messages: list[CanonicalMessage] = [CanonicalMessage.user("task")]
    fired: list[int] = []
    counter = TokenCounter()  # one per run, as the agent owns it
    for i in range(steps):
        messages.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"c{i}", tool_name="bash", args={"command": "ls"})
            )
        )
        messages.append(
            CanonicalMessage.request(
                ToolReturnPart(tool_call_id=f"c{i}", tool_name="bash", content="output " * 30)
            )
        )
        ctx = RequestContext(messages=messages, token_counter=counter)
        asyncio.run(cap.before_model_request(ctx))
        if ctx.events:
            fired.append(i)
    assert all(b - a >= 2 for a, b in itertools.pairwise(fired))


@settings(max_examples=150, deadline=None)
@given(histories(min_messages=1, max_messages=40), configs, st.booleans(), st.data())
def test_remembered_scans_match_fresh_scans(
    messages: list[CanonicalMessage], cap: ClearToolResults, forced: bool, data: st.DataObject
) -> None:
    """Replaying a run request by request, the remembered scan changes no outcome.

    ``cap`` keeps its memo between requests (it scans only appended messages and skips
    settled pairs); a fresh copy of it per request scans everything. Now and then another
    strategy edits a return in between, which must invalidate the memo.
    """

    def interfere(history: list[CanonicalMessage]) -> tuple[int, int] | None:
        spots = clearable_returns(history)
        if spots and data.draw(st.integers(0, 4)) == 0:
            return data.draw(st.sampled_from(spots))
        return None

    assert_memo_matches_fresh(cap, messages, interfere=interfere, forced=forced)
