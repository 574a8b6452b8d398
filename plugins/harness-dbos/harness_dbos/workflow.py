"""The DBOS workflow of a harness run (registered with DBOS when this module is imported).

The workflow's input is a :class:`harness.durable.RunSpec` JSON text; it:

1. builds the agent with :func:`harness.config.load_agent` and checks the fingerprint the
   run started with (:func:`harness.durable.check_fingerprint`): a worker whose agent,
   tools or stack changed refuses the run with
   :class:`~harness.errors.WorkflowIncompatibleError` before it touches the session;
2. resolves the run's store reference with this process's
   :class:`~harness.durable.StoreDirectory` (:func:`configure_stores`: the worker's
   ``--store NAME=URL`` options and ``HARNESS_STORE``), so the journal never holds a
   credential, opens the store off the event loop and wraps it in a
   :class:`~harness.durable.ReplaySafeStore` keyed by the workflow id, so a replay skips
   the checkpoints an earlier execution already committed;
3. snapshots the session as it is when the run begins, in a step of its own (a replay
   starts from the journaled snapshot, not from what the crashed execution left), or
   creates it;
4. runs :meth:`Agent.run <harness.Agent.run>` with :class:`~harness_dbos.effects.DBOSEffects`
   (every checkpoint is awaited on the store's own thread, never on the event loop) and
   returns a :class:`harness.durable.RunSummary` JSON text.
"""

from __future__ import annotations

__all__ = [
    "APP_NAME",
    "APP_VERSION",
    "SNAPSHOT_STEP",
    "WORKFLOW_NAME",
    "configure_stores",
    "configured_stores",
    "run_workflow",
]

import asyncio
import json
from typing import Final

from dbos import DBOS
from dbos import error as dbos_errors

from harness import open_store
from harness.config import load_agent
from harness.durable import (
    ReplaySafeStore,
    RunSpec,
    RunSummary,
    StoreDirectory,
    check_fingerprint,
    snapshot_session,
)
from harness.errors import WorkflowIncompatibleError
from harness.session import Session, async_store, usage_to_mapping
from harness_dbos.effects import DBOSEffects

WORKFLOW_NAME: Final = "harness.run"
"""The DBOS workflow name of a harness run."""
SNAPSHOT_STEP: Final = "harness.session_snapshot"
"""The step that journals the session as it was when the run began."""
APP_NAME: Final = "harness"
"""The DBOS application name (queues and recovery are per application)."""
APP_VERSION: Final = "harness-dbos-2"
"""The DBOS application version every harness-dbos worker runs with.

DBOS's default version is a hash of the workflow functions' source, and a worker only
recovers and dequeues workflows of its own version: a worker with other code would leave
an older run pending forever, silently. harness-dbos pins the version instead and checks
compatibility itself (the agent fingerprint and step names), so any worker picks the run up
and either resumes it or refuses it with a typed error. It changed to ``-2`` with the
input's version 2 (a store reference instead of a store URL).
"""

_STORES: list[StoreDirectory] = [StoreDirectory.from_options()]


def configure_stores(directory: StoreDirectory) -> None:
    """Set the stores this process's runs resolve their store references with (the worker's ``--store``)."""
    _STORES[0] = directory


def configured_stores() -> StoreDirectory:
    """The stores this process's runs resolve their store references with."""
    return _STORES[0]


def _new_session(safe: ReplaySafeStore, spec: RunSpec) -> Session:
    # Not Session.create, which refuses a taken id: a recovered run finds the session its
    # crashed execution created, which the replay-safe store recognises.
    return safe.new_session(
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
        StoreResolutionError: The run names a store this worker does not know.
    """
    workflow_id = DBOS.workflow_id
    if workflow_id is None:  # pragma: no cover - DBOS always sets it inside a workflow
        raise RuntimeError("run_workflow must run as a DBOS workflow")
    spec = RunSpec.from_json(spec_text)
    agent = load_agent(spec.agent)
    check_fingerprint(spec.fingerprint, agent, run_id=workflow_id)
    url = configured_stores().resolve(spec.store)
    store = await asyncio.to_thread(open_store, url.reveal())
    safe = ReplaySafeStore(store, run_key=workflow_id)
    try:

        async def snapshot() -> str:
            return await asyncio.to_thread(snapshot_session, store, spec.session_id) or ""

        try:
            taken = await DBOS.run_step_async({"name": SNAPSHOT_STEP}, snapshot)
        except dbos_errors.DBOSUnexpectedStepError as exc:
            raise WorkflowIncompatibleError(
                f"run {workflow_id!r} diverged from its journal: {exc}", run_id=workflow_id
            ) from exc
        if taken:
            session = safe.session_from_snapshot(taken, source=f"workflow {workflow_id}'s journal")
        else:
            session = _new_session(safe, spec)
        effects = DBOSEffects(workflow_id, spec.started_at, safe)
        result = await agent.run(spec.prompt, session, effects=effects)
        summary = RunSummary(
            run_id=workflow_id,
            session_id=result.session.session_id,
            output=result.output,
            revision=result.session.revision,
            iterations=result.iterations,
            messages=len(result.all_messages),
            usage=usage_to_mapping(result.usage),
            skipped_commits=safe.skipped,
        )
        return json.dumps(summary.to_json(), separators=(",", ":"), ensure_ascii=False)
    finally:
        await async_store(safe).aclose()
