"""Tests of harness.history.queries: empty responses, system-only requests, user turns."""

from __future__ import annotations

from typing import Any

from harness.core import CanonicalMessage, Part, SystemPromptPart, TextPart, ToolReturnPart, UserPromptPart
from harness.history import (
    first_user_request_index,
    is_empty_response,
    is_system_only_request,
    leading_system_request,
    user_prompt_count,
)


def req(*parts: Part, **fields: Any) -> CanonicalMessage:
    return CanonicalMessage.request(*parts, **fields)


def resp(*parts: Part, **fields: Any) -> CanonicalMessage:
    return CanonicalMessage.response(*parts, **fields)


def user(text: str = "hi") -> UserPromptPart:
    return UserPromptPart(text)


def ret(call_id: str, content: Any = "ok", name: str | None = "bash") -> ToolReturnPart:
    return ToolReturnPart(tool_call_id=call_id, tool_name=name, content=content)


# --------------------------------------------------------------------------- queries


def test_requests_are_never_empty_responses() -> None:
    assert not is_empty_response(req())


def test_user_and_system_helpers() -> None:
    system = req(SystemPromptPart("rules"))
    history = [system, req(user("a")), resp(TextPart("x")), req(ret("q"), user("b")), req(ret("z"))]
    assert first_user_request_index(history) == 1
    assert first_user_request_index([resp(TextPart("x"))]) is None
    assert user_prompt_count(history) == 2
    assert is_system_only_request(system)
    assert not is_system_only_request(req())
    assert not is_system_only_request(req(SystemPromptPart("s"), user()))
    assert not is_system_only_request(resp(TextPart("x")))
    assert leading_system_request(history)
    assert not leading_system_request(history[1:])
    assert not leading_system_request([])
