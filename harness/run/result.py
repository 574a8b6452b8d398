"""What a run returns: :class:`RunResult`, and how it ended (:data:`RunStatus`)."""

from __future__ import annotations

__all__ = ["RunResult", "RunStatus"]

from typing import Literal, TypeAlias

import attrs

from harness.core.messages import CanonicalMessage, ToolCallPart, Usage, history_repr
from harness.session import Session
from harness.tools.context import RunState

RunStatus: TypeAlias = Literal["completed", "awaiting_approval"]
"""How a run that returned ended: with an answer, or paused on calls waiting for approval."""


@attrs.frozen
class RunResult:
    """The result of :meth:`Agent.run`.

    Attributes:
        output: Text of the final response (``None`` when it had no text).
        new_messages: Messages this run added to the history.
        all_messages: The whole history after the run (a copy).
        usage: Usage of this run, capability requests included.
        request_id: The run's request id.
        session: The session the run used (pass it to the next run to continue).
        iterations: Model requests the run made.
        state: The run's final runtime state: counters and the tool-call registry.
        status: ``"completed"``: the run answered. ``"awaiting_approval"``: it paused on
            tool calls a ``wrap_tool_call`` wrapper held back for a human decision
            (``harness-tool-approval``); they are stored in the session, so the run can be
            resumed in another process with ``agent.run(None, session=...,
            approvals={call_id: decision})``.
        pending_approvals: The held-back calls when paused, in call order.
    """

    output: str | None
    new_messages: list[CanonicalMessage] = attrs.field(repr=history_repr)
    all_messages: list[CanonicalMessage] = attrs.field(repr=history_repr)
    usage: Usage
    request_id: str
    session: Session
    iterations: int = 0
    state: RunState = attrs.field(factory=RunState, repr=False)
    status: RunStatus = "completed"
    pending_approvals: tuple[ToolCallPart, ...] = ()
