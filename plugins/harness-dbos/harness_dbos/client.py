"""``DBOSRunClient``: enqueue runs and wait for them from a process that executes none.

It talks to the system database through :class:`dbos.DBOSClient` and never launches DBOS,
so it never picks up (or recovers) a run itself: the workers do. ::

    client = DBOSRunClient("postgresql://host/dbos", store_url="postgresql://host/app", agent="app:agent")
    handle = await client.enqueue("Fix the tests.")
    summary = await handle.result()
    client.close()
"""

from __future__ import annotations

__all__ = ["DBOSRunClient"]

import os

from dbos import DBOSClient, EnqueueOptions, WorkflowHandleAsync

from harness.durable import StoreReference
from harness_dbos.config import system_database_url
from harness_dbos.runs import DEFAULT_QUEUE, RunHandle, new_workflow_id, run_starter
from harness_dbos.serializer import JournalSerializer
from harness_dbos.workflow import APP_NAME, APP_VERSION, WORKFLOW_NAME


class DBOSRunClient:
    """Enqueues runs of one agent on one store, for workers sharing ``system_database_url``.

    Args:
        system_database_url: DBOS's system database (as for :class:`~harness_dbos.DBOSEngine`).
        store_url: The session store runs write to: a URL without credentials, or
            ``"@NAME"`` for a store the workers know by name (see
            :func:`harness.durable.store_reference`).
        strip_credentials: Journal a ``store_url`` that carries a password without it.
        agent: The agent's import reference (loaded here once, for its fingerprint).
        queue: The default queue.
        polling_interval: Seconds between two looks at a run's status.
    """

    def __init__(
        self,
        system_database_url_: str | os.PathLike[str],
        *,
        store_url: str | StoreReference,
        agent: str,
        strip_credentials: bool = False,
        queue: str = DEFAULT_QUEUE,
        polling_interval: float = 0.5,
    ) -> None:
        self.queue = queue
        self.polling_interval = polling_interval
        self._starter = run_starter(agent, store_url, strip_credentials=strip_credentials)
        self._client = DBOSClient(
            system_database_url=system_database_url(system_database_url_),
            serializer=JournalSerializer(),
            application_name=APP_NAME,
        )

    async def enqueue(
        self,
        prompt: str | None,
        session_id: str | None = None,
        *,
        queue: str | None = None,
        workflow_id: str | None = None,
    ) -> RunHandle:
        """Enqueue a run (see :meth:`DBOSEngine.enqueue <harness_dbos.DBOSEngine.enqueue>`)."""
        spec = self._starter.spec(prompt, session_id)
        options: EnqueueOptions = {
            "workflow_name": WORKFLOW_NAME,
            "queue_name": queue or self.queue,
            "workflow_id": workflow_id or new_workflow_id(),
            "app_version": APP_VERSION,
        }
        handle: WorkflowHandleAsync[str] = await self._client.enqueue_async(options, spec.to_text())
        return RunHandle(handle, spec.session_id, self.polling_interval)

    async def handle(self, workflow_id: str) -> RunHandle:
        """A handle on the run ``workflow_id``."""
        found: WorkflowHandleAsync[str] = await self._client.retrieve_workflow_async(workflow_id)
        return RunHandle(found, None, self.polling_interval)

    def close(self) -> None:
        """Close the connections to the system database."""
        self._client.destroy()
