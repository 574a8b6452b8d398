"""Replay a history request by request to check a capability's remembered state.

Capabilities that keep a memo between requests (scan only appended messages, skip settled
pairs) must decide exactly as a fresh copy that scans everything, even when another
strategy edited the history in between. :func:`assert_memo_matches_fresh` checks that::

    @given(histories(), st.data())
    def test_memo(messages, data):
        def interfere(history):
            spots = clearable_returns(history)
            return data.draw(st.sampled_from(spots)) if spots and data.draw(st.booleans()) else None

        assert_memo_matches_fresh(MyCapability(max_messages=8), messages, interfere=interfere)
"""

from __future__ import annotations

__all__ = ["OTHER_STRATEGY_MARK", "assert_memo_matches_fresh", "clearable_returns"]

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from harness.capabilities.context import RequestContext
from harness.core.messages import (
    CanonicalMessage,
    Part,
    ToolReturnPart,
    harness_mark,
    replace,
    with_harness_mark,
)
from harness.tokens import TokenCounter

OTHER_STRATEGY_MARK = "other"
"""The ``cleared`` mark of a return "another strategy" cleared during a replay."""

Spot = tuple[int, int]
"""``(message index, part index)`` of a tool return."""


def clearable_returns(history: Sequence[CanonicalMessage]) -> list[Spot]:
    """Unmarked tool returns before the newest message (what another strategy could clear)."""
    return [
        (mi, pi)
        for mi, message in enumerate(history[:-1])
        for pi, part in enumerate(message.parts)
        if isinstance(part, ToolReturnPart) and harness_mark(part) is None
    ]


def _clear(history: list[CanonicalMessage], spot: Spot) -> None:
    mi, pi = spot
    parts: list[Part] = list(history[mi].parts)
    part = parts[pi]
    if not isinstance(part, ToolReturnPart):
        raise ValueError(f"messages[{mi}].parts[{pi}] is not a tool return: {part.part_kind}")
    parts[pi] = with_harness_mark(replace(part, content="[c]"), cleared=OTHER_STRATEGY_MARK)
    history[mi] = history[mi].replace(parts=tuple(parts))


_Outcome = list[tuple[str, tuple[str, ...], tuple[str, ...]]]


def _outcome(ctx: RequestContext) -> _Outcome:
    return [(e.strategy, tuple(e.cleared_tool_call_ids), tuple(e.removed_tool_call_ids)) for e in ctx.events]


def assert_memo_matches_fresh(
    capability: Any,
    messages: Sequence[CanonicalMessage],
    *,
    fresh: Callable[[], Any] | None = None,
    interfere: Callable[[list[CanonicalMessage]], Spot | None] | None = None,
    forced: bool = False,
) -> None:
    """Replay ``messages`` request by request through ``capability`` and a fresh copy.

    At every request of the replay, ``capability`` (one instance, keeping its memo) edits
    one copy of the history and a fresh instance edits another; both histories and the
    events' strategies, cleared and removed call ids must stay equal. Before a request,
    ``interfere`` may name a tool return that "another strategy" clears in both copies
    (marked ``cleared="other"``), which must invalidate any memo that relied on it.

    Args:
        capability: The capability under test (its ``before_model_request`` / ``compact``).
        messages: The history to replay; each request in it is one model request.
        fresh: Builds the fresh copy per request (default: ``attrs.evolve(capability)``).
        interfere: Returns a :func:`clearable_returns` spot to clear, or ``None``.
        forced: Call ``compact`` (unconditional) instead of ``before_model_request``.

    Raises:
        AssertionError: The remembered and the fresh run diverged; names the request.
    """
    make_fresh = fresh if fresh is not None else lambda: attrs.evolve(capability)
    counter = TokenCounter()
    kept: list[CanonicalMessage] = []
    scratch: list[CanonicalMessage] = []
    for index, message in enumerate(messages):
        kept.append(message)
        scratch.append(message)
        if message.kind != "request":
            continue
        spot = interfere(kept) if interfere is not None else None
        if spot is not None:
            _clear(kept, spot)
            _clear(scratch, spot)
        outcomes: list[_Outcome] = []
        for history, instance in ((kept, capability), (scratch, make_fresh())):
            ctx = RequestContext(messages=history, token_counter=counter)
            step = instance.compact(ctx) if forced else instance.before_model_request(ctx)
            asyncio.run(step)
            outcomes.append(_outcome(ctx))
        if kept != scratch:
            raise AssertionError(f"request at messages[{index}]: the remembered run edited differently")
        if outcomes[0] != outcomes[1]:
            raise AssertionError(
                f"request at messages[{index}]: events differ: remembered {outcomes[0]}, fresh {outcomes[1]}"
            )
