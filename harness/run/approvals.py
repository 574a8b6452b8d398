"""Tool calls held back for a human decision: finding them in a paused history, answering them.

A ``wrap_tool_call`` wrapper (``harness-tool-approval``) holds a call back by returning a
``"deferred"`` outcome. The run then stores a placeholder answer for it, marked
``awaiting_approval`` (:data:`~harness.run.executor.AWAITING_APPROVAL_CONTENT`), so the
stored history stays valid, and ends with ``status="awaiting_approval"``. Resuming with
``agent.run(None, session=..., approvals={call_id: decision})`` runs the held calls again
through the wrappers with ``call.decision`` set, and swaps each placeholder for the real
answer before any request is sent. A placeholder is never sent to a model.
"""

from __future__ import annotations

__all__ = [
    "check_approvals",
    "held_calls",
    "holders",
    "is_placeholder",
    "replace_answers",
    "unknown_approvals",
]

from collections.abc import Callable, Mapping, Sequence

from harness.core.messages import CanonicalMessage, Part, ToolCallPart, ToolReturnPart, harness_mark
from harness.errors import ApprovalError, ApprovalPendingError
from harness.session import Session


def is_placeholder(part: Part) -> bool:
    """Whether ``part`` is the placeholder answer of a call awaiting approval."""
    if not isinstance(part, ToolReturnPart):
        return False
    mark = harness_mark(part)
    return bool(mark and mark.get("awaiting_approval"))


def held_calls(history: Sequence[CanonicalMessage]) -> tuple[ToolCallPart, ...]:
    """The calls whose answers are placeholders in the history's last request, in call order."""
    if len(history) < 2 or history[-1].kind != "request":
        return ()
    waiting = {
        p.tool_call_id for p in history[-1].parts if is_placeholder(p) and isinstance(p, ToolReturnPart)
    }
    if not waiting:
        return ()
    for message in reversed(history[:-1]):
        if message.kind == "response":
            return tuple(call for call in message.tool_calls if call.tool_call_id in waiting)
    return ()


def unknown_approvals(held: Sequence[ToolCallPart], approvals: Mapping[str, object]) -> list[str]:
    """The ids in ``approvals`` that name no held call, sorted."""
    ids = {call.tool_call_id for call in held}
    return sorted(key for key in approvals if key not in ids)


def replace_answers(message: CanonicalMessage, answers: Mapping[str, Part]) -> CanonicalMessage:
    """``message`` with each placeholder whose call has an entry in ``answers`` replaced by it."""
    parts = tuple(
        answers.get(part.tool_call_id, part)
        if is_placeholder(part) and isinstance(part, ToolReturnPart)
        else part
        for part in message.parts
    )
    return message.replace(parts=parts)


def holders(history: Sequence[CanonicalMessage]) -> dict[str, str | None]:
    """The plugin that held back each call of the last request, by call id (``None``: not recorded)."""
    if not history:
        return {}
    found: dict[str, str | None] = {}
    for part in history[-1].parts:
        if is_placeholder(part) and isinstance(part, ToolReturnPart):
            mark = harness_mark(part) or {}
            holder = mark.get("deferred_by")
            found[part.tool_call_id] = holder if isinstance(holder, str) else None
    return found


def check_approvals(
    session: Session,
    prompt: str | None,
    approvals: Mapping[str, object],
    registered: Callable[[str], bool] | None = None,
) -> None:
    """Refuse a run that would step over held calls, decide calls that are not held, or run them unguarded.

    Args:
        session: The session the run continues.
        prompt: The run's prompt (``None`` to resume).
        approvals: The decisions given, by call id.
        registered: Whether a plugin of that name is registered: the plugin that held a
            call back must be there to read its decision, or a rejected call would run.

    Raises:
        ApprovalPendingError: ``prompt`` is given while calls of ``session`` wait for approval.
        ApprovalError: ``approvals`` name a call that is not waiting, or the plugin that
            held a call back is not registered.
    """
    held = held_calls(session.messages)
    if held and registered is not None:
        for call_id, holder in holders(session.messages).items():
            if holder and not registered(holder):
                raise ApprovalError(
                    f"tool call {call_id!r} of session {session.session_id} was held back by plugin "
                    f"{holder!r}, which this agent does not have: without it the decision would not be "
                    "applied (a rejected call would run); register it (harness-tool-approval) to resume"
                )
    if held and prompt is not None:
        ids = [call.tool_call_id for call in held]
        raise ApprovalPendingError(
            f"session {session.session_id} has tool calls waiting for approval ({', '.join(ids)}); "
            "resume it with agent.run(None, session=..., approvals={call_id: decision})",
            tool_call_ids=ids,
        )
    unknown = unknown_approvals(held, approvals)
    if unknown:
        waiting = ", ".join(call.tool_call_id for call in held) or "none"
        raise ApprovalError(
            f"approvals name tool call {unknown[0]!r}, which is not waiting for approval "
            f"in session {session.session_id} (waiting: {waiting})"
        )
