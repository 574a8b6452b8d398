"""Parameters, validation, the plugin's shape, the guard's decisions on hand-built histories, the README."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest
from harness_compact_on_request import (
    MARK_KEY,
    STATUSES,
    TOOL_NAME,
    CompactOnRequest,
    decide,
    is_activity,
    pending_returns,
    status_of,
)

from harness import (
    CanonicalMessage,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from harness.core import with_harness_mark
from harness.errors import StackConfigError
from harness.testing import assert_plugin_valid

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_the_plugin_is_well_formed() -> None:
    assert_plugin_valid(CompactOnRequest)
    assert_plugin_valid(CompactOnRequest(stack="clear_tool_results:keep_pairs=2"))
    assert CompactOnRequest.name == "compact_on_request"
    assert "tiered" in CompactOnRequest.runs_after
    assert "recall" in CompactOnRequest.runs_after
    assert CompactOnRequest.runs_before == ("limit_warner",)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_messages_between": 0}, "min_messages_between must be at least 1, got 0"),
        ({"min_messages_between": True}, "min_messages_between must be an integer"),
        ({"context_window": 0}, "context_window must be at least 1"),
        ({"target_fraction": 0}, "target_fraction must be in (0, 1]"),
        ({"target_fraction": 1.5}, "target_fraction must be in (0, 1]"),
        ({"target_fraction": "half"}, "target_fraction must be a number"),
        ({"tool_name": " "}, "tool_name must be a non-empty string"),
        ({"stack": []}, "stack must hold at least one capability"),
        ({"stack": "  "}, "stack must name at least one capability"),
        ({"stack": 3}, "stack must be a list of capabilities, a stack string or None, got int"),
        ({"stack": [object()]}, "stack: capabilities[0] is object"),
    ],
)
def test_bad_values_name_the_parameter(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        CompactOnRequest(**kwargs)
    assert message in str(raised.value)


def test_a_bad_stack_string_names_the_entry_and_parameter() -> None:
    with pytest.raises(StackConfigError) as raised:
        CompactOnRequest(stack="clear_tool_results:keep_pears=2")
    text = str(raised.value)
    assert "keep_pears" in text
    assert "keep_pairs" in text, "did you mean"
    with pytest.raises(StackConfigError, match="unknown capability 'no_such_thing'"):
        CompactOnRequest(stack="no_such_thing")


def test_the_stack_forms() -> None:
    assert CompactOnRequest().describe() == "tiered"
    assert CompactOnRequest(stack="tiered").describe() == "tiered"
    assert CompactOnRequest(stack="clear_tool_results sliding_window").describe() == (
        "clear_tool_results sliding_window"
    )
    shown = repr(CompactOnRequest(stack="sliding_window"))
    assert shown == "CompactOnRequest('sliding_window', min_messages_between=2)"


def msg_call(call_id: str, *extra: Any) -> CanonicalMessage:
    return CanonicalMessage.response(
        *extra, ToolCallPart(tool_call_id=call_id, tool_name=TOOL_NAME, args={"reason": "r"})
    )


def msg_return(call_id: str, status: str | None = None) -> CanonicalMessage:
    part = ToolReturnPart(tool_call_id=call_id, tool_name=TOOL_NAME, content="ok")
    if status is not None:
        part = with_harness_mark(part, **{MARK_KEY: status})
    return CanonicalMessage.request(part)


def work(n: int) -> list[CanonicalMessage]:
    out: list[CanonicalMessage] = []
    for i in range(n):
        out.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"w{i}", tool_name="read_file", args={"path": "a"})
            )
        )
        out.append(
            CanonicalMessage.request(ToolReturnPart(tool_call_id=f"w{i}", tool_name="read_file", content="x"))
        )
    return out


@pytest.mark.parametrize("status", sorted(STATUSES))
def test_only_performed_compactions_count_as_the_last_one(status: str) -> None:
    history = [CanonicalMessage.user("go"), msg_call("k1"), msg_return("k1", status), msg_call("k2")]
    decision = decide(history, "k2", min_messages_between=1)
    assert decision.accepted is (status in ("refused", "failed"))


def test_work_is_counted_back_to_the_last_compaction() -> None:
    base = [CanonicalMessage.user("go"), msg_call("k1"), msg_return("k1", "compacted")]
    for messages, needed, accepted in [
        ([], 1, False),
        (work(1), 2, True),  # a call and its result: two messages of work
        (work(1), 3, False),
        (work(2), 4, True),
    ]:
        history = [*base, *messages, msg_call("k2")]
        assert decide(history, "k2", min_messages_between=needed).accepted is accepted, (
            len(messages),
            needed,
        )


def test_text_in_the_calling_response_is_work_thinking_is_not() -> None:
    base = [CanonicalMessage.user("go"), msg_call("k1"), msg_return("k1", "compacted")]
    said = [*base, msg_call("k2", TextPart("Let me compact."))]
    assert decide(said, "k2", min_messages_between=1).accepted
    thought = [*base, msg_call("k2", ThoughtPart("compact?"))]
    assert not decide(thought, "k2", min_messages_between=1).accepted
    assert not is_activity(SystemPromptPart("s"))
    assert not is_activity(TextPart("  "))
    assert is_activity(UserPromptPart("u"))
    assert not is_activity(ToolReturnPart(tool_call_id="k", tool_name=TOOL_NAME, content="x"))
    assert is_activity(ToolReturnPart(tool_call_id="k", tool_name="other", content="x"))


def test_one_call_per_turn_and_the_reason_is_read_from_the_arguments() -> None:
    response = CanonicalMessage.response(
        ToolCallPart(tool_call_id="k1", tool_name=TOOL_NAME, args={"reason": "first"}),
        ToolCallPart(tool_call_id="k2", tool_name=TOOL_NAME, args='{"reason": "second"}'),
    )
    history = [CanonicalMessage.user("go"), response]
    first, second = (
        decide(history, "k1", min_messages_between=1),
        decide(history, "k2", min_messages_between=1),
    )
    assert (first.accepted, first.reason) == (True, "first")
    assert (second.accepted, second.reason) == (False, "second")
    assert "call 'k1' of this same turn" in second.message


def test_pending_returns_are_the_unmarked_answers_of_the_last_request() -> None:
    last = CanonicalMessage.request(
        ToolReturnPart(tool_call_id="a", tool_name=TOOL_NAME, content="x"),
        with_harness_mark(
            ToolReturnPart(tool_call_id="b", tool_name=TOOL_NAME, content="x"), **{MARK_KEY: "compacted"}
        ),
        ToolReturnPart(tool_call_id="c", tool_name="read_file", content="x"),
    )
    assert pending_returns(last) == [0]
    assert pending_returns(CanonicalMessage.response(TextPart("x"))) == []
    assert status_of(last.parts[1]) == "compacted"
    assert status_of(last.parts[0]) is None


def test_the_readme_documents_every_parameter_with_its_default() -> None:
    table = re.search(r"^## Parameters\n(.*?)^## ", README, re.S | re.M)
    assert table is not None
    for name, parameter in inspect.signature(CompactOnRequest).parameters.items():
        row = re.search(rf"^\| `{name}` \| `([^`]*)` \|", table.group(1), re.M)
        assert row is not None, f"README has no row for {name}"
        assert row.group(1) == repr(parameter.default).replace("'", '"'), name
    for status in STATUSES:
        assert f"`{status}`" in README
