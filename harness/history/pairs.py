"""Tool calls and their answers: which id a part carries and where each pair sits."""

from __future__ import annotations

__all__ = [
    "ToolPair",
    "answer_id",
    "carried_id",
    "tool_pairs",
]

from collections.abc import Sequence

import attrs

from harness.core.messages import CanonicalMessage, Part, RetryPromptPart, ToolCallPart, ToolReturnPart


@attrs.frozen
class ToolPair:
    """Where a tool call and its answers sit in a history.

    Attributes:
        call_index: Index of the message holding the (first) call with this id.
        answer_indices: Sorted indices of the messages holding answers with this id
            (returns and retry prompts naming a tool), without repeats.
    """

    call_index: int
    answer_indices: tuple[int, ...]


def answer_id(part: Part) -> str | None:
    """The id ``part`` answers, ``""`` for a tool-naming retry without id, else ``None``."""
    if isinstance(part, ToolReturnPart):
        return part.tool_call_id
    if isinstance(part, RetryPromptPart) and part.tool_name is not None:
        return part.tool_call_id or ""
    return None


def carried_id(part: Part) -> str | None:
    """The tool call id a call or an answer carries (``None`` for other parts and ``""``)."""
    if isinstance(part, ToolCallPart):
        return part.tool_call_id
    answer = answer_id(part)
    return answer or None


def tool_pairs(messages: Sequence[CanonicalMessage]) -> dict[str, ToolPair]:
    """Map every tool call id to where its call and answers sit.

    Answers whose id matches no call are left out.
    """
    calls: dict[str, int] = {}
    answers: dict[str, list[int]] = {}
    for index, message in enumerate(messages):
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                calls.setdefault(part.tool_call_id, index)
            else:
                answer = answer_id(part)
                if answer:
                    found = answers.setdefault(answer, [])
                    if not found or found[-1] != index:
                        found.append(index)
    return {call_id: ToolPair(index, tuple(answers.get(call_id, ()))) for call_id, index in calls.items()}
