"""OpenAI Chat Completions messages read by harness.wire.messages_from_openai."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness.core import (
    CanonicalMessage,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UnknownPart,
    UserPromptPart,
)
from harness.errors import WireFormatError
from harness.history import check_invariants
from harness.wire import dump_messages, load_messages, messages_from_openai

# What the OpenAI SDK's ``message.model_dump()`` gives for a tool-calling turn: every
# optional key is present, most of them null.
SDK_ASSISTANT: dict[str, Any] = {
    "role": "assistant",
    "content": None,
    "refusal": None,
    "audio": None,
    "function_call": None,
    "annotations": [],
    "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}},
        {"id": "call_2", "type": "function", "function": {"name": "read", "arguments": '{"path":"a.py"}'}},
    ],
}


def test_a_tool_calling_conversation_becomes_alternating_canonical_messages() -> None:
    messages = messages_from_openai(
        [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "list the files"},
            SDK_ASSISTANT,
            {"role": "tool", "tool_call_id": "call_1", "content": "a.py"},
            {"role": "tool", "tool_call_id": "call_2", "content": "x = 1"},
            {"role": "assistant", "content": "One file, a.py."},
        ]
    )
    assert messages == [
        CanonicalMessage.request(SystemPromptPart("You are terse."), UserPromptPart("list the files")),
        CanonicalMessage.response(
            ToolCallPart(
                tool_call_id="call_1",
                tool_name="bash",
                args='{"command": "ls"}',
                extra={"message": {"annotations": []}},
            ),
            ToolCallPart(
                tool_call_id="call_2",
                tool_name="read",
                args='{"path":"a.py"}',
                extra={"message": {"annotations": []}},
            ),
        ),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="call_1", tool_name="bash", content="a.py"),
            ToolReturnPart(tool_call_id="call_2", tool_name="read", content="x = 1"),
        ),
        CanonicalMessage.response(TextPart("One file, a.py.")),
    ]
    assert check_invariants(messages) == []
    # the arguments string is kept exactly as the model wrote it
    assert [call.args for call in messages[1].tool_calls] == ['{"command": "ls"}', '{"path":"a.py"}']
    assert messages[1].tool_calls[0].args_as_dict() == {"command": "ls"}


def test_no_assistant_turn_becomes_a_user_prompt_and_no_repr_becomes_text() -> None:
    """The bug: role-shaped messages were read as legacy ``{"content": ...}`` prompts."""
    messages = messages_from_openai(
        [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
        ]
    )
    assert [m.kind for m in messages] == ["request", "response"]
    assert messages[1].parts == (TextPart("hello"),)
    assert "{'type'" not in json.dumps(json.loads(dump_messages(messages)))


def test_consecutive_messages_of_one_side_are_joined() -> None:
    messages = messages_from_openai(
        [
            {"role": "user", "content": "one"},
            {"role": "user", "content": "two"},
            {"role": "assistant", "content": "thinking aloud"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c", "type": "function", "function": {"name": "t", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c", "content": "ok"},
            {"role": "user", "content": "thanks"},
            {"role": "system", "content": "late instruction"},
        ]
    )
    assert [m.kind for m in messages] == ["request", "response", "request"]
    assert messages[0].parts == (UserPromptPart("one"), UserPromptPart("two"))
    assert messages[1].parts == (
        TextPart("thinking aloud"),
        ToolCallPart(tool_call_id="c", tool_name="t", args="{}"),
    )
    assert messages[2].parts == (
        ToolReturnPart(tool_call_id="c", tool_name="t", content="ok"),
        UserPromptPart("thanks"),
        SystemPromptPart("late instruction"),
    )
    assert check_invariants(messages) == []


def test_every_key_without_a_slot_is_kept() -> None:
    (request, response) = messages_from_openai(
        [
            {"role": "developer", "content": [{"type": "text", "text": "rules"}]},
            {
                "role": "user",
                "name": "alice",
                "content": [
                    {"type": "text", "text": "see"},
                    {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "high"}},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
                    {"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}},
                    {"type": "file", "file": {"file_id": "file-1"}},
                ],
            },
            {
                "role": "assistant",
                "reasoning_content": "let me think",
                "content": [{"type": "text", "text": "Sure."}, {"type": "refusal", "refusal": "Not that."}],
                "refusal": "No.",
                "audio": {"id": "audio_1"},
                "tool_calls": [
                    {
                        "id": "call_9",
                        "type": "function",
                        "index": 0,
                        "function": {"name": "f", "arguments": '{"a": 1}', "strict": True},
                    },
                    {"id": "call_10", "type": "custom", "custom": {"name": "grammar", "input": "raw text"}},
                ],
            },
        ]
    )
    assert request.parts == (
        SystemPromptPart("rules", extra={"message": {"role": "developer"}}),
        UserPromptPart(
            (
                "see",
                {"kind": "image-url", "url": "https://x/y.png", "vendor_metadata": {"detail": "high"}},
                {"kind": "binary", "media_type": "image/png", "data": "iVBO"},
                {"kind": "binary", "media_type": "audio/wav", "data": "UklG"},
                {"type": "file", "file": {"file_id": "file-1"}},
            ),
            extra={"message": {"name": "alice"}},
        ),
    )
    kept = {"message": {"audio": {"id": "audio_1"}}}
    assert response.parts == (
        ThoughtPart("let me think", extra={"field": "reasoning_content", **kept}),
        TextPart("Sure.", extra=kept),
        TextPart("Not that.", extra={"refusal": True, **kept}),
        TextPart("No.", extra={"refusal": True, **kept}),
        ToolCallPart(
            tool_call_id="call_9",
            tool_name="f",
            args='{"a": 1}',
            extra={"index": 0, "function": {"strict": True}, **kept},
        ),
        ToolCallPart(
            tool_call_id="call_10", tool_name="grammar", args="raw text", extra={"type": "custom", **kept}
        ),
    )


def test_content_null_and_empty_messages() -> None:
    messages = messages_from_openai(
        [
            {"role": "user", "content": None},
            {"role": "assistant", "content": None},
        ]
    )
    # nothing is invented, nothing is lost: the empty assistant turn stays, and the
    # invariant report says what a provider would say about it
    assert messages == [CanonicalMessage.request(UserPromptPart(())), CanonicalMessage.response(TextPart(""))]
    assert [v.kind for v in check_invariants(messages)] == ["empty_response"]


def test_tool_results_keep_content_and_name_the_called_tool() -> None:
    (_, _, request) = messages_from_openai(
        [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "grep", "arguments": ""}}
                ],
            },
            {"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": "match"}]},
            {"role": "tool", "tool_call_id": "unknown", "name": "named", "content": "x"},
        ]
    )
    assert request.parts == (
        ToolReturnPart(tool_call_id="a", tool_name="grep", content=[{"type": "text", "text": "match"}]),
        ToolReturnPart(tool_call_id="unknown", tool_name="named", content="x"),
    )


def test_deprecated_function_calls_get_matching_made_up_ids() -> None:
    messages = messages_from_openai(
        [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": None, "function_call": {"name": "weather", "arguments": "{}"}},
            {"role": "function", "name": "weather", "content": "sunny"},
            {"role": "assistant", "content": "Sunny."},
        ]
    )
    (call,) = messages[1].tool_calls
    assert call.extra["synthesized_id"] is True
    (answer,) = messages[2].parts
    assert isinstance(answer, ToolReturnPart)
    assert (answer.tool_call_id, answer.tool_name, answer.content) == (call.tool_call_id, "weather", "sunny")
    assert check_invariants(messages) == []


def test_unknown_tool_call_and_content_types_are_kept_whole() -> None:
    (_, response) = messages_from_openai(
        [
            {"role": "user", "content": "x"},
            {
                "role": "assistant",
                "content": [{"type": "output_audio", "id": "au"}],
                "tool_calls": [{"id": "m1", "type": "mcp", "mcp": {"server": "s"}}],
            },
        ]
    )
    assert response.parts == (
        UnknownPart(
            "openai-output_audio",
            data={"type": "output_audio", "id": "au", "part_kind": "openai-output_audio"},
        ),
        UnknownPart(
            "openai-mcp", data={"id": "m1", "type": "mcp", "mcp": {"server": "s"}, "part_kind": "openai-mcp"}
        ),
    )


def test_converted_histories_survive_the_wire_format() -> None:
    messages = messages_from_openai(
        [
            {
                "role": "user",
                "name": "bob",
                "content": [{"type": "text", "text": "a", "cache_control": {"type": "x"}}],
            },
            SDK_ASSISTANT,
            {"role": "tool", "tool_call_id": "call_1", "content": "1"},
            {"role": "tool", "tool_call_id": "call_2", "content": "2"},
        ]
    )
    assert load_messages(dump_messages(messages)) == messages


@pytest.mark.parametrize(
    ("messages", "index", "field", "fragment"),
    [
        ([{"content": "no role"}], 0, "role", "missing required field"),
        ([{"kind": "request", "parts": []}], 0, "role", "try format 'pydantic-ai'"),
        ([{"role": "user", "content": "ok"}, {"role": "robot", "content": "x"}], 1, "role", "unknown role"),
        ([{"role": "tool", "content": "x"}], 0, "tool_call_id", "non-empty string"),
        (
            [{"role": "assistant", "tool_calls": [{"type": "function", "function": {}}]}],
            0,
            "tool_calls[0].id",
            "",
        ),
        (
            [{"role": "assistant", "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]}],
            0,
            "tool_calls[0].function.name",
            "missing",
        ),
        ([{"role": "system", "content": [{"type": "image_url"}]}], 0, "content[0]", "text only"),
        ([{"role": "user", "content": 3}], 0, "content", "a string, an array or null"),
        (["not an object"], 0, None, "must be a JSON object"),
    ],
)
def test_errors_name_the_format_the_message_and_the_field(
    messages: list[Any], index: int, field: str | None, fragment: str
) -> None:
    with pytest.raises(WireFormatError) as caught:
        messages_from_openai(messages)
    error = caught.value
    assert (error.format, error.message_index, error.field) == ("openai", index, field)
    assert fragment in str(error)
    assert str(error).startswith(f"openai format, message {index}")
