"""Tests of harness.history.cleanup: run_cleanup_loop and sanitize_for_resume."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, TypeVar

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
)
from harness.history import CHANGE_KINDS, Violation, check_invariants, run_cleanup_loop, sanitize_for_resume
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


def kinds(messages: Sequence[CanonicalMessage], *, persisted: bool = False) -> list[str]:
    return [v.kind for v in check_invariants(messages, persisted=persisted)]


def same_objects(a: Sequence[object], b: Sequence[object]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


P = TypeVar("P")

FAST = settings(max_examples=150, deadline=None)


def snapshot(messages: Sequence[CanonicalMessage]) -> list[tuple[int, CanonicalMessage]]:
    return [(id(m), m) for m in messages]


def unchanged(messages: Sequence[CanonicalMessage], before: list[tuple[int, CanonicalMessage]]) -> bool:
    return len(messages) == len(before) and all(
        id(m) == ident and m == copy for m, (ident, copy) in zip(messages, before, strict=True)
    )


def answer_id(part: Part) -> str | None:
    if isinstance(part, ToolReturnPart):
        return part.tool_call_id
    if isinstance(part, RetryPromptPart) and part.tool_name is not None:
        return part.tool_call_id or ""
    return None


def parts_of(messages: Sequence[CanonicalMessage], kind: type[P]) -> list[P]:
    return [p for m in messages for p in m.parts if isinstance(p, kind)]


def user_ids(messages: Sequence[CanonicalMessage]) -> list[int]:
    return [id(p) for p in parts_of(messages, UserPromptPart)]


def without_id(part: Part) -> str:
    return repr(attrs.evolve(part, tool_call_id="-"))  # pyright: ignore[reportArgumentType]


# --------------------------------------------------------------------------- sanitize_for_resume


def test_sanitize_for_resume() -> None:
    plain = resp(TextPart("x"))
    history = [
        req(SystemPromptPart("only")),
        req(SystemPromptPart("s"), user(), run_id="r"),
        plain,
        resp(TextPart("y"), run_id="r"),
    ]
    edit = sanitize_for_resume(history)
    out = edit.messages
    assert [m.parts for m in out] == [(user(),), (TextPart("x"),), (TextPart("y"),)]
    assert all(m.run_id is None for m in out)
    assert out[1] is plain
    assert [c.kind for c in edit.changes] == [
        "stripped_system_prompt",
        "stripped_system_prompt",
        "cleared_run_id",
        "cleared_run_id",
    ]
    assert check_invariants(out, persisted=True) == [
        Violation("consecutive_responses", 2, None, None, "message 2 follows another response")
    ]


def test_sanitize_keeps_identity_when_clean() -> None:
    history = [req(user()), resp(TextPart("x")), req()]
    edit = sanitize_for_resume(history)
    assert not edit.changed
    assert same_objects(edit.messages, history)


@FAST
@given(histories(), messy_histories(max_messages=6))
def test_sanitize_for_resume_strips_what_must_not_be_stored(
    valid: list[CanonicalMessage], messy: list[CanonicalMessage]
) -> None:
    edit = sanitize_for_resume(valid)
    assert check_invariants(edit.messages, persisted=True) == []
    assert user_ids(edit.messages) == user_ids(valid)
    out = sanitize_for_resume(messy).messages
    assert not parts_of(out, SystemPromptPart)
    assert all(m.run_id is None for m in out)
    assert not sanitize_for_resume(out).changed


# --------------------------------------------------------------------------- run_cleanup_loop


def test_cleanup_loop_repairs_everything() -> None:
    history = [
        req(user("a"), ret("ghost")),
        req(user("b")),
        resp(call("x"), call("y")),
        resp(),
        req(ret("x")),
        resp(call("x")),
        resp(TextPart("t")),
    ]
    edit = run_cleanup_loop(history)
    assert check_invariants(edit.messages) == []
    assert edit.changed
    assert {c.kind for c in edit.changes} <= CHANGE_KINDS
    user_texts = [p.content for m in edit.messages for p in m.parts if isinstance(p, UserPromptPart)]
    assert user_texts == ["a", "b"]
    assert not run_cleanup_loop(edit.messages).changed


def test_cleanup_loop_remove_mode() -> None:
    history = [req(user()), resp(call("a")), req(user("again"))]
    edit = run_cleanup_loop(history, dangling="remove")
    assert [m.parts for m in edit.messages] == [(user(), user("again"))]
    assert edit.removed_tool_call_ids == ("a",)


def test_cleanup_loop_noop_on_valid_history() -> None:
    history = [req(user()), resp(call("a")), req(ret("a"))]
    edit = run_cleanup_loop(history)
    assert not edit.changed
    assert same_objects(edit.messages, history)


def test_cleanup_loop_validates_passes() -> None:
    with pytest.raises(ValueError, match="max_passes"):
        run_cleanup_loop([], max_passes=0)
    with pytest.raises(ValueError, match="dangling"):
        run_cleanup_loop([], dangling="drop")  # pyright: ignore[reportArgumentType]


def test_cleanup_loop_respects_max_passes() -> None:
    history = [req(user()), resp(call("a")), resp(), req(ret("ghost"))]
    edit = run_cleanup_loop(history, max_passes=1)
    assert check_invariants(edit.messages) == []  # one pass is enough here
    # removing the dangling call drops its response, which leaves two requests adjacent:
    # a second pass merges them
    history = [req(user()), resp(call("a")), req(user("b"))]
    one = run_cleanup_loop(history, dangling="remove", max_passes=1)
    assert kinds(one.messages) == ["consecutive_requests"]
    full = run_cleanup_loop(history, dangling="remove")
    assert [c.kind for c in full.changes] == ["removed_dangling_call", "merged_requests"]
    assert check_invariants(full.messages) == []


@FAST
@given(messy_histories(), st.sampled_from(["answer", "remove"]))
def test_cleanup_loop_makes_any_history_sendable(messages: list[CanonicalMessage], mode: str) -> None:
    before = snapshot(messages)
    edit = run_cleanup_loop(messages, dangling=mode)  # pyright: ignore[reportArgumentType]
    assert unchanged(messages, before)
    out = edit.messages
    assert check_invariants(out) == []
    # idempotent
    again = run_cleanup_loop(out, dangling=mode)  # pyright: ignore[reportArgumentType]
    assert not again.changed
    assert all(a is b for a, b in zip(again.messages, out, strict=True))
    # no user prompt is lost (same objects, same order)
    assert user_ids(out) == user_ids(messages)
    # no answer that follows a call with its id is lost (ids may be renamed)
    first_call: dict[str, int] = {}
    for index, message in enumerate(messages):
        for part in message.tool_calls:
            first_call.setdefault(part.tool_call_id, index)
    kept = Counter(without_id(p) for m in out for p in m.parts if answer_id(p) is not None)
    removed = set(edit.removed_tool_call_ids)
    for index, message in enumerate(messages):
        for part in message.parts:
            answer = answer_id(part)
            if answer is None:
                continue
            if first_call.get(answer, len(messages)) < index:
                assert kept[without_id(part)] > 0, part
                kept[without_id(part)] -= 1
            elif without_id(part) not in kept or kept[without_id(part)] == 0:
                assert answer in removed  # orphans may go, but are reported
    # no tool call is lost in answer mode
    if mode == "answer":
        assert len(parts_of(out, ToolCallPart)) == len(parts_of(messages, ToolCallPart))
        synthetic = [p for p in parts_of(out, ToolReturnPart) if (harness_mark(p) or {}).get("synthetic")]
        dangling_ids = {c.tool_call_ids for c in edit.changes if c.kind == "answered_dangling_call"}
        assert len(synthetic) == sum(len(ids) for ids in dangling_ids)


@FAST
@given(histories())
def test_cleanup_loop_is_noop_on_valid_histories(messages: list[CanonicalMessage]) -> None:
    for mode in ("answer", "remove"):
        edit = run_cleanup_loop(messages, dangling=mode)
        assert not edit.changed
        assert all(a is b for a, b in zip(edit.messages, messages, strict=True))
