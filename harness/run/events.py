"""The typed events :meth:`Agent.run_stream <harness.run.agent.Agent.run_stream>` yields.

A streamed run yields, in order, for each model request: :class:`RequestStarted`, the
model's deltas as they arrive (:class:`~harness.core.streaming.TextDelta`,
:class:`~harness.core.streaming.ThinkingDelta`, :class:`~harness.core.streaming.ToolCallDelta`,
with :class:`ToolCallStarted` the first time a call appears), then
:class:`RequestFinished` with its usage, :class:`ToolCallReady` for each call whose
arguments are complete, and for each call :class:`ToolResult` or :class:`RetryPrompt`.
Every :class:`~harness.capabilities.context.CompactionEvent` comes as a :class:`Compaction`
when a capability reports it; held-back calls as :class:`ApprovalNeeded`. The last event
is always :class:`RunFinished`, holding the same :class:`~harness.run.agent.RunResult`
that ``Agent.run`` returns (a run that fails raises its error from the iteration instead).

A model that cannot stream gives no deltas: its response arrives whole with
:class:`RequestFinished`.
"""

from __future__ import annotations

__all__ = [
    "ApprovalNeeded",
    "Compaction",
    "EventSink",
    "RequestFinished",
    "RequestStarted",
    "RetryPrompt",
    "RunEvent",
    "RunFinished",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallDelta",
    "ToolCallReady",
    "ToolCallStarted",
    "ToolResult",
]

from collections.abc import Callable
from typing import Any, TypeAlias

import attrs

from harness.capabilities.context import CompactionEvent
from harness.core.effects import UnitPurpose
from harness.core.messages import CanonicalMessage, RetryPromptPart, ToolCallPart, ToolReturnPart, Usage
from harness.core.streaming import TextDelta, ThinkingDelta, ToolCallDelta
from harness.run.result import RunResult


@attrs.frozen
class RequestStarted:
    """A model request is being sent.

    Attributes:
        index: The request's unit index in the run (1-based; capability calls count too).
        model_name: The model it goes to.
        purpose: ``"request"`` (the run's own) or ``"capability"`` (a summarizer's call).
        source: ``"agent"`` or the capability's name.
    """

    index: int
    model_name: str
    purpose: UnitPurpose = "request"
    source: str = "agent"


@attrs.frozen
class RequestFinished:
    """A model request came back.

    Attributes:
        index: As :attr:`RequestStarted.index`.
        model_name: The model that answered.
        usage: The request's usage as the provider reported it (zero when it did not).
        response: The response, whole.
    """

    index: int
    model_name: str
    usage: Usage
    response: CanonicalMessage = attrs.field(repr=False)

    @property
    def finish_reason(self) -> str | None:
        """Why the model stopped (``"stop"``, ``"tool_call"``, ``"length"``...), when known."""
        return self.response.finish_reason


@attrs.frozen
class ToolCallStarted:
    """The model began a tool call (its arguments may still be streaming)."""

    tool_call_id: str
    tool_name: str


@attrs.frozen
class ToolCallReady:
    """A tool call's arguments are complete; it is about to run.

    Attributes:
        call: The call as it is stored (its id may differ from the streamed one when the
            run had to make it unique).
    """

    call: ToolCallPart


@attrs.frozen
class ToolResult:
    """A tool call returned (or failed: the model reads the failure as its result)."""

    part: ToolReturnPart

    @property
    def tool_call_id(self) -> str:
        """The call it answers."""
        return self.part.tool_call_id


@attrs.frozen
class RetryPrompt:
    """A retry prompt for the model: invalid arguments, ``ToolRetry``, an unknown tool, an empty answer."""

    part: RetryPromptPart


@attrs.frozen
class Compaction:
    """A capability changed the history (see :class:`~harness.capabilities.context.CompactionEvent`)."""

    event: CompactionEvent


@attrs.frozen
class ApprovalNeeded:
    """The run paused: these calls wait for a human decision (``status="awaiting_approval"``)."""

    calls: tuple[ToolCallPart, ...]


@attrs.frozen
class RunFinished:
    """The run ended; :attr:`result` is what ``Agent.run`` would have returned."""

    result: RunResult = attrs.field(repr=False)


RunEvent: TypeAlias = (
    RequestStarted
    | RequestFinished
    | TextDelta
    | ThinkingDelta
    | ToolCallDelta
    | ToolCallStarted
    | ToolCallReady
    | ToolResult
    | RetryPrompt
    | Compaction
    | ApprovalNeeded
    | RunFinished
)
"""Everything a streamed run yields."""

EventSink: TypeAlias = Callable[[Any], None]
"""Receives each :data:`RunEvent` of a run as it happens (synchronously, in the run's task)."""
