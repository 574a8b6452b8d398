"""What SlidingWindow keeps, drops, merges and reports."""

from __future__ import annotations

from harness_sliding_window import SlidingWindow, is_preserved_part, is_receipt_part

from harness.capabilities import CompactionEvent, RequestContext
from harness.core import (
    CanonicalMessage,
    Part,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    harness_mark,
    with_harness_mark,
)
from harness.history import check_invariants
from harness.tokens import TokenCounter

SYS = SystemPromptPart("You are a careful assistant.")
TASK_TEXT = "Fix the failing test in tests/test_x.py"
TASK = UserPromptPart(TASK_TEXT)


def _ctx(messages: list[CanonicalMessage]) -> RequestContext:
    return RequestContext(messages=list(messages), token_counter=TokenCounter())


def _chat(turns: int, *, first: tuple[Part, ...] = (SYS, TASK)) -> list[CanonicalMessage]:
    """first request, then `turns` (response, user request) pairs: odd length, ends with a request."""
    messages = [CanonicalMessage.request(*first)]
    for i in range(turns):
        messages.append(CanonicalMessage.response(TextPart(f"answer {i}")))
        messages.append(CanonicalMessage.request(UserPromptPart(f"question {i}")))
    return messages


def _tools(calls: int, *, first: tuple[Part, ...] = (SYS, TASK)) -> list[CanonicalMessage]:
    messages = [CanonicalMessage.request(*first)]
    for i in range(calls):
        messages.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"c{i}", tool_name="read_file", args={"path": f"f{i}.py"})
            )
        )
        messages.append(
            CanonicalMessage.request(
                ToolReturnPart(tool_call_id=f"c{i}", tool_name="read_file", content=f"content {i} " * 20)
            )
        )
    return messages


def _texts(message: CanonicalMessage) -> list[str]:
    out: list[str] = []
    for part in message.parts:
        if isinstance(part, (UserPromptPart, SystemPromptPart, TextPart)):
            out.append(part.content if isinstance(part.content, str) else str(part.content))
        else:
            out.append(part.part_kind)
    return out


def _same(a: CanonicalMessage, b: CanonicalMessage) -> bool:
    return a is b


# -- cutting ---------------------------------------------------------------------------


def test_keeps_the_newest_keep_messages_as_the_same_objects() -> None:
    history = _tools(10, first=(TASK,))
    ctx = _ctx(history)
    SlidingWindow(max_messages=5, keep_messages=4, preserve_first_user_message=False).apply(ctx)
    assert len(ctx.messages) == 4
    assert all(a is b for a, b in zip(ctx.messages, history[-4:], strict=True))
    assert check_invariants(ctx.messages) == []


def test_cut_walks_back_instead_of_splitting_a_distant_pair() -> None:
    # call c0 at index 1 is answered only at index 9 (8 messages later)
    history = [
        CanonicalMessage.request(TASK),
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="c0", tool_name="bash", args={"cmd": "make"}), TextPart("started")
        ),
        *[
            m
            for i in range(1, 4)
            for m in (
                CanonicalMessage.request(UserPromptPart(f"u{i}")),
                CanonicalMessage.response(TextPart(f"a{i}")),
            )
        ],
        CanonicalMessage.request(ToolReturnPart(tool_call_id="c0", tool_name="bash", content="done")),
        CanonicalMessage.response(TextPart("ok")),
        CanonicalMessage.request(UserPromptPart("next")),
    ]
    assert check_invariants(history) == []
    ctx = _ctx(history)
    SlidingWindow(max_messages=3, keep_messages=2, preserve_first_user_message=False).apply(ctx)
    # keeping 2 would be fine (c0's return is at index 8, cut 9 is after it)
    assert ctx.messages == history[-2:]
    ctx = _ctx(history)
    SlidingWindow(max_messages=6, keep_messages=5, preserve_first_user_message=False).apply(ctx)
    # a cut at 6 would keep the return (index 8) without its call (index 1): walk back to 1
    assert ctx.messages[0] is history[1]
    assert check_invariants(ctx.messages) == []


def test_parallel_calls_and_a_retry_naming_a_call_stay_with_their_call() -> None:
    history = [
        CanonicalMessage.request(TASK),
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="a", tool_name="read_file", args={"path": "x"}),
            ToolCallPart(tool_call_id="b", tool_name="read_file", args={"path": "y"}),
            ToolCallPart(tool_call_id="c", tool_name="bash", args={"cmd": "ls"}),
        ),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="a", tool_name="read_file", content="x"),
            RetryPromptPart("bad args", tool_name="read_file", tool_call_id="b"),
        ),
        CanonicalMessage.response(TextPart("retrying")),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="c", tool_name="bash", content="files"), UserPromptPart("go on")
        ),
        CanonicalMessage.response(TextPart("done")),
        CanonicalMessage.request(UserPromptPart("thanks")),
    ]
    assert check_invariants(history) == []
    ctx = _ctx(history)
    event = SlidingWindow(max_messages=4, keep_messages=3, preserve_first_user_message=False).apply(ctx)
    # cuts at 4 and 2 would split c (answered at 4) or b (retried at 2): only 1 is safe
    assert ctx.messages == history[1:]
    assert event is not None
    assert event.removed_tool_call_ids == ()
    assert check_invariants(ctx.messages) == []


def test_keep_messages_zero_still_keeps_the_request_being_sent() -> None:
    history = _chat(4)
    ctx = _ctx(history)
    SlidingWindow(max_messages=3, keep_messages=0, preserve_first_user_message=False).apply(ctx)
    # the leading system prompt of the first request is kept, in front of the window
    assert ctx.messages[-1] is history[-1]
    assert check_invariants(ctx.messages) == []
    ctx = _ctx(_chat(4, first=(TASK,)))
    SlidingWindow(max_messages=3, keep_messages=0, preserve_first_user_message=False).apply(ctx)
    assert len(ctx.messages) == 1
    assert _texts(ctx.messages[0]) == ["question 3"]


def test_keep_messages_zero_with_preservation_never_edits_the_request_being_sent() -> None:
    history = _chat(4)
    ctx = _ctx(history)
    SlidingWindow(max_messages=3, keep_messages=0).apply(ctx)
    # the window grows back by one message so the task can stand in front of it
    assert ctx.messages[-1] is history[-1]
    assert ctx.messages[-2] is history[-2]
    assert _texts(ctx.messages[0]) == [SYS.content, TASK_TEXT]
    assert len(ctx.messages) == 3
    assert check_invariants(ctx.messages) == []


def test_tool_return_in_the_request_being_sent_keeps_its_call() -> None:
    history = _tools(5)
    ctx = _ctx(history)
    SlidingWindow(max_messages=3, keep_messages=1).apply(ctx)
    assert ctx.messages[-2:] == history[-2:]
    assert check_invariants(ctx.messages) == []


def test_short_history_or_nothing_to_drop_reports_nothing() -> None:
    window = SlidingWindow(max_messages=3, keep_messages=2)
    for history in ([], [CanonicalMessage.user("hi")], _chat(0), _chat(1)):
        ctx = _ctx(history)
        assert window.apply(ctx) is None
        assert ctx.messages == history
        assert ctx.events == []


# -- what is preserved -----------------------------------------------------------------


def test_first_user_request_is_kept_at_the_front() -> None:
    history = _tools(6)
    ctx = _ctx(history)
    SlidingWindow(max_messages=5, keep_messages=4).apply(ctx)
    assert _texts(ctx.messages[0]) == [SYS.content, TASK_TEXT]
    assert all(is_preserved_part(p) for p in ctx.messages[0].parts)
    assert ctx.messages[1:] == history[-4:]
    assert check_invariants(ctx.messages) == []


def test_first_user_request_is_not_duplicated() -> None:
    history = _chat(2)  # [task, a0, q0, a1, q1]
    ctx = _ctx(history)
    # keep 4: only the first request falls before the cut, and it is all preserved: a no-op
    assert SlidingWindow(max_messages=5, keep_messages=4).apply(ctx) is None
    assert ctx.messages == history
    ctx = _ctx(history)
    assert SlidingWindow(max_messages=4, keep_messages=3).apply(ctx) is not None
    texts = [t for m in ctx.messages for t in _texts(m)]
    assert texts.count(TASK_TEXT) == 1
    assert texts.count(SYS.content) == 1


def test_preservation_disabled_drops_the_task_but_keeps_the_instructions() -> None:
    history = _tools(6)
    ctx = _ctx(history)
    SlidingWindow(max_messages=5, keep_messages=4, preserve_first_user_message=False).apply(ctx)
    texts = [t for m in ctx.messages for t in _texts(m)]
    assert TASK_TEXT not in texts
    assert _texts(ctx.messages[0]) == [SYS.content]


def test_system_only_first_request_is_never_dropped() -> None:
    history = [
        CanonicalMessage.request(SYS, SystemPromptPart("Project rules: be brief.")),
        CanonicalMessage.response(TextPart("Understood.")),
        *_tools(5, first=(TASK,)),
    ]
    assert check_invariants(history) == []
    for preserve in (True, False):
        ctx = _ctx(history)
        SlidingWindow(max_messages=5, keep_messages=4, preserve_first_user_message=preserve).apply(ctx)
        expected = [SYS.content, "Project rules: be brief."] + ([TASK_TEXT] if preserve else [])
        assert _texts(ctx.messages[0]) == expected
        assert ctx.messages[1:] == history[-4:]
        assert check_invariants(ctx.messages) == []


def test_preserved_parts_merge_into_a_window_that_starts_with_a_request() -> None:
    history = _chat(5)  # requests at even indices
    ctx = _ctx(history)
    SlidingWindow(max_messages=4, keep_messages=3).apply(ctx)
    # window = [question 3, answer 4, question 4]; front parts go before "question 3"
    assert len(ctx.messages) == 3
    assert _texts(ctx.messages[0]) == [SYS.content, TASK_TEXT, "question 3"]
    assert ctx.messages[1:] == history[-2:]
    assert check_invariants(ctx.messages) == []


def test_the_preserved_front_does_not_grow_over_repeated_compactions() -> None:
    window = SlidingWindow(max_messages=6, keep_messages=3, receipt=True)
    ctx = _ctx(_chat(3))
    for turn in range(20):
        ctx.messages.append(CanonicalMessage.response(TextPart(f"reply {turn}")))
        ctx.messages.append(CanonicalMessage.request(UserPromptPart(f"follow-up {turn}")))
        reason = window.should_compact(ctx)
        if reason:
            window.apply(ctx, reason=reason)
        assert check_invariants(ctx.messages) == []
        first = ctx.messages[0]
        front = [p for p in first.parts if is_preserved_part(p)]
        assert [_texts(CanonicalMessage.request(*front))] in ([[SYS.content, TASK_TEXT]], [[]])
        receipts = [p for m in ctx.messages for p in m.parts if is_receipt_part(p)]
        assert len(receipts) <= 1
    all_texts = [t for m in ctx.messages for t in _texts(m)]
    assert all_texts.count(TASK_TEXT) == 1
    assert "follow-up 19" in all_texts


def test_request_scoped_parts_are_not_preserved_as_the_task() -> None:
    warning = with_harness_mark(
        UserPromptPart("[LimitWarner] hurry"), request_scoped=True, source="limit_warner"
    )
    history = _tools(5, first=(SYS, warning))
    ctx = _ctx(history)
    SlidingWindow(max_messages=5, keep_messages=4).apply(ctx)
    texts = [t for m in ctx.messages for t in _texts(m)]
    assert "[LimitWarner] hurry" not in texts
    assert texts[0] == SYS.content


# -- receipts --------------------------------------------------------------------------


def test_receipt_says_what_was_dropped_and_is_marked() -> None:
    history = _tools(6)
    ctx = _ctx(history)
    event = SlidingWindow(max_messages=5, keep_messages=4, receipt=True).apply(ctx)
    assert event is not None
    receipts = [p for p in ctx.messages[0].parts if is_receipt_part(p)]
    assert len(receipts) == 1
    receipt = receipts[0]
    assert isinstance(receipt, UserPromptPart)
    mark = harness_mark(receipt)
    assert mark is not None
    assert mark["kind"] == "receipt"
    assert mark["dropped_messages"] == 8  # 13 messages, 4 kept, the first request preserved
    assert mark["dropped_tokens"] == event.details["dropped_tokens"] > 0
    # exactly the tokens of messages 1..8 (message 0 is the preserved task)
    counter = TokenCounter()
    assert mark["dropped_tokens"] == sum(counter.count_message(m) for m in history[1:9])
    assert "8 earlier messages" in receipt.text
    assert f"{mark['dropped_tokens']:,} tokens" in receipt.text
    # the receipt comes after the preserved task
    assert _texts(ctx.messages[0])[:2] == [SYS.content, TASK_TEXT]


def test_a_later_receipt_replaces_the_old_one_and_accumulates_the_totals() -> None:
    window = SlidingWindow(max_messages=5, keep_messages=4, receipt=True)
    ctx = _ctx(_tools(6))
    window.apply(ctx)
    first = next(p for p in ctx.messages[0].parts if is_receipt_part(p))
    for i in range(6, 9):
        ctx.messages.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"c{i}", tool_name="read_file", args={"path": "z"})
            )
        )
        ctx.messages.append(
            CanonicalMessage.request(
                ToolReturnPart(tool_call_id=f"c{i}", tool_name="read_file", content="more " * 30)
            )
        )
    window.apply(ctx)
    receipts = [p for m in ctx.messages for p in m.parts if is_receipt_part(p)]
    assert len(receipts) == 1
    first_mark = harness_mark(first) or {}
    second_mark = harness_mark(receipts[0]) or {}
    assert second_mark["dropped_messages"] == first_mark["dropped_messages"] + 6
    assert second_mark["dropped_tokens"] > first_mark["dropped_tokens"]
    assert check_invariants(ctx.messages) == []


def test_receipt_is_recognised_by_mark_not_by_text() -> None:
    lookalike = UserPromptPart("[Note from the harness: 3 earlier messages were removed]")
    history = _chat(4, first=(SYS, TASK, lookalike))
    ctx = _ctx(history)
    SlidingWindow(max_messages=3, keep_messages=2, receipt=True).apply(ctx)
    first = ctx.messages[0]
    assert lookalike.content in _texts(first)  # preserved as part of the task
    assert sum(1 for p in first.parts if is_receipt_part(p)) == 1


def test_receipt_without_anything_to_preserve_stands_in_front() -> None:
    history = _tools(5, first=(TASK,))
    ctx = _ctx(history)
    SlidingWindow(max_messages=3, keep_messages=2, preserve_first_user_message=False, receipt=True).apply(ctx)
    assert ctx.messages[0].is_request
    assert [is_receipt_part(p) for p in ctx.messages[0].parts] == [True]
    assert ctx.messages[1:] == history[-2:]


# -- token mode ------------------------------------------------------------------------


def test_keep_tokens_keeps_the_newest_messages_that_fit() -> None:
    history = _tools(10, first=(TASK,))
    counter = TokenCounter()
    budget = sum(counter.count_message(m) for m in history[-5:])
    ctx = _ctx(history)
    SlidingWindow(max_tokens=budget * 3, keep_tokens=budget, preserve_first_user_message=False).apply(ctx)
    kept = ctx.messages
    assert sum(counter.count_message(m) for m in kept) <= budget
    # and as much as fits (the next safe cut back would exceed the budget)
    assert len(kept) >= 4
    assert check_invariants(kept) == []


def test_keep_tokens_keeps_the_newest_message_even_when_it_alone_is_too_big() -> None:
    history = _chat(3, first=(TASK,))
    history[-1] = CanonicalMessage.request(UserPromptPart("huge " * 500))
    ctx = _ctx(history)
    SlidingWindow(max_tokens=100, keep_tokens=10, preserve_first_user_message=False).apply(ctx)
    assert ctx.messages == history[-1:]


def test_keep_tokens_idempotent_with_a_merged_front() -> None:
    history = _chat(8)
    counter = TokenCounter()
    window = SlidingWindow(max_tokens=1000, keep_tokens=sum(counter.count_message(m) for m in history[-3:]))
    ctx = _ctx(history)
    assert window.apply(ctx) is not None
    assert _texts(ctx.messages[0])[:2] == [SYS.content, TASK_TEXT]
    assert window.apply(ctx) is None


# -- reporting -------------------------------------------------------------------------


def test_event_reports_tokens_removed_calls_and_details() -> None:
    history = _tools(6)
    ctx = _ctx(history)
    tokens_before = ctx.count_tokens()
    event = SlidingWindow(max_messages=5, keep_messages=4).apply(ctx, reason="because")
    assert isinstance(event, CompactionEvent)
    assert ctx.events == [event]
    assert event.strategy == "sliding_window"
    assert event.reason == "because"
    assert (event.messages_before, event.messages_after) == (13, 5)
    assert event.tokens_before == tokens_before
    assert event.tokens_after == ctx.count_tokens() < tokens_before
    assert event.removed_tool_call_ids == ("c0", "c1", "c2", "c3")
    assert event.details["cut"] == 9
    assert event.details["kept_window"] == 4
    assert event.details["dropped_messages"] == 8
    assert event.details["preserved_parts"] == 2


async def test_compact_ignores_the_trigger() -> None:
    history = _tools(3)
    ctx = _ctx(history)
    window = SlidingWindow(max_messages=100, keep_messages=2)
    assert window.should_compact(ctx) is None
    await window.compact(ctx, reason="forced")
    assert len(ctx.messages) == 3
    assert ctx.events[0].reason == "forced"


def test_history_ending_with_a_response_is_cut_too() -> None:
    history = _chat(5)[:-1]  # ends with a response (outside a run)
    ctx = _ctx(history)
    SlidingWindow(max_messages=4, keep_messages=1).apply(ctx)
    assert ctx.messages[-1] is history[-1]
    assert _texts(ctx.messages[0]) == [SYS.content, TASK_TEXT]
    assert check_invariants(ctx.messages) == []


def test_input_list_object_is_edited_in_place() -> None:
    history = _tools(6)
    ctx = _ctx(history)
    same_list = ctx.messages
    SlidingWindow(max_messages=5, keep_messages=2).apply(ctx)
    assert ctx.messages is same_list
    assert _same(ctx.messages[-1], history[-1])
