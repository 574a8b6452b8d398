"""Abort recovery: repair a run's history after an abort, a timeout or a failure.

Every completed tool result is kept; calls still pending or running get a synthetic
``"Tool execution aborted"`` return; on abort and timeout an ``[INTERRUPTED]`` response
is appended (merged into a trailing response, never two responses in a row). All of it
is synchronous, so no await can interrupt a repair half-way.
"""

from __future__ import annotations

__all__ = ["ABORTED_TOOL_CONTENT", "INTERRUPTED_MARKER", "answer_interrupted_batch", "append_interrupted"]

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from harness.core.messages import (
    CanonicalMessage,
    Part,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    with_harness_mark,
)

ABORTED_TOOL_CONTENT = "Tool execution aborted"
"""Content of the synthetic return given to calls still pending or running on abort."""

INTERRUPTED_MARKER = "[INTERRUPTED]"
"""Text of the response appended when a run is aborted or times out."""


def answer_interrupted_batch(
    history: list[CanonicalMessage], batch: Sequence[ToolCallPart], results: Mapping[str, Part]
) -> bool:
    """Append the results of an interrupted batch: the finished ones, and aborted returns.

    Only when the history still ends with the response that made ``batch``.

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
                    call.tool_call_id, call.tool_name, ABORTED_TOOL_CONTENT, timestamp=datetime.now(UTC)
                ),
                aborted=True,
            )
        parts.append(part)
    history.append(CanonicalMessage.request(*parts))
    return True


def append_interrupted(history: list[CanonicalMessage], model_name: str) -> bool:
    """Append the ``[INTERRUPTED]`` marker, merged into a trailing response.

    Returns:
        Whether a new message was appended (``False`` when it joined the last response).
    """
    marker = with_harness_mark(TextPart(INTERRUPTED_MARKER), interrupted=True)
    if history and history[-1].kind == "response":
        last = history[-1]
        history[-1] = last.replace(parts=(*last.parts, marker))
        return False
    history.append(
        with_harness_mark(
            CanonicalMessage.response(marker, model_name=model_name, timestamp=datetime.now(UTC)),
            interrupted=True,
        )
    )
    return True
