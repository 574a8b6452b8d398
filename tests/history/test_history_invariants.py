"""Tests of harness.history.invariants: check_invariants, also on the public history strategies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import pytest
from hypothesis import given, settings

from harness.core import (
    CanonicalMessage,
    Part,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UnknownPart,
    UserPromptPart,
)
from harness.history import VIOLATION_KINDS, Violation, check_invariants, is_empty_response
from harness.testing.strategies import histories, messy_histories


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


def kinds(messages: Sequence[CanonicalMessage], *, persisted: bool = False) -> list[str]:
    return [v.kind for v in check_invariants(messages, persisted=persisted)]


P = TypeVar("P")

FAST = settings(max_examples=150, deadline=None)


def parts_of(messages: Sequence[CanonicalMessage], kind: type[P]) -> list[P]:
    return [p for m in messages for p in m.parts if isinstance(p, kind)]


# --------------------------------------------------------------------------- check_invariants


def test_empty_history_is_valid() -> None:
    assert check_invariants([]) == []


def test_unanswered_trailing_request_is_valid() -> None:
    assert check_invariants([req(user())]) == []
    history = [req(user()), resp(call("a")), req(ret("a")), resp(TextPart("done")), req(user("next"))]
    assert check_invariants(history) == []


def test_distant_answers_and_retry_then_return_are_valid() -> None:
    history = [
        req(user()),
        resp(call("a"), call("b")),
        req(ret("a"), retry("b")),
        resp(TextPart("waiting")),
        req(user("more")),
        resp(TextPart("still")),
        req(ret("b")),
    ]
    assert check_invariants(history) == []


def test_dangling_call_reported_with_location() -> None:
    history = [req(user()), resp(TextPart("x"), call("a")), req(user("again"))]
    assert check_invariants(history) == [
        Violation("dangling_call", 1, 1, "a", "tool call 'a' (bash) has no return or retry after it")
    ]


def test_call_answered_only_by_a_retry_is_not_dangling() -> None:
    assert check_invariants([req(user()), resp(call("a")), req(retry("a"))]) == []


def test_call_whose_answer_comes_before_it_is_dangling_and_answer_is_early() -> None:
    history = [req(user()), resp(TextPart("x")), req(ret("a")), resp(call("a"))]
    violations = check_invariants(history)
    assert [(v.kind, v.message_index, v.part_index, v.tool_call_id) for v in violations] == [
        ("return_before_call", 2, 0, "a"),
        ("dangling_call", 3, 0, "a"),
    ]


def test_orphan_returns_and_retries() -> None:
    history = [
        req(user()),
        resp(call("a")),
        req(ret("a"), ret("ghost"), retry("ghost2"), retry(None), retry("x", name=None)),
    ]
    violations = check_invariants(history)
    assert [(v.kind, v.part_index, v.tool_call_id) for v in violations] == [
        ("orphan_return", 1, "ghost"),
        ("orphan_return", 2, "ghost2"),
        ("orphan_return", 3, ""),  # names a tool, but no id: answers nothing
    ]
    # a general retry (no tool name) is fine, whatever its id


def test_duplicate_call_id_reported_at_later_call() -> None:
    history = [req(user()), resp(call("a")), req(ret("a")), resp(TextPart("t"), call("a")), req(ret("a"))]
    violations = check_invariants(history)
    assert [(v.kind, v.message_index, v.part_index, v.tool_call_id) for v in violations] == [
        ("duplicate_call_id", 3, 1, "a")
    ]


def test_duplicate_call_id_in_one_response() -> None:
    history = [req(user()), resp(call("a"), call("a")), req(ret("a"), ret("a"))]
    assert kinds(history) == ["duplicate_call_id"]


def test_consecutive_messages() -> None:
    history = [req(user()), req(user("b")), resp(TextPart("x")), resp(TextPart("y"))]
    violations = check_invariants(history)
    assert [(v.kind, v.message_index, v.part_index) for v in violations] == [
        ("consecutive_requests", 1, None),
        ("consecutive_responses", 3, None),
    ]


@pytest.mark.parametrize(
    ("parts", "empty"),
    [
        ((), True),
        ((TextPart(""),), True),
        ((TextPart("  \n"), TextPart("")), True),
        ((TextPart("x"),), False),
        ((ThoughtPart("thinking only"),), False),
        ((ThoughtPart(""),), False),
        ((call("a"),), False),
        ((UnknownPart("builtin-tool-call", data={"x": 1}),), False),
    ],
)
def test_empty_response_definition(parts: tuple[Part, ...], empty: bool) -> None:
    message = resp(*parts)
    assert is_empty_response(message) is empty
    assert ("empty_response" in kinds([req(user()), message, req(user())])) is empty


def test_persisted_system_prompt_only_when_persisted() -> None:
    history = [req(SystemPromptPart("be nice"), user()), resp(TextPart("x"))]
    assert check_invariants(history) == []
    assert [(v.kind, v.message_index, v.part_index) for v in check_invariants(history, persisted=True)] == [
        ("persisted_system_prompt", 0, 0)
    ]


def test_violation_kinds_constant_lists_every_kind() -> None:
    history = [
        req(SystemPromptPart("s"), ret("early")),
        req(ret("ghost")),
        resp(call("early"), call("d")),
        resp(),
        resp(call("d")),
    ]
    assert set(kinds(history, persisted=True)) == VIOLATION_KINDS


# --------------------------------------------------------------------------- strategies (properties)


@FAST
@given(histories())
def test_generated_histories_are_valid(messages: list[CanonicalMessage]) -> None:
    assert check_invariants(messages) == []
    if messages:
        assert messages[-1].is_request
        assert messages[0].is_request
        assert any(isinstance(p, UserPromptPart) for p in messages[0].parts)
    ids = [p.tool_call_id for p in parts_of(messages, ToolCallPart)]
    assert len(ids) == len(set(ids))


@FAST
@given(
    histories(
        min_messages=2,
        max_messages=12,
        end_with_request=False,
        parallel_calls=False,
        retries=False,
        thinking=False,
        distant_returns=False,
        system_prompts=False,
    )
)
def test_generated_histories_respect_options(messages: list[CanonicalMessage]) -> None:
    assert check_invariants(messages) == []
    assert 2 <= len(messages) <= 12
    assert not parts_of(messages, RetryPromptPart)
    assert not parts_of(messages, SystemPromptPart)
    for index, message in enumerate(messages):
        assert len(message.tool_calls) <= 1
        for call in message.tool_calls:  # answered in the very next request
            assert call.tool_call_id in {
                p.tool_call_id for p in parts_of(messages[index + 1 : index + 2], ToolReturnPart)
            }


def test_histories_rejects_impossible_options() -> None:
    with pytest.raises(ValueError, match="end_with_request"):
        histories(min_messages=2, max_messages=2)
    with pytest.raises(ValueError, match="max_output_chars"):
        histories(max_output_chars=0)


def test_histories_can_generate_long_tool_outputs() -> None:
    longest: list[int] = [0]

    @settings(max_examples=100, deadline=None, derandomize=True, database=None)
    @given(histories(min_messages=3, max_output_chars=3000))
    def collect(messages: list[CanonicalMessage]) -> None:
        assert check_invariants(messages) == []
        for part in parts_of(messages, ToolReturnPart):
            if isinstance(part.content, str):
                assert len(part.content) <= 3000
                longest[0] = max(longest[0], len(part.content))

    collect()
    assert longest[0] > 500


@FAST
@given(messy_histories())
def test_messy_histories_hit_every_violation_kind_eventually(messages: list[CanonicalMessage]) -> None:
    # the strategy is meant to produce invalid input; spot-check it type-checks as history
    check_invariants(messages, persisted=True)


def test_messy_histories_cover_every_violation_kind() -> None:
    seen: set[str] = set()

    @settings(max_examples=300, deadline=None)
    @given(messy_histories())
    def collect(messages: list[CanonicalMessage]) -> None:
        seen.update(v.kind for v in check_invariants(messages, persisted=True))

    collect()
    assert seen == {
        "dangling_call",
        "orphan_return",
        "duplicate_call_id",
        "return_before_call",
        "consecutive_requests",
        "consecutive_responses",
        "empty_response",
        "persisted_system_prompt",
    }
