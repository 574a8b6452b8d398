"""Unavoidable requests over budget: the first message and the newest turn alone do not fit."""

from __future__ import annotations

from harness.core import CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
from harness.eval.budget import floor_tokens, is_unavoidable
from harness.tokens import TokenCounter


def history(result: str) -> list[CanonicalMessage]:
    return [
        CanonicalMessage.request(UserPromptPart("the task")),
        CanonicalMessage.response(TextPart("thinking " * 200)),
        CanonicalMessage.request(UserPromptPart("go on")),
        CanonicalMessage.response(ToolCallPart(tool_call_id="c1", tool_name="read", args={"path": "a.py"})),
        CanonicalMessage.request(ToolReturnPart(tool_call_id="c1", tool_name="read", content=result)),
    ]


def test_the_floor_is_the_first_message_and_the_newest_turn() -> None:
    counter = TokenCounter()
    sent = history("short")
    assert floor_tokens(sent, counter) == counter.count_messages([sent[0], sent[3], sent[4]])
    assert floor_tokens(sent[:3], counter) == counter.count_messages(sent[:3])


def test_a_request_is_unavoidable_only_when_its_floor_is_over_the_budget() -> None:
    counter = TokenCounter()
    small, huge = history("short"), history("word " * 400)
    small_size, huge_size = counter.count_messages(small), counter.count_messages(huge)
    budget = floor_tokens(small, counter) + 10
    assert small_size > budget  # over budget, but a stack could drop the long middle turn
    assert not is_unavoidable(small, small_size, budget, counter)
    assert is_unavoidable(huge, huge_size, budget, counter)
    assert not is_unavoidable(huge, huge_size, huge_size, counter)  # within budget
