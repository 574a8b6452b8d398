"""Load errors of harness.wire name the message, part and field at fault."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness.errors import WireFormatError
from harness.wire import load_messages


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


def test_errors_are_raised_from_the_first_bad_message_and_keep_no_partial_state() -> None:
    doc = [
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "x"}]},
        {"kind": "response", "parts": [{"part_kind": "text", "content": "ok"}, {"part_kind": "text"}]},
        {"kind": "bogus", "parts": []},
    ]
    with pytest.raises(WireFormatError) as caught:
        load_messages(json.dumps(doc))
    assert (caught.value.message_index, caught.value.part_index, caught.value.field) == (1, 1, "content")
