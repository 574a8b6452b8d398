"""Tests of harness.history.repairs: renamed ids, dangling calls, orphan answers, empty responses."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import (
    CanonicalMessage,
    Part,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    harness_mark,
)
from harness.history import (
    CHANGE_KINDS,
    Change,
    HistoryEdit,
    answer_dangling_calls,
    check_invariants,
    merge_consecutive_requests,
    merge_consecutive_responses,
    remove_empty_responses,
    remove_orphan_returns,
    rename_duplicate_call_ids,
    run_cleanup_loop,
    sanitize_for_resume,
)
from harness.testing.strategies import messy_histories


def req(*parts: Part, **fields: Any) -> CanonicalMessage:
    return CanonicalMessage.request(*parts, **fields)


def resp(*parts: Part, **fields: Any) -> CanonicalMessage:
    return CanonicalMessage.response(*parts, **fields)


def user(text: str = "hi") -> UserPromptPart:
    return UserPromptPart(text)


def call(call_id: str, name: str = "bash") -> ToolCallPart:
    return ToolCallPart(tool_call_id=call_id, tool_name=name, args={"cmd": "ls"})


def ret(call_id: str, content: Any = "ok", name: str | None = "bash") -> ToolReturnPart:
    return ToolReturnPart(tool_call_id=call_id, tool_name=name, content=content)


def retry(call_id: str | None, name: str | None = "bash") -> RetryPromptPart:
    return RetryPromptPart("try again", tool_name=name, tool_call_id=call_id)


def same_objects(a: Sequence[object], b: Sequence[object]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


FAST = settings(max_examples=150, deadline=None)


def snapshot(messages: Sequence[CanonicalMessage]) -> list[tuple[int, CanonicalMessage]]:
    return [(id(m), m) for m in messages]


def unchanged(messages: Sequence[CanonicalMessage], before: list[tuple[int, CanonicalMessage]]) -> bool:
    return len(messages) == len(before) and all(
        id(m) == ident and m == copy for m, (ident, copy) in zip(messages, before, strict=True)
    )


# --------------------------------------------------------------------------- rename_duplicate_call_ids


def test_rename_duplicates_sequential_pairs() -> None:
    first = resp(call("a"))
    history = [req(user()), first, req(ret("a", "1")), resp(call("a")), req(retry("a"), ret("a", "2"))]
    edit = rename_duplicate_call_ids(history)
    assert edit.changes == (
        Change("renamed_duplicate_call_id", 3, ("a", "a~1"), "tool call id 'a' reused; renamed to 'a~1'"),
    )
    out = edit.messages
    assert out[0] is history[0]
    assert out[1] is first
    assert out[2] is history[2]
    assert out[3].parts == (ToolCallPart(tool_call_id="a~1", tool_name="bash", args={"cmd": "ls"}),)
    assert [p.tool_call_id for p in out[4].parts if isinstance(p, (ToolReturnPart, RetryPromptPart))] == [
        "a~1",
        "a~1",
    ]
    assert check_invariants(out) == []


def test_rename_duplicates_parallel_in_one_response() -> None:
    history = [req(user()), resp(call("a"), call("a")), req(ret("a", "1"), ret("a", "2"))]
    edit = rename_duplicate_call_ids(history)
    out = edit.messages
    assert [p.tool_call_id for p in out[1].parts if isinstance(p, ToolCallPart)] == ["a", "a~1"]
    assert [(p.tool_call_id, p.content) for p in out[2].parts if isinstance(p, ToolReturnPart)] == [
        ("a", "1"),
        ("a~1", "2"),
    ]
    assert check_invariants(out) == []


def test_rename_avoids_existing_ids() -> None:
    history = [req(user()), resp(call("a"), call("a~1")), req(ret("a"), ret("a~1")), resp(call("a"))]
    out = rename_duplicate_call_ids(history).messages
    assert [p.tool_call_id for p in out[3].parts if isinstance(p, ToolCallPart)] == ["a~2"]


def test_rename_without_duplicates_is_identity() -> None:
    history = [req(user()), resp(call("a")), req(ret("a"))]
    edit = rename_duplicate_call_ids(history)
    assert not edit.changed
    assert same_objects(edit.messages, history)
    assert edit.messages is not history


# --------------------------------------------------------------------------- answer_dangling_calls


def test_answer_inserts_after_returns_before_user_prompt() -> None:
    response = resp(call("a", "read"), call("b", "grep"), call("c"))
    following = req(ret("a"), user("next"))
    history = [req(user()), response, following]
    edit = answer_dangling_calls(history)
    out = edit.messages
    assert len(out) == 3
    assert out[0] is history[0]
    assert out[1] is response
    parts = out[2].parts
    assert parts[0] is following.parts[0]
    assert [type(p).__name__ for p in parts] == [
        "ToolReturnPart",
        "ToolReturnPart",
        "ToolReturnPart",
        "UserPromptPart",
    ]
    synthetic = parts[1]
    assert isinstance(synthetic, ToolReturnPart)
    assert (synthetic.tool_call_id, synthetic.tool_name, synthetic.content) == (
        "b",
        "grep",
        "Tool execution aborted",
    )
    assert harness_mark(synthetic) == {"synthetic": True, "reason": "dangling"}
    assert edit.changes == (
        Change("answered_dangling_call", 1, ("b", "c"), "added 2 synthetic tool return(s) into request 2"),
    )
    assert check_invariants(out) == []


def test_answer_goes_after_system_prompt_when_request_has_no_returns() -> None:
    history = [req(user()), resp(call("a")), req(SystemPromptPart("s"), user("x"))]
    parts = answer_dangling_calls(history).messages[2].parts
    assert [p.part_kind for p in parts] == ["system-prompt", "tool-return", "user-prompt"]


def test_answer_inserts_new_request_between_responses() -> None:
    history = [req(user()), resp(call("a")), resp(TextPart("later"))]
    out = answer_dangling_calls(history, content="interrupted").messages
    assert len(out) == 4
    assert out[1] is history[1]
    assert out[3] is history[2]
    inserted = out[2]
    assert inserted.is_request
    assert harness_mark(inserted) == {"synthetic": True, "reason": "dangling"}
    assert inserted.parts[0] == ToolReturnPart(
        tool_call_id="a",
        tool_name="bash",
        content="interrupted",
        metadata={"harness": {"synthetic": True, "reason": "dangling"}},
    )


def test_answer_appends_request_after_trailing_response() -> None:
    history = [req(user()), resp(call("a"))]
    edit = answer_dangling_calls(history)
    assert len(edit.messages) == 3
    assert edit.messages[2].is_request
    assert check_invariants(edit.messages) == []
    assert edit.changes[0].detail == "added 1 synthetic tool return(s) in a new request"


def test_answer_does_nothing_without_dangling_calls() -> None:
    history = [req(user()), resp(call("a")), req(ret("a"))]
    edit = answer_dangling_calls(history)
    assert not edit.changed
    assert same_objects(edit.messages, history)


def test_remove_mode_deletes_call_and_its_parts() -> None:
    history = [
        req(user(), retry("a")),  # an answer before the call carries the id too
        resp(TextPart("x"), call("a")),
        resp(call("b")),
        req(user("next")),
    ]
    edit = answer_dangling_calls(history, mode="remove")
    out = edit.messages
    assert [m.parts for m in out] == [(user(),), (TextPart("x"),), (user("next"),)]
    assert out[2] is history[3]
    assert edit.removed_tool_call_ids == ("a", "b")
    assert [c.message_index for c in edit.changes] == [0, 1, 2]
    assert edit.changes[2].detail.endswith("message dropped (left empty)")


def test_remove_mode_keeps_answers_of_an_answered_call_with_same_id() -> None:
    history = [req(user()), resp(call("a")), req(ret("a")), resp(call("a"))]
    out = answer_dangling_calls(history, mode="remove").messages
    assert [m.parts for m in out] == [(user(),), (call("a"),), (ret("a"),)]


def test_remove_mode_uses_positions_not_object_identity() -> None:
    shared = call("a")  # the same part object in an answered and in a dangling response
    history = [req(user()), resp(shared), req(ret("a")), resp(TextPart("t"), shared)]
    out = answer_dangling_calls(history, mode="remove").messages
    assert [m.parts for m in out] == [(user(),), (shared,), (ret("a"),), (TextPart("t"),)]
    assert out[1] is history[1]


def test_answer_dangling_rejects_unknown_mode() -> None:
    with pytest.raises(ValueError, match="mode"):
        answer_dangling_calls([], mode="drop")  # pyright: ignore[reportArgumentType]


# --------------------------------------------------------------------------- remove_orphan_returns


def test_remove_orphans_and_early_answers() -> None:
    keep = req(user(), ret("a"), retry(None, name=None))
    history = [
        req(user(), ret("early")),
        resp(call("a"), call("early")),
        keep,
        req(ret("ghost")),
        resp(TextPart("x")),
        req(retry("ghost2"), retry(None), ret("early")),
    ]
    edit = remove_orphan_returns(history)
    out = edit.messages
    assert [m.parts for m in out] == [
        (user(),),
        (call("a"), call("early")),
        keep.parts,
        (TextPart("x"),),
        (ret("early"),),
    ]
    assert out[2] is keep
    assert out[1] is history[1]
    assert [(c.message_index, c.tool_call_ids) for c in edit.changes] == [
        (0, ("early",)),
        (3, ("ghost",)),
        (5, ("ghost2", "")),
    ]
    assert edit.removed_tool_call_ids == ("early", "ghost", "ghost2", "")


# --------------------------------------------------------------------------- remove_empty_responses


def test_remove_empty_responses() -> None:
    thinking = resp(ThoughtPart("hmm"))
    history = [req(user()), resp(), req(user()), resp(TextPart(" ")), req(user()), thinking]
    edit = remove_empty_responses(history)
    assert same_objects(edit.messages, [history[0], history[2], history[4], thinking])
    assert [c.message_index for c in edit.changes] == [1, 3]


# --------------------------------------------------------------------------- every repair (properties)


Repair = Callable[[Sequence[CanonicalMessage]], HistoryEdit]


REPAIRS: dict[str, tuple[Repair, set[str]]] = {
    "rename": (rename_duplicate_call_ids, {"duplicate_call_id"}),
    "answer": (answer_dangling_calls, {"dangling_call"}),
    "remove": (lambda m: answer_dangling_calls(m, mode="remove"), {"dangling_call"}),
    "orphans": (remove_orphan_returns, {"orphan_return", "return_before_call"}),
    "empty": (remove_empty_responses, {"empty_response"}),
    "requests": (merge_consecutive_requests, {"consecutive_requests"}),
    "responses": (merge_consecutive_responses, {"consecutive_responses"}),
    "sanitize": (sanitize_for_resume, set()),
}


@FAST
@given(messy_histories(), st.sampled_from(sorted(REPAIRS)))
def test_each_repair_is_pure_and_fixes_its_kind(messages: list[CanonicalMessage], name: str) -> None:
    repair, fixes = REPAIRS[name]
    before = snapshot(messages)
    edit = repair(messages)
    assert unchanged(messages, before)
    assert edit.messages is not messages
    assert {c.kind for c in edit.changes} <= CHANGE_KINDS
    remaining = {v.kind for v in check_invariants(edit.messages)}
    assert not (remaining & fixes)
    assert check_invariants(run_cleanup_loop(edit.messages).messages) == []
    if not edit.changed:
        assert all(a is b for a, b in zip(edit.messages, messages, strict=True))
        assert len(edit.messages) == len(messages)
    # a message that was kept unchanged is the very same object
    originals = {id(m) for m in messages}
    for message in edit.messages:
        if id(message) not in originals:
            assert all(message is not m for m in messages)
