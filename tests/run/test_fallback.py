"""Fallback parsing of textual tool calls."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import CanonicalMessage, TextPart, ThoughtPart, ToolCallPart, harness_mark
from harness.run import FALLBACK_ID_PREFIX, extract_fallback_tool_calls, with_fallback_tool_calls

TOOLS = {"read_file", "bash"}


def names_and_args(text: str) -> list[tuple[str, object]]:
    return [(c.tool_name, c.args) for c in extract_fallback_tool_calls(text, TOOLS)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>',
            [("bash", {"command": "ls"})],
        ),
        (
            '<tool_call>\n  {"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>\n'
            '<TOOL_CALL>{"name": "read_file", "arguments": "{\\"path\\": \\"a.py\\"}"}</TOOL_CALL>',
            [("bash", {"command": "ls"}), ("read_file", {"path": "a.py"})],
        ),
        ('<function=read_file>{"path": "x"}</function>', [("read_file", {"path": "x"})]),
        (
            "<function=bash>\n{}\n</function> and <function=bash>not json</function>",
            [("bash", {}), ("bash", {})],
        ),
        ('```json\n{"tool": "bash", "args": {"command": "pwd"}}\n```', [("bash", {"command": "pwd"})]),
        ('```\n{"function": "bash", "parameters": {"command": "id"}}\n```', [("bash", {"command": "id"})]),
        (
            '```json\n[{"name": "bash", "arguments": {}}, '
            '{"name": "read_file", "arguments": {"path": "p"}}]\n```',
            [("bash", {}), ("read_file", {"path": "p"})],
        ),
        (
            'First {"name": "bash", "arguments": {"command": "a"}}'
            '{"name": "bash", "arguments": {"command": "b"}} done',
            [("bash", {"command": "a"}), ("bash", {"command": "b"})],
        ),
        (
            '{"function": {"name": "bash", "arguments": "{\\"command\\": \\"ls\\"}"}}',
            [("bash", {"command": "ls"})],
        ),
        ('{"name": "bash", "arguments": "not json"}', [("bash", {})]),
        ('{"name": "bash", "arguments": [1, 2]}', [("bash", {})]),
        ('text with braces } { "name": "bash" "broken', []),
        ('{"name": "rm", "arguments": {}}', []),
        ('{"note": {"name": "bash", "arguments": {"command": "nested"}}}', [("bash", {"command": "nested"})]),
        ("plain answer without calls", []),
        ('{"name": "bash", "arguments": {"s": "a } b { c"}}', [("bash", {"s": "a } b { c"})]),
    ],
)
def test_forms_and_shapes(text: str, expected: list[tuple[str, object]]) -> None:
    assert names_and_args(text) == expected


def test_first_strategy_that_finds_something_wins() -> None:
    text = '<tool_call>{"name": "bash", "arguments": {}}</tool_call> {"name": "read_file", "arguments": {}}'
    assert names_and_args(text) == [("bash", {})]


def test_no_tools_or_empty_text() -> None:
    assert extract_fallback_tool_calls('{"name": "bash"}', set()) == []
    assert extract_fallback_tool_calls("", TOOLS) == []


def test_ids_are_fallback_uuid_hex() -> None:
    (call,) = extract_fallback_tool_calls('{"name": "bash", "arguments": {}}', TOOLS)
    assert call.tool_call_id.startswith(FALLBACK_ID_PREFIX)
    assert len(call.tool_call_id) == len(FALLBACK_ID_PREFIX) + 32
    int(call.tool_call_id[len(FALLBACK_ID_PREFIX) :], 16)


def test_with_fallback_appends_marked_calls_and_keeps_text() -> None:
    response = CanonicalMessage.response(
        ThoughtPart("t"), TextPart('Run <function=bash>{"command": "ls"}</function>'), model_name="m"
    )
    updated = with_fallback_tool_calls(response, TOOLS, make_id=lambda: "fixed")
    assert updated is not None
    assert updated.parts[:2] == response.parts
    (call,) = updated.tool_calls
    assert (call.tool_call_id, call.tool_name, call.args) == ("fixed", "bash", {"command": "ls"})
    assert harness_mark(call) == {"fallback": True}
    assert updated.model_name == "m"


def test_with_fallback_skips_structured_calls_and_plain_text() -> None:
    structured = CanonicalMessage.response(
        TextPart('{"name": "bash", "arguments": {}}'), ToolCallPart(tool_call_id="c", tool_name="bash")
    )
    assert with_fallback_tool_calls(structured, TOOLS) is None
    assert with_fallback_tool_calls(CanonicalMessage.response(TextPart("hi")), TOOLS) is None


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet='{}[]":,abnmeshl <>/=`\\tool_call', max_size=80))
def test_never_crashes_and_only_registered_tools(text: str) -> None:
    for call in extract_fallback_tool_calls(text, TOOLS):
        assert call.tool_name in TOOLS
        assert isinstance(call.args, dict)
