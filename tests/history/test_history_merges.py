"""Tests of harness.history.merges: adjacent requests/responses and the trailing request."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import (
    CanonicalMessage,
    Part,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from harness.errors import MessageError
from harness.history import merge_consecutive_requests, merge_consecutive_responses, merge_trailing_request
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


FAST = settings(max_examples=150, deadline=None)


def snapshot(messages: Sequence[CanonicalMessage]) -> list[tuple[int, CanonicalMessage]]:
    return [(id(m), m) for m in messages]


def unchanged(messages: Sequence[CanonicalMessage], before: list[tuple[int, CanonicalMessage]]) -> bool:
    return len(messages) == len(before) and all(
        id(m) == ident and m == copy for m, (ident, copy) in zip(messages, before, strict=True)
    )


# --------------------------------------------------------------------------- consecutive merges


def test_merge_consecutive_requests_keeps_every_part_and_first_fields() -> None:
    a = req(user("a"), run_id="r1", instructions="first")
    b = req(ret("x"), run_id="r2")
    c = req(user("c"))
    r = resp(TextPart("t"))
    edit = merge_consecutive_requests([a, b, c, r, req(user("d"))])
    out = edit.messages
    assert len(out) == 3
    assert out[0].parts == (*a.parts, *b.parts, *c.parts)
    assert (out[0].run_id, out[0].instructions) == ("r1", "first")
    assert out[1] is r
    assert [(c.kind, c.message_index, c.tool_call_ids) for c in edit.changes] == [("merged_requests", 0, ())]


def test_merge_consecutive_responses() -> None:
    first = resp(ThoughtPart("t"), model_name="m1")
    second = resp(call("a"), model_name="m2")
    edit = merge_consecutive_responses([req(user()), first, second, req(ret("a"))])
    out = edit.messages
    assert len(out) == 3
    assert out[1].parts == (ThoughtPart("t"), call("a"))
    assert out[1].model_name == "m1"
    assert [(c.kind, c.message_index) for c in edit.changes] == [("merged_responses", 1)]
    assert not merge_consecutive_responses(out).changed


# --------------------------------------------------------------------------- merge_trailing_request


def test_merge_trailing_request_merges() -> None:
    history = [req(user("a")), resp(TextPart("b")), req(user("interrupted"), run_id="old")]
    new = req(user("new"), run_id="new", instructions="inst")
    edit = merge_trailing_request(history, new)
    out = edit.messages
    assert len(out) == 3
    assert out[0] is history[0]
    assert out[1] is history[1]
    assert out[2].parts == (user("interrupted"), user("new"))
    assert (out[2].run_id, out[2].instructions) == ("new", "inst")
    assert edit.changes[0].kind == "merged_trailing_request"
    assert len(history) == 3  # input untouched


def test_merge_trailing_request_appends() -> None:
    new = req(user("new"))
    for history in ([], [req(user()), resp(TextPart("x"))]):
        edit = merge_trailing_request(history, new)
        assert edit.messages[-1] is new
        assert len(edit.messages) == len(history) + 1
        assert edit.changes[0].kind == "appended_request"


def test_merge_trailing_request_rejects_response() -> None:
    with pytest.raises(MessageError, match="new_request must be a request"):
        merge_trailing_request([], resp(TextPart("x")))


@FAST
@given(messy_histories(max_messages=8), st.lists(st.builds(UserPromptPart, st.text(max_size=5)), max_size=3))
def test_merge_trailing_request_keeps_every_part(
    messages: list[CanonicalMessage], new_parts: list[UserPromptPart]
) -> None:
    new_request = CanonicalMessage.request(*new_parts)
    before = snapshot(messages)
    edit = merge_trailing_request(messages, new_request)
    assert unchanged(messages, before)
    out = edit.messages
    assert [id(p) for m in out for p in m.parts] == [id(p) for m in [*messages, new_request] for p in m.parts]
    assert out[-1].is_request
    assert len(out) == len(messages) + (0 if messages and messages[-1].is_request else 1)
    assert all(a is b for a, b in zip(out[:-1], messages, strict=False))
