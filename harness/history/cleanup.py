"""Whole-history passes: the cleanup loop before sending, and sanitizing before storing."""

from __future__ import annotations

__all__ = [
    "run_cleanup_loop",
    "sanitize_for_resume",
]

from collections.abc import Callable, Sequence
from typing import Any, Literal

from harness.core.messages import CanonicalMessage, SystemPromptPart
from harness.history.changes import Change, HistoryEdit
from harness.history.invariants import check_invariants
from harness.history.merges import merge_consecutive_requests, merge_consecutive_responses
from harness.history.repairs import (
    answer_dangling_calls,
    remove_empty_responses,
    remove_orphan_returns,
    rename_duplicate_call_ids,
)


def sanitize_for_resume(messages: Sequence[CanonicalMessage]) -> HistoryEdit:
    """Make a history safe to store or resume: no system prompts, no run ids.

    Strips every :class:`~harness.core.messages.SystemPromptPart`, drops a message that had
    parts and has none left, and sets ``run_id`` to ``None``.

    Returns:
        The edit; ``stripped_system_prompt`` and ``cleared_run_id`` changes.
    """
    result: list[CanonicalMessage] = []
    changes: list[Change] = []
    for index, message in enumerate(messages):
        parts = [p for p in message.parts if not isinstance(p, SystemPromptPart)]
        stripped = len(parts) != len(message.parts)
        if stripped and not parts:
            changes.append(
                Change("stripped_system_prompt", index, (), "dropped a request holding only system prompts")
            )
            continue
        updates: dict[str, Any] = {}
        if stripped:
            updates["parts"] = tuple(parts)
            changes.append(
                Change(
                    "stripped_system_prompt",
                    index,
                    (),
                    f"removed {len(message.parts) - len(parts)} system prompt part(s)",
                )
            )
        if message.run_id is not None:
            updates["run_id"] = None
            changes.append(Change("cleared_run_id", index, (), f"cleared run_id {message.run_id!r}"))
        result.append(message.replace(**updates) if updates else message)
    return HistoryEdit(result, tuple(changes))


def run_cleanup_loop(
    messages: Sequence[CanonicalMessage],
    *,
    max_passes: int = 10,
    dangling: Literal["answer", "remove"] = "answer",
) -> HistoryEdit:
    """Repair a history until it is sendable (or ``max_passes`` passes ran).

    Each pass runs :func:`rename_duplicate_call_ids`, :func:`answer_dangling_calls`
    (with ``mode=dangling``), :func:`remove_orphan_returns`, :func:`remove_empty_responses`,
    :func:`merge_consecutive_requests` and :func:`merge_consecutive_responses`, in that
    order. Each pass starts with :func:`check_invariants` and runs only the steps whose
    violation kinds it found; the loop stops as soon as the history is sendable. So a
    valid history costs one O(n) check and is returned as is, and a history with one
    dangling call costs two checks and one repair. Violations a step creates for a
    later step (e.g. a removed call leaving two requests adjacent) are fixed by the
    next pass. System prompts are left alone (see :func:`sanitize_for_resume`).

    Returns:
        The combined edit (all changes of all passes, in order).

    Raises:
        ValueError: ``max_passes`` is less than 1, or ``dangling`` is not a known mode.
    """
    if max_passes < 1:
        raise ValueError(f"run_cleanup_loop: max_passes must be >= 1, got {max_passes}")
    if dangling not in ("answer", "remove"):
        raise ValueError(f"run_cleanup_loop: dangling must be 'answer' or 'remove', got {dangling!r}")
    current = list(messages)
    changes: list[Change] = []
    steps: tuple[tuple[frozenset[str], Callable[[Sequence[CanonicalMessage]], HistoryEdit]], ...] = (
        (frozenset({"duplicate_call_id"}), rename_duplicate_call_ids),
        (frozenset({"dangling_call"}), lambda m: answer_dangling_calls(m, mode=dangling)),
        (frozenset({"orphan_return", "return_before_call"}), remove_orphan_returns),
        (frozenset({"empty_response"}), remove_empty_responses),
        (frozenset({"consecutive_requests"}), merge_consecutive_requests),
        (frozenset({"consecutive_responses"}), merge_consecutive_responses),
    )
    for _ in range(max_passes):
        found = {violation.kind for violation in check_invariants(current)}
        if not found:
            break  # sendable
        pass_changed = False
        for fixes, step in steps:
            if found.isdisjoint(fixes):
                continue  # nothing for this step when the pass started
            edit = step(current)
            if edit.changed:
                pass_changed = True
                changes.extend(edit.changes)
                current = edit.messages
        if not pass_changed:
            break  # defensive: violations no step can fix would otherwise spin
    return HistoryEdit(current, tuple(changes))
