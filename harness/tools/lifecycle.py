"""The tool-call registry: the single source of truth for every call's status in a run.

Each tool call the model asks for is registered (``pending``), started (``running``) and
finished exactly once (``completed``, ``failed``, ``cancelled``, or ``deferred`` when a
wrapper held it back for a human's approval). Transitions are guarded:
a finished call can never change again, so a cancelled call cannot be completed later by
a tool that finishes after an abort. Every transition returns a :class:`ToolEvent`, which
the loop passes to the ``on_tool`` hook.
"""

from __future__ import annotations

from harness.errors import IllegalTransition

__all__ = [
    "ToolCallRecord",
    "ToolCallRegistry",
    "ToolCallStatus",
    "ToolEvent",
    "ToolEventKind",
]

import enum
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal, TypeAlias

import attrs

from harness.core.messages import (
    CanonicalMessage,
    Part,
    RetryPromptPart,
    ToolCallPart,
    ToolReturnPart,
    harness_mark,
)

ToolEventKind: TypeAlias = Literal["registered", "started", "completed", "failed", "cancelled", "deferred"]


class ToolCallStatus(enum.Enum):
    """Where a tool call is in its lifecycle."""

    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    DEFERRED = "deferred"
    """Held back for a human decision: the run paused; a resumed run registers the call again."""

    @property
    def finished(self) -> bool:
        """True for the terminal statuses (completed, failed, cancelled, deferred)."""
        return self in _FINISHED


_FINISHED = frozenset(
    {ToolCallStatus.COMPLETED, ToolCallStatus.FAILED, ToolCallStatus.CANCELLED, ToolCallStatus.DEFERRED}
)


def _now() -> datetime:
    return datetime.now(UTC)


@attrs.frozen
class ToolCallRecord:
    """An immutable snapshot of one tool call's state.

    Attributes:
        tool_call_id: The id shared with the ``ToolCallPart`` and its answer.
        tool_name: The tool the model asked for.
        args: The arguments as the model sent them (a mapping, JSON string or ``None``).
        status: Current lifecycle status.
        registered_at: When the call was registered.
        started_at: When execution began.
        completed_at: When the call finished (any terminal status).
        result: Short text of the result for completed calls.
        error: Error text for failed calls, reason for cancelled ones.
        attempts: Execution attempts made (transient failures are retried).
    """

    tool_call_id: str
    tool_name: str
    args: Mapping[str, Any] | str | None = None
    status: ToolCallStatus = ToolCallStatus.PENDING
    registered_at: datetime = attrs.field(factory=_now)
    started_at: datetime | None = None
    completed_at: datetime | None = None
    result: str | None = None
    error: str | None = None
    attempts: int = 0

    @property
    def is_finished(self) -> bool:
        """True once the call completed, failed or was cancelled."""
        return self.status.finished


@attrs.frozen
class ToolEvent:
    """One registry transition, passed to the ``on_tool`` hook.

    Attributes:
        kind: ``registered``, ``started``, ``completed``, ``failed``, ``cancelled`` or
            ``deferred``.
        record: The record as it is after the transition.
        answer: What the model reads for the call, on a terminal event (the executor sets
            it; the tool-effect ledger records it): the tool's return, a retry prompt, an
            "aborted" return (the call never ran, or the tool itself aborted), or an
            "outcome unknown" return (:attr:`outcome_unknown`). ``None`` on ``registered``
            and ``started``.
    """

    kind: ToolEventKind
    record: ToolCallRecord
    answer: Part | None = None

    @property
    def outcome_unknown(self) -> bool:
        """Whether the call may or may not have taken effect (its answer is marked ``outcome_unknown``)."""
        mark = harness_mark(self.answer) if self.answer is not None else None
        return bool(mark and mark.get("outcome_unknown"))


_MAX_RESULT_CHARS = 2000


class ToolCallRegistry:
    """Tracks every tool call of a run, in registration order.

    Methods that change a status return the :class:`ToolEvent` describing the change
    and raise :class:`IllegalTransition` when the change is not allowed:

    * ``register``: unknown id → ``pending`` (a duplicate id is refused);
    * ``start``: ``pending`` → ``running``;
    * ``complete`` / ``fail`` / ``cancel``: ``pending`` or ``running`` → terminal.
    """

    def __init__(self, clock: Callable[[], datetime] | None = None) -> None:
        self._records: dict[str, ToolCallRecord] = {}
        self.clock: Callable[[], datetime] = clock if clock is not None else _now
        """Where the records' timestamps come from (a run sets its effects' replay-stable clock)."""

    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, tool_call_id: object) -> bool:
        return tool_call_id in self._records

    def __iter__(self) -> Iterator[ToolCallRecord]:
        return iter(list(self._records.values()))

    def get(self, tool_call_id: str) -> ToolCallRecord:
        """Return the record of ``tool_call_id``.

        Raises:
            KeyError: The id was never registered.
        """
        try:
            return self._records[tool_call_id]
        except KeyError:
            raise KeyError(f"tool call not registered: {tool_call_id!r}") from None

    def records(self, status: ToolCallStatus | None = None) -> list[ToolCallRecord]:
        """All records in registration order, optionally only those with ``status``."""
        if status is None:
            return list(self._records.values())
        return [r for r in self._records.values() if r.status is status]

    def unfinished(self) -> list[ToolCallRecord]:
        """Records still pending or running, in registration order."""
        return [r for r in self._records.values() if not r.status.finished]

    def recent(self, n: int) -> list[ToolCallRecord]:
        """The ``n`` most recently registered records, oldest first."""
        if n <= 0:
            return []
        return list(self._records.values())[-n:]

    def clear(self) -> None:
        """Forget every record (done at the start of each run)."""
        self._records.clear()

    def register(self, part: ToolCallPart) -> ToolEvent:
        """Register the call ``part`` as ``pending``.

        Raises:
            IllegalTransition: A call with the same id is already registered.
        """
        if part.tool_call_id in self._records:
            raise IllegalTransition(
                part.tool_call_id,
                self._records[part.tool_call_id].status,
                "pending",
                "is already registered (tool call ids must be unique within a run)",
            )
        record = ToolCallRecord(part.tool_call_id, part.tool_name, part.args, registered_at=self.clock())
        self._records[part.tool_call_id] = record
        return ToolEvent("registered", record)

    def _move(self, tool_call_id: str, target: ToolCallStatus, **changes: Any) -> ToolCallRecord:
        record = self._records.get(tool_call_id)
        if record is None:
            raise IllegalTransition(tool_call_id, None, target.value, "is not registered")
        if record.status.finished:
            raise IllegalTransition(
                tool_call_id,
                record.status,
                target.value,
                f"cannot become {target.value}: it is already {record.status.value}",
            )
        if target is ToolCallStatus.RUNNING and record.status is not ToolCallStatus.PENDING:
            raise IllegalTransition(
                tool_call_id, record.status, target.value, f"cannot start: it is {record.status.value}"
            )
        updated = attrs.evolve(record, status=target, **changes)
        self._records[tool_call_id] = updated
        return updated

    def start(self, tool_call_id: str) -> ToolEvent:
        """Mark the call as running."""
        return ToolEvent("started", self._move(tool_call_id, ToolCallStatus.RUNNING, started_at=self.clock()))

    def note_attempt(self, tool_call_id: str) -> ToolCallRecord:
        """Count one execution attempt of a running call (no event is emitted)."""
        record = self.get(tool_call_id)
        updated = attrs.evolve(record, attempts=record.attempts + 1)
        self._records[tool_call_id] = updated
        return updated

    def complete(
        self, tool_call_id: str, result: str | None = None, *, answer: Part | None = None
    ) -> ToolEvent:
        """Mark the call as completed with (a short text of) its ``result``; ``answer`` rides on the event."""
        text = None if result is None else result[:_MAX_RESULT_CHARS]
        return ToolEvent(
            "completed",
            self._move(tool_call_id, ToolCallStatus.COMPLETED, completed_at=self.clock(), result=text),
            answer,
        )

    def fail(self, tool_call_id: str, error: str, *, answer: Part | None = None) -> ToolEvent:
        """Mark the call as failed with ``error``; ``answer`` rides on the event."""
        return ToolEvent(
            "failed",
            self._move(
                tool_call_id,
                ToolCallStatus.FAILED,
                completed_at=self.clock(),
                error=error[:_MAX_RESULT_CHARS],
            ),
            answer,
        )

    def cancel(
        self, tool_call_id: str, reason: str = "cancelled", *, answer: Part | None = None
    ) -> ToolEvent:
        """Mark the call as cancelled, storing ``reason`` in ``error``; ``answer`` rides on the event."""
        return ToolEvent(
            "cancelled",
            self._move(tool_call_id, ToolCallStatus.CANCELLED, completed_at=self.clock(), error=reason),
            answer,
        )

    def defer(self, tool_call_id: str, reason: str, *, answer: Part | None = None) -> ToolEvent:
        """Mark the call as held back for a human decision, storing ``reason`` in ``error``."""
        return ToolEvent(
            "deferred",
            self._move(tool_call_id, ToolCallStatus.DEFERRED, completed_at=self.clock(), error=reason),
            answer,
        )

    def check_against(self, messages: Sequence[CanonicalMessage]) -> list[str]:
        """Compare the registry with a history; return every mismatch (empty when in sync).

        Every registered id must appear on a ``ToolCallPart``. A finished call must be
        answered (a completed call by a ``ToolReturnPart``, a failed one by a return or a
        ``RetryPromptPart``, a cancelled one by a return); an unfinished call must not be.
        """
        calls: set[str] = set()
        returns: set[str] = set()
        retries: set[str] = set()
        for message in messages:
            for part in message.parts:
                if isinstance(part, ToolCallPart):
                    calls.add(part.tool_call_id)
                elif isinstance(part, ToolReturnPart):
                    returns.add(part.tool_call_id)
                elif isinstance(part, RetryPromptPart) and part.answers_tool_call and part.tool_call_id:
                    retries.add(part.tool_call_id)
        problems: list[str] = []
        for record in self._records.values():
            rid = record.tool_call_id
            if rid not in calls:
                problems.append(f"{rid}: registered but no ToolCallPart carries it")
            answered = rid in returns or rid in retries
            status = record.status
            if status is ToolCallStatus.COMPLETED and rid not in returns:
                problems.append(f"{rid}: completed but no ToolReturnPart answers it")
            elif status is ToolCallStatus.FAILED and not answered:
                problems.append(f"{rid}: failed but neither a return nor a retry prompt answers it")
            elif status in (ToolCallStatus.CANCELLED, ToolCallStatus.DEFERRED) and rid not in returns:
                problems.append(f"{rid}: {status.value} but no ToolReturnPart answers it")
            elif not status.finished and answered:
                problems.append(f"{rid}: answered in history but still {status.value} in the registry")
        return problems
