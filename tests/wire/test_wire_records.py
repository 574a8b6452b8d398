"""Claude Code transcripts and other JSON Lines records read by harness.wire.read_history."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from harness.core import (
    Part,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UnknownPart,
    UserPromptPart,
)
from harness.errors import WireFormatError
from harness.history import check_invariants
from harness.wire import dump_messages, load_messages, read_history

SESSION = {
    "sessionId": "s-1",
    "cwd": "/tmp/p",
    "version": "2.1.14",
    "gitBranch": "main",
    "isSidechain": False,
}


def extra(part: Part) -> Mapping[str, Any]:
    """The ``extra`` of a modelled part."""
    assert not isinstance(part, UnknownPart)
    return part.extra


def _usage() -> dict[str, Any]:
    return {
        "input_tokens": 3,
        "cache_read_input_tokens": 10,
        "cache_creation_input_tokens": 2,
        "output_tokens": 4,
    }


def _assistant(uuid: str, message_id: str, block: dict[str, Any], stamp: str) -> dict[str, Any]:
    return {
        **SESSION,
        "parentUuid": "p",
        "type": "assistant",
        "uuid": uuid,
        "timestamp": stamp,
        "requestId": "req_1",
        "message": {
            "model": "claude-opus-4-5",
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "content": [block],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": _usage(),
        },
    }


def _user(uuid: str, content: Any, stamp: str, **record: Any) -> dict[str, Any]:
    return {
        **SESSION,
        "type": "user",
        "uuid": uuid,
        "timestamp": stamp,
        "message": {"role": "user", "content": content},
        **record,
    }


def transcript() -> list[dict[str, Any]]:
    """A Claude Code session file's records, in its shapes (one line per assistant block)."""
    return [
        {
            "type": "queue-operation",
            "operation": "dequeue",
            "timestamp": "2026-01-21T06:19:38Z",
            "sessionId": "s-1",
        },
        {"type": "summary", "summary": "Adding multiply", "leafUuid": "u9"},
        _user("u1", "Add multiply(a, b).", "2026-01-21T06:19:38.056Z"),
        _assistant(
            "a1",
            "msg_1",
            {"type": "thinking", "thinking": "Look first.", "signature": "sig"},
            "2026-01-21T06:19:40Z",
        ),
        _assistant("a2", "msg_1", {"type": "text", "text": "Exploring."}, "2026-01-21T06:19:40.6Z"),
        _assistant(
            "a3",
            "msg_1",
            {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "m.py"}},
            "2026-01-21T06:19:41Z",
        ),
        _user(
            "u2",
            [{"tool_use_id": "toolu_1", "type": "tool_result", "content": "1→def add(a, b): ..."}],
            "2026-01-21T06:19:42Z",
            toolUseResult={"type": "text", "file": {"filePath": "m.py", "numLines": 1}},
            sourceToolAssistantUUID="a3",
        ),
        {
            "type": "system",
            "subtype": "info",
            "content": "Hook ran",
            "level": "info",
            "timestamp": "2026-01-21T06:19:43Z",
        },
        _assistant(
            "a4",
            "msg_2",
            {"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {"command": "git commit"}},
            "2026-01-21T06:19:44Z",
        ),
        _user(
            "u3",
            [{"type": "tool_result", "content": "Exit code 1", "is_error": True, "tool_use_id": "toolu_2"}],
            "2026-01-21T06:19:45Z",
            toolUseResult="Error: Exit code 1",
        ),
        _user("u4", "Stop hook feedback: commit first", "2026-01-21T06:19:46Z", isMeta=True),
        _assistant("a5", "msg_3", {"type": "text", "text": "Done."}, "2026-01-21T06:19:47Z"),
        {"type": "file-history-snapshot", "messageId": "m", "snapshot": {}, "isSnapshotUpdate": False},
    ]


def _jsonl(records: list[dict[str, Any]]) -> bytes:
    return "\n".join(json.dumps(record) for record in records).encode() + b"\n"


def test_a_claude_code_transcript_reads_as_a_clean_history() -> None:
    loaded = read_history(_jsonl(transcript()))
    assert (loaded.format, loaded.json_lines) == ("anthropic", True)
    assert loaded.skipped == {"queue-operation": 1, "summary": 1, "system": 1, "file-history-snapshot": 1}
    messages = loaded.messages
    assert [m.kind for m in messages] == ["request", "response", "request", "response", "request", "response"]
    assert [type(p) for p in messages[1].parts] == [ThoughtPart, TextPart, ToolCallPart]
    assert messages[1].provider_response_id == "msg_1"
    assert messages[1].model_name == "claude-opus-4-5"
    assert messages[1].timestamp == datetime(2026, 1, 21, 6, 19, 40, tzinfo=UTC)
    (result,) = messages[2].parts
    assert isinstance(result, ToolReturnPart)
    assert (result.tool_call_id, result.tool_name) == ("toolu_1", "Read")
    assert extra(messages[4].parts[0])["is_error"] is True
    assert isinstance(messages[4].parts[1], UserPromptPart)
    assert extra(messages[4].parts[1])["record"]["isMeta"] is True
    assert check_invariants(messages) == []


def test_nothing_of_a_record_is_lost() -> None:
    messages = read_history(_jsonl(transcript())).messages
    _, text, call = messages[1].parts
    # the first record's timestamp fills the message; later records keep theirs
    assert extra(text)["record"] == {
        **SESSION,
        "parentUuid": "p",
        "uuid": "a2",
        "requestId": "req_1",
        "timestamp": "2026-01-21T06:19:40.6Z",
    }
    assert extra(call)["record"]["uuid"] == "a3"
    assert extra(text)["message"] == {"type": "message"}
    (result,) = messages[2].parts
    assert extra(result)["record"]["toolUseResult"] == {
        "type": "text",
        "file": {"filePath": "m.py", "numLines": 1},
    }
    assert extra(result)["record"]["sourceToolAssistantUUID"] == "a3"
    assert load_messages(dump_messages(messages)) == messages


def test_a_bookkeeping_line_with_content_is_never_a_prompt() -> None:
    """Claude Code's ``system`` lines carry ``content``; the legacy form must not read them."""
    messages = read_history(_jsonl(transcript())).messages
    texts = [p.content for m in messages for p in m.parts if isinstance(p, UserPromptPart)]
    assert "Hook ran" not in texts


def test_sidechain_turns_are_skipped_beside_the_main_conversation_but_read_alone() -> None:
    main = transcript()
    side = [
        {**_user("s1", "explore", "2026-01-21T06:20:00Z"), "isSidechain": True},
        {
            **_assistant("s2", "msg_9", {"type": "text", "text": "found"}, "2026-01-21T06:20:01Z"),
            "isSidechain": True,
        },
    ]
    mixed = read_history(_jsonl(main + side))
    assert mixed.skipped["sidechain"] == 2
    assert len(mixed.messages) == 6
    alone = read_history(_jsonl(side))
    assert [m.kind for m in alone.messages] == ["request", "response"]
    assert alone.skipped == {}


def test_records_of_openai_messages_are_read_too() -> None:
    lines = [
        {"ts": 1, "message": {"role": "user", "content": "hi"}},
        {
            "ts": 2,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
            },
        },
        {"ts": 3, "message": {"role": "tool", "tool_call_id": "c", "content": "r"}},
    ]
    loaded = read_history(_jsonl(lines))
    assert loaded.format == "openai"
    assert loaded.messages[2].parts == (
        ToolReturnPart(tool_call_id="c", tool_name="f", content="r", extra={"record": {"ts": 3}}),
    )


def test_one_message_per_line_without_records() -> None:
    lines = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    loaded = read_history(_jsonl(lines))
    assert (loaded.format, loaded.json_lines, len(loaded.messages)) == ("openai", True, 2)


def test_a_file_of_records_without_messages_is_an_error() -> None:
    """Claude Code leaves files holding only summary lines; they are no history."""
    records = [{"type": "summary", "summary": "a", "leafUuid": "1"}, {"type": "summary", "summary": "b"}]
    with pytest.raises(WireFormatError, match=r"no message found, only records without one \(summary: 2\)"):
        read_history(_jsonl(records))


def test_a_data_set_of_conversations_is_not_one_history() -> None:
    lines = [
        {"messages": [{"role": "user", "content": "a"}]},
        {"messages": [{"role": "user", "content": "b"}]},
    ]
    with pytest.raises(WireFormatError) as caught:
        read_history(_jsonl(lines))
    assert (caught.value.line, caught.value.message_index) == (1, 0)
    assert "data set of conversations" in str(caught.value)


def test_errors_in_a_record_name_its_line() -> None:
    records = transcript()
    records[5]["message"]["content"][0] = {"type": "tool_use", "name": "Read", "input": {}}  # no id
    with pytest.raises(WireFormatError) as caught:
        read_history(_jsonl(records))
    error = caught.value
    assert (error.format, error.line, error.message_index, error.field) == (
        "anthropic",
        6,
        5,
        "content[0].id",
    )
    assert str(error).startswith("anthropic format, line 6, message 5")
