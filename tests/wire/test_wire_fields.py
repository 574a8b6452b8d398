"""How harness.wire reads and writes each message and part field (harness.wire.fields, .values)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from harness.core import (
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
    with_harness_mark,
)
from harness.wire import converter, dump_messages, load_messages, messages_to_jsonable

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
        CanonicalMessage.response(
            TextPart("..."), ToolCallPart(tool_call_id="tc_1", tool_name="bash", args={"command": "ls"})
        ),
        CanonicalMessage.request(ToolReturnPart(tool_call_id="tc_1", tool_name=None, content="...")),
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
        data={"content": "feedback", "retry": {"cause": "model_retry"}, "part_kind": "retry-feedback"},
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
    assert call_dict == ToolCallPart(tool_call_id="c2", tool_name="read", args={"path": "b.py"})
    assert call_none == ToolCallPart(tool_call_id="c3", tool_name="noargs", args=None, extra={"args": None})
    assert isinstance(builtin, UnknownPart)
    assert builtin.kind == "builtin-tool-call"
    assert builtin.data["tool_call_id"] == "b1"
    assert file == UnknownPart("file", data={"content": "x", "part_kind": "file", "media_type": "image/png"})
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
    assert messages_to_jsonable(
        [CanonicalMessage.request(ToolReturnPart(tool_call_id="c", tool_name="t", content=None))]
    )[0]["parts"] == [{"part_kind": "tool-return", "tool_call_id": "c", "tool_name": "t", "content": None}]
    # a null marker in extra is written; a set field wins over a marker of the same name
    marked = TextPart("x", metadata={"a": 1}, extra={"metadata": None, "id": None})
    assert converter.unstructure(marked) == {
        "part_kind": "text",
        "content": "x",
        "metadata": {"a": 1},
        "id": None,
    }
    # extra cannot override the class-owned keys
    sneaky = ToolCallPart(
        tool_call_id="c", tool_name="t", args={}, extra={"part_kind": "text", "tool_call_id": "other"}
    )
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
    part = with_harness_mark(
        ToolReturnPart(tool_call_id="c1", tool_name="read", content="[cleared]"), cleared=True
    )
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
        (UnknownPart("compaction", data=data),),
        (UnknownPart("compaction", data=data),),
    ]
    assert json.loads(dump_messages(loaded)) == doc
    # an UnknownPart built without part_kind in its data still writes one
    built = CanonicalMessage.response(UnknownPart("file", data={"x": 1}))
    assert messages_to_jsonable([built])[0]["parts"] == [{"x": 1, "part_kind": "file"}]
