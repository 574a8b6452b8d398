"""harness.interop.pydantic_ai: harness values pydantic-ai has no field for survive in its metadata."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import messages as pai

from harness.core import (
    CanonicalMessage,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    UserPromptPart,
    harness_mark,
    with_harness_mark,
)
from harness.interop.pydantic_ai import STASH_KEY, messages_from_pydantic_ai, messages_to_pydantic_ai

ADAPTER = pai.ModelMessagesTypeAdapter
STAMP = datetime(2025, 3, 4, 5, 6, 7, 890000, tzinfo=UTC)


def test_harness_only_values_survive_pydantic_ai() -> None:
    history = [
        CanonicalMessage.request(
            SystemPromptPart("sys"),
            with_harness_mark(UserPromptPart("task"), preserved_by="sliding_window"),
            RetryPromptPart("retry without a call"),
        ),
        CanonicalMessage.response(
            with_harness_mark(TextPart("text"), kind="note"),
            ThoughtPart("thinking", metadata={"k": 1}),
            ToolCallPart(tool_call_id="c1", tool_name="read", args={"p": 1}, metadata={"m": 2}),
        ),
        CanonicalMessage.request(RetryPromptPart("bad args", tool_name="read", tool_call_id="c1")),
    ]
    theirs = messages_to_pydantic_ai(history)
    assert all(isinstance(m, (pai.ModelRequest, pai.ModelResponse)) for m in theirs)
    assert STASH_KEY in (theirs[0].metadata or {})
    back = messages_from_pydantic_ai(theirs)
    assert back == history
    assert harness_mark(back[0].parts[1]) == {"preserved_by": "sliding_window"}
    # The stash survives pydantic-ai's own JSON round trip (it is plain metadata).
    assert messages_from_pydantic_ai(list(ADAPTER.validate_json(ADAPTER.dump_json(theirs)))) == history


def test_a_stash_entry_is_ignored_once_pydantic_ai_changed_the_part() -> None:
    marked = with_harness_mark(UserPromptPart("task"), preserved_by="sliding_window")
    (theirs,) = messages_to_pydantic_ai([CanonicalMessage.request(SystemPromptPart("s"), marked)])
    assert isinstance(theirs, pai.ModelRequest)
    edited = pai.ModelRequest(
        parts=[theirs.parts[0], pai.UserPromptPart("rewritten", timestamp=STAMP)], metadata=theirs.metadata
    )
    (back,) = messages_from_pydantic_ai([edited])
    prompt = back.parts[1]
    assert isinstance(prompt, UserPromptPart)
    assert prompt.content == "rewritten"
    assert harness_mark(prompt) is None
    assert back.metadata is None
