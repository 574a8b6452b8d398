"""Whether a ``compact_context`` call may compact, read from the history alone.

The tool answers the model at once, and the capability acts before the next model
request; both ask :func:`decide`, which reads only the history up to the response that
made the call. So the answer does not depend on process memory: it is the same in a
resumed run, after ``Session.open`` and under a durable engine.

What the capability did with a call is kept in the harness mark of the call's tool
return (``metadata["harness"]["compact_on_request"]``, see :data:`STATUSES`): the log
keeps the return as the tool wrote it, the view the marked copy.
"""

from __future__ import annotations

__all__ = [
    "MARK_KEY",
    "PERFORMED",
    "STATUSES",
    "TOOL_NAME",
    "Decision",
    "decide",
    "is_activity",
    "pending_returns",
    "status_of",
]

from collections.abc import Sequence
from typing import Final

import attrs

from harness import CanonicalMessage, Part, TextPart, ThoughtPart, ToolCallPart, ToolReturnPart
from harness.core import harness_mark

TOOL_NAME: Final = "compact_context"
"""The name of the tool :class:`~harness_compact_on_request.CompactOnRequest` gives the model."""

MARK_KEY: Final = "compact_on_request"
"""Key of the status in the harness mark of a ``compact_context`` tool return."""

STATUSES: Final = ("compacted", "unchanged", "skipped", "refused", "failed")
"""What became of a call: compacted; the stack changed nothing; skipped (another
compaction ran this request, or one of this session is in progress); refused by
:func:`decide`; the stack failed (history left as it was)."""

PERFORMED: Final = frozenset({"compacted", "unchanged", "skipped"})
"""Statuses after which the context counts as just compacted (the next call needs new activity)."""


@attrs.frozen
class Decision:
    """What :func:`decide` found for one call.

    Attributes:
        accepted: The call may compact (before the next model request).
        message: What the tool answers the model.
        reason: The reason the model gave.
    """

    accepted: bool
    message: str
    reason: str


def status_of(part: Part) -> str | None:
    """The status this capability marked ``part`` with, or ``None`` (not handled yet)."""
    mark = harness_mark(part)
    if mark is None:
        return None
    value = mark.get(MARK_KEY)
    return value if isinstance(value, str) else None


def _own(part: Part, tool_name: str) -> bool:
    return getattr(part, "tool_name", None) == tool_name


def is_activity(part: Part, tool_name: str = TOOL_NAME) -> bool:
    """Whether ``part`` is work done: anything but thinking, system prompts and the tool's own exchanges.

    A text, a user prompt, a call of another tool, its result or retry prompt are
    activity; a ``compact_context`` call, its return or its retry prompt are not.
    """
    if isinstance(part, ThoughtPart) or part.part_kind == "system-prompt":
        return False
    if isinstance(part, TextPart):
        return bool(part.content.strip())
    return not _own(part, tool_name)


def _call_position(messages: Sequence[CanonicalMessage], call_id: str | None) -> tuple[int, int]:
    """(index of the response holding the call, index of the call among its parts).

    Searched from the end; ``(len(messages), 0)`` when the call is not in the history.
    """
    if call_id is not None:
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            if message.kind != "response":
                continue
            for position, part in enumerate(message.parts):
                if isinstance(part, ToolCallPart) and part.tool_call_id == call_id:
                    return index, position
    return len(messages), 0


def _reason_of(call: Part | None) -> str:
    if not isinstance(call, ToolCallPart):
        return ""
    try:
        value = call.args_as_dict().get("reason")
    except ValueError:
        return ""
    return value.strip() if isinstance(value, str) else ""


def decide(
    messages: Sequence[CanonicalMessage],
    call_id: str | None,
    *,
    min_messages_between: int,
    tool_name: str = TOOL_NAME,
    reason: str | None = None,
) -> Decision:
    """May the call ``call_id`` compact the context?

    Refused when an earlier ``compact_context`` call of the same response already asked
    (one compaction per turn), and when fewer than ``min_messages_between`` messages of
    :func:`activity <is_activity>` lie between the last compaction this capability did
    (a return marked with a :data:`PERFORMED` status) and the call, the call's own
    response included: compacting twice in a row. Reads messages backwards from the call
    and stops as soon as enough activity is found, so it costs what it reads.

    Args:
        messages: The history, holding the response that made the call (later messages,
            such as the call's return, are not read).
        call_id: The call's id.
        min_messages_between: Activity messages needed since the last compaction.
        tool_name: The tool's name.
        reason: The reason the model gave (default: read from the call's arguments).
    """
    index, position = _call_position(messages, call_id)
    call = messages[index].parts[position] if index < len(messages) else None
    given = (reason if reason is not None else _reason_of(call)).strip()
    said = f": reason {given!r}" if given else ""
    if call is not None:
        earlier = [
            p
            for p in messages[index].parts[:position]
            if isinstance(p, ToolCallPart) and p.tool_name == tool_name
        ]
        if earlier:
            return Decision(
                False,
                f"Not compacting: call {earlier[0].tool_call_id!r} of this same turn already asked for a "
                "compaction; one per turn is enough.",
                given,
            )
    activity = 0
    for back in range(min(index, len(messages) - 1), -1, -1):
        message = messages[back]
        if back < index and any(
            isinstance(p, ToolReturnPart) and _own(p, tool_name) and status_of(p) in PERFORMED
            for p in message.parts
        ):
            return Decision(
                False,
                "Not compacting: the context was just compacted, and "
                f"{'nothing was done' if not activity else f'only {activity} message(s) of work were added'} "
                f"since (at least {min_messages_between} needed). Compacting again would not help; "
                "continue with the task.",
                given,
            )
        if any(is_activity(p, tool_name) for p in message.parts):
            activity += 1
            if activity >= min_messages_between:
                break
    return Decision(True, f"The context will be compacted before your next turn{said}.", given)


def pending_returns(last: CanonicalMessage, tool_name: str = TOOL_NAME) -> list[int]:
    """Indices of the ``compact_context`` returns in ``last`` this capability has not handled yet."""
    if last.kind != "request":
        return []
    return [
        index
        for index, part in enumerate(last.parts)
        if isinstance(part, ToolReturnPart) and part.tool_name == tool_name and status_of(part) is None
    ]
