"""What a run tells its observers besides the hooks: stream events and log records.

The orchestrator calls these at fixed points; each is a no-op when nobody listens (no
event sink, the logger's level above the record's), so an unobserved run pays nothing.
"""

from __future__ import annotations

__all__ = ["announce_calls", "compaction_reporter", "log_request"]

import logging
from collections.abc import Callable, Collection, Sequence

from harness.capabilities.context import CompactionEvent, RequestContext
from harness.core.messages import ToolCallPart
from harness.run.events import Compaction, EventSink, ToolCallReady, ToolCallStarted

_log = logging.getLogger("harness.run")


def compaction_reporter(
    request_id: str, events: EventSink | None
) -> Callable[[RequestContext, CompactionEvent], None]:
    """The ``ctx.on_event`` sink of a run's requests: logs each compaction and streams it."""

    def report(_ctx: RequestContext, event: CompactionEvent) -> None:
        _log.info(
            "run %s: %s compacted the history (%s): %d -> %d tokens",
            request_id,
            event.strategy,
            event.reason,
            event.tokens_before,
            event.tokens_after,
        )
        if events is not None:
            events(Compaction(event))

    return report


def announce_calls(events: EventSink, calls: Sequence[ToolCallPart], streamed: Collection[str]) -> None:
    """Stream a response's calls: started (unless the model streamed it), then arguments complete."""
    for call in calls:
        if call.tool_call_id not in streamed:
            events(ToolCallStarted(call.tool_call_id, call.tool_name))
        events(ToolCallReady(call))


def log_request(request_id: str, index: int, messages: int, model_name: str) -> None:
    """Log a request about to be sent, at debug level."""
    if _log.isEnabledFor(logging.DEBUG):
        _log.debug("run %s request %d: %d messages to %s", request_id, index, messages, model_name)
