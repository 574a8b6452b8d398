"""Small read-only questions about messages: empty responses, system-only requests, user turns."""

from __future__ import annotations

__all__ = [
    "first_user_request_index",
    "has_user_turns",
    "is_empty_response",
    "is_system_only_request",
    "leading_system_request",
    "user_prompt_count",
]

from collections.abc import Sequence

from harness.core.messages import CanonicalMessage, SystemPromptPart, TextPart, UserPromptPart


def is_empty_response(message: CanonicalMessage) -> bool:
    """True for a response no provider accepts as an assistant turn.

    A response is empty when it has no parts, or when every part is a
    :class:`~harness.core.messages.TextPart` whose content is empty or whitespace only
    (Anthropic rejects blank text blocks). A response holding thinking, a tool call or
    an unknown part is not empty. Requests are never empty responses.
    """
    if message.kind != "response":
        return False
    return all(isinstance(p, TextPart) and not p.content.strip() for p in message.parts)


def is_system_only_request(message: CanonicalMessage) -> bool:
    """True for a request whose parts are all system prompts (at least one)."""
    return (
        message.kind == "request"
        and bool(message.parts)
        and all(isinstance(p, SystemPromptPart) for p in message.parts)
    )


def leading_system_request(messages: Sequence[CanonicalMessage]) -> bool:
    """True when ``messages[0]`` is a system-only request (instructions a cut must keep)."""
    return bool(messages) and is_system_only_request(messages[0])


def _has_user_prompt(message: CanonicalMessage) -> bool:
    return message.kind == "request" and any(isinstance(p, UserPromptPart) for p in message.parts)


def has_user_turns(messages: Sequence[CanonicalMessage], wanted: int) -> bool:
    """True when at least ``wanted`` requests hold a user prompt (stops counting there)."""
    found = 0
    for message in messages:
        if _has_user_prompt(message):
            found += 1
            if found >= wanted:
                return True
    return False


def first_user_request_index(messages: Sequence[CanonicalMessage]) -> int | None:
    """Index of the first request holding a user prompt, or ``None``."""
    for index, message in enumerate(messages):
        if _has_user_prompt(message):
            return index
    return None


def user_prompt_count(messages: Sequence[CanonicalMessage]) -> int:
    """Number of user turns: requests holding at least one user prompt."""
    return sum(1 for message in messages if _has_user_prompt(message))
