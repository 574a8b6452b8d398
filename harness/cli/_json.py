"""What every ``--json`` output of the ``harness`` command shares.

* :data:`SCHEMA_VERSION` and :func:`echo_json`: every JSON document the command prints is
  an object whose first key is ``"schema_version"``; it grows when a key changes meaning
  or goes away (new keys do not change it).
* :func:`event_json`: a :class:`~harness.capabilities.context.CompactionEvent` as a JSON
  object, the same in ``compact``, ``replay``, ``demo`` and ``run``.
* :func:`is_rollup` and :func:`edit_count`: a roll-up event (``tiered``'s escalation)
  summarises edits that were reported on their own, so counts and sums skip it.
* :func:`percent` and :func:`saved_words`: percentages in words that never read ``-0%``.
"""

from __future__ import annotations

__all__ = [
    "SCHEMA_VERSION",
    "echo_json",
    "edit_count",
    "event_json",
    "is_rollup",
    "jsonable",
    "percent",
    "saved_words",
]

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final, cast

import click

from harness.capabilities.context import CompactionEvent

SCHEMA_VERSION: Final = 1
"""Version of the command's JSON documents; raised when a key changes meaning or goes away.

1: every document is an object carrying this key (``plugins``, ``hooks`` and ``stats``
wrap their lists), compaction events are objects everywhere, roll-up events are marked.
"""


def echo_json(document: Mapping[str, Any]) -> None:
    """Print ``document`` as indented JSON on stdout, ``schema_version`` first."""
    body = {key: value for key, value in document.items() if key != "schema_version"}
    click.echo(json.dumps({"schema_version": SCHEMA_VERSION, **jsonable(body)}, indent=2))


def jsonable(value: Any) -> Any:
    """``value`` with mappings, sequences and sets made JSON-ready; anything else unknown as ``str``."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        mapping = cast("Mapping[object, object]", value)
        return {str(key): jsonable(item) for key, item in mapping.items()}
    if isinstance(value, set | frozenset):
        return [jsonable(item) for item in sorted(cast("Iterable[object]", value), key=str)]
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in cast("Iterable[object]", value)]
    return str(value)


def is_rollup(event: CompactionEvent) -> bool:
    """Whether ``event`` sums up sub-steps that reported their own events.

    A composite capability (``TieredCompaction``) runs tiers that report their edits
    themselves, then one event for the whole escalation whose ``details`` list the
    tiers it ran under ``"tiers"``. That event repeats its tiers' edits: it is not counted
    as an edit of its own, and its tokens are not added to theirs.
    """
    tiers: object = event.details.get("tiers")
    return isinstance(tiers, list | tuple)


def edit_count(events: Iterable[CompactionEvent]) -> int:
    """The edits among ``events``: every event but the roll-ups (see :func:`is_rollup`)."""
    return sum(1 for event in events if not is_rollup(event))


def event_json(event: CompactionEvent) -> dict[str, Any]:
    """One compaction event as a JSON object (``capability`` is the event's ``strategy``).

    ``rollup`` marks an event that sums up the events before it (see :func:`is_rollup`);
    ``details`` holds the capability's own facts, made JSON-ready.
    """
    return {
        "capability": event.strategy,
        "reason": event.reason,
        "rollup": is_rollup(event),
        "messages_before": event.messages_before,
        "messages_after": event.messages_after,
        "tokens_before": event.tokens_before,
        "tokens_after": event.tokens_after,
        "tokens_saved": event.tokens_saved,
        "tool_calls_cleared": len(event.cleared_tool_call_ids),
        "tool_calls_dropped": len(event.removed_tool_call_ids),
        "cleared_tool_call_ids": list(event.cleared_tool_call_ids),
        "dropped_tool_call_ids": list(event.removed_tool_call_ids),
        "details": jsonable(event.details),
    }


def percent(fraction: float) -> str:
    """``fraction`` as a whole percentage, ``"<1%"`` when it is above zero but rounds to 0."""
    size = abs(fraction)
    if size == 0:
        return "0%"
    if size < 0.005:
        return "<1%"
    return f"{size:.0%}"


def saved_words(saved: int, fraction: float) -> str:
    """What a stack saved, in words: ``"1,234 tokens saved (12%)"``, or what it added.

    Args:
        saved: Tokens saved (negative when the stack added some).
        fraction: ``saved`` as a fraction of the tokens without the stack.
    """
    if saved > 0:
        return f"{saved:,} tokens saved ({percent(fraction)})"
    if saved < 0:
        return f"{-saved:,} tokens added by the stack ({percent(fraction)} more)"
    return "nothing saved"
