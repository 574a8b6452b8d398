"""``DBOSEffects``: every model request, tool call and capability model call of a run is a DBOS step.

DBOS runs a workflow's steps in the workflow's own process, so a step gets the whole
request in memory (:attr:`~harness.core.effects.ModelRequestUnit.messages`) and only its
*output* is journaled, in ``operation_outputs``: the response message in our wire JSON,
or the :class:`~harness.core.effects.ToolOutcome`'s JSON, each with the time the step
finished::

    {"at":"2026-12-02T14:00:00.123456+00:00","response":{"kind":"response","parts":[...]}}
    {"at":"2026-12-02T14:00:00.456789+00:00","outcome":{"kind":"returned","attempts":1,"content":"..."}}

The history is never journaled, so the journal grows with what the run added.

Replay-stable time and ids: :meth:`DBOSEffects.now` is the time of the latest unit output
this execution has seen (the run's start time before the first), and
:meth:`DBOSEffects.new_id` is a digest of the workflow id and a counter. A replay sees the
same outputs in the same order, so it records the same timestamps and ids, with no extra
rows in the journal.

Tool calls after a crash: DBOS runs again a step that had not finished. A tool that is not
idempotent and that the earlier execution had recorded as started in the session's
tool-effect ledger (:meth:`ReplaySafeStore.started_before
<harness.durable.replay_safe.ReplaySafeStore.started_before>`) is not run again: its
outcome is ``"unknown"`` and the model is told so. Any other tool runs (the attempt loop
of :func:`~harness.core.effects.run_attempts`, inside the step).
"""

from __future__ import annotations

__all__ = ["MODEL_STEP", "TOOL_STEP", "DBOSEffects", "step_name"]

import hashlib
import json
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any, Final, cast

from dbos import DBOS
from dbos import error as dbos_errors

from harness.core import CanonicalMessage, ModelRequestUnit, ToolCallUnit, ToolOutcome, run_attempts
from harness.durable import ReplaySafeStore
from harness.errors import WorkflowIncompatibleError
from harness.wire import encode_json, messages_from_jsonable, messages_to_jsonable

MODEL_STEP: Final = "harness.model_request"
"""Step name prefix of model-request units (``harness.model_request:agent``, ``...:capability:<name>``)."""
TOOL_STEP: Final = "harness.tool_call"
"""Step name prefix of tool-call units (``harness.tool_call:<tool name>``)."""


def step_name(unit: ModelRequestUnit | ToolCallUnit) -> str:
    """The DBOS step name of ``unit``: DBOS checks it on replay, so a changed run is refused."""
    if isinstance(unit, ToolCallUnit):
        return f"{TOOL_STEP}:{unit.call.tool_name}"
    if unit.purpose == "capability":
        return f"{MODEL_STEP}:capability:{unit.source}"
    return f"{MODEL_STEP}:{unit.source}"


def _stamp() -> str:
    return datetime.now(UTC).isoformat()


def _parse(text: str, key: str, workflow_id: str, name: str) -> tuple[datetime, Any]:
    try:
        data = cast(dict[str, Any], json.loads(text))
        return datetime.fromisoformat(data["at"]), data[key]
    except (ValueError, TypeError, KeyError) as exc:
        raise WorkflowIncompatibleError(
            f"run {workflow_id!r}: the journaled output of step {name!r} is not a harness-dbos unit output "
            f"({type(exc).__name__}: {exc})",
            run_id=workflow_id,
            changed=(name,),
        ) from exc


class DBOSEffects:
    """Effects that run each unit as a DBOS step of the current workflow.

    Args:
        workflow_id: The workflow (the run's key: ids derive from it).
        started_at: The run's start time (the workflow input's), ``now()`` before any unit.
        store: The run's :class:`ReplaySafeStore`, whose ledger says which tool calls an
            earlier execution had started (``None``: the session is not stored).

    Attributes:
        units: Units this execution asked for (journaled ones included).
    """

    deltas: bool = False
    """Steps run in this process with the whole request: no delta is needed to ship them."""

    def __init__(self, workflow_id: str, started_at: datetime, store: ReplaySafeStore | None = None) -> None:
        self.workflow_id = workflow_id
        self.store = store
        self.units = 0
        self._clock = started_at
        self._ids = 0

    def now(self) -> datetime:
        """The time of the latest unit output (the run's start before the first)."""
        return self._clock

    def new_id(self) -> str:
        """``sha256(workflow id, counter)``: 32 hexadecimal characters, the same on every replay."""
        self._ids += 1
        return hashlib.sha256(f"harness-dbos:{self.workflow_id}:{self._ids}".encode()).hexdigest()[:32]

    async def _step(self, name: str, body: Callable[[], Coroutine[Any, Any, str]]) -> str:
        self.units += 1
        try:
            return await DBOS.run_step_async({"name": name}, body)
        except dbos_errors.DBOSUnexpectedStepError as exc:
            raise WorkflowIncompatibleError(
                f"run {self.workflow_id!r} diverged from its journal: {exc}. The agent or its stack changed "
                "since the run started; it is refused.",
                run_id=self.workflow_id,
                changed=(name,),
            ) from exc

    async def model_request(self, unit: ModelRequestUnit) -> CanonicalMessage:
        """Send the request in a step; the step's journaled output is the response's wire JSON."""

        async def call() -> str:
            response = await unit.model.request(unit.messages, unit.tools, unit.settings)
            wire = encode_json(messages_to_jsonable([response])[0], ascii_only=False).decode("utf-8")
            return f'{{"at":"{_stamp()}","response":{wire}}}'

        name = step_name(unit)
        at, data = _parse(await self._step(name, call), "response", self.workflow_id, name)
        self._clock = at
        return messages_from_jsonable([data])[0]

    async def tool_call(self, unit: ToolCallUnit) -> ToolOutcome:
        """Run the tool in a step (or answer ``"unknown"``, see the module); journal the outcome's JSON."""
        store = self.store

        async def call() -> str:
            if not unit.idempotent and store is not None and store.started_before(unit.call.tool_call_id):
                outcome = ToolOutcome("unknown")
            else:
                outcome = await run_attempts(unit)
            wire = encode_json(outcome.to_json(), ascii_only=False).decode("utf-8")
            return f'{{"at":"{_stamp()}","outcome":{wire}}}'

        name = step_name(unit)
        at, data = _parse(await self._step(name, call), "outcome", self.workflow_id, name)
        self._clock = at
        return ToolOutcome.from_json(data)
