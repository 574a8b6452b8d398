"""Tests of harness.history.changes: HistoryEdit and changed_span."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import CanonicalMessage, UserPromptPart
from harness.history import HistoryEdit, changed_span
from harness.testing.strategies import histories


def user(text: str = "hi") -> UserPromptPart:
    return UserPromptPart(text)


SMALL = settings(max_examples=200, deadline=None)


# --------------------------------------------------------------------------- HistoryEdit


def test_history_edit_defaults() -> None:
    edit = HistoryEdit([])
    assert not edit.changed
    assert edit.tokens_reclaimed == 0
    assert edit.removed_tool_call_ids == () == edit.cleared_tool_call_ids


# --------------------------------------------------------------------------- changed_span (properties)


@SMALL
@given(histories(max_messages=30), st.data())
def test_changed_span_brackets_every_difference(
    messages: list[CanonicalMessage], data: st.DataObject
) -> None:
    edited = list(messages)
    for _ in range(data.draw(st.integers(0, 3))):
        if not edited:
            break
        index = data.draw(st.integers(0, len(edited) - 1))
        action = data.draw(st.sampled_from(["replace", "delete", "insert"]))
        if action == "replace":
            edited[index] = CanonicalMessage.user(f"replaced {index}")
        elif action == "delete":
            del edited[index]
        else:
            edited.insert(index, CanonicalMessage.user(f"inserted {index}"))
    start, stop = changed_span(messages, edited)
    assert 0 <= start <= stop <= len(edited)
    assert edited[:start] == messages[:start]
    tail = len(edited) - stop
    assert tail <= len(messages) - start
    assert edited[stop:] == messages[len(messages) - tail :]
    # the window is tight: widening the shared prefix or suffix by one would be wrong
    if start < min(len(messages), len(edited)) and start < stop:
        assert edited[start] != messages[start]
    if edited == messages:
        assert start == stop == len(edited)
