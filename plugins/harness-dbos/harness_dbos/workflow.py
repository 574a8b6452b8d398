"""The DBOS workflow of a harness run (registered with DBOS when this module is imported).

The workflow's input is a :class:`~harness_dbos.spec.RunSpec` JSON text; it:

1. builds the agent with :func:`harness.config.load_agent` and checks the fingerprint the
   run started with (:func:`~harness.durable.fingerprint.check_fingerprint`): a worker whose
   agent, tools or stack changed refuses the run with
   :class:`~harness.errors.WorkflowIncompatibleError` before it touches the session;
2. opens the session store (:func:`harness.open_store`) and wraps it in a
   :class:`~harness.durable.replay_safe.ReplaySafeStore` keyed by the workflow id, so a
   replay skips the checkpoints an earlier execution already committed;
3. snapshots the session as it is when the run begins, in a step of its own (a replay
   starts from the journaled snapshot, not from what the crashed execution left), or
   creates it;
4. runs :meth:`Agent.run <harness.Agent.run>` with :class:`~harness_dbos.effects.DBOSEffects`
   and returns a :class:`~harness_dbos.spec.RunSummary` JSON text.
"""

from __future__ import annotations

__all__ = ["APP_NAME", "APP_VERSION", "SNAPSHOT_STEP", "WORKFLOW_NAME", "run_workflow"]

from typing import Final

from dbos import DBOS
from dbos._error import DBOSUnexpectedStepError

from harness import open_store
from harness.config import load_agent
from harness.durable import ReplaySafeStore, snapshot_session
from harness.errors import WorkflowIncompatibleError
from harness.run import check_fingerprint
from harness.session import Session, SessionStore, usage_to_mapping
from harness_dbos.effects import DBOSEffects
from harness_dbos.spec import RunSpec, RunSummary

WORKFLOW_NAME: Final = "harness.run"
"""The DBOS workflow name of a harness run."""
SNAPSHOT_STEP: Final = "harness.session_snapshot"
"""The step that journals the session as it was when the run began."""
APP_NAME: Final = "harness"
"""The DBOS application name (queues and recovery are per application)."""
APP_VERSION: Final = "harness-dbos-1"
"""The DBOS application version every harness-dbos worker runs with.

DBOS's default version is a hash of the workflow functions' source, and a worker only
recovers and dequeues workflows of its own version: a worker with other code would leave
an older run pending forever, silently. harness-dbos pins the version instead and checks
compatibility itself (the agent fingerprint and step names), so any worker picks the run up
and either resumes it or refuses it with a typed error.
"""


def _session(store: SessionStore, safe: ReplaySafeStore, spec: RunSpec, snapshot: str) -> Session:
    del store
    if snapshot:
        return safe.session_from_snapshot(snapshot, source=f"workflow {safe.run_key}'s journal")
    return Session.create(
        store=safe,
        session_id=spec.session_id,
        created_at=spec.started_at,
        last_modified=spec.started_at,
        working_directory=spec.working_directory,
    )


@DBOS.workflow(name=WORKFLOW_NAME)
async def run_workflow(spec_text: str) -> str:
    """Run (or resume) one harness run; return its :class:`RunSummary` JSON text.

    Raises:
        WorkflowIncompatibleError: The agent changed since the run started, or the
            journal does not fit the run (the session is not touched by the refusal).
        AgentLoadError: The agent reference does not load in this worker.
    """
    workflow_id = DBOS.workflow_id
    if workflow_id is None:  # pragma: no cover - DBOS always sets it inside a workflow
        raise RuntimeError("run_workflow must run as a DBOS workflow")
    spec = RunSpec.from_json(spec_text)
    agent = load_agent(spec.agent)
    check_fingerprint(spec.fingerprint, agent, run_id=workflow_id)
    store = open_store(spec.store_url)
    try:
        safe = ReplaySafeStore(store, run_key=workflow_id)

        async def snapshot() -> str:
            return snapshot_session(store, spec.session_id) or ""

        try:
            taken = await DBOS.run_step_async({"name": SNAPSHOT_STEP}, snapshot)
        except DBOSUnexpectedStepError as exc:
            raise WorkflowIncompatibleError(
                f"run {workflow_id!r} diverged from its journal: {exc}", run_id=workflow_id
            ) from exc
        session = _session(store, safe, spec, taken)
        effects = DBOSEffects(workflow_id, spec.started_at, safe)
        result = await agent.run(spec.prompt, session, effects=effects)
        summary = RunSummary(
            output=result.output,
            session_id=result.session.session_id,
            revision=result.session.revision,
            iterations=result.iterations,
            usage=usage_to_mapping(result.usage),
            workflow_id=workflow_id,
        )
        return summary.to_json()
    finally:
        store.close()
