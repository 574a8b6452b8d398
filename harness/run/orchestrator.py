"""The request orchestrator: one ``Agent.run``, step by step, following the contract.

Sequence (the contract's "Request Loop Contract"):

1. **Context + id**: ``request_id`` = the first 8 characters of a fresh id from the run's
   effects (:meth:`~harness.core.effects.Effects.new_id`), stored on the run's state.
2. **Runtime reset**: a fresh :class:`~harness.tools.context.RunState` per run (counters,
   tool registry, empty-response counter); ``original_query`` is taken from the session
   when already set.
3. **Prepare** (:func:`~harness.run.prepare.prepare_history`): prune, clean up, merge the
   new request, sanitize.
4. **Iterate**: each iteration *sends* (``before_model_request`` edits the history; the
   system prompt and instructions are built fresh and put in front, never stored) and
   then *processes* the response (usage, thoughts, empty detection, fallback tool calls,
   tool dispatch through :class:`~harness.run.executor.ToolExecutor`); every node goes to
   ``after_node``. A response without tool calls ends the run.
5. **Finish**: the run hands its one history, usage total and thoughts to the session
   (:meth:`~harness.session.Session.record_run`), which is saved when it has a path.
6. **Abort / timeout / failure** (:mod:`harness.run.recovery`): completed results are
   kept, unfinished calls are answered and cancelled, ``[INTERRUPTED]`` is appended on
   abort and timeout, the history is repaired, handed over and saved, and the error is
   re-raised.

The orchestrator reads the agent only through its frozen
:class:`~harness.run.settings.RunSettings`; it owns the run's history and usage (on its
:class:`~harness.tools.context.RunContext`) and writes the session once, at the end.
"""

from __future__ import annotations

__all__ = ["RequestOrchestrator", "RunOutcome"]

import asyncio
import weakref
from collections.abc import Sequence
from typing import Any, Literal

import attrs

from harness import history as hist
from harness.capabilities.context import RequestContext
from harness.core._sequences import common_prefix
from harness.core.effects import Effects, InProcessEffects, ModelRequestUnit, RequestDelta
from harness.core.messages import (
    CanonicalMessage,
    RetryPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    Usage,
    UserPromptPart,
    with_harness_mark,
)
from harness.core.model import Model, ModelSettings, ToolDefinition
from harness.core.nodes import CallToolsNode, EndNode, ModelRequestNode, Node
from harness.errors import (
    EmptyResponseError,
    HarnessError,
    MaxIterationsExceeded,
    RequestTimeout,
    RunError,
    ToolRetryBudgetExceeded,
    UserAbort,
)
from harness.hooks.manager import PluginManager
from harness.run.executor import ToolExecutor
from harness.run.fallback import FALLBACK_ID_PREFIX, with_fallback_tool_calls
from harness.run.outgoing import build_outgoing, system_parts
from harness.run.persist import SessionWriter
from harness.run.prepare import prepare_history
from harness.run.recovery import INTERRUPTED_MARKER, answer_interrupted_batch, append_interrupted
from harness.run.responses import (
    EMPTY_RESPONSE_NUDGE,
    is_blank_response,
    normalise_response,
    unique_tool_call_ids,
)
from harness.run.resume import pending_calls, plan_resume
from harness.run.settings import RunSettings
from harness.session import Session
from harness.tokens import TokenCounter
from harness.tools.context import RunContext, RunState
from harness.tools.lifecycle import ToolEvent

_Kind = Literal["abort", "timeout", "error"]

_SESSIONS_IN_USE: weakref.WeakSet[Session] = weakref.WeakSet()
"""Sessions a run is using right now: a second, overlapping run on one is refused."""


@attrs.frozen
class RunOutcome:
    """What the orchestrator hands back to :class:`~harness.run.agent.Agent`."""

    output: str | None
    new_messages: list[CanonicalMessage]
    all_messages: list[CanonicalMessage]
    usage: Usage
    request_id: str
    iterations: int
    state: RunState


class RequestOrchestrator:
    """Runs one prompt against a session; create one per run (see :meth:`Agent.run`).

    Args:
        settings: The agent's frozen run settings.
        session: The session to continue; written once, when the run ends.
        prompt: The user prompt, or ``None`` to continue a pending request.
        plugin_manager: The plugins and capabilities to call.
        counter: The token counter of the run's owner.
        effects: How the run performs its model requests and tool calls, and where its
            clock and fresh ids come from (default: :class:`~harness.core.effects.InProcessEffects`).
    """

    def __init__(
        self,
        settings: RunSettings,
        session: Session,
        prompt: str | None,
        *,
        plugin_manager: PluginManager,
        counter: TokenCounter,
        effects: Effects | None = None,
    ) -> None:
        self.effects: Effects = effects if effects is not None else InProcessEffects()
        self.settings = settings
        self.session = session
        self.pm = plugin_manager
        self.counter = counter
        self.model = settings.model
        state = RunState(request_id=self.effects.new_id()[:8], original_query=session.original_query)
        state.tool_registry.clock = self.effects.now
        if state.original_query is None and prompt is not None:
            state.original_query = prompt
        # Until the history is prepared, the run's history is the session's, unchanged.
        self.ctx = RunContext(
            model=settings.model, session=session, prompt=prompt, run=state, messages=list(session.messages)
        )
        self.executor = ToolExecutor(settings, self.ctx, self._emit, self.effects)
        self.added = 0
        self.thoughts: list[str] = []
        self._batch: tuple[Any, ...] | None = None
        self._known_ids: set[str] = set()
        self._task: asyncio.Task[Any] | None = None
        self._aborted = False
        self._events: list[ToolEvent] = []
        self._units = 0
        self._deltas = bool(getattr(self.effects, "deltas", True))
        self._last_view: list[CanonicalMessage] | None = None
        self.writer = SessionWriter(session, self.ctx, self.executor)

    @property
    def history(self) -> list[CanonicalMessage]:
        """The run's history: the one list, owned by the run context."""
        return self.ctx.messages

    # ---------------------------------------------------------------- public

    def abort(self) -> None:
        """Abort the run: it stops at its next await, saves, and raises :class:`UserAbort`."""
        self._aborted = True
        task = self._task
        if task is not None and not task.done():
            task.cancel(INTERRUPTED_MARKER)

    async def run(self) -> RunOutcome:
        """Execute the run.

        Raises:
            MaxIterationsExceeded, EmptyResponseError, ToolRetryBudgetExceeded,
            RequestTimeout, UserAbort: after the history was repaired and saved.
            asyncio.CancelledError, KeyboardInterrupt: likewise, re-raised unchanged.
            CapabilityError: a capability failed (history restored, repaired, saved).
        """
        if self.session in _SESSIONS_IN_USE:
            raise HarnessError(
                f"session {self.session.session_id} is already used by a run in progress; "
                "runs on one session must not overlap"
            )
        _SESSIONS_IN_USE.add(self.session)
        self._task = asyncio.current_task()
        timeout = self.settings.request_timeout
        scope: asyncio.Timeout | None = None
        try:
            async with asyncio.timeout(timeout) as scope:
                await self._resume()
                self._prepare()
                output = await self._iterate()
        except BaseException as exc:
            kind: _Kind = "error"
            if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | UserAbort):
                kind = "abort"
            if isinstance(exc, TimeoutError) and scope is not None and scope.expired():
                kind = "timeout"
            if self._aborted and isinstance(exc, asyncio.CancelledError):
                kind = "abort"
            notes = self._recover(kind, exc)
            notes += await self._flush_events()
            error = self._error_for(kind, exc, timeout)
            for note in notes:  # on the error the caller sees, never lost on a chained cause
                error.add_note(note)
            if error is exc:
                raise
            raise error from exc
        finally:
            self._task = None
            _SESSIONS_IN_USE.discard(self.session)
        self._hand_over()
        return RunOutcome(
            output=output,
            new_messages=self.new_messages(),
            all_messages=list(self.history),
            usage=self.ctx.usage,
            request_id=self.ctx.request_id,
            iterations=self.ctx.iteration,
            state=self.ctx.run,
        )

    def new_messages(self) -> list[CanonicalMessage]:
        """The messages this run added (the tail of the history)."""
        count = min(self.added, len(self.history))
        return self.history[len(self.history) - count :] if count else []

    # ---------------------------------------------------------------- steps

    async def _resume(self) -> None:
        """Answer the calls a stopped run left unanswered (see :mod:`harness.run.resume`)."""
        calls = pending_calls(self.session.messages)
        if not calls or self.session.store is None:
            return
        plan = plan_resume(calls, self.session.ledger, self.settings.tools, now=self.effects.now())
        for entry in plan.ledger:
            self.session.record_tool(entry)
        self.ctx.messages = list(self.session.messages)
        answers = dict(plan.answers)
        if plan.rerun:
            self._batch = plan.rerun
            rerun = await self.executor.run_batch(plan.rerun)
            self._batch = None
            for call, part in zip(plan.rerun, rerun.parts, strict=True):
                answers[call.tool_call_id] = part
        self.ctx.messages.append(CanonicalMessage.request(*(answers[call.tool_call_id] for call in calls)))
        self.writer.step((), self.session.current_model)
        self.ctx.messages = list(self.session.messages)

    def _prepare(self) -> None:
        request = None
        if self.ctx.prompt is not None:
            request = CanonicalMessage.request(UserPromptPart(self.ctx.prompt, timestamp=self.effects.now()))
        before = self.session.messages
        messages = prepare_history(before, self.ctx.prompt, self.counter, request=request)
        self.added = 1
        # One pass over the parts; ``message.tool_calls`` would build a tuple per message.
        self._known_ids = {
            part.tool_call_id for m in messages for part in m.parts if isinstance(part, ToolCallPart)
        }
        self.ctx.messages = messages
        self.writer.prepared(before, messages, request)

    async def _iterate(self) -> str | None:
        while True:
            state = self.ctx.run
            if state.current_iteration >= self.settings.max_iterations:
                raise MaxIterationsExceeded(self.settings.max_iterations)
            state.current_iteration = state.iteration_count = state.current_iteration + 1
            outgoing = await self._send_prepare()
            response = await self.effects.model_request(outgoing)
            done, output = await self._process(
                normalise_response(response, self.model.model_name, now=self.effects.now), outgoing.messages
            )
            if done:
                return output

    async def _send_prepare(self) -> ModelRequestUnit:
        """Run the capabilities on the history and build the request unit to send."""
        ctx = RequestContext(
            messages=self.history,
            token_counter=self.counter,
            model=self.model,
            model_name=self.model.model_name,
            context_window=self.model.context_window,
            usage=self.ctx.usage,
            requests=self.ctx.iteration - 1,
            max_iterations=self.settings.max_iterations,
            request_id=self.ctx.request_id,
            state=self.ctx.state,  # per-run storage, shared by every request of the run
            session=self.session,
            model_requester=self._capability_request,
        )
        before = len(self.history)
        snapshot = list(self.history) if self.session.store is not None else None
        try:
            await self.pm.run_before_model_request(ctx)
        finally:
            self._adopt(ctx, before)
            if snapshot is not None:
                self.writer.edited(snapshot, ctx.events)
        if not self.history or self.history[-1].kind != "request":
            raise HarnessError("before_model_request left a history that does not end with the request")
        system = await system_parts(self.settings, self.ctx)
        view: Sequence[CanonicalMessage] = self.history
        delta = None
        if self._deltas:
            view = list(self.history)
            previous = self._last_view or []
            keep = common_prefix(previous, view)
            delta = RequestDelta(keep, tuple(view[keep:]), tuple(system), tuple(ctx.request_scoped))
            self._last_view = view
        self._units += 1
        return ModelRequestUnit(
            index=self._units,
            purpose="request",
            source="agent",
            model=self.model,
            messages=build_outgoing(view, system, ctx.request_scoped),
            view=view,
            delta=delta,
            tools=self.settings.tool_definitions,
            settings=self.settings.model_settings,
            session_id=self.session.session_id,
            revision=self.session.revision if self.session.store is not None else None,
        )

    async def _capability_request(
        self,
        model: Model,
        messages: Sequence[CanonicalMessage],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings,
        source: str,
    ) -> CanonicalMessage:
        """A capability's own model call (the summarizer), made as a unit of the run."""
        self._units += 1
        unit = ModelRequestUnit(
            index=self._units,
            purpose="capability",
            source=source,
            model=model,
            messages=list(messages),
            view=list(messages),
            tools=tuple(tools),
            settings=settings,
            session_id=self.session.session_id,
        )
        return normalise_response(
            await self.effects.model_request(unit), model.model_name, now=self.effects.now
        )

    async def _process(
        self, response: CanonicalMessage, outgoing: Sequence[CanonicalMessage]
    ) -> tuple[bool, str | None]:
        """Act on one response. Returns ``(done, output)``."""
        iteration = self.ctx.iteration
        self.ctx.usage = self.ctx.usage + (response.usage or Usage())
        request_node = ModelRequestNode(self.history[-1], iteration, tuple(outgoing))
        thought = "\n".join(p.content for p in response.parts if isinstance(p, ThoughtPart)) or None
        if thought:
            self.thoughts.append(thought)
        if is_blank_response(response):
            await self._handle_empty(response, request_node, thought)
            return False, None
        self.ctx.run.consecutive_empty_responses = 0

        used_fallback = False
        if not response.tool_calls and self.settings.tools and self.settings.fallback_tool_calls:
            with_calls = with_fallback_tool_calls(
                response,
                self.settings.tools.keys(),
                make_id=lambda: f"{FALLBACK_ID_PREFIX}{self.effects.new_id()}",
            )
            if with_calls is not None:
                response = with_calls
                used_fallback = True
        response = unique_tool_call_ids(
            response, self._known_ids, self.ctx.run.tool_registry, new_id=self.effects.new_id
        )
        calls = response.tool_calls
        self._batch = calls or None
        self.executor.results = {}
        self._append(response)
        await self.pm.notify_after_node(self.ctx, request_node)

        usage = response.usage or Usage()
        if not calls:
            self._batch = None
            output = "".join(p.content for p in response.parts if isinstance(p, TextPart)) or None
            await self.pm.notify_after_node(self.ctx, CallToolsNode(response, iteration, thought, usage))
            await self.pm.notify_after_node(self.ctx, EndNode(output, response, iteration))
            return True, output

        results = await self.executor.run_batch(calls)
        self._append(results)
        self._batch = None
        node: Node = CallToolsNode(
            response, iteration, thought, usage, calls, results, used_fallback=used_fallback
        )
        await self.pm.notify_after_node(self.ctx, node)
        if self.executor.budget_exceeded is not None:
            name, budget, last = self.executor.budget_exceeded
            raise ToolRetryBudgetExceeded(name, budget, last)
        return False, None

    def _append(self, message: CanonicalMessage) -> None:
        self.history.append(message)
        self.added += 1
        self.writer.step(self.thoughts, self.model.model_name)

    def _adopt(self, ctx: RequestContext, before: int) -> None:
        """Make the capabilities' edits the run's history and charge their usage."""
        if ctx.messages is not self.history:
            self.history[:] = ctx.messages
        after = len(self.history)
        if after < before:
            # Compaction removed messages; this run's messages are still the tail.
            self.added = min(self.added, after)
        self.ctx.usage = ctx.usage

    async def _handle_empty(
        self, response: CanonicalMessage, request_node: ModelRequestNode, thought: str | None
    ) -> None:
        state = self.ctx.run
        state.consecutive_empty_responses += 1
        count = state.consecutive_empty_responses
        await self.pm.notify_after_node(self.ctx, request_node)
        await self.pm.notify_after_node(
            self.ctx,
            CallToolsNode(response, self.ctx.iteration, thought, response.usage or Usage(), is_empty=True),
        )
        if count > self.settings.max_empty_responses:
            raise EmptyResponseError(count, self.settings.max_empty_responses)
        # The empty response is not stored (it would be an empty message); its thinking
        # went to the thoughts. The nudge joins the request that was just sent.
        nudge = with_harness_mark(
            RetryPromptPart(EMPTY_RESPONSE_NUDGE, timestamp=self.effects.now()), empty_response=count
        )
        last = self.history[-1]
        self.history[-1] = last.replace(parts=(*last.parts, nudge))
        # Checkpointed now: the next request unit's revision is the stored view it is built from.
        self.writer.step(self.thoughts, self.model.model_name)

    async def _emit(self, event: ToolEvent) -> None:
        self.writer.tool_event(event)
        await self.pm.notify_tool(self.ctx, event)

    # ---------------------------------------------------------------- finish / recover

    def _hand_over(self) -> None:
        """The run's last write to the session: its history, usage and thoughts, then save.

        A stored session was checkpointed at every step; this writes the totals. Any other
        session takes the run's result here, once, and is saved when it has a path.
        """
        if self.writer.enabled:
            self.writer.finish(
                self.thoughts, self.model.model_name, self.counter.count_messages(self.history)
            )
            return
        self.session.record_run(
            messages=self.history,
            usage=self.ctx.usage,
            thoughts=self.thoughts,
            model_name=self.model.model_name,
            total_tokens=self.counter.count_messages(self.history),
            original_query=self.ctx.run.original_query,
        )
        if self.session.path is not None:
            self.session.save()

    def _recover(self, kind: _Kind, exc: BaseException) -> list[str]:
        """Repair and save the history after ``exc`` (synchronous: no await can interrupt it).

        Returns:
            Notes for the run's error: what else failed while recovering.
        """
        history = self.history
        if self._batch is not None and answer_interrupted_batch(history, self._batch, self.executor.results):
            self.added += 1
        self._batch = None
        reason = {"abort": "aborted", "timeout": "timed out", "error": f"run failed: {type(exc).__name__}"}[
            kind
        ]
        registry = self.ctx.run.tool_registry
        for record in registry.unfinished():
            self._events.append(registry.cancel(record.tool_call_id, reason))
        if kind != "error" and append_interrupted(history, self.model.model_name):
            self.added += 1
        if hist.check_invariants(history):
            history[:] = hist.run_cleanup_loop(history, dangling="answer").messages
        try:
            self._hand_over()
        except Exception as save_error:  # never mask the original error
            return [f"harness: saving the session after the failure also failed: {save_error}"]
        return []

    def _error_for(self, kind: _Kind, exc: BaseException, timeout: float | None) -> BaseException:
        """The run's typed error for ``exc``: a new one to raise from it, or ``exc`` itself."""
        if kind == "timeout" and timeout is not None:
            error: RunError = RequestTimeout(timeout)
            error.session, error.state = self.session, self.ctx.run
            return error
        if self._aborted and isinstance(exc, asyncio.CancelledError):
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            error = UserAbort("the run was aborted by the user; completed work was saved")
            error.session, error.state = self.session, self.ctx.run
            return error
        if isinstance(exc, RunError):
            exc.session, exc.state = self.session, self.ctx.run
        return exc

    async def _flush_events(self) -> list[str]:
        """Send the recovery's registry events to ``on_tool``; what observers raise becomes notes.

        An observer failing here must not mask the run's error, and must not be lost: each
        failure is returned as a note for the error the run raises (the failed event, the
        plugin and its exception), and the remaining events are still sent.
        """
        events, self._events = self._events, []
        notes: list[str] = []
        for event in events:
            try:
                await self._emit(event)
            except Exception as failure:  # a CapabilityError naming the plugin and its exception
                notes.append(
                    f"harness: the on_tool hook failed on the {event.kind!r} event of tool call "
                    f"{event.record.tool_call_id!r} while the run recovered: {failure}"
                )
        return notes
