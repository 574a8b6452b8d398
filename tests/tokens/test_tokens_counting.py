"""Tests for what harness.tokens counts: parts, messages, tool definitions, instructions."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given, settings

from harness.core import (
    CanonicalMessage,
    Part,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolDefinition,
    ToolReturnPart,
    UnknownPart,
    UserPromptPart,
)
from harness.errors import MessageError, TokenizerError
from harness.testing.strategies import histories
from harness.tokens import MESSAGE_OVERHEAD, NON_TEXT_ITEM_TOKENS, PART_OVERHEAD, TOOL_OVERHEAD, TokenCounter
from harness.tokens.counting import json_text, part_text, tool_text

# --- parts and messages ------------------------------------------------------------------


def test_every_part_kind_is_counted(spied: tuple[TokenCounter, list[str]]) -> None:
    counter, calls = spied
    cases: list[tuple[Part, str, int]] = [
        (SystemPromptPart("be brief"), "be brief", 0),
        (UserPromptPart("hello"), "hello", 0),
        (UserPromptPart(("look at", {"kind": "image-url", "url": "http://x"}, "this")), "look at\nthis", 85),
        (UserPromptPart(({"kind": "text", "content": "typed"}, {"kind": "cache-point"})), "typed", 0),
        (TextPart("answer"), "answer", 0),
        (ThoughtPart("let me think"), "let me think", 0),
        (RetryPromptPart("try again"), "try again", 0),
        (
            RetryPromptPart(({"loc": ["x"], "msg": "bad"},), tool_name="grep", tool_call_id="c1"),
            'grep\n[{"loc":["x"],"msg":"bad"}]',
            0,
        ),
        (
            ToolCallPart(tool_call_id="c1", tool_name="read_file", args={"path": "a.py"}),
            'read_file\n{"path":"a.py"}',
            0,
        ),
        (
            ToolCallPart(tool_call_id="c2", tool_name="read_file", args='{"path": "b.py"}'),
            'read_file\n{"path": "b.py"}',
            0,
        ),
        (ToolCallPart(tool_call_id="c3", tool_name="noop"), "noop\n", 0),
        (
            ToolReturnPart(tool_call_id="c1", tool_name="read_file", content="print(1)"),
            "read_file\nprint(1)",
            0,
        ),
        (
            ToolReturnPart(tool_call_id="c1", tool_name="read_file", content={"ok": True, "lines": [1, 2]}),
            'read_file\n{"ok":true,"lines":[1,2]}',
            0,
        ),
        (ToolReturnPart(tool_call_id="c1", tool_name=None, content="x"), "\nx", 0),
        (UnknownPart("file", data={"part_kind": "file", "url": "u"}), '{"part_kind":"file","url":"u"}', 0),
    ]
    for part, text, flat in cases:
        calls.clear()
        count = counter.count_part(part)
        assert count == len(text) + flat + PART_OVERHEAD, part
        assert count > PART_OVERHEAD
        assert calls == [text], part
    assert NON_TEXT_ITEM_TOKENS == 85


@settings(max_examples=100, deadline=None)
@given(history=histories(max_messages=30))
def test_generated_histories_count_every_part(history: list[CanonicalMessage]) -> None:
    counter = TokenCounter()
    total = 0
    for message in history:
        parts = [counter.count_part(part) for part in message.parts]
        assert counter.count_message(message) == MESSAGE_OVERHEAD + sum(parts)
        assert all(count > PART_OVERHEAD for count in parts)  # every generated part has text
        total += counter.count_message(message)
    assert counter.count_messages(history) == total


def test_thinking_and_retry_are_not_free() -> None:
    counter = TokenCounter()
    assert counter.count_part(ThoughtPart("a long chain of thought")) > PART_OVERHEAD
    assert counter.count_part(RetryPromptPart("validation failed, fix the arguments")) > PART_OVERHEAD


def test_unserializable_content_falls_back_to_repr(spied: tuple[TokenCounter, list[str]]) -> None:
    counter, calls = spied
    looped: list[Any] = []
    looped.append(looped)
    assert (
        counter.count_part(ToolReturnPart(tool_call_id="c1", tool_name="t", content=looped)) > PART_OVERHEAD
    )
    assert calls == ["t\n[[...]]"]
    calls.clear()
    counter.count_part(ToolReturnPart(tool_call_id="c1", tool_name="t", content={"when": object}))
    assert calls == ['t\n{"when":"<class \'object\'>"}']


def _unchecked(cls: type[Any], **values: Any) -> Any:
    """A part built around its constructor's field checks (as an old pickle could hold one)."""
    part = object.__new__(cls)
    for field in attrs.fields(cls):
        default = None if field.default is attrs.NOTHING else field.default
        object.__setattr__(part, field.name, values.get(field.name, default))
    return part


def test_malformed_part_contents_are_still_counted(spied: tuple[TokenCounter, list[str]]) -> None:
    counter, calls = spied
    assert counter.count_part(_unchecked(TextPart, content=None)) == len("null") + PART_OVERHEAD
    assert (
        counter.count_part(UserPromptPart(["a", "b"])) == len("a\nb") + PART_OVERHEAD
    )  # a list becomes a tuple
    assert counter.count_part(_unchecked(UserPromptPart, content=42)) == len("42") + PART_OVERHEAD
    assert calls == ["null", "a\nb", "42"]


def test_count_part_is_cached_per_object(spied: tuple[TokenCounter, list[str]]) -> None:
    counter, calls = spied
    long_text = "cache me " * 40
    part = TextPart(long_text)
    assert counter.count_part(part) == counter.count_part(part)
    assert calls == [long_text]
    counter.count_part(TextPart(long_text))  # equal but not identical: counted again
    assert len(calls) == 2


def test_short_texts_are_tokenized_once_per_counter(spied: tuple[TokenCounter, list[str]]) -> None:
    counter, calls = spied
    placeholders = [TextPart("[tool result cleared]") for _ in range(100)]
    counts = {counter.count_part(p) for p in placeholders}
    assert len(counts) == 1
    assert calls == ["[tool result cleared]"]


def test_count_message_is_cached_and_adds_overhead(spied: tuple[TokenCounter, list[str]]) -> None:
    counter, calls = spied
    message = CanonicalMessage.response(
        TextPart("abc"), ToolCallPart(tool_call_id="c1", tool_name="t", args={"a": 1})
    )
    expected = MESSAGE_OVERHEAD + (3 + PART_OVERHEAD) + (len('t\n{"a":1}') + PART_OVERHEAD)
    assert counter.count_message(message) == expected
    seen = len(calls)
    assert counter.count_message(message) == expected
    assert len(calls) == seen
    # A new message reusing a part only counts the new part.
    reused = CanonicalMessage.response(message.parts[0], TextPart("zz"))
    counter.count_message(reused)
    assert calls[seen:] == ["zz"]


def test_empty_text_is_not_sent_to_the_counter(spied: tuple[TokenCounter, list[str]]) -> None:
    counter, calls = spied
    assert counter.count_part(TextPart("")) == PART_OVERHEAD
    assert calls == []


def test_bad_input_raises_typed_errors() -> None:
    counter = TokenCounter()
    with pytest.raises(MessageError, match="str"):
        counter.count_part("not a part")  # pyright: ignore[reportArgumentType]
    with pytest.raises(MessageError, match=r"messages\[1\].*dict"):
        counter.count_messages([CanonicalMessage.user("hi"), {"kind": "request"}])  # pyright: ignore[reportArgumentType]
    with pytest.raises(TokenizerError, match="bytes"):
        counter.count_text(b"raw")  # pyright: ignore[reportArgumentType]
    bad = TokenCounter(text_counter=lambda _text: -1)
    with pytest.raises(TokenizerError, match="non-negative"):
        bad.count_text("x")


def test_text_counter_backend(spied: tuple[TokenCounter, list[str]]) -> None:
    counter, calls = spied
    assert counter.encoding_name == "custom"
    assert counter.exact
    assert counter.count_text("four") == 4
    assert calls == ["four"]


def test_count_tools(spied: tuple[TokenCounter, list[str]]) -> None:
    counter, calls = spied
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    tool = ToolDefinition("read_file", "Read a file.", schema)
    expected_text = 'read_file\nRead a file.\n{"type":"object","properties":{"path":{"type":"string"}}}'
    assert counter.count_tools([tool]) == len(expected_text) + TOOL_OVERHEAD
    mapping = {"name": "read_file", "description": "Read a file.", "parameters_json_schema": schema}
    assert counter.count_tools([mapping]) == counter.count_tools([tool])
    assert counter.count_tools([]) == 0
    assert calls[-1] == expected_text
    with pytest.raises(TokenizerError, match=r"tool_definitions\[1\]"):
        counter.count_tools([tool, {"description": "no name"}])


def test_instructions_of_newest_request_are_counted_once(spied: tuple[TokenCounter, list[str]]) -> None:
    counter, _ = spied
    first = CanonicalMessage.request(UserPromptPart("a"), instructions="old instructions")
    reply = CanonicalMessage.response(TextPart("b"))
    second = CanonicalMessage.request(UserPromptPart("c"), instructions="newer")
    base = sum(counter.count_message(m) for m in (first, reply, second))
    assert (
        counter.count_messages([first, reply])
        == base - counter.count_message(second) + len("old instructions") + PART_OVERHEAD
    )
    assert counter.count_messages([first, reply, second]) == base + len("newer") + PART_OVERHEAD


def test_empty_history() -> None:
    counter = TokenCounter()
    assert counter.count_messages([]) == 0
    assert counter.context_tokens([]) == 0


def test_counting_module_names_the_texts_counted() -> None:
    image = {"kind": "image-url", "url": "u"}
    assert part_text(UserPromptPart(("see", image))) == ("see", NON_TEXT_ITEM_TOKENS)
    assert part_text(ToolCallPart(tool_call_id="c1", tool_name="grep", args={"q": "x"})) == (
        'grep\n{"q":"x"}',
        0,
    )
    assert json_text({"a": [1, "é"]}) == '{"a":[1,"é"]}'
    tool = ToolDefinition("t", "Does t.", {"type": "object"})
    assert tool_text(tool, 0) == 't\nDoes t.\n{"type":"object"}'
    assert tool_text({"name": "t", "parameters": {"type": "object"}}, 0) == 't\n\n{"type":"object"}'
    with pytest.raises(TokenizerError, match=r"tool_definitions\[3\]"):
        tool_text({"description": "no name"}, 3)
    with pytest.raises(MessageError, match="not a message part"):
        part_text(object())  # pyright: ignore[reportArgumentType]
