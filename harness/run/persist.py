"""Per-step checkpoints of a stored session while a run works on it.

A session with a :attr:`~harness.session.Session.store` is written after every step, so
a killed process loses at most the model request in flight:

* after the run's preparation (the new prompt, merged into a pending request or not);
* after the capabilities edited the history (their new messages are overlays, never log);
* after every model response and every tool-result request;
* when a tool call starts and when it finishes (the tool-effect ledger, with its answer,
  so a resumed run reuses it instead of running the tool again);
* when the run ends or fails.

Each checkpoint writes only what the step added (see :mod:`harness.session.tracking`).
A session without a store is untouched until the run ends, as before.
"""

from __future__ import annotations

__all__ = ["SessionWriter", "event_json"]

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, cast

import attrs

from harness.capabilities.context import CompactionEvent
from harness.core.messages import CanonicalMessage, Usage
from harness.run.executor import ToolExecutor
from harness.session import LedgerEntry, LedgerStatus, Session
from harness.session.tracking import encode_part
from harness.tools.context import RunContext
from harness.tools.lifecycle import ToolEvent

_LEDGER_STATUS: Mapping[str, LedgerStatus] = {
    "started": "started",
    "completed": "completed",
    "failed": "failed",
    "cancelled": "cancelled",
}


def event_json(event: CompactionEvent) -> dict[str, Any]:
    """A compaction event as a JSON object (values JSON cannot hold become strings)."""
    data = attrs.asdict(event, recurse=False)
    data["removed_tool_call_ids"] = list(event.removed_tool_call_ids)
    data["cleared_tool_call_ids"] = list(event.cleared_tool_call_ids)
    data["details"] = dict(event.details)
    return cast(dict[str, Any], json.loads(json.dumps(data, default=str)))


class SessionWriter:
    """Checkpoints one run's stored session at each step (a no-op for other sessions).

    Args:
        session: The run's session.
        ctx: The run's context (usage so far).
        executor: The run's tool executor (finished answers, for the ledger).
    """

    def __init__(self, session: Session, ctx: RunContext, executor: ToolExecutor) -> None:
        self.session = session
        self.ctx = ctx
        self.executor = executor
        self.enabled = session.store is not None
        self._base_usage: Usage = session.usage
        self._base_thoughts = len(session.thoughts)

    def prepared(
        self,
        before: Sequence[CanonicalMessage],
        messages: list[CanonicalMessage],
        request: CanonicalMessage | None,
    ) -> None:
        """Checkpoint the prepared history: repairs are overlays, the new prompt is logged as written."""
        if not self.enabled:
            return
        known = {id(m) for m in before}
        overlays = [m for m in messages if id(m) not in known and m is not request]
        if request is not None and (not messages or messages[-1] is not request):
            self.session.append_to_log([request])
        self.session.note_overlays(overlays)
        self.session.messages = messages
        self._checkpoint()

    def edited(self, snapshot: Sequence[CanonicalMessage], events: Iterable[CompactionEvent]) -> None:
        """After the capabilities: their new messages are overlays; checkpoint if anything changed."""
        if not self.enabled:
            return
        history = self.ctx.messages
        if len(history) == len(snapshot) and history == snapshot:
            return
        known = {id(m) for m in snapshot}
        self.session.note_overlays(
            (m for m in history if id(m) not in known), [event_json(e) for e in events]
        )
        self.session.messages = history
        self._checkpoint()

    def step(self, thoughts: Sequence[str], model_name: str | None) -> None:
        """After a model response or a tool-result request was appended."""
        if not self.enabled:
            return
        self.sync(thoughts, model_name)
        self._checkpoint()

    def tool_event(self, event: ToolEvent) -> None:
        """Record a tool call's start or end in the ledger, durably, before anything else happens."""
        if not self.enabled:
            return
        status = _LEDGER_STATUS.get(event.kind)
        if status is None:
            return
        record = event.record
        answer = self.executor.results.get(record.tool_call_id) if status != "started" else None
        now = datetime.now(UTC)
        self.session.record_tool(
            LedgerEntry(
                tool_call_id=record.tool_call_id,
                tool_name=record.tool_name,
                status=status,
                started_at=record.started_at or now,
                ended_at=record.completed_at if status != "started" else None,
                result=encode_part(answer) if answer is not None else None,
                error=record.error,
            )
        )
        self._checkpoint()

    def sync(self, thoughts: Sequence[str], model_name: str | None) -> None:
        """Make the session's usage, thoughts and model the run's, as of now."""
        session = self.session
        session.messages = self.ctx.messages
        session.usage = self._base_usage + self.ctx.usage
        del session.thoughts[self._base_thoughts :]
        session.thoughts.extend(thoughts)
        session.current_model = model_name
        session.original_query = self.ctx.run.original_query

    def finish(self, thoughts: Sequence[str], model_name: str | None, total_tokens: int) -> None:
        """The run's last write: totals, token count, then a checkpoint."""
        self.sync(thoughts, model_name)
        self.session.total_tokens = total_tokens
        self._checkpoint()

    def _checkpoint(self) -> None:
        self.session.checkpoint()
