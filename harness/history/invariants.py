"""What providers accept: :func:`check_invariants` and the :class:`Violation` it reports."""

from __future__ import annotations

__all__ = [
    "VIOLATION_KINDS",
    "Violation",
    "ViolationKind",
    "check_invariants",
]

from collections.abc import Sequence
from typing import Literal, TypeAlias

import attrs

from harness.core.messages import (
    CanonicalMessage,
    Part,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)

ViolationKind: TypeAlias = Literal[
    "dangling_call",
    "orphan_return",
    "duplicate_call_id",
    "return_before_call",
    "consecutive_requests",
    "consecutive_responses",
    "empty_response",
    "persisted_system_prompt",
]

VIOLATION_KINDS: frozenset[str] = frozenset(
    {
        "dangling_call",
        "orphan_return",
        "duplicate_call_id",
        "return_before_call",
        "consecutive_requests",
        "consecutive_responses",
        "empty_response",
        "persisted_system_prompt",
    }
)
"""Every :attr:`Violation.kind`."""


@attrs.frozen
class Violation:
    """One way a history breaks what providers accept.

    Attributes:
        kind: One of :data:`VIOLATION_KINDS`:

            * ``dangling_call``: a tool call with no answer anywhere after it.
            * ``orphan_return``: an answer whose id matches no tool call at all.
            * ``duplicate_call_id``: a tool call reusing the id of an earlier call
              (reported at the later call).
            * ``return_before_call``: an answer whose id is only called later.
            * ``consecutive_requests`` / ``consecutive_responses``: a message of the
              same kind as the one before it (reported at the later one).
            * ``empty_response``: see :func:`~harness.history.is_empty_response`.
            * ``persisted_system_prompt``: a system prompt part in a history that is
              about to be stored (only checked with ``persisted=True``).
        message_index: Index of the offending message.
        part_index: Index of the offending part in it, or ``None`` for message-level kinds.
        tool_call_id: The tool call id concerned, if any.
        detail: Human-readable description.
    """

    kind: ViolationKind
    message_index: int
    part_index: int | None
    tool_call_id: str | None
    detail: str


def check_invariants(messages: Sequence[CanonicalMessage], *, persisted: bool = False) -> list[Violation]:
    """List every way ``messages`` breaks what providers accept; ``[]`` means sendable.

    One pass over the parts, then one over the tool calls and answers found.

    Args:
        messages: The history.
        persisted: Also report system prompt parts, which must never be stored.

    Returns:
        Violations ordered by message index, then part index (message-level kinds first).
    """
    violations: list[Violation] = []
    calls: list[tuple[int, int, ToolCallPart]] = []
    answers: list[tuple[int, int, str, Part]] = []
    first_call: dict[str, int] = {}
    last_answer: dict[str, int] = {}
    previous: str | None = None
    for index, message in enumerate(messages):
        kind = message.kind
        if kind == previous:
            violations.append(
                Violation(
                    "consecutive_requests" if kind == "request" else "consecutive_responses",
                    index,
                    None,
                    None,
                    f"message {index} follows another {kind}",
                )
            )
        previous = kind
        if kind == "response":
            empty = True
            for part_index, part in enumerate(message.parts):
                if isinstance(part, ToolCallPart):
                    calls.append((index, part_index, part))
                    first_call.setdefault(part.tool_call_id, index)
                    empty = False
                elif empty and not (isinstance(part, TextPart) and not part.content.strip()):
                    empty = False
            if empty:
                violations.append(
                    Violation("empty_response", index, None, None, f"response {index} has no content")
                )
            continue
        for part_index, part in enumerate(message.parts):
            if isinstance(part, ToolReturnPart):
                answer = part.tool_call_id
            elif isinstance(part, RetryPromptPart):
                if part.tool_name is None:
                    continue
                answer = part.tool_call_id or ""
            elif persisted and isinstance(part, SystemPromptPart):
                violations.append(
                    Violation(
                        "persisted_system_prompt",
                        index,
                        part_index,
                        None,
                        "system prompts must not be stored in a history",
                    )
                )
                continue
            else:
                continue
            answers.append((index, part_index, answer, part))
            last_answer[answer] = index

    seen_calls: set[str] = set()
    for index, part_index, part in calls:
        call_id = part.tool_call_id
        if call_id in seen_calls:
            violations.append(
                Violation(
                    "duplicate_call_id",
                    index,
                    part_index,
                    call_id,
                    f"tool call id {call_id!r} is used by an earlier call",
                )
            )
        seen_calls.add(call_id)
        if last_answer.get(call_id, -1) < index:
            violations.append(
                Violation(
                    "dangling_call",
                    index,
                    part_index,
                    call_id,
                    f"tool call {call_id!r} ({part.tool_name}) has no return or retry after it",
                )
            )
    for index, part_index, answer, part in answers:
        call_index = first_call.get(answer)
        if call_index is None:
            violations.append(
                Violation(
                    "orphan_return",
                    index,
                    part_index,
                    answer,
                    f"{part.part_kind} {answer!r} answers no tool call",
                )
            )
        elif call_index > index:
            violations.append(
                Violation(
                    "return_before_call",
                    index,
                    part_index,
                    answer,
                    f"{part.part_kind} {answer!r} comes before its call (message {call_index})",
                )
            )
    if violations:
        violations.sort(key=_violation_order)
    return violations


def _violation_order(violation: Violation) -> tuple[int, int]:
    part_index = violation.part_index
    return (violation.message_index, -1 if part_index is None else part_index)
