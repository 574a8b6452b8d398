"""Property tests of harness.interop.pydantic_ai: lossless conversion, valid processed histories."""

from __future__ import annotations

import pytest

pytest.importorskip("pydantic_ai")

from harness_clear_tool_results import ClearToolResults
from harness_sliding_window import SlidingWindow
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_ai import messages as pai

from harness.core import CanonicalMessage, UserPromptPart
from harness.history import check_invariants
from harness.interop.pydantic_ai import (
    MessageConverter,
    as_history_processor,
    messages_from_pydantic_ai,
    messages_to_pydantic_ai,
)
from harness.testing.strategies import histories


@settings(max_examples=100, deadline=None)
@given(histories())
def test_harness_to_pydantic_ai_and_back_is_lossless(history: list[CanonicalMessage]) -> None:
    theirs = messages_to_pydantic_ai(history)
    assert [m.kind for m in theirs] == [m.kind for m in history]
    assert messages_from_pydantic_ai(theirs) == history
    # A fresh pydantic-ai side round trip changes nothing either.
    again = list(
        pai.ModelMessagesTypeAdapter.validate_python(pai.ModelMessagesTypeAdapter.dump_python(theirs))
    )
    assert messages_from_pydantic_ai(again) == history


@settings(max_examples=30, deadline=None)
@given(histories(min_messages=1))
def test_cached_converter_agrees_with_the_plain_functions(history: list[CanonicalMessage]) -> None:
    theirs = messages_to_pydantic_ai(history)
    converter = MessageConverter()
    first = converter.to_canonical(theirs)
    assert first == history
    assert converter.to_canonical(theirs) == history
    assert all(a is b for a, b in zip(converter.to_pydantic_ai(first), theirs, strict=True))


def _user_prompts(messages: list[CanonicalMessage]) -> list[str]:
    return [p.text for m in messages for p in m.parts if isinstance(p, UserPromptPart)]


@settings(max_examples=40, deadline=None)
@given(histories(min_messages=1, max_messages=41), st.integers(3, 9), st.integers(0, 3))
async def test_processed_history_keeps_calls_with_answers_and_the_request_being_sent(
    history: list[CanonicalMessage], window: int, keep_pairs: int
) -> None:
    theirs = messages_to_pydantic_ai(history)
    stack = [
        ClearToolResults(max_messages=window, keep_pairs=keep_pairs),
        SlidingWindow(max_messages=window, keep_messages=window - 2),
    ]
    processed = await as_history_processor(stack).process(theirs)
    sent = messages_from_pydantic_ai(processed.sent)
    assert check_invariants(sent) == []
    assert processed.sent[-1] is theirs[-1] or sent[-1].parts == history[-1].parts
    # The task (the first user prompt) is never lost.
    assert _user_prompts(history)[0] in _user_prompts(sent)
    if not processed.changed:
        assert all(a is b for a, b in zip(processed.sent, theirs, strict=True))
