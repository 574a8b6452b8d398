"""Anthropic Messages API messages read by harness.wire.messages_from_anthropic."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from harness.core import (
    CanonicalMessage,
    Part,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UnknownPart,
    Usage,
    UserPromptPart,
)
from harness.errors import WireFormatError
from harness.history import check_invariants
from harness.wire import dump_messages, load_messages, messages_from_anthropic

RESPONSE: dict[str, Any] = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 10,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 5,
        "output_tokens": 7,
        "service_tier": "standard",
    },
    "content": [
        {"type": "thinking", "thinking": "I should look.", "signature": "EqQB"},
        {"type": "redacted_thinking", "data": "opaque=="},
        {"type": "text", "text": "Looking.", "citations": [{"type": "char_location", "cited_text": "c"}]},
        {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "false"}},
    ],
}


def extra(part: Part) -> Mapping[str, Any]:
    """The ``extra`` of a modelled part."""
    assert not isinstance(part, UnknownPart)
    return part.extra


def test_blocks_map_to_parts_and_the_response_fields_fill_the_message() -> None:
    messages = messages_from_anthropic(
        [
            {"role": "user", "content": "fix it"},
            RESPONSE,
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "is_error": True,
                        "content": [{"type": "text", "text": "exit 1"}],
                    },
                    {"type": "text", "text": "try again"},
                ],
            },
            {"role": "assistant", "content": "Done."},
        ],
        system="Be brief.",
    )
    assert messages[0] == CanonicalMessage.request(SystemPromptPart("Be brief."), UserPromptPart("fix it"))
    kept = {"message": {"type": "message"}}
    assert messages[1] == CanonicalMessage.response(
        ThoughtPart("I should look.", signature="EqQB", provider_name="anthropic", extra=kept),
        ThoughtPart(
            "", signature="opaque==", provider_name="anthropic", extra={"id": "redacted_thinking", **kept}
        ),
        TextPart("Looking.", extra={"citations": [{"type": "char_location", "cited_text": "c"}], **kept}),
        ToolCallPart(tool_call_id="toolu_1", tool_name="bash", args={"command": "false"}, extra=kept),
        model_name="claude-sonnet-4-5",
        provider_name="anthropic",
        provider_response_id="msg_01",
        finish_reason="tool_call",
        usage=Usage(115, 7, cached_tokens=100, cache_write_tokens=5, extra={"service_tier": "standard"}),
        extra={"provider_details": {"finish_reason": "tool_use"}},
    )
    assert messages[2] == CanonicalMessage.request(
        ToolReturnPart(
            tool_call_id="toolu_1",
            tool_name="bash",
            content=[{"type": "text", "text": "exit 1"}],
            extra={"is_error": True},
        ),
        UserPromptPart(("try again",)),
    )
    assert messages[3] == CanonicalMessage.response(TextPart("Done."))
    assert check_invariants(messages) == []
    assert load_messages(dump_messages(messages)) == messages


def test_user_blocks_become_pydantic_ai_items_and_cache_points() -> None:
    (request,) = messages_from_anthropic(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"},
                    },
                    {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
                    {"type": "document", "source": {"type": "url", "url": "https://x/d.pdf"}, "title": "D"},
                    {"type": "image", "source": {"type": "file", "file_id": "f1"}},
                    {"type": "text", "text": "cited", "citations": []},
                ],
            }
        ]
    )
    assert request.parts == (
        UserPromptPart(
            (
                "look",
                {"kind": "cache-point", "ttl": "1h"},
                {"kind": "binary", "media_type": "image/png", "data": "iVBO"},
                {"kind": "image-url", "url": "https://x/y.png"},
                {"kind": "document-url", "url": "https://x/d.pdf", "title": "D"},
                {"type": "image", "source": {"type": "file", "file_id": "f1"}},
                {"kind": "text", "content": "cited", "citations": []},
            )
        ),
    )


def test_results_between_prompts_keep_their_order() -> None:
    messages = messages_from_anthropic(
        [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "a", "name": "x", "input": {}},
                    {"type": "tool_use", "id": "b", "name": "y", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "a", "content": "1"},
                    {"type": "text", "text": "note"},
                    {"type": "tool_result", "tool_use_id": "b", "cache_control": {"type": "ephemeral"}},
                ],
            },
        ]
    )
    assert messages[2].parts == (
        ToolReturnPart(tool_call_id="a", tool_name="x", content="1"),
        UserPromptPart(("note",)),
        ToolReturnPart(
            tool_call_id="b", tool_name="y", content=None, extra={"cache_control": {"type": "ephemeral"}}
        ),
    )


def test_per_block_assistant_messages_are_one_response() -> None:
    """Claude Code writes each block of one response as its own message."""
    first = {**RESPONSE, "content": [RESPONSE["content"][2]]}
    second = {**RESPONSE, "content": [RESPONSE["content"][3]]}
    later = {**RESPONSE, "id": "msg_02", "content": [{"type": "text", "text": "more"}]}
    (_, response) = messages_from_anthropic([{"role": "user", "content": "hi"}, first, second, later])
    assert [p.part_kind for p in response.parts] == ["text", "tool-call", "text"]
    assert response.provider_response_id == "msg_01"
    # the second response's own id has no slot left: it is kept with its parts
    assert extra(response.parts[2])["message"] == {"type": "message", "id": "msg_02"}
    assert "id" not in extra(response.parts[1])["message"]


def test_server_tool_blocks_are_kept_whole() -> None:
    block = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}}
    (_, response) = messages_from_anthropic(
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": [block]}]
    )
    assert response.parts == (
        UnknownPart("anthropic-server_tool_use", data={**block, "part_kind": "anthropic-server_tool_use"}),
    )
    assert load_messages(dump_messages([response])) == [response]


def test_system_blocks_and_a_system_role() -> None:
    messages = messages_from_anthropic(
        [{"role": "system", "content": "also"}, {"role": "user", "content": "hi"}],
        system=[{"type": "text", "text": "rules", "cache_control": {"type": "ephemeral"}}],
    )
    assert messages == [
        CanonicalMessage.request(
            SystemPromptPart("rules", extra={"cache_control": {"type": "ephemeral"}}),
            SystemPromptPart("also"),
            UserPromptPart("hi"),
        )
    ]


def test_a_block_key_named_like_a_part_field_is_kept_apart() -> None:
    (_, response) = messages_from_anthropic(
        [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": [{"type": "text", "text": "t", "metadata": {"m": 1}}]},
        ]
    )
    (part,) = response.parts
    assert part == TextPart("t", extra={"block": {"metadata": {"m": 1}}})
    assert load_messages(dump_messages([response])) == [response]


def test_message_keys_without_a_slot_are_kept_and_nulls_read_as_absent() -> None:
    (message,) = messages_from_anthropic(
        [{"role": "user", "content": "x", "created": "2024-01-01", "stop_sequence": None}]
    )
    assert message.timestamp is None
    assert extra(message.parts[0]) == {"message": {"created": "2024-01-01"}}


@pytest.mark.parametrize(
    ("messages", "field", "fragment"),
    [
        ([{"role": "tool", "content": "x"}], "role", "try format 'openai'"),
        (
            [{"role": "assistant", "content": [{"type": "tool_use", "name": "x", "input": {}}]}],
            "content[0].id",
            "missing",
        ),
        (
            [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": ""}]}],
            "content[0].tool_use_id",
            "non-empty",
        ),
        ([{"role": "assistant", "content": [{"type": "text"}]}], "content[0].text", "missing"),
        (
            [{"role": "assistant", "content": [{"type": "tool_use", "id": "i", "name": "n", "input": 3}]}],
            "content[0].input",
            "",
        ),
        ([{"role": "user", "content": {"type": "text"}}], "content", "an array"),
    ],
)
def test_errors_name_the_format_the_message_and_the_block(
    messages: list[Any], field: str, fragment: str
) -> None:
    with pytest.raises(WireFormatError) as caught:
        messages_from_anthropic(messages)
    assert (caught.value.format, caught.value.message_index, caught.value.field) == ("anthropic", 0, field)
    assert fragment in str(caught.value)


def test_a_bad_system_field_is_located() -> None:
    with pytest.raises(WireFormatError) as caught:
        messages_from_anthropic([], system=[{"type": "image"}])  # pyright: ignore[reportArgumentType]
    assert (caught.value.format, caught.value.field) == ("anthropic", "system[0]")
