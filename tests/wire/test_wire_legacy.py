"""Legacy history entries in harness.wire: ``{"content": ...}`` and ``{"thought": ...}``."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from harness.core import CanonicalMessage, TextPart, ThoughtPart, UserPromptPart
from harness.errors import WireFormatError
from harness.wire import dump_messages, load_messages, load_messages_and_thoughts


def test_legacy_entries() -> None:
    doc = [
        {"content": "hello"},
        {"thought": "thinking..."},
        {"content": ["a", {"kind": "image-url", "url": "u"}], "origin": "user"},
        {"kind": "response", "parts": [{"part_kind": "text", "content": "hi"}]},
        {"thought": "second"},
    ]
    loaded = load_messages(json.dumps(doc))
    assert loaded == [
        CanonicalMessage.user("hello"),
        CanonicalMessage.response(ThoughtPart("thinking...")),
        CanonicalMessage.request(
            UserPromptPart(("a", {"kind": "image-url", "url": "u"})), extra={"origin": "user"}
        ),
        CanonicalMessage.response(TextPart("hi")),
        CanonicalMessage.response(ThoughtPart("second")),
    ]
    # other keys of a legacy entry are read like a message's own fields
    (stamped,) = load_messages(
        '[{"thought": "t", "timestamp": "2024-01-01T00:00:00Z", "metadata": {"a": 1}}]'
    )
    assert stamped.timestamp == datetime(2024, 1, 1, tzinfo=UTC)
    assert stamped.metadata == {"a": 1}
    assert load_messages(dump_messages([stamped])) == [stamped]
    messages_only, thoughts = load_messages_and_thoughts(json.dumps(doc))
    assert thoughts == ["thinking...", "second"]
    assert messages_only == [loaded[0], loaded[2], loaded[3]]
    # legacy entries are migrated on dump: the written form is the current one
    assert all("kind" in item for item in json.loads(dump_messages(loaded)))


def test_legacy_thought_errors_in_thoughts_mode_name_the_location() -> None:
    with pytest.raises(WireFormatError) as caught:
        load_messages_and_thoughts('[{"content": "x"}, {"thought": null}]')
    assert (caught.value.message_index, caught.value.field) == (1, "thought")
