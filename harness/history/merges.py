"""Merging adjacent messages of the same kind, and a new request into a trailing one."""

from __future__ import annotations

__all__ = [
    "merge_consecutive_requests",
    "merge_consecutive_responses",
    "merge_trailing_request",
]

from collections.abc import Sequence
from typing import Any

from harness.core.messages import CanonicalMessage
from harness.errors import MessageError
from harness.history.changes import Change, HistoryEdit


def _merge_runs(messages: Sequence[CanonicalMessage], kind: str, change_kind: str) -> HistoryEdit:
    result: list[CanonicalMessage] = []
    changes: list[Change] = []
    index = 0
    total = len(messages)
    while index < total:
        message = messages[index]
        end = index + 1
        if message.kind == kind:
            while end < total and messages[end].kind == kind:
                end += 1
        if end - index == 1:
            result.append(message)
        else:
            parts = tuple(part for m in messages[index:end] for part in m.parts)
            result.append(message.replace(parts=parts))
            changes.append(
                Change(
                    change_kind, index, (), f"merged {end - index} consecutive {kind}s ({index}..{end - 1})"
                )
            )
        index = end
    return HistoryEdit(result, tuple(changes))


def merge_consecutive_requests(messages: Sequence[CanonicalMessage]) -> HistoryEdit:
    """Merge each run of adjacent requests into one request (parts in order).

    The merged request keeps the first request's fields (timestamp, run id, metadata...).
    Nothing is deleted, unlike the contract's "keep only the last" rule.

    Returns:
        The edit; one ``merged_requests`` change per run.
    """
    return _merge_runs(messages, "request", "merged_requests")


def merge_consecutive_responses(messages: Sequence[CanonicalMessage]) -> HistoryEdit:
    """Merge each run of adjacent responses into one response (parts in order).

    The merged response keeps the first response's fields (usage, model name...).

    Returns:
        The edit; one ``merged_responses`` change per run.
    """
    return _merge_runs(messages, "response", "merged_responses")


def merge_trailing_request(
    messages: Sequence[CanonicalMessage], new_request: CanonicalMessage
) -> HistoryEdit:
    """Add ``new_request`` to the history without ever dropping a trailing request.

    When the history ends with a request (for example an interrupted turn whose prompt
    was never answered), it and ``new_request`` become one request: the history's parts
    first, then the new ones. The merged request keeps the history request's fields,
    except ``timestamp``, ``instructions`` and ``run_id``, which come from
    ``new_request`` when it sets them. Otherwise ``new_request`` is appended.

    Returns:
        The edit, with a ``merged_trailing_request`` or ``appended_request`` change.

    Raises:
        MessageError: ``new_request`` is not a request.
    """
    if not new_request.is_request:
        raise MessageError(f"merge_trailing_request: new_request must be a request, got a {new_request.kind}")
    if messages and messages[-1].is_request:
        last = messages[-1]
        fields: dict[str, Any] = {
            name: getattr(new_request, name)
            for name in ("timestamp", "instructions", "run_id")
            if getattr(new_request, name) is not None
        }
        merged = last.replace(parts=last.parts + new_request.parts, **fields)
        change = Change(
            "merged_trailing_request",
            len(messages) - 1,
            (),
            f"merged the new request's {len(new_request.parts)} part(s) into the trailing request",
        )
        return HistoryEdit([*messages[:-1], merged], (change,))
    change = Change("appended_request", len(messages), (), "appended the new request")
    return HistoryEdit([*messages, new_request], (change,))
