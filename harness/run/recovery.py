"""Abort recovery: repair a run's history after an abort, a timeout or a failure.

Every completed tool result is kept; calls still pending or running get a synthetic
``"Tool execution aborted"`` return; on abort and timeout an ``[INTERRUPTED]`` response
is appended (merged into a trailing response, never two responses in a row). All of it
is synchronous, so no await can interrupt a repair half-way.
"""

from __future__ import annotations

__all__ = [
    "ABORTED_TOOL_CONTENT",
    "INTERRUPTED_MARKER",
    "INTERRUPTED_UNKNOWN_CONTENT",
    "RecoveryKind",
    "answer_interrupted_batch",
    "append_interrupted",
    "flush_events",
    "repair_stopped",
    "run_error",
]

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from harness.core.messages import (
    CanonicalMessage,
    Part,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    with_harness_mark,
)
from harness.errors import RequestTimeout, RunError, UserAbort
from harness.history import check_invariants, run_cleanup_loop
from harness.tools.lifecycle import ToolEvent

ABORTED_TOOL_CONTENT = "Tool execution aborted"
"""Content of the synthetic return given to calls that never ran when the run stopped."""

INTERRUPTED_UNKNOWN_CONTENT = (
    "The outcome of this call is unknown: the run stopped while the tool was running, so it may or "
    "may not have taken effect. Check the current state before calling it again."
)
"""What the model reads for a call the run stopped part way (marked ``outcome_unknown``)."""

INTERRUPTED_MARKER = "[INTERRUPTED]"
"""Text of the response appended when a run is aborted or times out."""


def answer_interrupted_batch(
    history: list[CanonicalMessage],
    batch: Sequence[ToolCallPart],
    results: Mapping[str, Part],
    *,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> bool:
    """Append the results of an interrupted batch: the finished ones, and aborted returns.

    Only when the history still ends with the response that made ``batch``. ``now`` is the
    run's clock (its effects' ``now``).

    Returns:
        Whether a request was appended.
    """
    if not batch or not history or history[-1].kind != "response":
        return False
    last_ids = {c.tool_call_id for c in history[-1].tool_calls}
    if not all(c.tool_call_id in last_ids for c in batch):
        return False
    parts: list[Part] = []
    for call in batch:
        part = results.get(call.tool_call_id)
        if part is None:
            part = with_harness_mark(
                ToolReturnPart(
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    content=ABORTED_TOOL_CONTENT,
                    timestamp=now(),
                ),
                aborted=True,
            )
        parts.append(part)
    history.append(CanonicalMessage.request(*parts))
    return True


def append_interrupted(
    history: list[CanonicalMessage],
    model_name: str,
    partial: str = "",
    *,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> bool:
    """Append the ``[INTERRUPTED]`` marker, merged into a trailing response.

    Args:
        history: The run's history, changed in place.
        model_name: The model of the new response, when one is appended.
        partial: Text the model had streamed for a request still in flight: kept in
            front of the marker, in a new response (the contract's "partial stream text").
        now: The run's clock (its effects' ``now``), for the new response's timestamp.

    Returns:
        Whether a new message was appended (``False`` when it joined the last response).
    """
    marker = with_harness_mark(TextPart(INTERRUPTED_MARKER), interrupted=True)
    if partial and history and history[-1].kind == "request":
        history.append(
            with_harness_mark(
                CanonicalMessage.response(TextPart(partial), marker, model_name=model_name, timestamp=now()),
                interrupted=True,
                partial_stream=True,
            )
        )
        return True
    if history and history[-1].kind == "response":
        last = history[-1]
        history[-1] = last.replace(parts=(*last.parts, marker))
        return False
    history.append(
        with_harness_mark(
            CanonicalMessage.response(marker, model_name=model_name, timestamp=now()),
            interrupted=True,
        )
    )
    return True


RecoveryKind = Literal["abort", "timeout", "error"]
"""How a run stopped: aborted (by the user, or a cancellation), timed out, or failed."""


def repair_stopped(
    history: list[CanonicalMessage],
    kind: RecoveryKind,
    batch: Sequence[ToolCallPart],
    results: Mapping[str, Part],
    model_name: str,
    *,
    partial: str = "",
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> int:
    """Repair a stopped run's history in place: the batch's answers, ``[INTERRUPTED]``, invariants.

    Returns:
        How many messages were appended.
    """
    added = int(answer_interrupted_batch(history, batch, results, now=now))
    if kind != "error":
        added += append_interrupted(history, model_name, partial, now=now)
    if check_invariants(history):
        history[:] = run_cleanup_loop(history, dangling="answer").messages
    return added


def run_error(
    kind: RecoveryKind,
    exc: BaseException,
    timeout: float | None,
    *,
    aborted: bool,
    session: Any,
    state: Any,
) -> BaseException:
    """The run's typed error for ``exc``: a new one to raise from it, or ``exc`` itself.

    A timeout becomes :class:`~harness.errors.RequestTimeout`, the cancellation of an
    aborted run :class:`~harness.errors.UserAbort` (the task's cancellation is undone); a
    :class:`~harness.errors.RunError` gets the run's ``session`` and ``state``.
    """
    if kind == "timeout" and timeout is not None:
        error: RunError = RequestTimeout(timeout)
        error.session, error.state = session, state
        return error
    if aborted and isinstance(exc, asyncio.CancelledError):
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        error = UserAbort("the run was aborted by the user; completed work was saved")
        error.session, error.state = session, state
        return error
    if isinstance(exc, RunError):
        exc.session, exc.state = session, state
    return exc


async def flush_events(
    events: Sequence[ToolEvent],
    record: Callable[[ToolEvent], Awaitable[None]],
    notify: Callable[[ToolEvent], Awaitable[None]],
) -> list[str]:
    """Record the recovery's registry events in the ledger, then send each to ``on_tool``.

    A failure here must not mask the run's error, and must not be lost: each one is
    returned as a note for the error the run raises, naming what failed (recording the
    event in the session's ledger, such as a ``SessionConflictError`` from its checkpoint,
    or the ``on_tool`` hook) with its exception; the remaining steps and events still run.

    Args:
        events: The events, in order.
        record: Writes an event to the tool-effect ledger (the run's checkpoint).
        notify: Sends an event to the ``on_tool`` hook.
    """
    notes: list[str] = []
    for event in events:
        call = f"the {event.kind!r} event of tool call {event.record.tool_call_id!r}"
        try:
            await record(event)
        except Exception as failure:  # the store: a conflict, an unreachable database
            notes.append(
                f"harness: recording {call} in the session's tool-effect ledger failed while the run "
                f"recovered: {type(failure).__name__}: {failure}"
            )
        try:
            await notify(event)
        except Exception as failure:  # a CapabilityError naming the plugin and its exception
            notes.append(f"harness: the on_tool hook failed on {call} while the run recovered: {failure}")
    return notes
