"""Pins: marking parts, finding lost ones, and the invariant guard refusing edits that lose them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import harness
from harness.core import (
    CanonicalMessage,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UnknownPart,
    UserPromptPart,
    harness_mark,
    is_pinned,
    lost_pins,
    pin,
    pin_reason,
    pinned_call_ids,
    pinned_parts,
    replace,
    with_harness_mark,
)
from harness.errors import CapabilityError, MessageError
from harness.history.guard import check_edit, guard_edit


def history() -> list[CanonicalMessage]:
    return [
        CanonicalMessage.request(UserPromptPart("fix the parser; never touch tests/")),
        CanonicalMessage.response(ToolCallPart(tool_call_id="c1", tool_name="read", args={"path": "a.py"})),
        CanonicalMessage.request(ToolReturnPart(tool_call_id="c1", tool_name="read", content="print('a')")),
        CanonicalMessage.response(TextPart("done")),
        CanonicalMessage.request(UserPromptPart("next")),
    ]


def test_pin_marks_a_part_and_keeps_its_other_metadata() -> None:
    part = UserPromptPart("task", metadata={"mine": 1})
    pinned = harness.pin(part, "task")
    assert harness.is_pinned(pinned)
    assert not is_pinned(part)
    assert pinned.metadata == {"mine": 1, "harness": {"pinned": "task"}}
    assert pin_reason(pinned) == "task"
    assert pin(pinned, "other") is pinned  # already pinned: unchanged, the first reason stays


def test_a_metadata_mark_pins_and_true_reads_as_user() -> None:
    part = UserPromptPart("x", metadata={"harness": {"pinned": True}})
    assert is_pinned(part)
    assert pin_reason(part) == "user"
    assert not is_pinned(UserPromptPart("x", metadata={"harness": {"pinned": False}}))
    assert not is_pinned(UserPromptPart("x", metadata=["not", "a", "mapping"]))


def test_pinning_a_message_pins_every_known_part() -> None:
    message = CanonicalMessage.request(
        UserPromptPart("a"),
        ToolReturnPart(tool_call_id="c1", tool_name="t", content="r"),
        UnknownPart("future-part", data={"x": 1}),
    )
    pinned = pin(message)
    assert [is_pinned(p) for p in pinned.parts] == [True, True, False]
    assert [(mi, pi) for mi, pi, _ in pinned_parts([message, pinned])] == [(1, 0), (1, 1)]
    assert pinned_call_ids([pinned]) == frozenset({"c1"})


def test_unknown_parts_and_non_mapping_metadata_cannot_be_pinned() -> None:
    with pytest.raises(MessageError, match="UnknownPart"):
        pin(UnknownPart("future-part", data={}))
    with pytest.raises(MessageError, match="not a mapping"):
        pin(UserPromptPart("x", metadata=[1]))


def test_lost_pins_sees_drops_and_changes_but_allows_moves_and_new_marks() -> None:
    before = history()
    before[0] = pin(before[0], "task")
    pinned_part = before[0].parts[0]
    assert isinstance(pinned_part, UserPromptPart)
    assert lost_pins(before, before) == []
    assert lost_pins(before, before[1:]) == [pinned_part]  # dropped
    changed = [replace(before[0], parts=(replace(pinned_part, content="other"),)), *before[1:]]
    assert lost_pins(before, changed) == [pinned_part]
    # moved into a later request and marked by the capability that moved it: kept
    moved_part = with_harness_mark(pinned_part, preserved_by="window")
    moved = [*before[1:4], CanonicalMessage.request(moved_part, *before[4].parts)]
    assert lost_pins(before, moved) == []
    assert harness_mark(moved_part) == {"pinned": "task", "preserved_by": "window"}


def test_two_equal_pins_need_two_copies() -> None:
    part = pin(UserPromptPart("same"))
    before = [
        CanonicalMessage.request(part),
        CanonicalMessage.response(TextPart("ok")),
        CanonicalMessage.request(part),
    ]
    assert lost_pins(before, [before[1], before[2]]) == [part]


def test_the_guard_rejects_an_edit_that_loses_a_pin_and_names_it() -> None:
    before = history()
    before[2] = pin(before[2], "user")
    result = before[2].parts[0]
    assert isinstance(result, ToolReturnPart)
    cleared = replace(before[2], parts=(replace(result, content="[cleared]"),))
    after = [*before[:2], cleared, *before[3:]]
    check = check_edit(before, after)  # same shape: the fast path must still see the pin
    assert not check.ok
    assert check.problems == (
        "lost_pinned_part: a tool-return part pinned by 'user' (tool call 'c1') was changed or dropped: "
        "\"print('a')\"",
    )
    with pytest.raises(CapabilityError, match="lost_pinned_part") as info:
        guard_edit(before, after, "clearer")
    assert info.value.capability == "clearer"
    # an edit of unpinned parts passes
    other = replace(before[3], parts=(TextPart("shorter"),))
    assert check_edit(before, [*before[:3], other, before[4]]).ok


@st.composite
def pinned_histories(draw: st.DrawFn) -> list[CanonicalMessage]:
    messages: list[CanonicalMessage] = []
    for i in range(draw(st.integers(1, 8))):
        prompt = UserPromptPart(f"prompt {i}")
        messages.append(CanonicalMessage.request(pin(prompt) if draw(st.booleans()) else prompt))
        messages.append(CanonicalMessage.response(TextPart(f"answer {i}")))
    messages.append(CanonicalMessage.request(UserPromptPart("last")))
    return messages


@settings(max_examples=150, deadline=None)
@given(pinned_histories(), st.data())
def test_property_an_edit_keeps_every_pin_exactly_when_lost_pins_is_empty(
    messages: list[CanonicalMessage], data: st.DataObject
) -> None:
    keep = data.draw(st.lists(st.booleans(), min_size=len(messages), max_size=len(messages)))
    keep[-1] = True
    after = [m for m, kept in zip(messages, keep, strict=True) if kept]
    dropped_pins = [
        p for m, kept in zip(messages, keep, strict=True) if not kept for p in m.parts if is_pinned(p)
    ]
    lost = lost_pins(messages, after)
    assert len(lost) == len(dropped_pins)
    assert len(check_edit(messages, after).lost_pins) == len(dropped_pins)
