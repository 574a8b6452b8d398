"""Telling history formats apart (harness.wire.detect_format) and refusing what is none of them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness.core import CanonicalMessage, SystemPromptPart, TextPart, ToolCallPart, UserPromptPart
from harness.errors import WireFormatError
from harness.wire import (
    FORMAT_CHOICES,
    HISTORY_FORMATS,
    detect_format,
    dump_messages,
    load_history,
    load_messages,
    load_messages_and_thoughts,
    read_history,
)

OPENAI: list[dict[str, Any]] = [
    {"role": "user", "content": "go"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    },
    {"role": "tool", "tool_call_id": "c", "content": "ok"},
]
ANTHROPIC: list[dict[str, Any]] = [
    {"role": "user", "content": "go"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "f", "input": {}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c", "content": "ok"}]},
]
PYDANTIC_AI = json.loads(
    dump_messages([CanonicalMessage.user("go"), CanonicalMessage.response(TextPart("ok"))])
)


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (OPENAI, "openai"),
        (ANTHROPIC, "anthropic"),
        (PYDANTIC_AI, "pydantic-ai"),
        ([{"content": "legacy"}, {"thought": "t"}], "pydantic-ai"),
        ([], "pydantic-ai"),
        ([{"role": "user", "content": "plain"}], "openai"),  # reads the same either way
        ({"model": "gpt-4o", "messages": OPENAI}, "openai"),
        (
            {"model": "claude", "system": "be brief", "messages": [{"role": "user", "content": "hi"}]},
            "anthropic",
        ),
        ([{"role": "developer", "content": "rules"}], "openai"),
        (
            [{"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"}]}],
            "anthropic",
        ),
        (
            [{"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "u"}}]}],
            "anthropic",
        ),
        ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}], "openai"),
        ([{"type": "user", "message": {"role": "user", "content": "hi"}, "uuid": "u"}], "openai"),
        (
            [
                {"type": "user", "message": {"role": "user", "content": "hi"}},
                {
                    "type": "assistant",
                    "message": {"role": "assistant", "content": [], "stop_reason": "end_turn"},
                },
            ],
            "anthropic",
        ),
    ],
)
def test_detect_format(document: Any, expected: str) -> None:
    assert detect_format(document) == expected
    assert read_history(json.dumps(document)).format == expected


def test_the_formats_are_named_in_one_place() -> None:
    assert HISTORY_FORMATS == ("pydantic-ai", "openai", "anthropic")
    assert FORMAT_CHOICES == ("auto", "pydantic-ai", "openai", "anthropic")


@pytest.mark.parametrize(
    ("document", "seen"),
    [
        ([{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}], "OpenAI Responses API items"),
        ([{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}], "OpenAI Responses API"),
        ([{"role": "user", "parts": [{"text": "hi"}]}], "Google Gemini contents"),
        ([{"role": "model", "content": "x"}], "Google Gemini contents"),
        ([{"type": "human", "data": {"content": "hi"}}], "LangChain messages"),
        ([{"lc": 1, "type": "constructor", "id": ["x"], "kwargs": {}}], "LangChain messages"),
        (
            [{"text": "hi", "speaker": "me"}],
            "an object with 'text', 'speaker': not a message of any accepted format",
        ),
        ([42], "a JSON number: not a message of any accepted format"),
    ],
)
def test_anything_else_is_an_error_saying_what_was_seen_and_what_is_accepted(
    document: Any, seen: str
) -> None:
    with pytest.raises(WireFormatError) as caught:
        load_history(json.dumps(document))
    message = str(caught.value)
    assert seen in message
    assert "accepted formats: pydantic-ai (harness's wire format" in message
    assert "openai (Chat Completions messages)" in message
    assert "anthropic (Messages API messages, Claude Code transcripts)" in message
    assert (caught.value.message_index, caught.value.format) == (0, None)


def test_mixed_formats_are_an_error_naming_both() -> None:
    with pytest.raises(WireFormatError) as caught:
        load_history(json.dumps([*OPENAI, ANTHROPIC[1]]))
    message = str(caught.value)
    assert "openai messages (message 1: a 'tool_calls' key)" in message
    assert "anthropic messages (message 3: a 'tool_use' block)" in message
    assert "pass a format" in message
    with pytest.raises(WireFormatError, match=r"pydantic-ai messages .* and role-shaped chat messages"):
        load_history(json.dumps([*PYDANTIC_AI, {"role": "user", "content": "x"}]))


def test_a_given_format_wins_over_detection() -> None:
    plain = json.dumps([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}])
    assert read_history(plain, format="anthropic").format == "anthropic"
    assert load_history(plain, format="anthropic") == [
        CanonicalMessage.request(SystemPromptPart("s"), UserPromptPart("u"))
    ]
    with pytest.raises(WireFormatError) as caught:
        load_history(json.dumps(OPENAI), format="anthropic")
    assert (caught.value.format, caught.value.message_index, caught.value.field) == ("anthropic", 2, "role")
    with pytest.raises(WireFormatError) as caught:
        load_history(json.dumps(PYDANTIC_AI), format="openai")
    assert "try format 'pydantic-ai'" in str(caught.value)
    with pytest.raises(WireFormatError, match="unknown format 'csv'"):
        load_history("[]", format="csv")  # pyright: ignore[reportArgumentType]


def test_the_legacy_form_never_applies_to_a_dict_with_a_role() -> None:
    """The bug: ``[{"role": "assistant", "content": [...]}]`` became a user prompt of reprs."""
    for loader in (load_messages, lambda text: load_messages_and_thoughts(text)[0]):
        for item in (
            {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
            {"role": "user", "thought": "x"},
            {"type": "user", "message": {"role": "user", "content": "hi"}},
        ):
            with pytest.raises(WireFormatError) as caught:
                loader(json.dumps([item]))
            assert caught.value.message_index == 0
            assert "load_history" in str(caught.value)
    # loading through the format-aware reader gives the right side instead
    (response,) = load_history('[{"role": "assistant", "content": [{"type": "text", "text": "hi"}]}]')
    assert response.parts == (TextPart("hi"),)


def test_pydantic_ai_errors_name_the_format_line_and_message() -> None:
    lines = "\n".join(
        json.dumps(item)
        for item in [*PYDANTIC_AI, {"kind": "response", "parts": [{"part_kind": "tool-call"}]}]
    )
    with pytest.raises(WireFormatError) as caught:
        load_history(lines)
    error = caught.value
    assert (error.format, error.line, error.message_index, error.part_index) == ("pydantic-ai", 3, 2, 0)
    assert str(error).startswith("pydantic-ai format, line 3, message 2, part 0")
    with pytest.raises(WireFormatError, match="read it as 'anthropic'"):
        load_history(json.dumps({"system": "s", "messages": PYDANTIC_AI}))


def test_a_request_body_reads_its_system_prompt() -> None:
    body = {"system": [{"type": "text", "text": "rules"}], "messages": ANTHROPIC, "max_tokens": 10}
    messages = load_history(json.dumps(body))
    assert messages[0].parts[0] == SystemPromptPart("rules")
    assert isinstance(messages[1].parts[0], ToolCallPart)
