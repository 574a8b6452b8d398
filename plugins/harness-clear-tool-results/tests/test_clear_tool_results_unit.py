"""Unit tests of ClearToolResults: validation, every parameter, marks and reporting."""

from __future__ import annotations

import json
from typing import Any

import pytest
from harness_clear_tool_results import CLEARED_ARGS_KEY, DEFAULT_PLACEHOLDER, ClearToolResults

from harness.capabilities import CompactionEvent, RequestContext
from harness.core import (
    CanonicalMessage,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    harness_mark,
    with_harness_mark,
)
from harness.errors import CapabilityError
from harness.tokens import TokenCounter

BIG = "result line\n" * 50


def ctx_for(messages: list[CanonicalMessage], **kw: Any) -> RequestContext:
    return RequestContext(messages=list(messages), token_counter=TokenCounter(), **kw)


def step(i: int, tool: str = "read_file", content: Any = BIG, args: Any = None) -> list[CanonicalMessage]:
    call = ToolCallPart(
        tool_call_id=f"c{i}", tool_name=tool, args={"path": f"f{i}.py"} if args is None else args
    )
    return [
        CanonicalMessage.response(call),
        CanonicalMessage.request(ToolReturnPart(tool_call_id=f"c{i}", tool_name=tool, content=content)),
    ]


def history(n: int, **kw: Any) -> list[CanonicalMessage]:
    messages = [CanonicalMessage.user("start")]
    for i in range(n):
        messages += step(i, **kw)
    return messages


def returns(messages: list[CanonicalMessage]) -> list[ToolReturnPart]:
    return [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]


def calls(messages: list[CanonicalMessage]) -> list[ToolCallPart]:
    return [p for m in messages for p in m.parts if isinstance(p, ToolCallPart)]


async def run(cap: ClearToolResults, messages: list[CanonicalMessage], **kw: Any) -> RequestContext:
    ctx = ctx_for(messages, **kw)
    await cap.compact(ctx, reason="test")
    return ctx


# -- validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "At least one of max_messages, max_tokens or max_fraction must be set."),
        ({"max_messages": 0}, "max_messages must be positive."),
        ({"max_tokens": 0}, "max_tokens must be positive."),
        ({"max_tokens": 10, "max_fraction": 0.5}, "Set at most one of max_tokens or max_fraction."),
        ({"max_fraction": 1.5}, "max_fraction must be in (0, 1]."),
        ({"max_fraction": 0.5, "context_window": 0}, "context_window must be positive."),
        ({"max_messages": 5, "keep_pairs": -1}, "keep_pairs must be non-negative."),
        ({"max_messages": 5, "keep_pairs": 1.5}, "keep_pairs must be an integer"),
        ({"max_messages": 5, "placeholder": ""}, "placeholder must be a non-empty string."),
        ({"max_messages": 5, "min_clear_tokens": -1}, "min_clear_tokens must be non-negative."),
        ({"max_messages": 5, "exclude_tools": "bash"}, "exclude_tools must be a collection of tool names"),
        ({"max_messages": 5, "exclude_tools": {""}}, "exclude_tools must hold non-empty tool names"),
    ],
)
def test_validation_messages(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        ClearToolResults(**kwargs)
    assert message in str(info.value)


def test_defaults_match_the_reference() -> None:
    cap = ClearToolResults(max_messages=10)
    assert cap.keep_pairs == 3
    assert cap.placeholder == DEFAULT_PLACEHOLDER == "[tool result cleared]"
    assert cap.exclude_tools == frozenset()
    assert cap.clear_tool_inputs is False
    assert cap.min_clear_tokens is None
    assert cap.name == "clear_tool_results"
    assert cap.trigger.max_messages == 10


def test_exclude_tools_accepts_any_collection() -> None:
    assert ClearToolResults(max_messages=1, exclude_tools=["a", "b"]).exclude_tools == frozenset({"a", "b"})


def test_max_fraction_needs_a_window() -> None:
    cap = ClearToolResults(max_fraction=0.5)
    with pytest.raises(CapabilityError, match="context_window"):
        cap.should_compact(ctx_for(history(2)))


# -- clearing -------------------------------------------------------------------------------


async def test_keeps_newest_pairs_and_clears_the_rest() -> None:
    ctx = await run(
        ClearToolResults(max_messages=1, keep_pairs=2), [*history(5), CanonicalMessage.user("go")]
    )
    contents = [r.content for r in returns(ctx.messages)]
    assert contents == [DEFAULT_PLACEHOLDER] * 3 + [BIG, BIG]
    [event] = ctx.events
    assert event.strategy == "clear_tool_results"
    assert event.reason == "test"
    assert event.cleared_tool_call_ids == ("c0", "c1", "c2")
    assert event.removed_tool_call_ids == ()
    assert event.tokens_after < event.tokens_before
    assert event.messages_before == event.messages_after
    assert event.details["cleared_results"] == 3


async def test_never_removes_messages_or_parts() -> None:
    original = history(6)
    ctx = await run(ClearToolResults(max_messages=1, keep_pairs=0), original)
    assert len(ctx.messages) == len(original)
    assert [len(m.parts) for m in ctx.messages] == [len(m.parts) for m in original]
    assert [p.tool_call_id for p in returns(ctx.messages)] == [p.tool_call_id for p in returns(original)]


async def test_unchanged_messages_keep_their_identity() -> None:
    original = history(4)
    ctx = await run(ClearToolResults(max_messages=1, keep_pairs=1), original)
    for before, after in zip(original, ctx.messages, strict=True):
        if before.kind == "response" or before is original[0]:
            assert after is before


async def test_keep_pairs_zero_still_keeps_the_current_step() -> None:
    messages = history(3)  # ends with the request holding c2's return: the current step
    ctx = await run(ClearToolResults(max_messages=1, keep_pairs=0), messages)
    assert [r.content for r in returns(ctx.messages)] == [DEFAULT_PLACEHOLDER, DEFAULT_PLACEHOLDER, BIG]
    assert ctx.messages[-1] is messages[-1]


async def test_parallel_calls_count_individually() -> None:
    calls_msg = CanonicalMessage.response(
        *(ToolCallPart(tool_call_id=f"p{i}", tool_name="grep", args={"q": i}) for i in range(3))
    )
    answers = CanonicalMessage.request(
        *(ToolReturnPart(tool_call_id=f"p{i}", tool_name="grep", content=BIG) for i in range(3))
    )
    messages = [CanonicalMessage.user("go"), calls_msg, answers, CanonicalMessage.response(TextPart("ok"))]
    messages.append(CanonicalMessage.user("next"))
    ctx = await run(ClearToolResults(max_messages=1, keep_pairs=2), messages)
    assert [r.content for r in returns(ctx.messages)] == [DEFAULT_PLACEHOLDER, BIG, BIG]


async def test_pairs_are_ordered_by_return_position() -> None:
    # c0 is called first but answered last (a distant return): it is the newest pair.
    messages = [
        CanonicalMessage.user("go"),
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="c0", tool_name="slow", args={}),
            ToolCallPart(tool_call_id="c1", tool_name="fast", args={}),
        ),
        CanonicalMessage.request(ToolReturnPart(tool_call_id="c1", tool_name="fast", content=BIG)),
        CanonicalMessage.response(ToolCallPart(tool_call_id="c2", tool_name="fast", args={})),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="c2", tool_name="fast", content=BIG),
            ToolReturnPart(tool_call_id="c0", tool_name="slow", content=BIG),
        ),
        CanonicalMessage.response(TextPart("done")),
        CanonicalMessage.user("next"),
    ]
    ctx = await run(ClearToolResults(max_messages=1, keep_pairs=1), messages)
    by_id = {r.tool_call_id: r.content for r in returns(ctx.messages)}
    assert by_id == {"c1": DEFAULT_PLACEHOLDER, "c2": DEFAULT_PLACEHOLDER, "c0": BIG}


async def test_exclude_tools_are_never_cleared_but_hold_keep_slots() -> None:
    messages = history(2, tool="memory") + history(3)[1:] + [CanonicalMessage.user("go")]
    ctx = await run(ClearToolResults(max_messages=1, keep_pairs=1, exclude_tools={"memory"}), messages)
    contents = [(r.tool_name, r.content) for r in returns(ctx.messages)]
    assert contents == [
        ("memory", BIG),
        ("memory", BIG),
        ("read_file", DEFAULT_PLACEHOLDER),
        ("read_file", DEFAULT_PLACEHOLDER),
        ("read_file", BIG),
    ]


async def test_custom_placeholder() -> None:
    ctx = await run(ClearToolResults(max_messages=1, keep_pairs=0, placeholder="<gone>"), history(2))
    assert returns(ctx.messages)[0].content == "<gone>"


async def test_structured_content_is_cleared_to_a_string() -> None:
    structured: list[Any] = [
        {"rows": [{"id": i, "name": f"row {i}"} for i in range(30)], "ok": True},
        list(range(200)),
        [{"type": "text", "text": BIG}],
    ]
    messages = [CanonicalMessage.user("go")]
    for i, content in enumerate(structured):
        messages += step(i, tool="query", content=content)
    messages += step(99)
    ctx = await run(ClearToolResults(max_messages=1, keep_pairs=1), messages)
    cleared = returns(ctx.messages)[:-1]
    assert [r.content for r in cleared] == [DEFAULT_PLACEHOLDER] * 3
    assert all(harness_mark(r) == {"cleared": "clear_tool_results"} for r in cleared)
    assert ctx.events[0].tokens_saved > 0


async def test_results_shorter_than_the_placeholder_are_left_alone() -> None:
    messages = [CanonicalMessage.user("go")]
    for i, content in enumerate([42, None, "ok", BIG]):
        messages += step(i, tool="query", content=content)
    messages += step(99)
    ctx = await run(ClearToolResults(max_messages=1, keep_pairs=1), messages)
    assert [r.content for r in returns(ctx.messages)] == [42, None, "ok", DEFAULT_PLACEHOLDER, BIG]
    assert ctx.events[0].cleared_tool_call_ids == ("c3",)


async def test_retry_prompts_are_never_cleared() -> None:
    retry = RetryPromptPart("bad args, try again " * 20, tool_name="read_file", tool_call_id="r0")
    messages = [
        CanonicalMessage.user("go"),
        CanonicalMessage.response(ToolCallPart(tool_call_id="r0", tool_name="read_file", args={"path": 1})),
        CanonicalMessage.request(retry),
        *history(3)[1:],
        CanonicalMessage.user("next"),
    ]
    ctx = await run(ClearToolResults(max_messages=1, keep_pairs=0, clear_tool_inputs=True), messages)
    assert ctx.messages[2] is messages[2]
    assert ctx.messages[1] is messages[1]  # the call answered only by a retry keeps its args


async def test_clear_tool_inputs_mapping_args() -> None:
    write = {"path": "notes.md", "content": BIG}
    messages = history(3, tool="write_file", args=write)
    ctx = await run(ClearToolResults(max_messages=1, keep_pairs=1, clear_tool_inputs=True), messages)
    args = [c.args for c in calls(ctx.messages)]
    assert args == [
        {CLEARED_ARGS_KEY: DEFAULT_PLACEHOLDER},
        {CLEARED_ARGS_KEY: DEFAULT_PLACEHOLDER},
        write,
    ]
    assert all(harness_mark(c) == {"cleared": "clear_tool_results"} for c in calls(ctx.messages)[:2])
    assert ctx.events[0].details["cleared_inputs"] == 2


async def test_clear_tool_inputs_string_args_stay_a_json_string() -> None:
    messages = [*history(2, args=json.dumps({"path": "a.py", "content": BIG})), CanonicalMessage.user("go")]
    ctx = await run(
        ClearToolResults(max_messages=1, keep_pairs=0, placeholder='say "hi"', clear_tool_inputs=True),
        messages,
    )
    for call in calls(ctx.messages):
        assert isinstance(call.args, str)
        assert json.loads(call.args) == {CLEARED_ARGS_KEY: 'say "hi"'}
        assert call.args_as_dict() == {CLEARED_ARGS_KEY: 'say "hi"'}


async def test_clear_tool_inputs_skips_args_shorter_than_the_placeholder() -> None:
    ctx = await run(ClearToolResults(max_messages=1, keep_pairs=0, clear_tool_inputs=True), history(3))
    assert [c.args for c in calls(ctx.messages)] == [{"path": f"f{i}.py"} for i in range(3)]
    assert ctx.events[0].details["cleared_inputs"] == 0


async def test_clear_tool_inputs_skips_empty_args() -> None:
    messages = [*history(2, args={}), CanonicalMessage.user("go")]
    ctx = await run(ClearToolResults(max_messages=1, keep_pairs=0, clear_tool_inputs=True), messages)
    assert [c.args for c in calls(ctx.messages)] == [{}, {}]
    assert ctx.events[0].details["cleared_inputs"] == 0


async def test_clear_tool_inputs_never_touches_calls_of_the_current_step() -> None:
    messages = history(3)
    ctx = await run(ClearToolResults(max_messages=1, keep_pairs=0, clear_tool_inputs=True), messages)
    assert calls(ctx.messages)[-1].args == {"path": "f2.py"}
    assert ctx.messages[-2] is messages[-2]


async def test_inputs_are_kept_by_default() -> None:
    ctx = await run(ClearToolResults(max_messages=1, keep_pairs=0), history(3))
    assert [c.args for c in calls(ctx.messages)] == [{"path": f"f{i}.py"} for i in range(3)]


async def test_min_clear_tokens_skips_a_small_clear() -> None:
    messages = history(3, content="tiny")
    ctx = await run(ClearToolResults(max_messages=1, keep_pairs=0, min_clear_tokens=1_000), messages)
    assert ctx.messages == messages
    assert all(a is b for a, b in zip(ctx.messages, messages, strict=True))
    assert ctx.events == []


async def test_min_clear_tokens_lets_a_large_clear_through() -> None:
    counter = TokenCounter()
    one = counter.count_text(BIG)
    ctx = await run(ClearToolResults(max_messages=1, keep_pairs=0, min_clear_tokens=one), history(3))
    [event] = ctx.events
    assert event.tokens_saved >= one


async def test_min_clear_tokens_counts_only_the_candidates() -> None:
    # Two old results of about `one` tokens each: a threshold just above one result passes,
    # a threshold above both does not.
    counter = TokenCounter()
    one = counter.count_text(BIG)
    messages = history(3)
    skipped = await run(ClearToolResults(max_messages=1, keep_pairs=0, min_clear_tokens=3 * one), messages)
    assert skipped.events == []
    done = await run(ClearToolResults(max_messages=1, keep_pairs=0, min_clear_tokens=one + 1), messages)
    assert len(done.events) == 1


# -- marks and idempotence ---------------------------------------------------------------


async def test_cleared_parts_are_marked() -> None:
    ctx = await run(ClearToolResults(max_messages=1, keep_pairs=1), history(2))
    first, last = returns(ctx.messages)
    assert harness_mark(first) == {"cleared": "clear_tool_results"}
    assert harness_mark(last) is None


async def test_existing_metadata_is_kept_when_marking() -> None:
    messages = history(2)
    part = returns(messages)[0]
    marked = ToolReturnPart(
        tool_call_id=part.tool_call_id, tool_name=part.tool_name, content=part.content, metadata={"mine": 1}
    )
    messages[2] = CanonicalMessage.request(marked)
    ctx = await run(ClearToolResults(max_messages=1, keep_pairs=1), messages)
    cleared = returns(ctx.messages)[0]
    assert cleared.metadata == {"mine": 1, "harness": {"cleared": "clear_tool_results"}}
    assert cleared.metadata == with_harness_mark(marked, cleared="clear_tool_results").metadata


async def test_parts_with_unmarkable_metadata_are_left_alone() -> None:
    messages = history(2)
    part = returns(messages)[0]
    messages[2] = CanonicalMessage.request(
        ToolReturnPart(tool_call_id=part.tool_call_id, tool_name=part.tool_name, content=BIG, metadata="x")
    )
    ctx = await run(ClearToolResults(max_messages=1, keep_pairs=0), [*messages, CanonicalMessage.user("go")])
    assert [r.content for r in returns(ctx.messages)] == [BIG, DEFAULT_PLACEHOLDER]


async def test_second_run_changes_and_reports_nothing() -> None:
    cap = ClearToolResults(max_messages=1, keep_pairs=1, clear_tool_inputs=True)
    ctx = await run(cap, history(5))
    first = list(ctx.messages)
    await cap.compact(ctx, reason="again")
    assert len(ctx.events) == 1
    assert all(a is b for a, b in zip(ctx.messages, first, strict=True))


async def test_already_cleared_parts_are_recognised_by_mark_not_text() -> None:
    messages = history(3)
    # A result whose *text* equals the placeholder but that nobody cleared is not special;
    # a result marked by another strategy (e.g. dedupe) is not cleared again.
    other = with_harness_mark(
        ToolReturnPart(tool_call_id="c1", tool_name="read_file", content="pointer"),
        cleared="dedupe_file_reads",
    )
    messages[4] = CanonicalMessage.request(other)
    ctx = await run(ClearToolResults(max_messages=1, keep_pairs=0), messages)
    assert [r.content for r in returns(ctx.messages)] == [DEFAULT_PLACEHOLDER, "pointer", BIG]
    assert ctx.events[0].cleared_tool_call_ids == ("c0",)


async def test_no_pairs_is_a_silent_no_op() -> None:
    messages = [
        CanonicalMessage.user("a"),
        CanonicalMessage.response(TextPart("b")),
        CanonicalMessage.user("c"),
    ]
    ctx = await run(ClearToolResults(max_messages=1, keep_pairs=0), messages)
    assert ctx.events == []
    assert all(a is b for a, b in zip(ctx.messages, messages, strict=True))


async def test_empty_history_is_a_no_op() -> None:
    ctx = await run(ClearToolResults(max_messages=1), [])
    assert ctx.messages == []
    assert ctx.events == []


async def test_history_ending_with_a_response_clears_by_keep_pairs_only() -> None:
    messages = [*history(3), CanonicalMessage.response(TextPart("done"))]
    ctx = await run(ClearToolResults(max_messages=1, keep_pairs=1), messages)
    assert [r.content for r in returns(ctx.messages)] == [DEFAULT_PLACEHOLDER, DEFAULT_PLACEHOLDER, BIG]


async def test_orphan_returns_and_dangling_calls_are_ignored() -> None:
    messages = [
        CanonicalMessage.user("go"),
        CanonicalMessage.request(ToolReturnPart(tool_call_id="ghost", tool_name="read_file", content=BIG)),
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="dangling", tool_name="read_file", args={"path": "x"})
        ),
        *history(2)[1:],
        CanonicalMessage.user("next"),
    ]
    ctx = await run(ClearToolResults(max_messages=1, keep_pairs=0, clear_tool_inputs=True), messages)
    assert ctx.messages[1] is messages[1]
    assert ctx.messages[2] is messages[2]
    assert ctx.events[0].cleared_tool_call_ids == ("c0", "c1")


def test_plan_does_not_modify_the_history() -> None:
    messages = history(4)
    snapshot = list(messages)
    changes, ids, freed = ClearToolResults(max_messages=1, keep_pairs=1).plan(messages, TokenCounter())
    assert messages == snapshot
    assert sorted(changes) == [2, 4, 6]
    assert ids == ["c0", "c1", "c2"]
    assert freed > 0


# -- trigger ----------------------------------------------------------------------------------


def test_below_max_messages_is_idle() -> None:
    cap = ClearToolResults(max_messages=7)
    assert cap.should_compact(ctx_for(history(3))) is None  # 7 messages


def test_above_max_messages_fires() -> None:
    cap = ClearToolResults(max_messages=6)
    reason = cap.should_compact(ctx_for(history(3)))
    assert reason == "more than max_messages=6 messages since the newest cleared result"


async def test_max_messages_counts_only_messages_after_the_newest_clear() -> None:
    cap = ClearToolResults(max_messages=6, keep_pairs=1)
    ctx = ctx_for(history(4))  # 9 messages
    assert cap.should_compact(ctx) is not None
    await cap.compact(ctx)
    # The newest cleared result sits at index 6: two messages follow it.
    assert cap.messages_since_last_clear(ctx.messages) == 2
    assert cap.should_compact(ctx) is None
    ctx.messages.extend(step(10) + step(11))
    assert cap.should_compact(ctx) is None  # 6 messages since the clear
    ctx.messages.append(CanonicalMessage.response(TextPart("x")))
    assert cap.should_compact(ctx) == "more than max_messages=6 messages since the newest cleared result"


def test_messages_since_last_clear_stops_early() -> None:
    cap = ClearToolResults(max_messages=1)
    assert cap.messages_since_last_clear(history(50), limit=4) == 5
    assert cap.messages_since_last_clear(history(2)) == 5


def test_token_trigger() -> None:
    messages = history(4)
    tokens = TokenCounter().count_messages(messages)
    assert ClearToolResults(max_tokens=tokens).should_compact(ctx_for(messages)) is None
    reason = ClearToolResults(max_tokens=tokens - 1).should_compact(ctx_for(messages))
    assert reason == f"{tokens} tokens > limit {tokens - 1}"


def test_fraction_trigger_uses_the_context_window_override() -> None:
    messages = history(4)
    tokens = TokenCounter().count_messages(messages)
    window = tokens * 2
    assert (
        ClearToolResults(max_fraction=0.5, context_window=window + 2).should_compact(ctx_for(messages))
        is None
    )
    assert ClearToolResults(max_fraction=0.5, context_window=window - 2).should_compact(ctx_for(messages))
    assert ClearToolResults(max_fraction=0.5).should_compact(ctx_for(messages, context_window=window - 2))


async def test_hook_runs_compact_only_when_triggered() -> None:
    cap = ClearToolResults(max_messages=100, keep_pairs=0)
    ctx = ctx_for(history(3))
    await cap.before_model_request(ctx)
    assert ctx.events == []
    cap = ClearToolResults(max_messages=2, keep_pairs=0)
    await cap.before_model_request(ctx)
    [event] = ctx.events
    assert isinstance(event, CompactionEvent)
    assert event.reason == "more than max_messages=2 messages since the newest cleared result"


async def test_prompt_part_is_never_touched() -> None:
    messages = [CanonicalMessage.request(UserPromptPart(BIG)), *history(3)[1:]]
    ctx = await run(ClearToolResults(max_messages=1, keep_pairs=0), messages)
    assert ctx.messages[0] is messages[0]
