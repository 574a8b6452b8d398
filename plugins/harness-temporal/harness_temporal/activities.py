"""The activities of a harness run: the session snapshot, model requests and tool calls.

They run in any worker process. The agent is built there with
:func:`harness.config.load_agent` from the reference the run names (once per process, and
its fingerprint checked against the run's), and the store is opened from the run's URL.

A model-request activity receives only the request's **delta**. It rebuilds the request's
view from the previous one, which it keeps per run (a small per-process cache: run key ->
the last request's index and view). A worker that has not seen the run before (a new
worker, or the request was retried elsewhere) reads the view from the session store
instead: the run checkpoints the session before every request, so the stored head at the
unit's revision *is* the request's view (another revision raises a typed, non-retryable
``StaleViewError``).

A tool activity runs the tool once per attempt. A transient failure of an idempotent tool
raises a retryable ``ApplicationError`` (Temporal retries it with the run's retry policy);
deterministic failures and ``ToolRetry`` become outcomes. Both heartbeat while they run,
so a worker that dies is noticed after the heartbeat timeout.
"""

from __future__ import annotations

__all__ = ["HarnessActivities", "open_run_store"]

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from temporalio import activity
from temporalio.exceptions import ApplicationError

from harness.config import load_agent
from harness.core import NON_RETRYABLE, CanonicalMessage, ToolOutcome
from harness.durable import snapshot_session
from harness.errors import AgentLoadError, SessionNotFoundError, ToolArgumentsError, ToolRetry
from harness.run import agent_fingerprint, tool_content
from harness.session import Session
from harness.tools import RunContext
from harness_temporal.units import (
    ACTIVITY_MODEL,
    ACTIVITY_SNAPSHOT,
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


def open_run_store(url: str) -> SessionStore:
    """Open a run's store: the built-in schemes, or one an installed plugin answers (``postgresql:``)."""
    from harness.hooks import PluginManager
    from harness.stores import open_store

    if url.startswith(("sqlite:", "file:")):
        return open_store(url)
    manager = PluginManager()
    manager.load_entrypoint_plugins()
    return open_store(url, plugin_manager=manager)


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
        max_runs: How many runs' last request views to keep (least recently used dropped).
    """

    def __init__(self, *, max_runs: int = 256) -> None:
        self.max_runs = max_runs
        self._agents: dict[str, tuple[Agent, str]] = {}
        self._stores: dict[str, SessionStore] = {}
        self._views: OrderedDict[str, tuple[int, list[CanonicalMessage]]] = OrderedDict()
        self.view_misses = 0
        """Model requests whose view was read from the store (no cached previous view)."""

    @property
    def activities(self) -> Sequence[Callable[..., Any]]:
        """The activities to register on a worker."""
        return [self.snapshot, self.model_request, self.tool_call]

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

    def store(self, url: str) -> SessionStore:
        """The store at ``url`` (opened once per process)."""
        store = self._stores.get(url)
        if store is None:
            store = open_run_store(url)
            self._stores[url] = store
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
        return snapshot_session(self.store(data["store"]), data["session"])

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

    @activity.defn(name=ACTIVITY_MODEL)
    async def model_request(self, data: dict[str, Any]) -> dict[str, Any]:
        """Send one model request; return the response's wire JSON."""
        run = activity.info().workflow_id or ""
        agent = self.agent(data["agent"], data["fp"])
        model = agent.model
        wanted = data.get("model")
        if wanted is not None and wanted != model.model_name:
            raise _fail(
                "UnsupportedModelError",
                f"a capability asked model {wanted!r}, this worker's agent has {model.model_name!r}: "
                "harness-temporal calls capabilities' models through the agent's model only",
            )
        settings = decode_settings(data["settings"])
        if data["purpose"] == "capability":
            messages = decode_messages(data["messages"])
            tools = decode_tools(data["tools"])
            async with _heartbeating():
                response = await model.request(messages, tools, settings)
            return encode_message(response)
        view = self._view(run, data)
        outgoing = _outgoing(view, decode_parts(data["system"]), decode_parts(data["scoped"]))
        async with _heartbeating():
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
        ctx = RunContext(
            model=agent.model,
            session=Session(session_id=data["session"]),
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
            raise _fail(type(exc).__name__, f"{type(exc).__name__}: {exc}") from exc
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            transient = tool.is_transient(exc)
            if transient and data["idempotent"] and attempt < data["max_attempts"]:
                raise ApplicationError(error, type="TransientToolError") from exc
            return ToolOutcome("failed", error=error, transient=transient, attempts=attempt).to_json()
        return ToolOutcome("returned", content=content, attempts=attempt).to_json()


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
