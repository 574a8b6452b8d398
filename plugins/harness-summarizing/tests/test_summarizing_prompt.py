"""Safe templating and the transcript shown to the summarizer."""

from __future__ import annotations

import pytest
from harness_summarizing import DEFAULT_SUMMARY_PROMPT, render_template, render_transcript
from harness_summarizing.prompt import bound_text, validate_template
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import (
    CanonicalMessage,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UnknownPart,
    UserPromptPart,
)


def test_known_placeholders_substituted_once() -> None:
    out = render_template(
        "A {messages} B {previous_summary} C", {"messages": "{previous_summary}", "previous_summary": "P"}
    )
    # the substituted value is not re-scanned: its braces are inert
    assert out == "A {previous_summary} B P C"


def test_unknown_placeholders_and_stray_braces_kept() -> None:
    template = 'json: {"a": 1} {unknown} { messages } {messages} {0} }{'
    assert render_template(template, {"messages": "M"}) == 'json: {"a": 1} {unknown} { messages } M {0} }{'


def test_double_braces_unescape_like_format() -> None:
    assert render_template("{{messages}} {messages}", {"messages": "M"}) == "{messages} M"


@settings(max_examples=150, deadline=None)
@given(st.text(), st.text())
def test_any_content_renders_verbatim(content: str, previous: str) -> None:
    out = render_template(
        "<{messages}>[{previous_summary}]", {"messages": content, "previous_summary": previous}
    )
    assert out == f"<{content}>[{previous}]"


def test_validate_template() -> None:
    validate_template("x {messages} y")
    with pytest.raises(ValueError, match=r"my_param must contain the \{messages\} placeholder"):
        validate_template("x {message} y", parameter="my_param")


def test_default_prompt_sections_and_placeholders() -> None:
    for heading in ("Intent", "Key decisions", "Artifacts", "Current state", "Next steps", "Open questions"):
        assert f"## {heading}" in DEFAULT_SUMMARY_PROMPT
    for name in ("{messages}", "{previous_summary}", "{message_count}"):
        assert name in DEFAULT_SUMMARY_PROMPT
    validate_template(DEFAULT_SUMMARY_PROMPT)


def test_bound_text() -> None:
    assert bound_text("abc", 5) == "abc"
    assert bound_text("abcdefgh", 3) == "abc…[5 chars omitted]"
    assert bound_text("abcdefgh", None) == "abcdefgh"


def test_transcript_lines_and_bounds() -> None:
    messages = [
        CanonicalMessage.request(SystemPromptPart("be nice"), UserPromptPart("do {x}")),
        CanonicalMessage.response(
            ThoughtPart("secret thinking"),
            TextPart("sure"),
            TextPart("  "),
            ToolCallPart(tool_call_id="c1", tool_name="read_file", args={"path": "a.py"}),
            ToolCallPart(tool_call_id="c2", tool_name="bash", args='{"command": "ls"}'),
            ToolCallPart(tool_call_id="c3", tool_name="noop"),
        ),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="c1", tool_name="read_file", content="x" * 50),
            ToolReturnPart(tool_call_id="c2", tool_name=None, content={"out": [1, 2]}),
            RetryPromptPart("try again", tool_name="noop", tool_call_id="c3"),
            RetryPromptPart("bad output"),
            UnknownPart("mystery", data={"part_kind": "mystery"}),
        ),
    ]
    text = render_transcript(messages, tool_return_max_chars=10)
    lines = text.split("\n")
    assert lines[0] == "System: be nice"
    assert lines[1] == "User: do {x}"
    assert lines[2] == "Assistant: sure"
    assert lines[3] == 'Tool call [read_file]: {"path": "…[6 chars omitted]'
    assert lines[4] == 'Tool call [bash]: {"command"…[7 chars omitted]'
    assert lines[5] == "Tool call [noop]: {}"
    assert lines[6] == "Tool result [read_file]: xxxxxxxxxx…[40 chars omitted]"
    assert lines[7] == 'Tool result [?]: {"out": [1…[5 chars omitted]'
    assert lines[8] == "Retry [noop]: try again"
    assert lines[9] == "Retry [model]: bad output"
    assert lines[10] == "[mystery part]"
    assert "secret thinking" not in text
    unbounded = render_transcript(messages, tool_return_max_chars=None)
    assert "x" * 50 in unbounded
