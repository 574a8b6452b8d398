"""Tests of the JSON wire format (harness.wire)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from pathlib import Path
from typing import Any, cast

import cattrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.errors import WireFormatError
from harness.messages import (
    CanonicalMessage,
    MessageKind,
    Part,
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
    with_harness_mark,
)
from harness.wire import (
    converter,
    dump_messages,
    load_messages,
    load_messages_and_thoughts,
    messages_from_jsonable,
    messages_to_jsonable,
)

# ---------------------------------------------------------------------------------------
# Strategies (own, small: every part kind, extra keys, null markers, unknown parts)
# ---------------------------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=8,
)
non_null_json = json_values.filter(lambda value: value is not None)
texts = st.text(max_size=30)
ids = st.text(min_size=1, max_size=12)
opt_texts = st.none() | texts
opt_metadata = st.none() | non_null_json | st.just({"harness": {"kind": "summary"}})
_zones: list[tzinfo] = [UTC, timezone(timedelta(hours=5, minutes=30))]
timestamps = (
    st.none()
    | st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1))
    | st.datetimes(
        min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.sampled_from(_zones)
    )
)
extra_keys = st.dictionaries(st.text(max_size=6).map(lambda key: f"x_{key}"), json_values, max_size=2)


@st.composite
def extras(draw: st.DrawFn, optional_none: tuple[str, ...]) -> dict[str, Any]:
    """Unknown keys plus, for some optional fields that are None, a null marker."""
    extra = draw(extra_keys)
    for key in optional_none:
        if draw(st.booleans()):
            extra[key] = None
    return extra


def _nones(**fields: Any) -> tuple[str, ...]:
    return tuple(key for key, value in fields.items() if value is None)


@st.composite
def system_parts(draw: st.DrawFn) -> SystemPromptPart:
    fields: dict[str, Any] = {
        "timestamp": draw(timestamps),
        "dynamic_ref": draw(opt_texts),
        "metadata": draw(opt_metadata),
    }
    return SystemPromptPart(draw(texts), **fields, extra=draw(extras(_nones(**fields))))


@st.composite
def user_parts(draw: st.DrawFn) -> UserPromptPart:
    content = draw(
        texts
        | st.tuples()
        | st.lists(texts | st.dictionaries(st.text(max_size=5), json_values, max_size=3), max_size=3).map(
            tuple
        )
    )
    fields: dict[str, Any] = {"timestamp": draw(timestamps), "metadata": draw(opt_metadata)}
    return UserPromptPart(content, **fields, extra=draw(extras(_nones(**fields))))


@st.composite
def tool_return_parts(draw: st.DrawFn) -> ToolReturnPart:
    fields: dict[str, Any] = {
        "tool_name": draw(opt_texts),
        "timestamp": draw(timestamps),
        "metadata": draw(opt_metadata),
    }
    return ToolReturnPart(
        draw(ids), content=draw(json_values), **fields, extra=draw(extras(_nones(**fields)))
    )


@st.composite
def retry_parts(draw: st.DrawFn) -> RetryPromptPart:
    content = draw(texts | st.lists(json_values, max_size=3).map(tuple))
    fields: dict[str, Any] = {
        "tool_name": draw(opt_texts),
        "tool_call_id": draw(st.none() | st.text(max_size=8)),
        "timestamp": draw(timestamps),
        "metadata": draw(opt_metadata),
    }
    return RetryPromptPart(content, **fields, extra=draw(extras(_nones(**fields))))


@st.composite
def text_parts(draw: st.DrawFn) -> TextPart:
    fields: dict[str, Any] = {"metadata": draw(opt_metadata)}
    return TextPart(draw(texts), **fields, extra=draw(extras(_nones(**fields))))


@st.composite
def thought_parts(draw: st.DrawFn) -> ThoughtPart:
    fields: dict[str, Any] = {
        "signature": draw(opt_texts),
        "provider_name": draw(opt_texts),
        "metadata": draw(opt_metadata),
    }
    return ThoughtPart(draw(texts), **fields, extra=draw(extras(_nones(**fields))))


@st.composite
def tool_call_parts(draw: st.DrawFn) -> ToolCallPart:
    args = draw(st.none() | texts | st.dictionaries(st.text(max_size=6), json_values, max_size=3))
    fields: dict[str, Any] = {"args": args, "metadata": draw(opt_metadata)}
    return ToolCallPart(draw(ids), draw(texts), **fields, extra=draw(extras(_nones(**fields))))


@st.composite
def unknown_parts(draw: st.DrawFn) -> UnknownPart:
    kind = draw(st.sampled_from(["builtin-tool-call", "builtin-tool-return", "file", "compaction", "x-new"]))
    data = draw(
        st.dictionaries(st.text(max_size=6).filter(lambda k: k != "part_kind"), json_values, max_size=3)
    )
    return UnknownPart(kind, {**data, "part_kind": kind})


usages = st.builds(
    Usage,
    request_tokens=st.integers(0, 10**7),
    response_tokens=st.integers(0, 10**7),
    cached_tokens=st.integers(0, 10**7),
    cache_write_tokens=st.integers(0, 10**7),
    extra=extra_keys,
)


@st.composite
def messages(draw: st.DrawFn) -> CanonicalMessage:
    kind: MessageKind = draw(st.sampled_from(["request", "response"]))
    if kind == "request":
        part = system_parts() | user_parts() | tool_return_parts() | retry_parts() | unknown_parts()
    else:
        part = text_parts() | thought_parts() | tool_call_parts() | unknown_parts()
    fields: dict[str, Any] = {
        "timestamp": draw(timestamps),
        "model_name": draw(opt_texts),
        "usage": draw(st.none() | usages),
        "run_id": draw(opt_texts),
        "provider_name": draw(opt_texts),
        "provider_response_id": draw(opt_texts),
        "finish_reason": draw(st.none() | st.sampled_from(["stop", "length", "tool_call"])),
        "metadata": draw(opt_metadata),
        "instructions": draw(opt_texts),
    }
    return CanonicalMessage(
        kind, draw(st.lists(part, max_size=3)), **fields, extra=draw(extras(_nones(**fields)))
    )


histories = st.lists(messages(), max_size=4)


# ---------------------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------------------


@settings(max_examples=120, deadline=None)
@given(histories)
def test_load_of_dump_is_identity(history: list[CanonicalMessage]) -> None:
    data = dump_messages(history)
    assert load_messages(data) == history
    assert messages_from_jsonable(messages_to_jsonable(history)) == history
    # dumping is deterministic and idempotent through a load
    assert dump_messages(load_messages(data)) == data
    # the output is compact ASCII JSON of exactly the jsonable form
    assert data.isascii()
    parsed = json.loads(data)
    assert parsed == messages_to_jsonable(history)
    assert data == json.dumps(parsed, separators=(",", ":")).encode()


def test_shared_strategies_round_trip_when_available() -> None:
    strategies = pytest.importorskip("harness.testing.strategies")
    histories_strategy = getattr(strategies, "histories", None)
    if histories_strategy is None:
        pytest.skip("harness.testing.strategies has no histories()")

    @settings(max_examples=50, deadline=None)
    @given(histories_strategy())
    def check(history: list[CanonicalMessage]) -> None:
        assert load_messages(dump_messages(history)) == history

    check()


CONTRACT_EXAMPLE = [
    {
        "kind": "response",
        "parts": [
            {"part_kind": "text", "content": "..."},
            {
                "part_kind": "tool-call",
                "tool_call_id": "tc_1",
                "tool_name": "bash",
                "args": {"command": "ls"},
            },
        ],
    },
    {"kind": "request", "parts": [{"part_kind": "tool-return", "tool_call_id": "tc_1", "content": "..."}]},
]


def test_contract_minimal_form() -> None:
    loaded = load_messages(json.dumps(CONTRACT_EXAMPLE))
    assert loaded == [
        CanonicalMessage.response(TextPart("..."), ToolCallPart("tc_1", "bash", {"command": "ls"})),
        CanonicalMessage.request(ToolReturnPart("tc_1", None, "...")),
    ]
    assert json.loads(dump_messages(loaded)) == CONTRACT_EXAMPLE


FULL_DOCUMENT: list[dict[str, Any]] = [
    {
        "parts": [
            {
                "content": "be brief",
                "timestamp": "2024-01-02T03:04:05.123000Z",
                "dynamic_ref": None,
                "scope": "conversation",
                "metadata": None,
                "part_kind": "system-prompt",
            },
            {
                "content": [
                    "look",
                    {"url": "https://example.com/a.png", "kind": "image-url", "media_type": "image/png"},
                ],
                "timestamp": "2024-01-02T03:04:05Z",
                "part_kind": "user-prompt",
            },
            {
                "tool_name": "read",
                "content": {"lines": [1, 2]},
                "tool_call_id": "c1",
                "tool_kind": None,
                "metadata": {"harness": {"cleared": True}},
                "timestamp": "2024-01-02T03:04:05+05:30",
                "outcome": "success",
                "retry": None,
                "part_kind": "tool-return",
            },
            {
                "content": "bad args",
                "tool_name": "read",
                "tool_call_id": "c2",
                "timestamp": "2024-01-02T03:04:05",
                "part_kind": "retry-prompt",
            },
            {"content": "no tool", "tool_name": None, "tool_call_id": "retry_1", "part_kind": "retry-prompt"},
            {"content": "feedback", "retry": {"cause": "model_retry"}, "part_kind": "retry-feedback"},
        ],
        "timestamp": "2024-01-02T03:04:05.123000Z",
        "instructions": "be kind",
        "kind": "request",
        "run_id": "run-1",
        "conversation_id": None,
        "metadata": None,
        "state": "complete",
    },
    {
        "parts": [
            {
                "content": "hello",
                "id": None,
                "provider_name": None,
                "provider_details": None,
                "citations": None,
                "part_kind": "text",
            },
            {
                "content": "hmm",
                "id": "th1",
                "signature": "sig==",
                "provider_name": "anthropic",
                "provider_details": {"x": 1},
                "part_kind": "thinking",
            },
            {
                "tool_name": "read",
                "args": '{"path": "a.py"}',
                "tool_call_id": "c1",
                "tool_kind": None,
                "id": None,
                "provider_name": None,
                "provider_details": None,
                "part_kind": "tool-call",
            },
            {"tool_name": "read", "args": {"path": "b.py"}, "tool_call_id": "c2", "part_kind": "tool-call"},
            {"tool_name": "noargs", "args": None, "tool_call_id": "c3", "part_kind": "tool-call"},
            {
                "tool_name": "web_search",
                "args": {"q": "x"},
                "tool_call_id": "b1",
                "provider_name": "openai",
                "part_kind": "builtin-tool-call",
            },
            {"content": "x", "part_kind": "file", "media_type": "image/png"},
        ],
        "usage": {
            "input_tokens": 10,
            "cache_write_tokens": 1,
            "cache_write_1h_tokens": 0,
            "cache_read_tokens": 2,
            "output_tokens": 3,
            "output_reasoning_tokens": 0,
            "input_audio_tokens": 0,
            "details": {"reasoning": 5},
            "cost": None,
        },
        "model_name": "claude",
        "timestamp": "2024-01-02T03:04:06.5Z",
        "kind": "response",
        "provider_name": "anthropic",
        "provider_url": None,
        "provider_details": {"stop": "end_turn"},
        "provider_response_id": "msg_1",
        "finish_reason": "stop",
        "run_id": None,
        "metadata": {"harness": {"kind": "summary"}},
        "workspace_ref": None,
    },
]


def test_full_pydantic_ai_shaped_document_loads_every_field() -> None:
    request, response = load_messages(json.dumps(FULL_DOCUMENT).encode())
    system, user, tool_return, retry, retry_no_tool, feedback = request.parts
    assert system == SystemPromptPart(
        "be brief",
        timestamp=datetime(2024, 1, 2, 3, 4, 5, 123000, tzinfo=UTC),
        extra={"dynamic_ref": None, "scope": "conversation", "metadata": None},
    )
    assert user == UserPromptPart(
        ("look", {"url": "https://example.com/a.png", "kind": "image-url", "media_type": "image/png"}),
        timestamp=datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
    )
    assert isinstance(tool_return, ToolReturnPart)
    assert tool_return.content == {"lines": [1, 2]}
    assert tool_return.timestamp == datetime(
        2024, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=5, minutes=30))
    )
    assert harness_mark(tool_return) == {"cleared": True}
    assert tool_return.extra == {"tool_kind": None, "outcome": "success", "retry": None}
    assert retry == RetryPromptPart(
        "bad args", tool_name="read", tool_call_id="c2", timestamp=datetime(2024, 1, 2, 3, 4, 5)
    )
    assert isinstance(retry, RetryPromptPart)
    assert retry.answers_tool_call
    assert retry_no_tool == RetryPromptPart("no tool", tool_call_id="retry_1", extra={"tool_name": None})
    assert isinstance(retry_no_tool, RetryPromptPart)
    assert not retry_no_tool.answers_tool_call
    assert feedback == UnknownPart(
        "retry-feedback",
        {"content": "feedback", "retry": {"cause": "model_retry"}, "part_kind": "retry-feedback"},
    )
    assert request.instructions == "be kind"
    assert request.run_id == "run-1"
    assert request.extra == {"conversation_id": None, "metadata": None, "state": "complete"}

    text, thinking, call_str, call_dict, call_none, builtin, file = response.parts
    assert text == TextPart(
        "hello", extra={"id": None, "provider_name": None, "provider_details": None, "citations": None}
    )
    assert thinking == ThoughtPart(
        "hmm", signature="sig==", provider_name="anthropic", extra={"id": "th1", "provider_details": {"x": 1}}
    )
    assert isinstance(call_str, ToolCallPart)
    assert call_str.args == '{"path": "a.py"}'
    assert call_str.args_as_dict() == {"path": "a.py"}
    assert call_dict == ToolCallPart("c2", "read", {"path": "b.py"})
    assert call_none == ToolCallPart("c3", "noargs", None, extra={"args": None})
    assert isinstance(builtin, UnknownPart)
    assert builtin.kind == "builtin-tool-call"
    assert builtin.data["tool_call_id"] == "b1"
    assert file == UnknownPart("file", {"content": "x", "part_kind": "file", "media_type": "image/png"})
    assert response.usage == Usage(
        request_tokens=10,
        response_tokens=3,
        cached_tokens=2,
        cache_write_tokens=1,
        extra={
            "cache_write_1h_tokens": 0,
            "output_reasoning_tokens": 0,
            "input_audio_tokens": 0,
            "details": {"reasoning": 5},
            "cost": None,
        },
    )
    assert response.model_name == "claude"
    assert response.timestamp == datetime(2024, 1, 2, 3, 4, 6, 500000, tzinfo=UTC)
    assert response.provider_name == "anthropic"
    assert response.provider_response_id == "msg_1"
    assert response.finish_reason == "stop"
    assert harness_mark(response) == {"kind": "summary"}
    assert response.extra["provider_details"] == {"stop": "end_turn"}


def test_full_document_round_trips_exactly_except_timestamp_spelling() -> None:
    loaded = load_messages(json.dumps(FULL_DOCUMENT))
    dumped = json.loads(dump_messages(loaded))
    expected = json.loads(json.dumps(FULL_DOCUMENT))
    # timestamps are normalised to pydantic's spelling; every other key and value is kept
    expected[1]["timestamp"] = "2024-01-02T03:04:06.500000Z"
    assert dumped == expected


def test_tool_call_args_are_kept_exactly_as_given() -> None:
    doc = [
        {
            "kind": "response",
            "parts": [
                {"part_kind": "tool-call", "tool_call_id": "a", "tool_name": "t", "args": '{"x":  1}'},
                {"part_kind": "tool-call", "tool_call_id": "b", "tool_name": "t", "args": {"x": 1}},
                {"part_kind": "tool-call", "tool_call_id": "c", "tool_name": "t", "args": "not json"},
                {"part_kind": "tool-call", "tool_call_id": "d", "tool_name": "t"},
            ],
        }
    ]
    (message,) = load_messages(json.dumps(doc))
    assert [p.args for p in message.tool_calls] == ['{"x":  1}', {"x": 1}, "not json", None]
    assert json.loads(dump_messages([message])) == doc


def test_omission_rules() -> None:
    assert messages_to_jsonable([CanonicalMessage.response(TextPart("x"))]) == [
        {"kind": "response", "parts": [{"part_kind": "text", "content": "x"}]}
    ]
    # a tool return's content is required, so a null content is written
    assert messages_to_jsonable([CanonicalMessage.request(ToolReturnPart("c", "t", None))])[0]["parts"] == [
        {"part_kind": "tool-return", "tool_call_id": "c", "tool_name": "t", "content": None}
    ]
    # a null marker in extra is written; a set field wins over a marker of the same name
    marked = TextPart("x", metadata={"a": 1}, extra={"metadata": None, "id": None})
    assert converter.unstructure(marked) == {
        "part_kind": "text",
        "content": "x",
        "metadata": {"a": 1},
        "id": None,
    }
    # extra cannot override the class-owned keys
    sneaky = ToolCallPart("c", "t", {}, extra={"part_kind": "text", "tool_call_id": "other"})
    assert converter.unstructure(sneaky) == {
        "part_kind": "tool-call",
        "tool_call_id": "c",
        "tool_name": "t",
        "args": {},
    }
    message = CanonicalMessage.response(TextPart("x"), extra={"kind": "request", "parts": [], "state": "ok"})
    assert converter.unstructure(message) == {
        "kind": "response",
        "parts": [{"part_kind": "text", "content": "x"}],
        "state": "ok",
    }


def test_metadata_and_harness_marks_round_trip() -> None:
    part = with_harness_mark(ToolReturnPart("c1", "read", "[cleared]"), cleared=True)
    message = with_harness_mark(CanonicalMessage.request(part), summary=True)
    (loaded,) = load_messages(dump_messages([message]))
    assert harness_mark(loaded) == {"summary": True}
    assert harness_mark(loaded.parts[0]) == {"cleared": True}
    assert loaded == message


def test_timestamps() -> None:
    utc = CanonicalMessage.user("x").replace(timestamp=datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC))
    assert messages_to_jsonable([utc])[0]["timestamp"] == "2024-05-06T07:08:09Z"
    micro = utc.replace(timestamp=datetime(2024, 5, 6, 7, 8, 9, 10, tzinfo=UTC))
    assert messages_to_jsonable([micro])[0]["timestamp"] == "2024-05-06T07:08:09.000010Z"
    offset = utc.replace(timestamp=datetime(2024, 5, 6, 7, 8, 9, tzinfo=timezone(timedelta(hours=-3))))
    assert messages_to_jsonable([offset])[0]["timestamp"] == "2024-05-06T07:08:09-03:00"
    naive = utc.replace(timestamp=datetime(2024, 5, 6, 7, 8, 9))
    assert messages_to_jsonable([naive])[0]["timestamp"] == "2024-05-06T07:08:09"
    for message in (utc, micro, offset, naive):
        (loaded,) = load_messages(dump_messages([message]))
        assert loaded.timestamp == message.timestamp
        assert loaded.timestamp is not None
        assert message.timestamp is not None
        assert loaded.timestamp.utcoffset() == message.timestamp.utcoffset()
    doc = [{"kind": "request", "parts": [], "timestamp": "2024-05-06T07:08:09.5Z"}]
    assert load_messages(json.dumps(doc))[0].timestamp == datetime(2024, 5, 6, 7, 8, 9, 500000, tzinfo=UTC)


def test_usage_is_read_with_pydantic_ai_names_and_written_in_its_shape() -> None:
    doc = [
        {"kind": "response", "parts": [], "usage": {"request_tokens": 7, "response_tokens": 2, "foo": [1]}}
    ]
    (message,) = load_messages(json.dumps(doc))
    assert message.usage == Usage(request_tokens=7, response_tokens=2, extra={"foo": [1]})
    assert messages_to_jsonable([message])[0]["usage"] == {
        "input_tokens": 7,
        "output_tokens": 2,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "foo": [1],
    }
    assert converter.structure({"input_tokens": 3}, Usage) == Usage(request_tokens=3)
    assert converter.unstructure(Usage(1, 2, 3, 4))["cache_write_tokens"] == 4


def test_user_prompt_content_list_becomes_a_tuple_and_dumps_as_a_list() -> None:
    items = ["a", {"kind": "image-url", "url": "https://x/y.png"}, {"kind": "binary", "data": "AAAA"}]
    doc = [{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": items}]}]
    (message,) = load_messages(json.dumps(doc))
    part = message.parts[0]
    assert isinstance(part, UserPromptPart)
    assert part.content == tuple(items)
    assert part.text == "a"
    assert json.loads(dump_messages([message])) == doc


def test_unknown_parts_are_kept_verbatim_in_either_kind_of_message() -> None:
    data = {"part_kind": "compaction", "content": {"deep": [1, None]}, "provider_name": "openai"}
    doc = [{"kind": "request", "parts": [data]}, {"kind": "response", "parts": [data]}]
    loaded = load_messages(json.dumps(doc))
    assert [m.parts for m in loaded] == [
        (UnknownPart("compaction", data),),
        (UnknownPart("compaction", data),),
    ]
    assert json.loads(dump_messages(loaded)) == doc
    # an UnknownPart built without part_kind in its data still writes one
    built = CanonicalMessage.response(UnknownPart("file", {"x": 1}))
    assert messages_to_jsonable([built])[0]["parts"] == [{"x": 1, "part_kind": "file"}]


def test_legacy_entries() -> None:
    doc = [
        {"content": "hello"},
        {"thought": "thinking..."},
        {"content": ["a", {"kind": "image-url", "url": "u"}], "role": "user"},
        {"kind": "response", "parts": [{"part_kind": "text", "content": "hi"}]},
        {"thought": "second"},
    ]
    loaded = load_messages(json.dumps(doc))
    assert loaded == [
        CanonicalMessage.user("hello"),
        CanonicalMessage.response(ThoughtPart("thinking...")),
        CanonicalMessage.request(
            UserPromptPart(("a", {"kind": "image-url", "url": "u"})), extra={"role": "user"}
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


def test_accepted_inputs() -> None:
    doc = [{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "héllo ☃ 😀"}]}]
    text = json.dumps(doc, ensure_ascii=False)
    expected = [CanonicalMessage.user("héllo ☃ 😀")]
    assert load_messages(text) == expected
    assert load_messages(text.encode()) == expected
    assert load_messages(bytearray(text.encode())) == expected
    assert load_messages(memoryview(text.encode())) == expected
    assert load_messages(b"\xef\xbb\xbf" + text.encode()) == expected  # UTF-8 BOM
    assert load_messages(doc) == expected
    assert messages_from_jsonable(doc) == expected
    assert load_messages(b"[]") == []
    assert load_messages_and_thoughts("[]") == ([], [])
    assert dump_messages([]) == b"[]"


def test_non_ascii_and_lone_surrogates_round_trip() -> None:
    history = [CanonicalMessage.user("héllo ☃ 😀 \ud800 end")]
    data = dump_messages(history)
    data.decode("utf-8")  # always valid UTF-8
    assert load_messages(data) == history


def test_jsonable_is_what_dump_writes() -> None:
    history = [
        CanonicalMessage.request(UserPromptPart(("a", {"b": 1}))),
        CanonicalMessage.response(ToolCallPart("c", "t", {"x": (1, 2)})),
    ]
    jsonable = messages_to_jsonable(history)
    assert jsonable[0]["parts"][0]["content"] == ["a", {"b": 1}]
    assert json.loads(dump_messages(history)) == json.loads(json.dumps(jsonable))


def test_converter_is_a_cattrs_converter_with_hooks_for_every_class() -> None:
    any_part: Any = Part  # a union, which cattrs' type hints do not spell
    assert isinstance(converter, cattrs.Converter)
    assert converter.structure({"part_kind": "text", "content": "x"}, TextPart) == TextPart("x")
    assert converter.structure({"part_kind": "text", "content": "x"}, any_part) == TextPart("x")
    assert converter.structure({"part_kind": "user-prompt", "content": "x"}, any_part) == UserPromptPart("x")
    assert converter.structure({"part_kind": "odd", "a": 1}, any_part) == UnknownPart(
        "odd", {"part_kind": "odd", "a": 1}
    )
    assert converter.structure({"part_kind": "odd"}, UnknownPart) == UnknownPart("odd", {"part_kind": "odd"})
    message = CanonicalMessage.response(TextPart("x"), ToolCallPart("c", "t", "{}"))
    assert converter.unstructure(message) == messages_to_jsonable([message])[0]
    assert converter.structure(converter.unstructure(message), CanonicalMessage) == message
    assert converter.unstructure(TextPart("x"), unstructure_as=Part) == {"part_kind": "text", "content": "x"}
    stamp = datetime(2024, 1, 1, tzinfo=UTC)
    assert converter.structure(converter.unstructure(stamp), datetime) == stamp
    # the fast path for minimal parts and the general path build equal objects
    assert converter.structure({"part_kind": "text", "content": "x", "metadata": None}, TextPart) == TextPart(
        "x", extra={"metadata": None}
    )
    with pytest.raises(WireFormatError, match="part must be a JSON object"):
        converter.structure(["x"], TextPart)


# ---------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------


def _doc(*parts: Any, kind: str = "request", **fields: Any) -> list[Any]:
    return [{"kind": "request", "parts": []}, {"kind": kind, "parts": list(parts), **fields}]


BAD_DOCUMENTS: list[tuple[str, Any, int | None, int | None, str | None, str]] = [
    ("top level object", {"kind": "request", "parts": []}, None, None, None, "must be a JSON array"),
    ("top level string", "hello", None, None, None, "must be a JSON array"),
    ("top level null", None, None, None, None, "must be a JSON array"),
    ("message not an object", [["kind"]], 0, None, None, "message must be a JSON object"),
    (
        "message a string",
        [{"kind": "request", "parts": []}, "x"],
        1,
        None,
        None,
        "message must be a JSON object",
    ),
    ("missing kind", [{"parts": []}], 0, None, "kind", "missing required field"),
    ("empty legacy-less dict", [{}], 0, None, "kind", "missing required field"),
    ("unknown kind", [{"kind": "system", "parts": []}], 0, None, "kind", "'request' or 'response'"),
    ("kind not a string", [{"kind": 3, "parts": []}], 0, None, "kind", "'request' or 'response'"),
    ("missing parts", [{"kind": "request"}], 0, None, "parts", "missing required field"),
    ("parts not a list", [{"kind": "request", "parts": {"a": 1}}], 0, None, "parts", "must be an array"),
    ("part not an object", _doc("text"), 1, 0, None, "part must be a JSON object"),
    (
        "part a list",
        _doc({"part_kind": "text", "content": "x"}, [1], kind="response"),
        1,
        1,
        None,
        "JSON object",
    ),
    ("part without part_kind", _doc({"content": "x"}), 1, 0, "part_kind", "missing required field"),
    ("part_kind not a string", _doc({"part_kind": ["text"]}), 1, 0, "part_kind", "must be a string"),
    (
        "response kind in request",
        _doc({"part_kind": "text", "content": "x"}),
        1,
        0,
        "part_kind",
        "request cannot",
    ),
    (
        "request kind in response",
        _doc({"part_kind": "tool-return", "tool_call_id": "a", "content": "x"}, kind="response"),
        1,
        0,
        "part_kind",
        "response cannot",
    ),
    (
        "tool call without id",
        _doc({"part_kind": "tool-call", "tool_name": "t"}, kind="response"),
        1,
        0,
        "tool_call_id",
        "missing required field",
    ),
    (
        "tool call with empty id",
        _doc({"part_kind": "tool-call", "tool_call_id": "", "tool_name": "t", "args": {}}, kind="response"),
        1,
        0,
        "tool_call_id",
        "non-empty",
    ),
    (
        "tool call with null id",
        _doc({"part_kind": "tool-call", "tool_call_id": None, "tool_name": "t"}, kind="response"),
        1,
        0,
        "tool_call_id",
        "non-empty",
    ),
    (
        "tool call with numeric id",
        _doc({"part_kind": "tool-call", "tool_call_id": 5, "tool_name": "t"}, kind="response"),
        1,
        0,
        "tool_call_id",
        "non-empty",
    ),
    (
        "tool return without id",
        _doc({"part_kind": "tool-return", "content": "x"}),
        1,
        0,
        "tool_call_id",
        "missing",
    ),
    (
        "tool return with empty id",
        _doc({"part_kind": "tool-return", "tool_call_id": "", "content": "x", "tool_name": "t"}),
        1,
        0,
        "tool_call_id",
        "non-empty",
    ),
    (
        "tool return without content",
        _doc({"part_kind": "tool-return", "tool_call_id": "a"}),
        1,
        0,
        "content",
        "missing required field",
    ),
    (
        "text content not a string",
        _doc({"part_kind": "text", "content": 5}, kind="response"),
        1,
        0,
        "content",
        "string",
    ),
    ("text without content", _doc({"part_kind": "text"}, kind="response"), 1, 0, "content", "missing"),
    (
        "thinking content null",
        _doc({"part_kind": "thinking", "content": None}, kind="response"),
        1,
        0,
        "content",
        "string",
    ),
    (
        "tool name not a string",
        _doc({"part_kind": "tool-call", "tool_call_id": "a", "tool_name": 1}, kind="response"),
        1,
        0,
        "tool_name",
        "must be a string",
    ),
    (
        "tool name missing",
        _doc({"part_kind": "tool-call", "tool_call_id": "a"}, kind="response"),
        1,
        0,
        "tool_name",
        "missing required field",
    ),
    (
        "args a number",
        _doc({"part_kind": "tool-call", "tool_call_id": "a", "tool_name": "t", "args": 3}, kind="response"),
        1,
        0,
        "args",
        "object, a string or null",
    ),
    (
        "args a list",
        _doc({"part_kind": "tool-call", "tool_call_id": "a", "tool_name": "t", "args": [1]}, kind="response"),
        1,
        0,
        "args",
        "object, a string or null",
    ),
    (
        "timestamp unparsable",
        _doc({"part_kind": "user-prompt", "content": "x", "timestamp": "yesterday"}),
        1,
        0,
        "timestamp",
        "ISO-8601",
    ),
    (
        "timestamp a number",
        _doc({"part_kind": "system-prompt", "content": "x", "timestamp": 1700000000}),
        1,
        0,
        "timestamp",
        "ISO-8601",
    ),
    ("message timestamp bad", _doc(timestamp="2024-13-01"), 1, None, "timestamp", "ISO-8601"),
    ("usage not an object", _doc(kind="response", usage=[1]), 1, None, "usage", "must be an object"),
    (
        "usage tokens not an integer",
        _doc(kind="response", usage={"input_tokens": "many"}),
        1,
        None,
        "usage.input_tokens",
        "integer",
    ),
    (
        "usage tokens a boolean",
        _doc(kind="response", usage={"output_tokens": True}),
        1,
        None,
        "usage.output_tokens",
        "integer",
    ),
    ("model name not a string", _doc(kind="response", model_name=3), 1, None, "model_name", "string"),
    ("instructions not a string", _doc(instructions={"a": 1}), 1, None, "instructions", "string"),
    (
        "user content a number",
        _doc({"part_kind": "user-prompt", "content": 3}),
        1,
        0,
        "content",
        "string or an array",
    ),
    (
        "retry content an object",
        _doc({"part_kind": "retry-prompt", "content": {}}),
        1,
        0,
        "content",
        "string or an array",
    ),
    (
        "retry tool name a number",
        _doc({"part_kind": "retry-prompt", "content": "x", "tool_name": 1}),
        1,
        0,
        "tool_name",
        "string",
    ),
    (
        "signature not a string",
        _doc({"part_kind": "thinking", "content": "x", "signature": 1}, kind="response"),
        1,
        0,
        "signature",
        "string",
    ),
    (
        "dynamic ref not a string",
        _doc({"part_kind": "system-prompt", "content": "x", "dynamic_ref": []}),
        1,
        0,
        "dynamic_ref",
        "string",
    ),
    ("legacy thought not a string", [{"thought": 3}], 0, None, "thought", "string"),
    ("legacy timestamp bad", [{"thought": "t", "timestamp": []}], 0, None, "timestamp", "ISO-8601"),
    ("legacy content not text", [{"content": 3}], 0, None, "content", "string or an array"),
]


@pytest.mark.parametrize(
    ("document", "message_index", "part_index", "field", "reason"),
    [pytest.param(*case[1:], id=case[0]) for case in BAD_DOCUMENTS],
)
def test_bad_documents_name_the_location(
    document: Any, message_index: int | None, part_index: int | None, field: str | None, reason: str
) -> None:
    for data in (json.dumps(document), json.dumps(document).encode()):
        with pytest.raises(WireFormatError) as caught:
            load_messages(data)
        error = caught.value
        assert (error.message_index, error.part_index, error.field) == (message_index, part_index, field)
        assert reason in error.reason
        assert reason in str(error)
        if message_index is not None:
            assert f"message {message_index}" in str(error)
        if part_index is not None:
            assert f"part {part_index}" in str(error)


def test_legacy_thought_errors_in_thoughts_mode_name_the_location() -> None:
    with pytest.raises(WireFormatError) as caught:
        load_messages_and_thoughts('[{"content": "x"}, {"thought": null}]')
    assert (caught.value.message_index, caught.value.field) == (1, "thought")


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        pytest.param(b"", "invalid JSON", id="empty"),
        pytest.param(b'[{"kind": "request", "parts": [', "line 1 column 32 \\(char 31\\)", id="truncated"),
        pytest.param(b'[{"kind": "request"}\n,,]', "line 2 column 2", id="junk"),
        pytest.param(b"[NaN]", "NaN is not a JSON value", id="nan"),
        pytest.param(b"[-Infinity]", "-Infinity is not a JSON value", id="infinity"),
        pytest.param(b"\xff\xfe[]", "invalid UTF-8 at byte 0", id="not utf-8"),
        pytest.param(b"[" * 100_000 + b"]" * 100_000, "invalid JSON", id="too deep"),
        pytest.param(b"[" + b"1" * 5000 + b"]", "invalid JSON", id="huge integer"),
    ],
)
def test_invalid_json_is_a_wire_format_error(data: bytes, reason: str) -> None:
    with pytest.raises(WireFormatError, match=reason) as caught:
        load_messages(data)
    assert caught.value.message_index is None


def test_non_list_jsonable_and_wrong_input_types() -> None:
    with pytest.raises(WireFormatError, match="JSON array"):
        messages_from_jsonable({"kind": "request"})  # pyright: ignore[reportArgumentType]
    with pytest.raises(WireFormatError, match="JSON array"):
        load_messages(3)  # pyright: ignore[reportArgumentType]


def test_errors_are_raised_from_the_first_bad_message_and_keep_no_partial_state() -> None:
    doc = [
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "x"}]},
        {"kind": "response", "parts": [{"part_kind": "text", "content": "ok"}, {"part_kind": "text"}]},
        {"kind": "bogus", "parts": []},
    ]
    with pytest.raises(WireFormatError) as caught:
        load_messages(json.dumps(doc))
    assert (caught.value.message_index, caught.value.part_index, caught.value.field) == (1, 1, "content")


def test_dump_errors_name_the_location() -> None:
    with pytest.raises(WireFormatError) as caught:
        dump_messages([CanonicalMessage.user("x"), "not a message"])  # pyright: ignore[reportArgumentType]
    assert caught.value.message_index == 1

    bad_content = CanonicalMessage.request(ToolReturnPart("c", "t", {"x": float("nan")}))
    with pytest.raises(WireFormatError) as caught:
        dump_messages([CanonicalMessage.user("x"), bad_content])
    assert (caught.value.message_index, caught.value.part_index, caught.value.field) == (1, 0, "content")

    bad_args = CanonicalMessage.response(ToolCallPart("c", "t", {"x": object()}))
    with pytest.raises(WireFormatError) as caught:
        dump_messages([bad_args])
    assert (caught.value.message_index, caught.value.part_index, caught.value.field) == (0, 0, "args")

    bad_metadata = CanonicalMessage.user("x").replace(metadata={"when": {1, 2}, "f": float("inf")})
    with pytest.raises(WireFormatError) as caught:
        dump_messages([bad_metadata])
    assert (caught.value.message_index, caught.value.part_index, caught.value.field) == (0, None, "metadata")

    class Alien:
        part_kind = "alien"

    with pytest.raises(WireFormatError) as caught:
        dump_messages([_with_alien_part(Alien())])
    assert (caught.value.message_index, caught.value.part_index) == (0, 0)


def _with_alien_part(part: object) -> CanonicalMessage:
    message = CanonicalMessage.response()
    object.__setattr__(message, "parts", (part,))  # bypass validation to simulate a foreign object
    return message


def test_dump_converts_non_json_containers() -> None:
    from types import MappingProxyType

    message = CanonicalMessage.response(ToolCallPart("c", "t", MappingProxyType({"a": (1, 2)})))
    assert json.loads(dump_messages([message]))[0]["parts"][0]["args"] == {"a": [1, 2]}
    stamped = CanonicalMessage.request(ToolReturnPart("c", "t", {"at": datetime(2024, 1, 1, tzinfo=UTC)}))
    assert json.loads(dump_messages([stamped]))[0]["parts"][0]["content"] == {"at": "2024-01-01T00:00:00Z"}


# ---------------------------------------------------------------------------------------
# Corpus
# ---------------------------------------------------------------------------------------


def test_corpus_file_round_trips_exactly(corpus_file: Path) -> None:
    raw = corpus_file.read_bytes()
    original = json.loads(raw)
    loaded = load_messages(raw)
    assert len(loaded) == len(original)
    dumped = dump_messages(loaded)
    assert json.loads(dumped) == original
    assert load_messages(dumped) == loaded
    for message, item in zip(loaded, original, strict=True):
        assert message.kind == item["kind"]
        assert [p.part_kind for p in message.parts] == [p["part_kind"] for p in item["parts"]]
        assert not any(isinstance(p, UnknownPart) for p in message.parts)
        wire_ids = [p["tool_call_id"] for p in item["parts"] if "tool_call_id" in p]
        ids = [
            p.tool_call_id
            for p in message.parts
            if isinstance(p, (ToolCallPart, ToolReturnPart, RetryPromptPart))
        ]
        assert ids == wire_ids
        for part, wire in zip(message.parts, item["parts"], strict=True):
            if "content" in wire:
                content = cast("Any", part).content
                assert content == (
                    tuple(wire["content"]) if isinstance(wire["content"], list) else wire["content"]
                )
            if "args" in wire:
                assert isinstance(part, ToolCallPart)
                assert part.args == wire["args"]


def test_unexpected_errors_inside_hooks_are_wrapped(monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.wire as wire

    def broken(data: Any, _type: Any) -> Any:
        raise cattrs.ClassValidationError("broken hook", [KeyError("x")], UserPromptPart)  # pyright: ignore[reportCallIssue]

    monkeypatch.setitem(wire._REQUEST_STRUCTURE, "user-prompt", broken)
    doc = [{"kind": "response", "parts": []}, {"kind": "request", "parts": [{"part_kind": "user-prompt"}]}]
    for loader in (load_messages, load_messages_and_thoughts):
        with pytest.raises(WireFormatError, match="ClassValidationError") as caught:
            loader(json.dumps(doc))
        assert caught.value.message_index == 1
        assert isinstance(caught.value.__cause__, cattrs.ClassValidationError)


def test_loading_pauses_the_garbage_collector_and_always_restores_it() -> None:
    import gc

    from harness import wire

    seen: list[bool] = []
    original = wire._load_items

    def spy(items: list[object], thoughts: list[str] | None) -> list[CanonicalMessage]:
        seen.append(gc.isenabled())
        return original(items, thoughts)  # pyright: ignore[reportArgumentType]

    assert gc.isenabled()
    wire._load_items = spy  # pyright: ignore[reportAttributeAccessIssue]
    try:
        load_messages(b'[{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hi"}]}]')
        with pytest.raises(WireFormatError):
            load_messages(b'[{"kind": "request", "parts": [{"part_kind": "text", "content": "x"}]}]')
        gc.disable()
        load_messages(b"[]")
        assert not gc.isenabled(), "a collector the caller disabled stays disabled"
    finally:
        gc.enable()
        wire._load_items = original  # pyright: ignore[reportAttributeAccessIssue]
    assert seen == [False, False, False]
    assert gc.isenabled()
