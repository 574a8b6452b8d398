"""Tokens sent per model request, with and without a capability stack.

:class:`RequestMeter` is an observer plugin: on every ``ModelRequestNode`` it counts the
exact message list the model received (``node.sent``: system prompt and request-scoped
parts included) with the token counter of the model, and it attaches the compaction
events reported since the previous request. :func:`compare` pairs two measured runs of
the same deterministic conversation, one with the stack and one without, request by
request.

*With/without* is measured by running the conversation twice rather than estimated: the
scripted demo model and :class:`~harness.replay.model.ReplayModel` answer the same way
whatever history they receive, so both runs make the same requests, and "without" is
what an agent without the stack would really have sent (growing history, stored system
prompt excluded, the same tool results).
"""

from __future__ import annotations

__all__ = ["Comparison", "ComparedRequest", "RequestMeasure", "RequestMeter", "compare", "describe_event"]

from collections.abc import Callable, Sequence
from typing import Any, cast

import attrs

from harness.capabilities.context import CompactionEvent, RequestContext
from harness.cli._json import edit_count, event_json, is_rollup
from harness.core.markers import hookimpl
from harness.core.nodes import Node
from harness.tokens import TokenCounter
from harness.tools.context import RunContext


def describe_event(event: CompactionEvent) -> str:
    """One line for a compaction event: strategy, messages and tokens before and after.

    A roll-up (see :func:`~harness.cli._json.is_rollup`) says so: its figures sum up the
    edits reported before it. A roll-up that changed nothing (its tiers found nothing to
    edit, so no edit is listed above it) says that instead.
    """
    if is_rollup(event) and _unchanged(event):
        tried = _tiers_run(event)
        return (
            f"{event.strategy}: no tier changed the history ({event.messages_before} messages, "
            f"{event.tokens_before:,} tokens{f'; tried {tried}' if tried else ''})"
        )
    name = f"{event.strategy} (roll-up of the edits above)" if is_rollup(event) else event.strategy
    text = (
        f"{name}: {event.messages_before}→{event.messages_after} messages, "
        f"{event.tokens_before:,}→{event.tokens_after:,} tokens"
    )
    cleared = len(event.cleared_tool_call_ids)
    removed = len(event.removed_tool_call_ids)
    if cleared or removed:
        text += f" (cleared {cleared}, removed {removed} tool calls)"
    return text


def _unchanged(event: CompactionEvent) -> bool:
    return (
        event.messages_before == event.messages_after
        and event.tokens_before == event.tokens_after
        and not event.cleared_tool_call_ids
        and not event.removed_tool_call_ids
    )


def _tiers_run(event: CompactionEvent) -> str:
    tiers: object = event.details.get("tiers_run")
    if not isinstance(tiers, list | tuple):
        return ""
    return ", ".join(str(tier) for tier in cast("Sequence[object]", tiers))


@attrs.frozen
class RequestMeasure:
    """One model request as the model received it.

    Attributes:
        index: 1-based number of the request in the measured session (across runs).
        messages: Messages sent.
        tokens: Tokens of the messages sent.
        events: Compaction events reported while preparing this request.
    """

    index: int
    messages: int
    tokens: int
    events: tuple[CompactionEvent, ...] = ()


class RequestMeter:
    """Observer plugin measuring every model request of the agents it is registered with.

    Args:
        counter: The token counter of the model (``TokenCounter(model.model_name)``).
        on_request: Called with each new :class:`RequestMeasure`, as it happens.
        on_event: Called with each compaction event, as it happens (before its request).
    """

    def __init__(
        self,
        counter: TokenCounter,
        *,
        on_request: Callable[[RequestMeasure], None] | None = None,
        on_event: Callable[[CompactionEvent], None] | None = None,
    ) -> None:
        self.counter = counter
        self.on_request = on_request
        self.on_event = on_event
        self.requests: list[RequestMeasure] = []
        self._pending: list[CompactionEvent] = []

    @hookimpl(trylast=True)
    def after_node(self, ctx: RunContext, node: Node) -> None:
        """Measure a request that was sent (``ModelRequestNode.sent``)."""
        from harness.core.nodes import ModelRequestNode

        if not isinstance(node, ModelRequestNode):
            return
        measure = RequestMeasure(
            index=len(self.requests) + 1,
            messages=len(node.sent),
            tokens=self.counter.count_messages(node.sent),
            events=tuple(self._pending),
        )
        self._pending.clear()
        self.requests.append(measure)
        if self.on_request is not None:
            self.on_request(measure)

    @hookimpl
    def on_compaction(self, ctx: RequestContext, event: CompactionEvent) -> None:
        """Keep ``event`` for the request being prepared."""
        self._pending.append(event)
        if self.on_event is not None:
            self.on_event(event)

    @property
    def events(self) -> list[CompactionEvent]:
        """Every compaction event measured so far (pending ones included)."""
        return [event for request in self.requests for event in request.events] + self._pending


@attrs.frozen
class ComparedRequest:
    """One request of a compared pair of runs.

    Attributes:
        index: 1-based request number.
        messages_without: Messages the run without the stack sent.
        messages_with: Messages the run with the stack sent.
        tokens_without: Tokens the run without the stack sent.
        tokens_with: Tokens the run with the stack sent.
        events: The compaction events reported while preparing this request (with the stack).
    """

    index: int
    messages_without: int
    messages_with: int
    tokens_without: int
    tokens_with: int
    events: tuple[CompactionEvent, ...] = ()

    @property
    def edits(self) -> int:
        """Compaction edits before this request (a roll-up is not counted again)."""
        return edit_count(self.events)

    @property
    def saved(self) -> int:
        """Tokens the stack saved on this request (negative when it added some)."""
        return self.tokens_without - self.tokens_with

    @property
    def compacted(self) -> bool:
        """Whether an event before this request changed the history (a no-op roll-up did not)."""
        return any(not (is_rollup(event) and _unchanged(event)) for event in self.events)


@attrs.frozen
class Comparison:
    """Two runs of one conversation compared request by request.

    Attributes:
        requests: The paired requests.
        budget: The token budget the stack was given (``None``: none).
        unpaired: Requests one run made that the other did not (``0`` when both runs
            made the same number of requests, as deterministic runs do).
    """

    requests: tuple[ComparedRequest, ...]
    budget: int | None = None
    unpaired: int = 0

    @property
    def total_without(self) -> int:
        """Input tokens of every request without the stack (what you would pay)."""
        return sum(r.tokens_without for r in self.requests)

    @property
    def total_with(self) -> int:
        """Input tokens of every request with the stack."""
        return sum(r.tokens_with for r in self.requests)

    @property
    def peak_without(self) -> int:
        """The largest request without the stack."""
        return max((r.tokens_without for r in self.requests), default=0)

    @property
    def peak_with(self) -> int:
        """The largest request with the stack."""
        return max((r.tokens_with for r in self.requests), default=0)

    @property
    def saved(self) -> int:
        """Input tokens the stack saved over the whole run."""
        return self.total_without - self.total_with

    @property
    def saved_fraction(self) -> float:
        """:attr:`saved` as a fraction of :attr:`total_without` (``0.0`` for an empty run)."""
        return self.saved / self.total_without if self.total_without else 0.0

    @property
    def edit_count(self) -> int:
        """Compaction edits over the run; a roll-up event repeats its tiers' edits and is not counted."""
        return sum(r.edits for r in self.requests)

    @property
    def first_request_over_budget(self) -> bool:
        """The first request alone is over the budget: no stack can fit it.

        The first request holds nothing a capability may edit (the system prompt, the
        tools and the first prompt), so the budget itself is too small.
        """
        first = self.requests[0] if self.requests else None
        return self.budget is not None and first is not None and first.tokens_with > self.budget

    @property
    def over_budget(self) -> tuple[int, ...]:
        """Numbers of the requests that sent more than the budget with the stack."""
        if self.budget is None:
            return ()
        return tuple(r.index for r in self.requests if r.tokens_with > self.budget)

    def as_json(self) -> dict[str, Any]:
        """A JSON-ready dict: every request and the totals."""
        return {
            "budget": self.budget,
            "requests": [
                {
                    "index": r.index,
                    "messages_without": r.messages_without,
                    "messages_with": r.messages_with,
                    "tokens_without": r.tokens_without,
                    "tokens_with": r.tokens_with,
                    "saved": r.saved,
                    "edits": r.edits,
                    "events": [event_json(e) for e in r.events],
                }
                for r in self.requests
            ],
            "total_tokens_without": self.total_without,
            "total_tokens_with": self.total_with,
            "saved_tokens": self.saved,
            "saved_fraction": round(self.saved_fraction, 4) + 0.0,  # + 0.0: never -0.0
            "peak_tokens_without": self.peak_without,
            "peak_tokens_with": self.peak_with,
            "edit_count": self.edit_count,
            "over_budget": list(self.over_budget),
            "first_request_over_budget": self.first_request_over_budget,
            "unpaired_requests": self.unpaired,
        }


def compare(
    without: Sequence[RequestMeasure], with_stack: Sequence[RequestMeasure], *, budget: int | None = None
) -> Comparison:
    """Pair the requests of a run without the stack with those of a run with it.

    Requests are paired by position; any surplus of one run is counted in
    :attr:`Comparison.unpaired` (the runs were not deterministic).
    """
    rows = tuple(
        ComparedRequest(
            index=index,
            messages_without=plain.messages,
            messages_with=stacked.messages,
            tokens_without=plain.tokens,
            tokens_with=stacked.tokens,
            events=stacked.events,
        )
        for index, (plain, stacked) in enumerate(zip(without, with_stack, strict=False), start=1)
    )
    return Comparison(rows, budget=budget, unpaired=abs(len(without) - len(with_stack)))
