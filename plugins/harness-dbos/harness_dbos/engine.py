"""``DBOSEngine``: runs of a harness agent as DBOS workflows, executed in this process.

::

    engine = DBOSEngine("sqlite:///runs.sqlite", store_url="sqlite:///sessions.db", agent="app:agent")
    # with credentials: name the store, and the runs journal only the name
    engine = DBOSEngine("postgresql://dbos@db/dbos", store_url="@app", agent="app:agent",
                        stores=["app=postgresql://app:secret@db/agents"])
    engine.launch()                      # DBOS starts; pending runs of this executor resume
    handle = await engine.start("Fix the tests.")
    summary = await handle.result()      # RunSummary: output, session_id, revision, ...
    handle = await engine.enqueue("Another task.")   # any worker on the database may run it
    engine.shutdown()

DBOS is one instance per process: one engine per process, launched once. A process that
only enqueues runs and waits for them, without executing any, uses
:class:`~harness_dbos.client.DBOSRunClient` instead.
"""

from __future__ import annotations

__all__ = ["DBOSEngine"]

import asyncio
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from dbos import DBOS, SetWorkflowID, WorkflowHandleAsync

from harness.durable import RunStarter, StoreDirectory, StoreReference
from harness_dbos.config import dbos_config
from harness_dbos.runs import DEFAULT_QUEUE, RunHandle, new_workflow_id, run_starter
from harness_dbos.workflow import APP_VERSION, configure_stores, run_workflow

_OWN_STORE = "engine"
"""The name the engine's own ``store_url`` has in its store directory."""


def _outside_event_loop(call: Callable[[], None]) -> None:
    """Run ``call`` here, or in a thread of its own when this thread runs an event loop (DBOS refuses)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        call()
        return
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(call).result()


class DBOSEngine:
    """Runs of one agent on one session store, as DBOS workflows of this process.

    Args:
        system_database_url: DBOS's system database (``sqlite:///file`` or
            ``postgresql://...``; a plain path is an SQLite file).
        store_url: The session store the runs this engine starts write to: a URL without
            credentials, or ``"@NAME"`` for a store the workers know by name (``None``: this
            process only executes runs others started; :meth:`start` and :meth:`enqueue`
            need it). A URL with a password is refused (it would be journaled) unless
            ``strip_credentials``.
        stores: The stores this process's runs resolve their references with: a
            :class:`~harness.durable.StoreDirectory` or ``"[NAME=]URL"`` strings (default:
            ``HARNESS_STORE`` only; ``store_url`` is added as its own entry when it is a URL).
        strip_credentials: Journal a ``store_url`` that carries a password without it (the
            workers supply it, see :func:`harness.durable.store_reference`).
        agent: The agent's import reference, ``"package.module:attribute"`` (``None``: as
            for ``store_url``).
        queue: The queue :meth:`enqueue` uses and this process dequeues from.
        concurrency: Runs of the queue this process executes at once (``None``: no limit).
        executor_id: This process's DBOS executor id (see
            :func:`~harness_dbos.config.dbos_config`).
        listen: Dequeue runs from ``queue`` (``False``: only run what this process starts,
            and the runs DBOS recovers for its executor id).
        polling_interval: Seconds between two looks at the queue and at a run's status.
        application_version: DBOS's application version (keep the default).
    """

    def __init__(
        self,
        system_database_url: str | os.PathLike[str],
        *,
        store_url: str | StoreReference | None = None,
        agent: str | None = None,
        stores: StoreDirectory | Sequence[str] | None = None,
        strip_credentials: bool = False,
        queue: str = DEFAULT_QUEUE,
        concurrency: int | None = None,
        executor_id: str | None = None,
        listen: bool = True,
        polling_interval: float = 0.5,
        application_version: str = APP_VERSION,
    ) -> None:
        self.config = dbos_config(
            system_database_url, executor_id=executor_id, application_version=application_version
        )
        self.queue = queue
        self.concurrency = concurrency
        self.listen = listen
        self.polling_interval = polling_interval
        self._starter: RunStarter | None = None
        if agent is not None and store_url is not None:
            self._starter = run_starter(agent, store_url, strip_credentials=strip_credentials)
        if isinstance(stores, StoreDirectory):
            self.stores = stores
        else:
            self.stores = StoreDirectory.from_options(stores or ())
        if isinstance(store_url, str) and not store_url.startswith("@") and _OWN_STORE not in self.stores:
            # The engine executes its own runs, so it knows their store, password included:
            # the directory lives in this process's memory only, never in the journal.
            self.stores = self.stores.with_store(_OWN_STORE, store_url)
        self._launched = False

    @property
    def launched(self) -> bool:
        """Whether :meth:`launch` ran (and :meth:`shutdown` did not)."""
        return self._launched

    def launch(self) -> None:
        """Start DBOS in this process.

        DBOS creates or migrates the system database, resumes this executor's pending
        runs, and, with ``listen``, starts dequeuing runs from the queue.

        Raises:
            RuntimeError: DBOS already runs in this process (one engine per process).
        """
        if self._launched:
            return
        configure_stores(self.stores)
        DBOS(config=self.config)
        DBOS.listen_queues([self.queue] if self.listen else [])

        def start() -> None:
            DBOS.launch()
            DBOS.register_queue(
                self.queue,
                worker_concurrency=self.concurrency,
                polling_interval_sec=self.polling_interval,
                on_conflict="always_update",
            )

        try:
            _outside_event_loop(start)
        except BaseException:
            DBOS.destroy()
            raise
        self._launched = True

    def adopt(self, executor_ids: list[str]) -> int:
        """Hand the pending runs of dead executors (``executor_ids``) to this engine's queue; return how many.

        A worker killed for good leaves its runs pending under its executor id; restarting
        a worker with that id resumes them, and so does this: each run is resumed through
        DBOS's public API (``list_workflows``, then ``resume_workflow`` onto :attr:`queue`),
        so a worker listening on the queue, this one included, picks it up and replays it
        from its journal.
        """
        pending = DBOS.list_workflows(
            status="PENDING", executor_id=list(executor_ids), load_input=False, load_output=False
        )
        for status in pending:
            DBOS.resume_workflow(status.workflow_id, queue_name=self.queue)
        return len(pending)

    def _require(self) -> RunStarter:
        if self._starter is None:
            raise RuntimeError(
                "this engine has no agent and store_url: it only executes runs started elsewhere"
            )
        if not self._launched:
            raise RuntimeError("launch() the engine first")
        return self._starter

    async def start(
        self, prompt: str | None, session_id: str | None = None, *, workflow_id: str | None = None
    ) -> RunHandle:
        """Start a run in this process (durably: it resumes if the process dies and comes back).

        Args:
            prompt: The prompt.
            session_id: Continue this session (created if the store has none such);
                ``None``: a new session.
            workflow_id: The run's workflow id (``None``: a fresh one). Starting a run with
                the id of an existing one returns that run's handle.
        """
        spec = self._require().spec(prompt, session_id)
        with SetWorkflowID(workflow_id or new_workflow_id()):
            handle = await DBOS.start_workflow_async(run_workflow, spec.to_text())
        return RunHandle(handle, spec.session_id, self.polling_interval)

    async def enqueue(
        self,
        prompt: str | None,
        session_id: str | None = None,
        *,
        queue: str | None = None,
        workflow_id: str | None = None,
    ) -> RunHandle:
        """Enqueue a run: any worker on this system database listening to ``queue`` runs it."""
        spec = self._require().spec(prompt, session_id)
        with SetWorkflowID(workflow_id or new_workflow_id()):
            handle = await DBOS.enqueue_workflow_async(queue or self.queue, run_workflow, spec.to_text())
        return RunHandle(handle, spec.session_id, self.polling_interval)

    async def handle(self, workflow_id: str) -> RunHandle:
        """A handle on the run ``workflow_id`` (started by any process on this database)."""
        found: WorkflowHandleAsync[str] = await DBOS.retrieve_workflow_async(workflow_id)
        return RunHandle(found, None, self.polling_interval)

    def shutdown(self) -> None:
        """Stop DBOS in this process; runs still executing stay pending and resume later."""
        if self._launched:
            DBOS.destroy(workflow_completion_timeout_sec=0)
            self._launched = False
