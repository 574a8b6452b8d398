"""The agent: a model, tools, capabilities and a system prompt, run against sessions.

Example::

    from harness import Agent
    from harness.models.function import FunctionModel

    agent = Agent(model, tools=[read_file], system_prompt="You are terse.")
    result = await agent.run("What is in README.md?", session=session)
    print(result.output)
"""

from __future__ import annotations

__all__ = ["Agent", "RunResult"]

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, cast

from harness.core.effects import Effects
from harness.core.model import Model, ModelSettings, ToolDefinition
from harness.errors import ToolDefinitionError
from harness.hooks.defaults import default_plugin_manager
from harness.hooks.manager import PluginManager
from harness.models.resolve import resolve_model
from harness.run.continuity import ContinuitySettings
from harness.run.events import EventSink
from harness.run.lease import RunLease
from harness.run.orchestrator import RequestOrchestrator
from harness.run.result import RunResult
from harness.run.settings import InstructionsFunction, RunSettings
from harness.run.stream import RunStream
from harness.run.sync import run_sync
from harness.run.threads import DEFAULT_TOOL_THREADS, ToolThreads
from harness.session import Session
from harness.tools.tool import Tool, as_tool


def _capability_tools(capability: object) -> Sequence[Tool | Callable[..., Any]]:
    """The tools a capability provides through ``tools`` (a sequence, or a method returning one)."""
    provided = getattr(capability, "tools", None)
    if provided is None:
        return ()
    if callable(provided) and not isinstance(provided, Tool):
        provided = provided()
    if isinstance(provided, Tool) or not isinstance(provided, Sequence):
        raise TypeError(
            f"capability {type(capability).__name__}.tools must be a sequence of tools or functions, "
            f"got {type(provided).__name__}"
        )
    return cast(Sequence[Tool | Callable[..., Any]], provided)


def _positive(name: str, value: int) -> None:
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")


class Agent:
    """Runs prompts through a model, its tools and a capability stack.

    Args:
        model: Any :class:`~harness.core.model.Model`, or a model string such as
            ``"openai:gpt-4o-mini"`` or ``"anthropic:claude-sonnet-4-6"``, resolved by
            :func:`~harness.models.resolve.resolve_model` (plugins' ``resolve_model`` hook
            first, then the built-in providers).
        tools: Tools or plain functions (turned into tools with :meth:`Tool.from_function`).
            A capability may provide tools too, through a ``tools`` attribute (a sequence,
            or a method returning one; ``harness-recall``'s ``recall`` and
            ``search_history`` come this way); a name used twice raises.
        capabilities: Capabilities, run before every model request in this order (adjusted
            only by their ``runs_before`` / ``runs_after`` declarations): capability objects,
            short-form stack strings such as ``"sliding_window:max_messages=80,keep_messages=10"``
            (the ``--stack`` grammar of :mod:`harness.config`, validated the same way; one
            string may hold several entries, and a single string stands for a one-item
            list), or :class:`~harness.config.StackEntry` objects. Strings name the
            capability classes of ``plugin_manager``'s entry points when it loaded them,
            else the installed ones.
        system_prompt: Static system prompt, sent in front of every request, never stored.
        instructions: ``callable(RunContext) -> str`` (sync or async) for dynamic
            instructions, evaluated before every model request, never stored.
        plugin_manager: A prepared :class:`~harness.hooks.manager.PluginManager` (observers,
            entry-point plugins); ``capabilities`` are added to it. Default:
            :func:`~harness.hooks.defaults.default_plugin_manager`, the installed
            ``plugin.<name>`` observers (``harness-otel``) and nothing else.
        max_iterations: Maximum model requests per run (``MaxIterationsExceeded``).
        request_timeout: Seconds a whole run may take (``RequestTimeout``); ``None`` = no limit.
        tool_max_retries: Attempts per call for transient tool failures (connection errors,
            timeouts, a tool's ``retry_on``; see :mod:`harness.tools.tool`), with exponential
            backoff; after the last attempt the failure becomes a tool return the model sees,
            and the run continues. Other exceptions are returned at once, never re-run, and a
            tool declared ``idempotent=False`` is never re-run automatically.
        tool_retry_budget: Consecutive retry prompts (``ToolRetry``, invalid arguments,
            unknown tool) a tool may cause before the run fails with
            ``ToolRetryBudgetExceeded``; a success resets the count.
        max_parallel_tools: Maximum tool calls of one response running at once.
        max_empty_responses: Nudges after empty responses before ``EmptyResponseError``.
        settings: Model settings sent with every request.
        tool_retry_base_delay: First backoff delay in seconds (doubles, capped at 5 s,
            plus up to 10 % jitter).
        fallback_tool_calls: Parse tool calls written as text when a response has no
            structured call (see :mod:`harness.run.fallback`).
        anchors: After a compaction, re-send request-scoped the task, the user's
            constraints, the history's instructions and the latest plan when the
            compaction removed them (see :mod:`harness.run.continuity`).
        compaction_receipt: After a compaction, tell the model on the next request what
            was compacted and how to get it back (``recall`` references when
            ``harness-recall`` is installed).
        pause_after_compaction: End the run right after a compaction, before the compacted
            request is sent, with ``status="paused_after_compaction"``: ``True`` for any
            compaction, or the names of the capabilities whose compactions pause. Continue
            with ``agent.run(None, session=...)`` or a new prompt.
        pin_anchors: Pin the first user prompt of a new session (``harness.pin``), so the
            invariant guard rejects any capability that changes or drops it.
        plan_tools: Tool names whose calls write the plan (besides names holding ``todo``
            or ``plan``).
        tool_threads: The threads sync tools run in: a number (a bounded pool this agent
            owns, created on first use; default 16) or a
            :class:`~harness.run.threads.ToolThreads` to share one pool between agents.
            Every call's thread is tracked, so a stopping run knows which calls still run.
        tool_settle_timeout: Seconds a run that stops (abort, timeout, error) waits for
            sync calls still running; one that finishes in time keeps its result, one
            still running is answered "outcome unknown" (ledger ``unknown``).

    Raises:
        ValueError: A limit is below 1, or ``tool_settle_timeout`` is negative.
        TypeError: A capability is neither a capability object, nor a string, nor an
            entry (the message names its index and type).
        StackConfigError: A capability string is invalid (the message names
            ``capabilities[<index>]``, the entry and the parameter).
        ToolDefinitionError: Two tools share a name.
        ModelResolutionError: ``model`` is a string no plugin or built-in provider knows.
    """

    def __init__(
        self,
        model: Model | str,
        *,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        capabilities: Sequence[object] | str = (),
        system_prompt: str | None = None,
        instructions: InstructionsFunction | None = None,
        plugin_manager: PluginManager | None = None,
        max_iterations: int = 25,
        request_timeout: float | None = None,
        tool_max_retries: int = 3,
        tool_retry_budget: int = 3,
        max_parallel_tools: int = 8,
        max_empty_responses: int = 2,
        settings: ModelSettings | None = None,
        tool_retry_base_delay: float = 0.5,
        fallback_tool_calls: bool = True,
        anchors: bool = True,
        compaction_receipt: bool = True,
        pause_after_compaction: bool | Collection[str] = False,
        pin_anchors: bool = False,
        plan_tools: Collection[str] = (),
        tool_threads: int | ToolThreads = DEFAULT_TOOL_THREADS,
        tool_settle_timeout: float = 1.0,
    ) -> None:
        _positive("max_iterations", max_iterations)
        _positive("tool_max_retries", tool_max_retries)
        _positive("max_parallel_tools", max_parallel_tools)
        if tool_retry_budget < 0:
            raise ValueError(f"tool_retry_budget must be >= 0, got {tool_retry_budget}")
        if max_empty_responses < 0:
            raise ValueError(f"max_empty_responses must be >= 0, got {max_empty_responses}")
        if request_timeout is not None and request_timeout <= 0:
            raise ValueError(f"request_timeout must be positive or None, got {request_timeout}")
        if tool_retry_base_delay < 0:
            raise ValueError(f"tool_retry_base_delay must be >= 0, got {tool_retry_base_delay}")
        if not tool_settle_timeout >= 0:  # NaN too
            raise ValueError(f"tool_settle_timeout must be >= 0 (seconds), got {tool_settle_timeout}")
        threads = tool_threads if isinstance(tool_threads, ToolThreads) else ToolThreads(tool_threads)
        tools_by_name: dict[str, Tool] = {}
        for item in tools:
            tool = as_tool(item)
            if tool.name in tools_by_name:
                raise ToolDefinitionError(f"two tools are named {tool.name!r}", tool_name=tool.name)
            tools_by_name[tool.name] = tool
        self.plugin_manager = plugin_manager if plugin_manager is not None else default_plugin_manager()
        resolved = resolve_model(model, plugin_manager=self.plugin_manager)
        if capabilities:
            manager = self.plugin_manager
            self.plugin_manager.add_capabilities(
                capabilities, resolve_model=lambda text: resolve_model(text, plugin_manager=manager)
            )
        for capability in self.plugin_manager.capabilities:
            for item in _capability_tools(capability):
                tool = as_tool(item)
                if tool.name in tools_by_name:
                    raise ToolDefinitionError(
                        f"capability {type(capability).__name__} provides a tool named {tool.name!r}, "
                        "and another tool has that name",
                        tool_name=tool.name,
                    )
                tools_by_name[tool.name] = tool
        self.run_settings = RunSettings(
            model=resolved,
            tools=tools_by_name,
            tool_definitions=tuple(t.definition for t in tools_by_name.values()),
            system_prompt=system_prompt,
            instructions=instructions,
            max_iterations=max_iterations,
            request_timeout=request_timeout,
            tool_max_retries=tool_max_retries,
            tool_retry_budget=tool_retry_budget,
            max_parallel_tools=max_parallel_tools,
            max_empty_responses=max_empty_responses,
            model_settings=settings if settings is not None else ModelSettings(),
            tool_retry_base_delay=tool_retry_base_delay,
            fallback_tool_calls=fallback_tool_calls,
            continuity=ContinuitySettings.create(
                anchors=anchors,
                receipt=compaction_receipt,
                pause_after_compaction=pause_after_compaction,
                pin_anchors=pin_anchors,
                plan_tools=plan_tools,
            ),
            tool_threads=threads,
            tool_settle_timeout=float(tool_settle_timeout),
        )
        """Everything a run reads from this agent, frozen (see :class:`~harness.run.settings.RunSettings`)."""
        self._active: set[RequestOrchestrator] = set()

    @property
    def model(self) -> Model:
        """The resolved model."""
        return self.run_settings.model

    @property
    def tools(self) -> Mapping[str, Tool]:
        """The agent's tools by name."""
        return self.run_settings.tools

    @property
    def tool_definitions(self) -> tuple[ToolDefinition, ...]:
        """What the model is told about the tools."""
        return self.run_settings.tool_definitions

    @property
    def system_prompt(self) -> str | None:
        """The static system prompt."""
        return self.run_settings.system_prompt

    @property
    def max_iterations(self) -> int:
        """Maximum model requests per run."""
        return self.run_settings.max_iterations

    @property
    def request_timeout(self) -> float | None:
        """Seconds a whole run may take (``None``: no limit)."""
        return self.run_settings.request_timeout

    @property
    def tool_max_retries(self) -> int:
        """Attempts per call for transient tool failures."""
        return self.run_settings.tool_max_retries

    @property
    def tool_retry_budget(self) -> int:
        """Consecutive retry prompts a tool may cause."""
        return self.run_settings.tool_retry_budget

    @property
    def max_parallel_tools(self) -> int:
        """Maximum tool calls of one response running at once."""
        return self.run_settings.max_parallel_tools

    @property
    def max_empty_responses(self) -> int:
        """Nudges after empty responses before ``EmptyResponseError``."""
        return self.run_settings.max_empty_responses

    @property
    def fallback_tool_calls(self) -> bool:
        """Whether tool calls written as text are parsed."""
        return self.run_settings.fallback_tool_calls

    async def run(
        self,
        prompt: str | None,
        session: Session | None = None,
        *,
        effects: Effects | None = None,
        approvals: Mapping[str, object] | None = None,
    ) -> RunResult:
        """Run ``prompt`` to a final answer.

        Args:
            prompt: The user prompt. ``None`` continues a history that ends with a
                request (for example after ``MaxIterationsExceeded``).
            session: The conversation to continue and update; a fresh in-memory session
                when omitted (find it on the result). A session with a ``path`` is saved
                after the run, and after a failure before the error is raised.
            effects: How the run makes its model requests and tool calls (see
                :mod:`harness.core.effects`); durable engines (``harness-dbos``,
                ``harness-temporal``) pass theirs. Default: in this process.
            approvals: Decisions for the calls a paused run (``status="awaiting_approval"``)
                held back, by call id (``harness_tool_approval.Approve()``, ``Reject(reason)``,
                ``Edit(args)``); pass ``prompt=None`` with them to resume.

        Raises:
            ApprovalPendingError: ``prompt`` was given while calls of the session wait for
                approval (nothing was changed).
            ApprovalError: ``approvals`` name a call that is not waiting for approval.
            MaxIterationsExceeded, EmptyResponseError, ToolRetryBudgetExceeded,
            RequestTimeout, UserAbort: The run stopped; the history was saved (the
                error's ``session`` attribute holds it).
            CapabilityError: A capability failed.
            SessionLeaseError: Another live run holds the stored session's lease (nothing
                was sent to the model; see :mod:`harness.session.lease`).
        """
        return await self._run(prompt, session, effects=effects, approvals=approvals)

    def run_stream(
        self,
        prompt: str | None,
        session: Session | None = None,
        *,
        approvals: Mapping[str, object] | None = None,
    ) -> RunStream:
        """Run ``prompt`` and yield its events as they happen (see :mod:`harness.run.stream`).

        ``async with agent.run_stream(prompt, session=s) as stream: async for event in stream``
        yields the run's :mod:`events <harness.run.events>` (model deltas as they arrive,
        tool calls and results, compactions, approvals) and ends with ``RunFinished``;
        ``stream.result`` is then the :class:`RunResult` :meth:`run` would have returned,
        with the same persistence. Leaving the block early aborts the run (saved).

        Args:
            prompt: As :meth:`run`.
            session: As :meth:`run`.
            approvals: As :meth:`run`.
        """
        holder: list[RequestOrchestrator] = []
        abort_asked: list[bool] = []  # an abort asked for before the run's task started is kept

        def started(orchestrator: RequestOrchestrator) -> None:
            holder.append(orchestrator)
            if abort_asked:
                orchestrator.abort()

        async def start(sink: EventSink) -> RunResult:
            return await self._run(prompt, session, approvals=approvals, events=sink, started=started)

        def abort() -> None:
            abort_asked.append(True)
            for orchestrator in holder:
                orchestrator.abort()

        return RunStream(start, abort)

    async def _run(
        self,
        prompt: str | None,
        session: Session | None,
        *,
        effects: Effects | None = None,
        approvals: Mapping[str, object] | None = None,
        events: EventSink | None = None,
        started: Callable[[RequestOrchestrator], None] | None = None,
    ) -> RunResult:
        if session is None:
            session = Session()
        orchestrator = RequestOrchestrator(
            self.run_settings,
            session,
            prompt,
            plugin_manager=self.plugin_manager,
            counter=self.plugin_manager.token_counter(self.model.model_name),
            effects=effects,
            approvals=approvals,
            events=events,
        )
        if started is not None:
            started(orchestrator)
        self._active.add(orchestrator)
        try:
            if effects is None:  # a durable engine owns its run's I/O: no lease there
                async with RunLease(session):  # a second live writer fails here, before any model call
                    outcome = await orchestrator.run()
            else:
                outcome = await orchestrator.run()
        finally:
            self._active.discard(orchestrator)
        return RunResult(
            output=outcome.output,
            new_messages=outcome.new_messages,
            all_messages=outcome.all_messages,
            usage=outcome.usage,
            request_id=outcome.request_id,
            session=session,
            iterations=outcome.iterations,
            state=outcome.state,
            status=outcome.status,
            pending_approvals=outcome.pending_approvals,
        )

    def run_sync(
        self,
        prompt: str | None,
        session: Session | None = None,
        *,
        effects: Effects | None = None,
        approvals: Mapping[str, object] | None = None,
    ) -> RunResult:
        """Run :meth:`run` in a new event loop and return its result (for scripts).

        Takes the same arguments as :meth:`run` and raises the same errors. Inside a running
        event loop (a notebook, an async function) it refuses before doing anything: await
        :meth:`run` there (see :mod:`harness.run.sync` for why it does not start a thread).

        Raises:
            EventLoopRunningError: An event loop is running in this thread.
        """
        return run_sync(
            lambda: self.run(prompt, session, effects=effects, approvals=approvals),
            "Agent.run_sync",
            "await agent.run(...)",
        )

    def abort(self) -> None:
        """Abort every run of this agent in progress; each saves and raises ``UserAbort``."""
        for orchestrator in list(self._active):
            orchestrator.abort()
