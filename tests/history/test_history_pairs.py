"""Tests of harness.history.pairs: tool_pairs."""

from __future__ import annotations

from typing import Any

from harness.core import (
    CanonicalMessage,
    Part,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from harness.history import ToolPair, tool_pairs


def req(*parts: Part, **fields: Any) -> CanonicalMessage:
    return CanonicalMessage.request(*parts, **fields)


def resp(*parts: Part, **fields: Any) -> CanonicalMessage:
    return CanonicalMessage.response(*parts, **fields)


def user(text: str = "hi") -> UserPromptPart:
    return UserPromptPart(text)


def call(call_id: str, name: str = "bash") -> ToolCallPart:
    return ToolCallPart(tool_call_id=call_id, tool_name=name, args={"cmd": "ls"})


def ret(call_id: str, content: Any = "ok", name: str | None = "bash") -> ToolReturnPart:
    return ToolReturnPart(tool_call_id=call_id, tool_name=name, content=content)


def retry(call_id: str | None, name: str | None = "bash") -> RetryPromptPart:
    return RetryPromptPart("try again", tool_name=name, tool_call_id=call_id)


# --------------------------------------------------------------------------- tool_pairs


def test_tool_pairs() -> None:
    history = [
        req(user(), ret("orphan")),
        resp(call("a"), call("b")),
        req(ret("a"), retry("b")),
        resp(TextPart("x")),
        req(ret("b"), ret("b")),
    ]
    assert tool_pairs(history) == {"a": ToolPair(1, (2,)), "b": ToolPair(1, (2, 4))}
