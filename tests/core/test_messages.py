"""The canonical message model: construction rules, usage normalisation, helpers, marks."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import (
    HARNESS_KEY,
    CanonicalMessage,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UnknownPart,
    Usage,
    UserPromptPart,
    harness_mark,
    latest_assistant_text,
    marked_metadata,
    message_text,
    replace,
    tool_answer_ids,
    tool_call_ids,
    tool_return_ids,
    with_harness_mark,
)
from harness.errors import MessageError
from harness.testing.strategies import histories


def test_parts_keep_their_order_and_are_a_tuple() -> None:
    parts = [UserPromptPart("b"), SystemPromptPart("a"), UserPromptPart("c")]
    message = CanonicalMessage.request(*parts)
    assert message.parts == tuple(parts)


@pytest.mark.parametrize(
    "part", [TextPart("x"), ThoughtPart("t"), ToolCallPart(tool_call_id="c1", tool_name="read")]
)
def test_a_request_refuses_response_parts(part: TextPart | ThoughtPart | ToolCallPart) -> None:
    with pytest.raises(MessageError, match=rf"part 0: a request cannot hold a '{part.part_kind}' part"):
        CanonicalMessage.request(part)


@pytest.mark.parametrize(
    "part",
    [
        UserPromptPart("x"),
        SystemPromptPart("s"),
        ToolReturnPart(tool_call_id="c1", tool_name="read", content="r"),
        RetryPromptPart("again"),
    ],
)
def test_a_response_refuses_request_parts(
    part: UserPromptPart | SystemPromptPart | ToolReturnPart | RetryPromptPart,
) -> None:
    with pytest.raises(MessageError, match="a response cannot hold"):
        CanonicalMessage.response(part)


def test_unknown_parts_are_allowed_on_both_sides() -> None:
    unknown = UnknownPart("builtin-tool-call", data={"part_kind": "builtin-tool-call", "tool_name": "web"})
    assert CanonicalMessage.request(unknown).parts == (unknown,)
    assert CanonicalMessage.response(unknown).parts == (unknown,)
    assert unknown.part_kind == "builtin-tool-call"


def test_kind_must_be_request_or_response() -> None:
    with pytest.raises(MessageError, match="kind must be"):
        CanonicalMessage("system", ())  # pyright: ignore[reportArgumentType]


@pytest.mark.parametrize("bad", ["", None, 3])
def test_tool_call_ids_are_required_and_non_empty(bad: object) -> None:
    with pytest.raises(MessageError, match="tool_call_id must be a non-empty string"):
        ToolCallPart(tool_call_id=bad, tool_name="read")  # pyright: ignore[reportArgumentType]
    with pytest.raises(MessageError, match="tool_call_id must be a non-empty string"):
        ToolReturnPart(tool_call_id=bad, tool_name="read", content="x")  # pyright: ignore[reportArgumentType]


def test_messages_and_parts_are_frozen() -> None:
    message = CanonicalMessage.user("hi")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        message.kind = "response"  # pyright: ignore[reportAttributeAccessIssue]


def test_args_as_dict_reads_objects_json_strings_and_nothing() -> None:
    assert ToolCallPart(tool_call_id="c", tool_name="t", args={"a": 1}).args_as_dict() == {"a": 1}
    assert ToolCallPart(tool_call_id="c", tool_name="t", args='{"a": 1}').args_as_dict() == {"a": 1}
    assert ToolCallPart(tool_call_id="c", tool_name="t", args=None).args_as_dict() == {}
    assert ToolCallPart(tool_call_id="c", tool_name="t", args="  ").args_as_dict() == {}
    assert ToolCallPart(tool_call_id="c", tool_name="t", args="[1, 2]").args_as_dict() == {}
    with pytest.raises(MessageError, match="tool call 'c': args are not valid JSON"):
        ToolCallPart(tool_call_id="c", tool_name="t", args="{not json").args_as_dict()


def test_usage_from_pydantic_ai_reads_cached_tokens() -> None:
    usage = Usage.from_pydantic_ai(
        {
            "input_tokens": 1200,
            "output_tokens": 80,
            "cache_read_tokens": 1000,
            "cache_write_tokens": 5,
            "x": 1,
        }
    )
    assert (usage.request_tokens, usage.response_tokens, usage.cached_tokens, usage.cache_write_tokens) == (
        1200,
        80,
        1000,
        5,
    )
    assert usage.extra == {"x": 1}
    assert Usage.from_pydantic_ai({"request_tokens": 7, "response_tokens": 3}).total_tokens == 10


def test_usage_from_openai_reads_cached_tokens_from_details() -> None:
    chat = {"prompt_tokens": 900, "completion_tokens": 50, "prompt_tokens_details": {"cached_tokens": 512}}
    responses = {"input_tokens": 900, "output_tokens": 50, "input_tokens_details": {"cached_tokens": 256}}
    assert Usage.from_openai(chat) == Usage(900, 50, 512)
    assert Usage.from_openai(responses) == Usage(900, 50, 256)
    assert Usage.from_any(chat).cached_tokens == 512


def test_usage_from_anthropic_adds_cache_reads_and_writes_to_the_input() -> None:
    data = {
        "input_tokens": 100,
        "output_tokens": 40,
        "cache_read_input_tokens": 3000,
        "cache_creation_input_tokens": 200,
    }
    usage = Usage.from_anthropic(data)
    assert usage == Usage(request_tokens=3300, response_tokens=40, cached_tokens=3000, cache_write_tokens=200)
    assert Usage.from_any(data) == usage


def test_usage_adds_up() -> None:
    assert Usage(1, 2, 3, 4) + Usage(10, 20, 30, 40) == Usage(11, 22, 33, 44)


def test_latest_assistant_text_skips_tool_only_and_thinking_responses() -> None:
    history = [
        CanonicalMessage.user("q"),
        CanonicalMessage.response(TextPart("first "), TextPart("answer")),
        CanonicalMessage.user("q2"),
        CanonicalMessage.response(ThoughtPart("hmm"), ToolCallPart(tool_call_id="c1", tool_name="read")),
        CanonicalMessage.request(ToolReturnPart(tool_call_id="c1", tool_name="read", content="x")),
    ]
    assert latest_assistant_text(history) == "first answer"
    assert latest_assistant_text([CanonicalMessage.user("only")]) is None


def test_message_text_joins_every_textual_part() -> None:
    message = CanonicalMessage.request(
        SystemPromptPart("sys"),
        UserPromptPart(("look", {"kind": "image-url", "url": "x"}, "here")),
        ToolReturnPart(tool_call_id="c1", tool_name="read", content={"lines": 3}),
        RetryPromptPart("try again"),
    )
    assert message_text(message) == 'sys\nlook\nhere\n{"lines": 3}\ntry again'


def test_tool_id_helpers() -> None:
    response = CanonicalMessage.response(
        ToolCallPart(tool_call_id="a", tool_name="t"),
        TextPart("x"),
        ToolCallPart(tool_call_id="b", tool_name="t"),
    )
    request = CanonicalMessage.request(
        ToolReturnPart(tool_call_id="a", tool_name="t", content="1"),
        RetryPromptPart("bad args", tool_name="t", tool_call_id="b"),
        RetryPromptPart("general retry", tool_call_id="r1"),
    )
    assert tool_call_ids(response) == ["a", "b"]
    assert tool_return_ids(request) == ["a"]
    assert tool_answer_ids(request) == ["a", "b"]


def test_harness_marks_are_metadata_not_text() -> None:
    part = UserPromptPart("[LimitWarner] quoted by a user", metadata={"mine": 1})
    assert harness_mark(part) is None
    marked = with_harness_mark(part, kind="summary")
    assert harness_mark(marked) == {"kind": "summary"}
    assert marked.metadata == {"mine": 1, HARNESS_KEY: {"kind": "summary"}}
    assert harness_mark(with_harness_mark(marked, count=2)) == {"kind": "summary", "count": 2}
    assert part.metadata == {"mine": 1}, "the original is unchanged"
    with pytest.raises(MessageError, match="not a mapping"):
        with_harness_mark(UserPromptPart("x", metadata=["list"]), kind="summary")


def test_replace_runs_validators_and_marks_in_one_copy() -> None:
    part = ToolReturnPart(tool_call_id="c1", tool_name="read", content="long output")
    cleared = replace(part, content="[cleared]", metadata=marked_metadata(part.metadata, cleared="me"))
    assert cleared == ToolReturnPart(
        tool_call_id="c1", tool_name="read", content="[cleared]", metadata={HARNESS_KEY: {"cleared": "me"}}
    )
    with pytest.raises(MessageError):
        replace(part, tool_call_id="")
    message = CanonicalMessage.user("hi")
    with pytest.raises(MessageError):
        replace(message, parts=(TextPart("x"),))
    with pytest.raises(TypeError, match="no init field"):
        replace(part, nonsense=1)


@settings(max_examples=100, deadline=None)
@given(histories(max_messages=20))
def test_replace_with_no_change_is_an_equal_copy(messages: list[CanonicalMessage]) -> None:
    for message in messages:
        copy = message.replace(parts=message.parts)
        assert copy == message
        assert all(replace(p) == p for p in message.parts if not isinstance(p, UnknownPart))


@given(st.integers(0, 10**9), st.integers(0, 10**9), st.integers(0, 10**9))
def test_usage_totals(request_tokens: int, response_tokens: int, cached: int) -> None:
    usage = Usage(request_tokens, response_tokens, cached)
    assert usage.total_tokens == request_tokens + response_tokens
