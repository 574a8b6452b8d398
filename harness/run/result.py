"""What a run returns: :class:`RunResult`, and how it ended (:data:`RunStatus`)."""

from __future__ import annotations

__all__ = ["RunOutcome", "RunResult", "RunStatus"]

from typing import Literal, TypeAlias

import attrs

from harness.core.messages import CanonicalMessage, ToolCallPart, Usage, history_repr
from harness.session import Session
from harness.tools.context import RunState

RunStatus: TypeAlias = Literal["completed", "awaiting_approval", "paused_after_compaction"]
"""How a run that returned ended: with an answer, paused on calls waiting for approval, or
paused right after a compaction (``pause_after_compaction``)."""


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
            approvals={call_id: decision})``. ``"paused_after_compaction"``: a capability
            compacted the history and the agent (or the capability) asked to pause
            (``pause_after_compaction``); the compacted history is saved and its request
            not yet sent: review ``all_messages``, then continue with
            ``agent.run(None, session=...)`` (or a new prompt). ``output`` is ``None``.
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


@attrs.frozen
class RunOutcome:
    """What the orchestrator hands back to :class:`~harness.run.agent.Agent`."""

    output: str | None
    new_messages: list[CanonicalMessage]
    all_messages: list[CanonicalMessage]
    usage: Usage
    request_id: str
    iterations: int
    state: RunState
    status: RunStatus = "completed"
    pending_approvals: tuple[ToolCallPart, ...] = ()
