"""Anchors: constraint sentences, and the tracker reading a growing history once."""

from __future__ import annotations

from harness.core import (
    CanonicalMessage,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    with_harness_mark,
)
from harness.history.anchors import AnchorTracker, constraint_sentences, is_plan_tool


def test_constraint_sentences_are_the_requirement_sentences_verbatim() -> None:
    text = (
        "Port the parser to Rust. You must keep the public API unchanged. "
        "The tests live in tests/. Never edit generated files!\n\n"
        "- use only the standard library\n"
        "- speed matters\n"
        "Make sure `cargo test` passes before you stop."
    )
    assert constraint_sentences(text) == [
        "You must keep the public API unchanged.",
        "Never edit generated files!",
        "- use only the standard library",
        "Make sure `cargo test` passes before you stop.",
    ]


def test_long_pasted_text_is_not_a_constraint() -> None:
    assert constraint_sentences("You must " + "x" * 500) == []
    assert constraint_sentences("Just a plain question about parsers?") == []


def test_plan_tools_are_named_or_hold_todo_or_plan() -> None:
    assert is_plan_tool("TodoWrite")
    assert is_plan_tool("update_plan")
    assert is_plan_tool("write_todos")
    assert not is_plan_tool("bash")
    assert is_plan_tool("checklist", plan_tools={"checklist"})


def build() -> list[CanonicalMessage]:
    return [
        CanonicalMessage.request(
            SystemPromptPart("You are a coding agent."), UserPromptPart("Fix bug 12. Do not change the CLI.")
        ),
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="p1", tool_name="TodoWrite", args={"todos": ["read", "fix"]})
        ),
        CanonicalMessage.request(ToolReturnPart(tool_call_id="p1", tool_name="TodoWrite", content="ok")),
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="p2", tool_name="TodoWrite", args={"todos": ["fix", "test"]})
        ),
        CanonicalMessage.request(ToolReturnPart(tool_call_id="p2", tool_name="TodoWrite", content="ok")),
        CanonicalMessage.response(TextPart("fixed")),
        CanonicalMessage.request(UserPromptPart("Now add a test. It should cover the empty input.")),
    ]


def test_the_tracker_finds_task_instructions_constraints_and_the_latest_plan() -> None:
    tracker = AnchorTracker()
    tracker.update(build())
    assert [(a.kind, a.text) for a in tracker.anchors()] == [
        ("task", "Fix bug 12. Do not change the CLI."),
        ("instructions", "You are a coding agent."),
        ("constraint", "It should cover the empty input."),
        ("plan", 'TodoWrite: {"todos": ["fix", "test"]}'),
    ]  # "Do not change the CLI." is inside the task: not repeated


def test_the_tracker_reads_only_new_messages_and_survives_compaction() -> None:
    messages = build()
    tracker = AnchorTracker()
    tracker.update(messages[:3])
    first_task = tracker.task
    compacted = [messages[0], *messages[5:]]  # a window dropped the middle
    tracker.update(compacted)
    assert tracker.task is first_task
    assert tracker.plan is not None
    assert tracker.plan.text == 'TodoWrite: {"todos": ["read", "fix"]}'
    # the compacted plan call is gone from the history, but the tracker still knows it
    assert [a.kind for a in tracker.anchors()] == ["task", "instructions", "constraint", "plan"]


def test_marked_parts_and_harness_artifacts() -> None:
    plan = with_harness_mark(UserPromptPart("1. read 2. fix"), anchor="plan")
    summary = with_harness_mark(
        UserPromptPart("Summary: you must do X."), kind="summary", source="summarizing"
    )
    rule = with_harness_mark(UserPromptPart("prefer tabs"), anchor="constraint")
    tracker = AnchorTracker()
    tracker.update(
        [CanonicalMessage.request(UserPromptPart("task")), CanonicalMessage.request(summary, plan, rule)]
    )
    assert [(a.kind, a.text) for a in tracker.anchors()] == [
        ("task", "task"),
        ("constraint", "prefer tabs"),
        ("plan", "1. read 2. fix"),
    ]
