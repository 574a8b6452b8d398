"""Checks and repairs applied to every model response before the run acts on it."""

from __future__ import annotations

__all__ = ["EMPTY_RESPONSE_NUDGE", "is_blank_response", "normalise_response", "unique_tool_call_ids"]

import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import attrs

from harness.core.messages import CanonicalMessage, Part, TextPart, ToolCallPart, Usage, with_harness_mark
from harness.errors import ModelResponseError
from harness.tools.lifecycle import ToolCallRegistry

EMPTY_RESPONSE_NUDGE = (
    "Your previous response was empty: it had no text and no tool call. "
    "Answer the request, or call one of the available tools."
)
"""Retry prompt sent after an empty response."""


def is_blank_response(response: CanonicalMessage) -> bool:
    """True when a response has no non-blank text and no tool call (thinking alone is empty)."""
    for part in response.parts:
        if isinstance(part, ToolCallPart):
            return False
        if isinstance(part, TextPart) and part.content.strip():
            return False
    return True


def normalise_response(
    response: object, model_name: str, *, now: Callable[[], datetime] | None = None
) -> CanonicalMessage:
    """Check that a model returned a response message and fill in what it left out.

    Args:
        response: What the model returned.
        model_name: The model's name, for a response without one.
        now: The clock for a response without a timestamp (default: the wall clock); a
            run passes its effects' replay-stable one.

    Raises:
        ModelResponseError: ``response`` is not a response :class:`CanonicalMessage`.
    """
    if not isinstance(response, CanonicalMessage) or response.kind != "response":
        raise ModelResponseError(
            f"model {model_name!r} returned {type(response).__name__}"
            + (" (a request)" if isinstance(response, CanonicalMessage) else "")
            + "; Model.request must return a response CanonicalMessage",
            model_name=model_name,
        )
    changes: dict[str, Any] = {}
    usage: object = response.usage
    if usage is not None and not isinstance(usage, Usage):  # pyright: ignore[reportUnnecessaryIsInstance]
        changes["usage"] = Usage.from_any(usage) if isinstance(usage, Mapping) else Usage()  # pyright: ignore[reportUnknownArgumentType]
    if response.model_name is None:
        changes["model_name"] = model_name
    if response.timestamp is None:
        changes["timestamp"] = now() if now is not None else datetime.now(UTC)
    return response.replace(**changes) if changes else response


def unique_tool_call_ids(
    response: CanonicalMessage,
    known: set[str],
    registry: ToolCallRegistry,
    *,
    new_id: Callable[[], str] | None = None,
) -> CanonicalMessage:
    """Give tool call ids already used (in the run or the history) a fresh suffix.

    Args:
        response: The response whose calls are checked.
        known: Every call id seen so far; updated in place with this response's ids.
        registry: The run's tool-call registry (its ids are taken too).
        new_id: Fresh ids for the suffix (default: ``uuid4().hex``); a run passes its
            effects' replay-stable ones.
    """
    calls = response.tool_calls
    if not calls:
        return response
    seen: set[str] = set()
    clash = False
    for call in calls:
        if call.tool_call_id in registry or call.tool_call_id in seen:
            clash = True
        seen.add(call.tool_call_id)
    if not clash and known.isdisjoint(seen):
        known.update(seen)
        return response
    taken = known | {record.tool_call_id for record in registry}
    parts: list[Part] = []
    for part in response.parts:
        if isinstance(part, ToolCallPart):
            if part.tool_call_id in taken:
                fresh = new_id() if new_id is not None else uuid.uuid4().hex
                renamed = f"{part.tool_call_id}_{fresh[:8]}"
                part = with_harness_mark(
                    attrs.evolve(part, tool_call_id=renamed), original_id=part.tool_call_id
                )
            taken.add(part.tool_call_id)
        parts.append(part)
    known.update(taken)
    return response.replace(parts=tuple(parts))
