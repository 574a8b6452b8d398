"""What a repair returns: :class:`HistoryEdit` and its :class:`Change` records, plus :func:`changed_span`."""

from __future__ import annotations

__all__ = [
    "CHANGE_KINDS",
    "Change",
    "HistoryEdit",
    "changed_span",
]

from collections.abc import Iterable, Sequence

import attrs

from harness.core._sequences import common_prefix, common_suffix
from harness.core.messages import CanonicalMessage

CHANGE_KINDS: frozenset[str] = frozenset(
    {
        "renamed_duplicate_call_id",
        "answered_dangling_call",
        "removed_dangling_call",
        "removed_orphan_return",
        "removed_empty_response",
        "merged_requests",
        "merged_responses",
        "merged_trailing_request",
        "appended_request",
        "stripped_system_prompt",
        "cleared_run_id",
        "pruned_tool_output",
    }
)
"""Every :attr:`Change.kind` a repair of :mod:`harness.history` reports."""


@attrs.frozen
class Change:
    """One thing a repair did.

    Attributes:
        kind: One of :data:`CHANGE_KINDS`.
        message_index: Index, in the list the repair *received*, of the message the change
            is about (for merges: the first merged message; for answered dangling calls:
            the response holding the calls). Inside :func:`~harness.history.run_cleanup_loop`
            each step's indices refer to the list that step received.
        tool_call_ids: Tool call ids concerned (for a rename: ``(old, new)``).
        detail: Human-readable description.
    """

    kind: str
    message_index: int
    tool_call_ids: tuple[str, ...] = ()
    detail: str = ""


_REMOVING_KINDS = frozenset({"removed_dangling_call", "removed_orphan_return"})


@attrs.frozen
class HistoryEdit:
    """The result of a repair: the new history and what was done.

    Attributes:
        messages: The new history (a new list; unchanged messages are the input objects).
        changes: Everything that was done, in order; empty when nothing changed.
        tokens_reclaimed: Tokens freed by :func:`~harness.history.prune_old_tool_outputs` (0 elsewhere).
    """

    messages: list[CanonicalMessage]
    changes: tuple[Change, ...] = ()
    tokens_reclaimed: int = 0

    @property
    def changed(self) -> bool:
        """True when the history differs from the input."""
        return bool(self.changes)

    @property
    def removed_tool_call_ids(self) -> tuple[str, ...]:
        """Ids of tool calls or answers that were removed (dangling calls, orphans), in order."""
        return _unique_ids(c for c in self.changes if c.kind in _REMOVING_KINDS)

    @property
    def cleared_tool_call_ids(self) -> tuple[str, ...]:
        """Ids of tool returns whose content was replaced by a placeholder, in order."""
        return _unique_ids(c for c in self.changes if c.kind == "pruned_tool_output")


def _unique_ids(changes: Iterable[Change]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for change in changes:
        for call_id in change.tool_call_ids:
            seen.setdefault(call_id, None)
    return tuple(seen)


def changed_span(before: Sequence[CanonicalMessage], after: Sequence[CanonicalMessage]) -> tuple[int, int]:
    """The window ``[start, stop)`` of ``after`` outside which it equals ``before``.

    ``after[:start] == before[:start]`` and ``after[stop:]`` equals the same number of
    last messages of ``before``; ``start == stop`` means nothing differs beyond a length
    change at ``start``. Found with list comparisons at C speed (identical messages compare
    by identity), so an edit of a few messages in a long history costs O(log n) slice
    comparisons instead of a Python loop over every message.
    """
    a = before if isinstance(before, list) else list(before)
    b = after if isinstance(after, list) else list(after)
    start = common_prefix(a, b)
    end = common_suffix(a, b, min(len(a), len(b)) - start)
    return start, len(b) - end
