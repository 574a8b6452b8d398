"""The activities of a harness run: the session snapshot, store operations, model requests and tool calls.

They run in any worker process. The agent is built there with
:func:`harness.config.load_agent` from the reference the run names (once per process, and
its fingerprint checked against the run's). The store is the one the run's
:class:`~harness.durable.StoreReference` names, resolved with the worker's own
:class:`~harness.durable.StoreDirectory` (its ``--store NAME=URL`` options and
``HARNESS_STORE``), so no activity input ever holds a credential; it is opened once per
process and every operation on it runs on a thread, never on the worker's event loop.

A store activity (a local activity, see :mod:`harness_temporal.store`) commits one
checkpoint of the run, or reads for it. A commit the store already holds (the activity ran
before, and its worker died before Temporal recorded it) returns its revision instead of
failing.

A model-request activity receives only the request's **delta**. It rebuilds the request's
view from the previous one, which it keeps per run (a small per-process cache: run key ->
the last request's index and view). A worker that has not seen the run before (a new
worker, or the request was retried elsewhere) reads the view from the session store
instead: the run checkpoints the session before every request, so the stored head at the
unit's revision *is* the request's view (another revision raises a typed, non-retryable
``StaleViewError``). A request for another model than the agent's (a fallback model, a
summarizer's own) finds it by name among the models the agent holds
(:func:`harness.durable.known_models`), else resolves the name as a model string.

A tool activity runs the tool once per attempt, with the context of
:func:`harness.tools.remote_context`: the fields that cross the boundary, and a typed
error for those that do not. A transient failure of an idempotent tool raises a retryable
``ApplicationError`` (Temporal retries it with the run's retry policy); deterministic
failures and ``ToolRetry`` become outcomes. Both heartbeat while they run, so a worker that
dies is noticed after the heartbeat timeout. A harness error (a model's
``ModelAuthenticationError``) fails the activity carrying the error as JSON, and the
workflow raises it as itself (:mod:`harness_temporal.failures`).
"""

from __future__ import annotations

__all__ = ["HarnessActivities", "open_run_store"]

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from temporalio import activity
from temporalio.exceptions import ApplicationError

from harness.config import load_agent
from harness.core import NON_RETRYABLE, CanonicalMessage, MaskedURL, Model, ToolOutcome
from harness.durable import (
    StoreDirectory,
    StoreReference,
    agent_fingerprint,
    already_applied,
    checkpoint_from_json,
    edits_to_json,
    head_to_json,
    hits_to_json,
    known_models,
    log_to_json,
    snapshot_session,
    store_reference,
    stored_to_json,
)
from harness.errors import (
    AgentLoadError,
    HarnessError,
    SessionConflictError,
    SessionNotFoundError,
    StoreCredentialsError,
    StoreResolutionError,
    ToolArgumentsError,
    ToolRetry,
    WorkflowIncompatibleError,
)
from harness.models import resolve_model
from harness.run import tool_content
from harness.session import Session, SessionHead
from harness.tools import remote_context
from harness_temporal.failures import application_error
from harness_temporal.units import (
    ACTIVITY_MODEL,
    ACTIVITY_SNAPSHOT,
    ACTIVITY_STORE,
    ACTIVITY_TOOL,
    decode_messages,
    decode_parts,
    decode_settings,
    decode_tools,
    encode_message,
    encode_messages,
    fingerprint_digest,
)

if TYPE_CHECKING:
    from harness.run import Agent
    from harness.session import SessionStore

_T = TypeVar("_T")


def open_run_store(url: str | MaskedURL) -> SessionStore:
    """Open a run's store: the built-in schemes, or one an installed plugin answers (``postgresql:``)."""
    from harness import open_store

    return open_store(url.reveal() if isinstance(url, MaskedURL) else url)


def _fail(kind: str, message: str, *details: Any) -> ApplicationError:
    return ApplicationError(message, *details, type=kind, non_retryable=True)


@contextlib.asynccontextmanager
async def _heartbeating() -> AsyncGenerator[None]:
    """Heartbeat three times per heartbeat timeout while the body runs."""
    timeout = activity.info().heartbeat_timeout
    if not timeout:
        yield
        return
    interval = max(timeout.total_seconds() / 3, 0.05)

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(interval)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class HarnessActivities:
    """The activity implementations, with this process's caches (agents, stores, views).

    Args:
        stores: The stores runs name by reference (default: ``HARNESS_STORE`` only).
        max_runs: How many runs' last request views to keep (least recently used dropped).
    """

    def __init__(self, *, stores: StoreDirectory | None = None, max_runs: int = 256) -> None:
        self.max_runs = max_runs
        self.stores = stores if stores is not None else StoreDirectory.from_options()
        self._agents: dict[str, tuple[Agent, str]] = {}
        self._stores: dict[str, SessionStore] = {}
        self._views: OrderedDict[str, tuple[int, list[CanonicalMessage]]] = OrderedDict()
        self.view_misses = 0
        """Model requests whose view was read from the store (no cached previous view)."""

    @property
    def activities(self) -> Sequence[Callable[..., Any]]:
        """The activities to register on a worker."""
        return [self.snapshot, self.store_operation, self.model_request, self.tool_call]

    def agent(self, reference: str, digest: str | None = None) -> Agent:
        """The agent ``reference`` names (built once per process), checked against ``digest``.

        Raises:
            ApplicationError: ``AgentLoadError``, or ``WorkflowIncompatibleError`` when this
                worker's agent is not the one the run started with (both non-retryable).
        """
        cached = self._agents.get(reference)
        if cached is None:
            try:
                agent = load_agent(reference)
            except AgentLoadError as exc:
                raise _fail("AgentLoadError", str(exc)) from exc
            cached = (agent, fingerprint_digest(agent_fingerprint(agent)))
            self._agents[reference] = cached
        agent, own = cached
        if digest is not None and digest != own:
            raise _fail(
                "WorkflowIncompatibleError",
                f"this worker's agent {reference!r} is not the one the run started with "
                "(its fingerprint differs); refusing the activity",
            )
        return agent

    def store(self, reference: object) -> SessionStore:
        """The store a run's reference names, resolved with :attr:`stores`, opened once per process.

        ``reference`` is a :class:`~harness.durable.StoreReference`, its JSON, or a URL.

        Raises:
            ApplicationError: ``StoreResolutionError`` (non-retryable) when the worker knows no
                such store.
        """
        try:
            if isinstance(reference, str):
                url = self.stores.resolve(store_reference(reference))
            elif isinstance(reference, StoreReference):
                url = self.stores.resolve(reference)
            else:
                url = self.stores.resolve(StoreReference.from_json(reference))
        except (StoreResolutionError, WorkflowIncompatibleError, StoreCredentialsError) as exc:
            raise application_error(exc) from exc
        key = url.reveal()
        store = self._stores.get(key)
        if store is None:
            store = open_run_store(url)
            self._stores[key] = store
        return store

    def close(self) -> None:
        """Close the stores this process opened."""
        for store in self._stores.values():
            store.close()
        self._stores.clear()

    # ---------------------------------------------------------------- activities

    @activity.defn(name=ACTIVITY_SNAPSHOT)
    async def snapshot(self, data: dict[str, Any]) -> str | None:
        """The session as it is now (``None``: new), journaled once as the run's starting point."""
        store = self.store(data["store"])
        return await _off_loop(snapshot_session, store, data["session"])

    @activity.defn(name=ACTIVITY_STORE)
    async def store_operation(self, data: dict[str, Any]) -> dict[str, Any]:
        """One store operation of a run, on a thread: ``{"value": ...}`` (see :mod:`harness_temporal.store`).

        Raises:
            ApplicationError: The harness error the store raised (``SessionConflictError``...),
                carried as JSON.
        """
        store = self.store(data["store"])
        return {"value": await _off_loop(_store_operation, store, data)}

    def _view(self, run: str, data: dict[str, Any]) -> list[CanonicalMessage]:
        """This request's view: the cached previous view plus the delta, or the stored view."""
        keep: int = data["keep"]
        added = decode_messages(data["added"])
        cached = self._views.get(run)
        if cached is not None and cached[0] == data["after"] and len(cached[1]) >= keep:
            return [*cached[1][:keep], *added]
        if cached is not None and cached[0] == data["index"]:
            return cached[1]  # a retry of the request this worker answered last
        if keep == 0:
            return added
        self.view_misses += 1
        store = self.store(data["store"])
        try:
            stored = Session.open(store, data["session"])
        except SessionNotFoundError as exc:
            raise _fail("StaleViewError", f"run {run}: the session is not in the store") from exc
        if stored.revision != data["revision"]:
            raise _fail(
                "StaleViewError",
                f"run {run}: model request {data['index']} was made at session revision "
                f"{data['revision']}, the store is at {stored.revision}; the view cannot be rebuilt",
            )
        view = list(stored.messages)
        if len(view) != keep + len(added) or _timeless(view[keep:]) != _timeless(added):
            raise _fail(
                "StaleViewError",
                f"run {run}: the stored view at revision {stored.revision} is not model request "
                f"{data['index']}'s view ({len(view)} messages, the delta says {keep} + {len(added)})",
            )
        # The delta's messages, not the stored ones: a checkpoint written by a workflow task that
        # Temporal never recorded (its worker died) has the same messages at other times.
        return [*view[:keep], *added]

    def _model(self, agent: Agent, name: object) -> Model:
        """The model a unit names: the agent's, one the agent holds, or a model string.

        Raises:
            ApplicationError: ``ModelResolutionError`` (non-retryable): no such model here.
        """
        if name is None or name == agent.model.model_name:
            return agent.model
        found = known_models(agent).get(str(name))
        if found is not None:
            return found
        try:
            return resolve_model(str(name), plugin_manager=agent.plugin_manager)
        except HarnessError as exc:
            raise application_error(exc) from exc

    @activity.defn(name=ACTIVITY_MODEL)
    async def model_request(self, data: dict[str, Any]) -> dict[str, Any]:
        """Send one model request; return the response's wire JSON."""
        run = activity.info().workflow_id or ""
        agent = self.agent(data["agent"], data["fp"])
        model = self._model(agent, data.get("model"))
        settings = decode_settings(data["settings"])
        if data["purpose"] == "capability":
            messages = decode_messages(data["messages"])
            tools = decode_tools(data["tools"])
            async with _heartbeating(), _carried_errors():
                response = await model.request(messages, tools, settings)
            return encode_message(response)
        view = self._view(run, data)
        outgoing = _outgoing(view, decode_parts(data["system"]), decode_parts(data["scoped"]))
        async with _heartbeating(), _carried_errors():
            response = await model.request(outgoing, agent.run_settings.tool_definitions, settings)
        self._views[run] = (data["index"], view)
        self._views.move_to_end(run)
        while len(self._views) > self.max_runs:
            self._views.popitem(last=False)
        return encode_message(response)

    @activity.defn(name=ACTIVITY_TOOL)
    async def tool_call(self, data: dict[str, Any]) -> dict[str, Any]:
        """Run one tool call once; return its :class:`~harness.core.effects.ToolOutcome` JSON.

        Raises:
            ApplicationError: retryable for a transient failure of an idempotent tool with
                attempts left; non-retryable for a fatal error (the run stops).
        """
        agent = self.agent(data["agent"], data["fp"])
        name: str = data["name"]
        tool = agent.run_settings.tools.get(name)
        if tool is None:
            raise _fail("UnknownToolError", f"this worker's agent has no tool {name!r}")
        ctx = remote_context(
            engine="harness-temporal",
            model=agent.model,
            session_id=data["session"],
            store=self.store(data["store"]),
            tool_call_id=data["id"],
            tool_name=name,
            retry=data["retry"],
        )
        attempt = activity.info().attempt
        try:
            async with _heartbeating():
                content = tool_content(await tool.call(data["arguments"], ctx))
        except ToolRetry as exc:
            return ToolOutcome("retry", error=exc.message, hint=exc.hint, attempts=attempt).to_json()
        except ToolArgumentsError as exc:
            return ToolOutcome("retry", error=str(exc), attempts=attempt).to_json()
        except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
            raise
        except NON_RETRYABLE as exc:
            raise application_error(exc) from exc
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            transient = tool.is_transient(exc)
            if transient and data["idempotent"] and attempt < data["max_attempts"]:
                raise ApplicationError(error, type="TransientToolError") from exc
            return ToolOutcome("failed", error=error, transient=transient, attempts=attempt).to_json()
        return ToolOutcome("returned", content=content, attempts=attempt).to_json()


async def _off_loop(function: Callable[..., _T], *args: Any) -> _T:
    """``function(*args)`` on a thread: a store never blocks the worker's event loop."""
    return await asyncio.to_thread(function, *args)


def _store_operation(store: SessionStore, data: dict[str, Any]) -> Any:
    """One store operation of :meth:`HarnessActivities.store_operation` (runs on a thread)."""
    op: str = data["op"]
    try:
        if op == "commit":
            checkpoint = checkpoint_from_json(data["checkpoint"], store.url)
            try:
                stored: SessionHead | None = store.head(checkpoint.head.session_id)
            except SessionNotFoundError:
                stored = None
            if already_applied(stored, checkpoint, data["run"], int(data["commit"])):
                return {"revision": checkpoint.head.revision, "skipped": True}
            return {"revision": store.commit(checkpoint), "skipped": False}
        session: str = data["session"]
        if op == "load":
            return stored_to_json(store.load(session))
        if op == "head":
            return head_to_json(store.head(session))
        if op == "read_log":
            return log_to_json(store.read_log(session, int(data["start"]), data["stop"]))
        if op == "edits":
            return edits_to_json(store.edits(session))
        if op == "search":
            return hits_to_json(
                store.search(data["query"], session_id=data["session"], limit=int(data["limit"]))
            )
    except HarnessError as exc:
        retryable = not isinstance(exc, SessionConflictError | SessionNotFoundError)
        raise application_error(exc, non_retryable=not retryable) from exc
    raise _fail("UnknownStoreOperation", f"this worker knows no store operation {op!r}")


@contextlib.asynccontextmanager
async def _carried_errors() -> AsyncGenerator[None]:
    """A harness error leaves the activity as an ``ApplicationError`` carrying it.

    Non-retryable: the model layer retried transient errors already.
    """
    try:
        yield
    except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
        raise
    except HarnessError as exc:
        raise application_error(exc) from exc


def _timeless(messages: Sequence[CanonicalMessage]) -> list[Any]:
    """Messages as wire JSON without their timestamps."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            items = cast("dict[str, Any]", value).items()
            return {k: strip(v) for k, v in items if k != "timestamp"}
        if isinstance(value, list):
            return [strip(v) for v in cast("list[Any]", value)]
        return value

    return [strip(m) for m in encode_messages(messages)]


def _outgoing(
    view: list[CanonicalMessage], system: Sequence[Any], scoped: Sequence[Any]
) -> list[CanonicalMessage]:
    from harness.core import build_outgoing

    return build_outgoing(view, system, scoped)
