"""Start harness runs on Temporal and run the workers that execute them.

::

    engine = TemporalEngine("127.0.0.1:7233", store_url="@app", agent="myapp.agents:build")
    handle = await engine.start("Fix the failing test.")
    result = await handle.result()          # a harness.durable.RunSummary; the session is in the store

    # in each worker process (or: python -m harness_temporal worker --store app=URL --agent ...)
    await run_worker("127.0.0.1:7233", task_queue="harness", stores=["app=postgresql://app:secret@db/agents"])

The starting process builds the agent once to take its fingerprint (the workers refuse the
run if theirs differs). Every worker must reach the same session store. The run names it by
reference (``"@app"``, or a URL without credentials): a URL with a password is refused,
because Temporal would keep it in the run's history, its UI and every export.
"""

from __future__ import annotations

__all__ = [
    "RunHandle",
    "TemporalEngine",
    "TemporalRunResult",
    "connect_client",
    "create_worker",
    "run_worker",
]


import asyncio
import contextlib
import os
import re
import signal
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload, WorkflowExecution
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryReverseRequest
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from harness.config import load_agent
from harness.durable import RunSpec as DurableRunSpec
from harness.durable import RunSummary, StoreDirectory, StoreReference, agent_fingerprint, store_reference
from harness.errors import EngineConnectionError, HarnessError, WorkflowIncompatibleError
from harness_temporal.activities import HarnessActivities
from harness_temporal.errors import TemporalRunError
from harness_temporal.failures import rebuild
from harness_temporal.units import WORKFLOW_NAME, ActivityOptions, RunSpec
from harness_temporal.workflow import HarnessRun

_ENGINE = "harness-temporal"

TemporalRunResult = RunSummary
"""What a finished run returns: :class:`harness.durable.RunSummary` (its session is in the store)."""


class RunHandle:
    """A started run: wait for its result, read its workflow history."""

    def __init__(self, handle: WorkflowHandle[Any, Any], session_id: str) -> None:
        self.handle = handle
        self.session_id = session_id

    @property
    def workflow_id(self) -> str:
        """The workflow id (the run key)."""
        return self.handle.id

    async def result(self, *, poll: float = 1.0) -> TemporalRunResult:
        """Wait for the run to finish.

        Args:
            poll: Seconds between checks that no worker refused to resume the run.

        Raises:
            WorkflowIncompatibleError: A worker's agent differs from the run's (nothing written;
                a resumed run stays parked, see :mod:`harness_temporal.workflow`).
            TemporalRunError: The run failed otherwise (``kind`` names the error).
        """
        waiting = asyncio.ensure_future(self.handle.result())
        try:
            while True:
                done, _ = await asyncio.wait({waiting}, timeout=poll)
                if done:
                    break
                refused = await self.refusal()
                if refused is not None:
                    raise refused
        finally:
            if not waiting.done():
                waiting.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await waiting
        try:
            data = waiting.result()
        except WorkflowFailureError as exc:
            cause = exc.cause
            if isinstance(cause, ApplicationError):
                raise rebuild(cause, run_id=self.workflow_id) from exc
            raise TemporalRunError(
                str(cause or exc), kind=type(cause or exc).__name__, run_id=self.workflow_id
            ) from exc
        return RunSummary.from_json(data)

    async def refusal(self) -> WorkflowIncompatibleError | None:
        """The error of a worker that refused to resume the run (its workflow task failed), if any."""
        description = await self.handle.describe()
        pending = description.raw_description.pending_workflow_task
        if not description.raw_description.HasField("pending_workflow_task") or pending.attempt < 2:
            return None
        client = self.handle._client  # pyright: ignore[reportPrivateUsage]
        request = GetWorkflowExecutionHistoryReverseRequest(
            namespace=client.namespace,
            execution=WorkflowExecution(workflow_id=self.workflow_id),
            maximum_page_size=20,
        )
        response = await client.workflow_service.get_workflow_execution_history_reverse(request)
        for event in response.history.events:
            if event.HasField("workflow_task_failed_event_attributes"):
                failure = event.workflow_task_failed_event_attributes.failure
                if failure.application_failure_info.type != "WorkflowIncompatibleError":
                    return None
                found = re.search(r"its (.+?) changed since", failure.message)
                changed = tuple(found.group(1).split(", ")) if found else ()
                return WorkflowIncompatibleError(failure.message, run_id=self.workflow_id, changed=changed)
            if event.HasField("workflow_task_completed_event_attributes"):
                return None
        return None

    async def history_size(self) -> dict[str, int]:
        """The workflow history's size: ``{"events", "bytes", "payload_bytes"}``.

        ``bytes`` is the serialized protobuf of every event; ``payload_bytes`` the data of
        the payloads in it (workflow input, activity inputs and results).
        """
        history = await self.handle.fetch_history()
        total = 0
        payloads = 0
        for event in history.events:
            total += len(event.SerializeToString())
            payloads += _payload_bytes(event)
        return {"events": len(history.events), "bytes": total, "payload_bytes": payloads}


def _payload_bytes(message: Message) -> int:
    """Sum of ``Payload.data`` sizes in a protobuf message, found by walking its fields."""
    if isinstance(message, Payload):
        return len(message.data)
    size = 0
    for descriptor, value in message.ListFields():
        if isinstance(value, Message):
            size += _payload_bytes(value)
        elif descriptor.message_type is not None:  # a repeated message field, or a map
            items = value.values() if hasattr(value, "values") else (value[i] for i in range(len(value)))
            for item in cast("Iterable[object]", items):
                if isinstance(item, Message):
                    size += _payload_bytes(item)
    return size


class TemporalEngine:
    """Starts harness runs as Temporal workflows.

    Args:
        address: The Temporal frontend, ``"HOST:PORT"``.
        namespace: The Temporal namespace.
        task_queue: The task queue the workers poll.
        store_url: The session store every worker opens (shared: SQLite on one machine,
            PostgreSQL for many): ``"@NAME"`` for a store the workers know by name (their
            ``--store NAME=URL``), or a URL without credentials. A URL with a password is
            refused (Temporal would keep it in every history), unless ``strip_credentials``.
        strip_credentials: Journal a ``store_url`` that carries a password without it; the
            workers supply it (their ``--store`` for the same URL, or ``PGPASSWORD``).
        agent: The agent reference (``"package.module:attribute"``) workers build.
        options: The activities' timeouts and retries.
    """

    def __init__(
        self,
        address: str,
        *,
        namespace: str = "default",
        task_queue: str = "harness",
        store_url: str | StoreReference,
        agent: str,
        options: ActivityOptions | None = None,
        strip_credentials: bool = False,
    ) -> None:
        self.address = address
        self.namespace = namespace
        self.task_queue = task_queue
        self.store = store_reference(store_url, strip_credentials=strip_credentials)
        self.store_url = str(self.store)
        """The run's store as journaled: ``@NAME`` or the URL without credentials."""
        self.agent = agent
        self.options = options or ActivityOptions()
        self._client: Client | None = None
        self._fingerprint: dict[str, str] | None = None

    async def client(self) -> Client:
        """The Temporal client (connected once)."""
        if self._client is None:
            self._client = await connect_client(self.address, namespace=self.namespace)
        return self._client

    def fingerprint(self) -> dict[str, str]:
        """The agent's fingerprint (built once, in this process)."""
        if self._fingerprint is None:
            self._fingerprint = agent_fingerprint(load_agent(self.agent))
        return self._fingerprint

    async def start(
        self, prompt: str | None, session_id: str | None = None, *, workflow_id: str | None = None
    ) -> RunHandle:
        """Start a run on ``session_id`` (a new session when ``None``) and return its handle.

        Raises:
            AgentLoadError: The agent reference does not load here.
        """
        session = session_id or uuid.uuid4().hex
        spec = RunSpec(
            run=DurableRunSpec(
                agent=self.agent,
                store=self.store,
                session_id=session,
                prompt=prompt,
                fingerprint=self.fingerprint(),
                started_at=datetime.now(UTC),
                working_directory=os.getcwd(),
            ),
            options=self.options,
        )
        client = await self.client()
        handle = await client.start_workflow(
            WORKFLOW_NAME,
            spec.to_json(),
            id=workflow_id or f"harness-run-{uuid.uuid4().hex}",
            task_queue=self.task_queue,
        )
        return RunHandle(handle, session)

    def attach(self, workflow_id: str, session_id: str) -> RunHandle:
        """A handle on a run started earlier (needs :meth:`client` connected first)."""
        if self._client is None:
            raise RuntimeError("connect first: await engine.client()")
        return RunHandle(self._client.get_workflow_handle(workflow_id), session_id)


def create_worker(
    client: Client,
    *,
    task_queue: str = "harness",
    activities: HarnessActivities | None = None,
    sticky_timeout: float = 10.0,
    max_concurrent_activities: int = 100,
) -> Worker:
    """A worker running harness workflows and activities on ``task_queue``.

    Args:
        client: A connected client.
        task_queue: The queue to poll.
        activities: The activity implementations (default: new ones, with their caches).
        sticky_timeout: Seconds before a run cached on a worker that stopped answering is
            handed to another worker (Temporal's sticky schedule-to-start timeout).
        max_concurrent_activities: Activities run at once.
    """
    implementations = activities or HarnessActivities()
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[HarnessRun],
        activities=list(implementations.activities),
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=sticky_timeout),
        max_concurrent_activities=max_concurrent_activities,
    )


async def connect_client(address: str, *, namespace: str = "default", timeout: float = 10.0) -> Client:
    """A client of the Temporal server at ``address``, connected within ``timeout`` seconds.

    Raises:
        EngineConnectionError: No server answers there (the message says what to check).
    """
    check = (
        f"check that a Temporal server runs at {address} (for a local one: temporal server start-dev) "
        "or pass --address HOST:PORT"
    )
    try:
        return await asyncio.wait_for(Client.connect(address, namespace=namespace), timeout)
    except TimeoutError:
        raise EngineConnectionError(_ENGINE, address, f"no answer within {timeout:g}s; {check}") from None
    except RuntimeError as exc:
        text = str(exc)
        found = re.search(r'message: "([^"]+)"', text)
        reason = found.group(1) if found else (text.splitlines() or [type(exc).__name__])[0]
        raise EngineConnectionError(_ENGINE, address, f"cannot connect ({reason}); {check}") from None


async def run_worker(
    address: str,
    *,
    namespace: str = "default",
    task_queue: str = "harness",
    agents: Sequence[str] = (),
    stores: Sequence[str] = (),
    sticky_timeout: float = 10.0,
    connect_timeout: float = 10.0,
    on_ready: Callable[[], None] | None = None,
) -> None:
    """Run a worker until SIGINT or SIGTERM; ``on_ready`` is called once it polls its task queue.

    ``agents`` and ``stores`` are loaded and opened first, so a worker that cannot build
    an agent or reach a store fails at start, not on its first run. ``stores`` are
    ``"[NAME=]URL"`` strings (see :class:`harness.durable.StoreDirectory`): runs name them
    by reference, and ``HARNESS_STORE`` adds the default one.

    Raises:
        AgentLoadError: An agent does not load.
        SessionStoreError: A store cannot be opened.
        EngineConnectionError: No Temporal server answers at ``address`` within
            ``connect_timeout`` seconds.
    """
    directory = StoreDirectory.from_options(stores)
    activities = HarnessActivities(stores=directory)
    try:
        for reference in agents:
            activities.agent(reference)
        for name in directory:
            url = directory.url(name)
            if url is not None:
                activities.store(StoreReference.named(name))
    except ApplicationError as exc:  # what an activity would fail with: the worker raises the error itself
        if isinstance(exc.__cause__, HarnessError):
            raise exc.__cause__ from None
        raise
    client = await connect_client(address, namespace=namespace, timeout=connect_timeout)
    worker = create_worker(
        client, task_queue=task_queue, activities=activities, sticky_timeout=sticky_timeout
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with worker:
            if on_ready is not None:
                on_ready()
            await stop.wait()
    finally:
        activities.close()
