"""Per-step checkpoints of a stored session while a run works on it.

A session with a :attr:`~harness.session.Session.store` is written after every step, so
a killed process loses at most the model request in flight:

* after the run's preparation (the new prompt, merged into a pending request or not);
* after the capabilities edited the history (their new messages are overlays, never log);
* after every model response and every tool-result request;
* when a tool call starts and when it finishes (the tool-effect ledger, with its answer,
  so a resumed run reuses it instead of running the tool again);
* when the run ends or fails.

Each checkpoint writes only what the step added (see :mod:`harness.session.tracking`),
and is awaited (:meth:`Session.acheckpoint <harness.session.Session.acheckpoint>`): the
store's I/O runs off the event loop's thread, one checkpoint of the session at a time, in
order. A session without a store is written once, when the run ends; during the run its
``messages`` are the run's history (the same list as ``ctx.messages``), so a tool or a hook
reads one history whatever the store.
"""

from __future__ import annotations

__all__ = ["SessionWriter", "event_json"]

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, cast

import attrs

from harness.capabilities.context import CompactionEvent
from harness.core.messages import CanonicalMessage, Usage
from harness.session import LedgerEntry, LedgerStatus, Session
from harness.session.tracking import encode_part
from harness.tokens import TokenCounter
from harness.tools.context import RunContext
from harness.tools.lifecycle import ToolEvent

_log = logging.getLogger("harness.run")

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
        clock: The run's clock (its effects' ``now``), for the ledger's times.
    """

    def __init__(
        self,
        session: Session,
        ctx: RunContext,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.session = session
        self.clock: Callable[[], datetime] = clock or (lambda: datetime.now(UTC))
        self.ctx = ctx
        self.enabled = session.store is not None
        self._base_usage: Usage = session.usage
        self._base_thoughts = len(session.thoughts)

    async def prepared(
        self,
        before: Sequence[CanonicalMessage],
        messages: list[CanonicalMessage],
        request: CanonicalMessage | None,
    ) -> None:
        """Checkpoint the prepared history: repairs are overlays, the new prompt is logged as written."""
        if not self.enabled:
            self.session.messages = self.ctx.messages  # one history, whatever the store
            return
        known = {id(m) for m in before}
        overlays = [m for m in messages if id(m) not in known and m is not request]
        if request is not None and (not messages or messages[-1] is not request):
            self.session.append_to_log([request])
        self.session.note_overlays(overlays)
        self.session.messages = messages
        await self._checkpoint()

    async def edited(self, snapshot: Sequence[CanonicalMessage], events: Iterable[CompactionEvent]) -> None:
        """After the capabilities: their new messages are overlays; checkpoint if anything changed."""
        if not self.enabled:
            self.session.messages = self.ctx.messages  # one history, whatever the store
            return
        history = self.ctx.messages
        if len(history) == len(snapshot) and history == snapshot:
            return
        known = {id(m) for m in snapshot}
        self.session.note_overlays(
            (m for m in history if id(m) not in known), [event_json(e) for e in events]
        )
        self.session.messages = history
        await self._checkpoint()

    async def step(self, thoughts: Sequence[str], model_name: str | None) -> None:
        """After a model response or a tool-result request was appended."""
        if not self.enabled:
            self.session.messages = self.ctx.messages  # one history, whatever the store
            return
        self.sync(thoughts, model_name)
        await self._checkpoint()

    async def tool_event(self, event: ToolEvent) -> None:
        """Record a tool call's start or end in the ledger, durably, before anything else happens.

        The event carries the call's answer (:attr:`ToolEvent.answer
        <harness.tools.lifecycle.ToolEvent.answer>`), which the ledger keeps; a call whose
        answer says its outcome is unknown is ledgered ``unknown``, whatever its kind.
        """
        if not self.enabled:
            self.session.messages = self.ctx.messages  # one history, whatever the store
            return
        status = _LEDGER_STATUS.get(event.kind)
        if status is None:
            return
        if status != "started" and event.outcome_unknown:
            status = "unknown"
        record = event.record
        answer = event.answer if status != "started" else None
        now = self.clock()
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
        await self._checkpoint()

    def sync(self, thoughts: Sequence[str], model_name: str | None) -> None:
        """Make the session's usage, thoughts and model the run's, as of now."""
        session = self.session
        session.messages = self.ctx.messages
        session.usage = self._base_usage + self.ctx.usage
        del session.thoughts[self._base_thoughts :]
        session.thoughts.extend(thoughts)
        session.current_model = model_name
        session.original_query = self.ctx.run.original_query

    async def finish(self, thoughts: Sequence[str], model_name: str | None, total_tokens: int) -> None:
        """The run's last write: totals, token count, then a checkpoint."""
        self.sync(thoughts, model_name)
        self.session.total_tokens = total_tokens
        await self._checkpoint()

    async def hand_over(
        self,
        history: list[CanonicalMessage],
        thoughts: Sequence[str],
        model_name: str,
        *,
        count: Callable[[], int],
    ) -> list[str]:
        """The run's last write to the session: its history, usage and thoughts, then save.

        A stored session was checkpointed at every step; this writes the totals. Any other
        session takes the run's result here, once, and is saved when it has a path. The
        history is handed over before it is counted, and a failing count never loses it:
        when ``count`` (the run's counter, which a ``count_tokens`` hook may answer) raises,
        the built-in counter counts instead and the failure becomes a note.

        Returns:
            Notes on what failed without stopping the hand-over (a failing count).
        """
        session = self.session
        if not self.enabled:
            session.record_run(
                messages=history,
                usage=self.ctx.usage,
                thoughts=thoughts,
                model_name=model_name,
                total_tokens=session.total_tokens,
                original_query=self.ctx.run.original_query,
            )
        try:
            total, notes = count(), []
        except Exception as exc:
            total = TokenCounter(model_name).count_messages(history)
            notes = [
                f"harness: counting the history at the end of the run failed ({type(exc).__name__}: {exc}); "
                "the built-in counter counted it instead"
            ]
            _log.warning("run %s: %s", self.ctx.request_id, notes[0])
        if self.enabled:
            await self.finish(thoughts, model_name, total)
            return notes
        session.total_tokens = total
        if session.path is not None:
            session.save()
        return notes

    async def _checkpoint(self) -> None:
        await self.session.acheckpoint()
