"""Resuming a run that stopped between a model response and its tool results.

A stored session is checkpointed after every step, so after a crash its view may end
with a response whose tool calls have no answer. The tool-effect ledger
(:attr:`Session.ledger <harness.session.Session.ledger>`) says what happened to each:

* ``completed``, ``failed`` or ``cancelled``: the recorded answer is reused, the tool is
  never run again;
* ``started`` (the process stopped while it ran): the entry becomes
  ``unknown_after_crash``. A tool declared idempotent (the default) is run again; any
  other gets an answer saying its outcome is unknown (recorded in the ledger, so a run
  stopped again gives the same answer), and the model decides what to do;
* no entry (it never started): it runs now.
"""

from __future__ import annotations

__all__ = ["OUTCOME_UNKNOWN_CONTENT", "ResumePlan", "pending_calls", "plan_resume"]

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

import attrs

from harness.core.messages import CanonicalMessage, Part, ToolCallPart, ToolReturnPart, with_harness_mark
from harness.errors import WireFormatError
from harness.session import LedgerEntry
from harness.session.tracking import decode_part, encode_part
from harness.tools.tool import Tool

OUTCOME_UNKNOWN_CONTENT = (
    "The outcome of this call is unknown: the process stopped while the tool was running, so it may or "
    "may not have taken effect. It was not run again because the tool is not idempotent. Check the "
    "current state before calling it again."
)
"""What the model reads for a non-idempotent call found ``started`` after a crash."""


def pending_calls(history: Sequence[CanonicalMessage]) -> tuple[ToolCallPart, ...]:
    """The tool calls of a trailing response (none when the history ends otherwise)."""
    if not history or history[-1].kind != "response":
        return ()
    return history[-1].tool_calls


@attrs.frozen
class ResumePlan:
    """What to do with the unanswered calls of a trailing response.

    Attributes:
        answers: Answers known now, by call id: reused from the ledger, or "outcome unknown".
        rerun: Calls to run now, in call order (never started, or idempotent and interrupted).
        ledger: Entries to record (``started`` ones become ``unknown_after_crash``).
    """

    answers: Mapping[str, Part]
    rerun: tuple[ToolCallPart, ...]
    ledger: tuple[LedgerEntry, ...]


def plan_resume(
    calls: Sequence[ToolCallPart],
    ledger: Mapping[str, LedgerEntry],
    tools: Mapping[str, Tool],
    *,
    now: datetime | None = None,
) -> ResumePlan:
    """Decide, call by call, between reusing, re-running and reporting an unknown outcome.

    ``now`` stamps the entries and answers it writes (default: the wall clock).
    """
    answers: dict[str, Part] = {}
    rerun: list[ToolCallPart] = []
    updates: list[LedgerEntry] = []
    now = now if now is not None else datetime.now(UTC)
    for call in calls:
        entry = ledger.get(call.tool_call_id)
        if entry is None:
            rerun.append(call)
            continue
        if entry.result is not None:  # finished, or an unknown outcome already answered
            try:
                answers[call.tool_call_id] = decode_part(entry.result)
                continue
            except (WireFormatError, ValueError, IndexError, KeyError):
                pass  # an unreadable record: treat the outcome as unknown
        tool = tools.get(call.tool_name)
        unknown = attrs.evolve(
            entry, status="unknown_after_crash", ended_at=now, error="the process stopped while the call ran"
        )
        if tool is not None and tool.idempotent:
            updates.append(unknown)  # until the re-run records its own start
            rerun.append(call)
            continue
        answer = with_harness_mark(
            ToolReturnPart(
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                content=OUTCOME_UNKNOWN_CONTENT,
                timestamp=now,
            ),
            outcome_unknown=True,
        )
        # The answer is recorded with the entry, so a run killed again before the answer is
        # logged gives the model the same answer next time.
        updates.append(attrs.evolve(unknown, result=encode_part(answer)))
        answers[call.tool_call_id] = answer
    return ResumePlan(answers, tuple(rerun), tuple(updates))
