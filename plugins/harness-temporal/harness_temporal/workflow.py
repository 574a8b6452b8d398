"""The harness run as a Temporal workflow: the orchestration in the workflow, every effect an activity.

:class:`HarnessRun` builds the agent (:func:`harness.config.load_agent`), refuses a run
whose agent changed since it started (:func:`harness.durable.check_fingerprint`: a
non-retryable ``WorkflowIncompatibleError``), takes the session as it was when the run
began from its first activity (journaled once), and runs ``agent.run`` with
:class:`TemporalEffects`: ``now()`` and ``new_id()`` are Temporal's replay-stable
``workflow.now()`` and ``workflow.uuid4()``, each model request and tool call an activity.

The workflow never touches a store. Its session lives in an
:class:`~harness_temporal.store.ActivityStore`: every checkpoint, and every read a
capability makes, is a local activity on the worker, whose result the history records. A
store waiting on a lock waits on the worker, never in workflow code (Temporal's deadlock
detector), and a replay gets each write's result back without writing again. The run's
input and every activity's input name the store by reference
(:class:`harness.durable.StoreReference`), never by a credential.

Errors keep their type across the boundaries (:mod:`harness_temporal.failures`): a model's
``ModelRateLimitError`` raised in an activity is raised as itself in the workflow (so
``harness-model-fallback`` falls back there, and the next model's request goes to the
worker by name), and a run that fails raises the same type from
:meth:`~harness_temporal.engine.RunHandle.result`.

A worker whose agent differs from the run's refuses it. On a fresh start the workflow fails
with a non-retryable ``WorkflowIncompatibleError``. On a resume (Temporal replays the
journal, whose commands a different ending would contradict) the workflow *task* fails with
it: the failure is in the history, :meth:`~harness_temporal.engine.RunHandle.result` raises
:class:`~harness.errors.WorkflowIncompatibleError`, and the run stays as it was until a
worker with the original agent resumes it (or someone cancels it).

The workflow is **not sandboxed** (``sandboxed=False``): harness's orchestration is
deterministic given its effects, but uses ``datetime``/``uuid`` defaults that Temporal's
sandbox would refuse or re-import per run.
"""

from __future__ import annotations

__all__ = ["HarnessRun", "TemporalEffects"]

from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import TimeoutError as TemporalTimeoutError

from harness.config import load_agent
from harness.core import CanonicalMessage, ModelRequestUnit, ToolCallUnit, ToolOutcome
from harness.durable import RunSummary, check_fingerprint, session_from_snapshot
from harness.errors import AgentLoadError, WorkflowIncompatibleError
from harness.session import Session, usage_to_mapping
from harness_temporal.errors import TemporalRunError
from harness_temporal.failures import application_error, rebuild
from harness_temporal.store import ActivityStore
from harness_temporal.units import (
    ACTIVITY_MODEL,
    ACTIVITY_SNAPSHOT,
    ACTIVITY_TOOL,
    WORKFLOW_NAME,
    RunSpec,
    decode_message,
    encode_messages,
    encode_parts,
    encode_settings,
    encode_tools,
    fingerprint_digest,
)


def _timeout_kind(error: TemporalTimeoutError) -> str:
    return error.type.name.lower() if error.type is not None else "an activity"


def _unit_error(exc: ActivityError, what: str) -> BaseException:
    """The error a failed activity raises in the orchestration: the harness error it carried."""
    cause = exc.cause
    run_id = workflow.info().workflow_id
    if isinstance(cause, ApplicationError):
        return rebuild(cause, what=what, run_id=run_id)
    return TemporalRunError(f"{what} failed: {cause or exc}", kind=type(cause or exc).__name__, run_id=run_id)


class TemporalEffects:
    """The effects of a run inside a Temporal workflow (see the module).

    Args:
        spec: The run's workflow input.
        model_name: The agent's model name (a capability asking another model says so).
    """

    deltas: bool = True
    """Request units carry deltas: each model-request activity ships only what the run added."""

    def __init__(self, spec: RunSpec, model_name: str) -> None:
        self.spec = spec
        self.model_name = model_name
        self.digest = fingerprint_digest(spec.fingerprint)
        self._last_request = 0

    def now(self) -> datetime:
        """``workflow.now()`` (replay-stable)."""
        return workflow.now()

    def new_id(self) -> str:
        """``workflow.uuid4().hex`` (replay-stable)."""
        return workflow.uuid4().hex

    def _base(self, session_id: str | None) -> dict[str, Any]:
        return {
            "agent": self.spec.agent,
            "fp": self.digest,
            "store": self.spec.store.to_json(),
            "session": session_id or self.spec.session_id,
        }

    async def model_request(self, unit: ModelRequestUnit) -> CanonicalMessage:
        """One ``harness.model_request`` activity: the delta in, the response out."""
        data = self._base(unit.session_id)
        data.update(index=unit.index, settings=encode_settings(unit.settings))
        if unit.model.model_name != self.model_name:  # a fallback model, a summarizer's own model
            data["model"] = unit.model.model_name
        delta = unit.delta
        if unit.purpose == "capability" or delta is None:
            data.update(
                purpose="capability", messages=encode_messages(unit.messages), tools=encode_tools(unit.tools)
            )
        else:
            data.update(
                purpose="request",
                after=self._last_request,
                keep=delta.keep,
                added=encode_messages(delta.added),
                system=encode_parts(delta.system),
                scoped=encode_parts(delta.scoped),
                revision=unit.revision,
            )
            self._last_request = unit.index
        options = self.spec.options
        try:
            result: dict[str, Any] = await workflow.execute_activity(
                ACTIVITY_MODEL,
                data,
                result_type=dict,
                start_to_close_timeout=timedelta(seconds=options.model_timeout),
                heartbeat_timeout=timedelta(seconds=options.heartbeat),
                retry_policy=RetryPolicy(maximum_attempts=options.model_attempts),
                summary=f"model request {unit.index} ({unit.source})",
            )
        except ActivityError as exc:
            raise _unit_error(exc, f"model request {unit.index}") from exc
        return decode_message(result)

    async def tool_call(self, unit: ToolCallUnit) -> ToolOutcome:
        """One ``harness.tool_call`` activity; a non-idempotent call whose worker died is ``"unknown"``."""
        call = unit.call
        data = self._base(unit.session_id)
        data.update(
            id=call.tool_call_id,
            name=call.tool_name,
            arguments=dict(unit.arguments),
            retry=0,
            idempotent=unit.idempotent,
            max_attempts=unit.max_attempts,
        )
        options = self.spec.options
        if unit.idempotent:
            policy = RetryPolicy(
                initial_interval=timedelta(seconds=max(unit.base_delay, 0.001)),
                backoff_coefficient=2.0,
                maximum_interval=timedelta(seconds=5),
                maximum_attempts=max(1, unit.max_attempts) + options.crash_attempts,
            )
        else:
            policy = RetryPolicy(maximum_attempts=1)
        try:
            result: dict[str, Any] = await workflow.execute_activity(
                ACTIVITY_TOOL,
                data,
                result_type=dict,
                start_to_close_timeout=timedelta(seconds=options.tool_timeout),
                heartbeat_timeout=timedelta(seconds=options.heartbeat),
                retry_policy=policy,
                summary=f"tool {call.tool_name} ({call.tool_call_id})",
            )
        except ActivityError as exc:
            cause = exc.cause
            if isinstance(cause, TemporalTimeoutError):
                if not unit.idempotent:
                    return ToolOutcome(
                        "unknown",
                        error=f"the worker running the call stopped ({_timeout_kind(cause)} timeout); "
                        "the tool is not idempotent, so it was not run again",
                    )
                return ToolOutcome("failed", error=f"TimeoutError: {cause}", transient=True)
            if isinstance(cause, ApplicationError) and cause.type == "TransientToolError":
                return ToolOutcome("failed", error=cause.message, transient=True, attempts=unit.max_attempts)
            raise _unit_error(exc, f"tool call {call.tool_call_id} ({call.tool_name})") from exc
        return ToolOutcome.from_json(result)


@workflow.defn(name=WORKFLOW_NAME, sandboxed=False)
class HarnessRun:
    """One harness run (see the module)."""

    @workflow.run
    async def run(self, data: dict[str, Any]) -> dict[str, Any]:
        """Run the agent on the session; return the run's :class:`harness.durable.RunSummary` as JSON."""
        info = workflow.info()
        try:
            spec = RunSpec.from_json(data)
            agent = load_agent(spec.agent)
            check_fingerprint(spec.fingerprint, agent, run_id=info.workflow_id)
        except (AgentLoadError, WorkflowIncompatibleError) as exc:
            if workflow.unsafe.is_replaying():
                # Resuming a run this worker cannot replay: Temporal allows no other ending than
                # the journaled one, so the workflow *task* fails with the typed error (recorded
                # in the history, seen by RunHandle.result()) and the run waits, untouched, for a
                # worker with the agent it started with.
                raise
            raise application_error(exc) from exc
        snapshot: str | None = await workflow.execute_activity(
            ACTIVITY_SNAPSHOT,
            {"store": spec.store.to_json(), "session": spec.session_id},
            result_type=str,
            start_to_close_timeout=timedelta(seconds=spec.options.snapshot_timeout),
            summary="session snapshot",
        )
        store = ActivityStore(spec, info.workflow_id)
        if snapshot is not None:
            session = session_from_snapshot(store, snapshot, source=f"workflow {info.workflow_id}")
        else:
            started = info.start_time
            session = Session.create(
                store=store,
                session_id=spec.session_id,
                created_at=started,
                last_modified=started,
                working_directory=spec.working_directory,
            )
        try:
            result = await agent.run(
                spec.prompt, session, effects=TemporalEffects(spec, agent.model.model_name)
            )
        except Exception as exc:
            raise application_error(exc) from exc
        summary = RunSummary(
            run_id=info.workflow_id,
            session_id=result.session.session_id,
            output=result.output,
            revision=result.session.revision,
            iterations=result.iterations,
            messages=len(result.all_messages),
            usage=usage_to_mapping(result.usage),
            skipped_commits=store.skipped,
        )
        return summary.to_json()
