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
import logging
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

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
from harness.core.pins import pin
from harness.durable.resume import pending_calls, plan_resume
from harness.errors import (
    EmptyResponseError,
    HarnessError,
    MaxIterationsExceeded,
    ToolRetryBudgetExceeded,
    UserAbort,
)
from harness.hooks.manager import PluginManager
from harness.run.approvals import check_approvals, held_calls, is_placeholder, replace_answers
from harness.run.continuity import Continuity, has_user_prompt
from harness.run.events import (
    ApprovalNeeded,
    EventSink,
    RetryPrompt,
)
from harness.run.executor import ToolExecutor
from harness.run.fallback import FALLBACK_ID_PREFIX, with_fallback_tool_calls
from harness.run.model_calls import ModelCaller
from harness.run.narration import announce_calls, compaction_reporter, log_request
from harness.run.outgoing import build_outgoing, system_parts
from harness.run.persist import SessionWriter
from harness.run.prepare import prepare_history
from harness.run.recovery import INTERRUPTED_MARKER, RecoveryKind, flush_events, repair_stopped, run_error
from harness.run.responses import (
    EMPTY_RESPONSE_NUDGE,
    is_blank_response,
    normalise_response,
    unique_tool_call_ids,
)
from harness.run.result import RunOutcome, RunStatus
from harness.run.settings import RunSettings
from harness.session import Session, finish_shielded
from harness.tokens import TokenCounter
from harness.tools.context import RunContext, RunState
from harness.tools.lifecycle import ToolEvent

_Kind = RecoveryKind

_log = logging.getLogger("harness.run")

_SESSIONS_IN_USE: weakref.WeakSet[Session] = weakref.WeakSet()
"""Sessions a run is using right now: a second, overlapping run on one is refused."""


async def _off_loop(work: Callable[[], None]) -> None:
    """``work()`` on a thread, or here when the loop has no executor (a Temporal workflow's)."""
    try:
        await asyncio.to_thread(work)
    except NotImplementedError:
        work()


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
        approvals: Human decisions for the calls a paused run held back, by call id.
        events: Receives every :mod:`~harness.run.events` event as it happens (a streamed run).
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
        approvals: Mapping[str, object] | None = None,
        events: EventSink | None = None,
    ) -> None:
        self.effects: Effects = effects if effects is not None else InProcessEffects()
        self.approvals: Mapping[str, object] = dict(approvals or {})
        self.events = events
        self.status: RunStatus = "completed"
        self.pending: tuple[ToolCallPart, ...] = ()
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
        self.executor = ToolExecutor(
            settings,
            self.ctx,
            self._emit,
            self.effects,
            plugin_manager=plugin_manager,
            decisions=self.approvals,
            events=events,
        )
        self.caller = ModelCaller(self.effects, plugin_manager, events)
        self._request_ctx: RequestContext | None = None
        self.added = 0
        self.thoughts: list[str] = []
        self._batch: tuple[Any, ...] | None = None
        self._known_ids: set[str] = set()
        self._task: asyncio.Task[Any] | None = None
        self._aborted = False
        self._events: list[ToolEvent] = []
        self._deltas = bool(getattr(self.effects, "deltas", True))
        self._last_view: list[CanonicalMessage] | None = None
        self.writer = SessionWriter(session, self.ctx, self.effects.now)
        self.continuity = Continuity(settings.continuity, session, plugin_manager.capabilities)

    @property
    def history(self) -> list[CanonicalMessage]:
        """The run's history: the one list, owned by the run context."""
        return self.ctx.messages

    # ---------------------------------------------------------------- public

    def abort(self) -> None:
        """Abort the run: it stops at its next await, saves, and raises :class:`UserAbort`.

        An abort asked for before the run started is kept: the run stops at its first await.
        """
        self._aborted = True
        task = self._task
        if task is not None and not task.done():
            task.cancel(INTERRUPTED_MARKER)

    async def run(self) -> RunOutcome:
        """Execute the run, inside the ``wrap_run`` wrappers.

        Raises:
            ApprovalPendingError: A prompt was given while calls of the session wait for
                approval (nothing was changed).
            HarnessError: ``approvals`` name a call that is not waiting for approval.
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
        check_approvals(self.session, self.ctx.prompt, self.approvals, self.pm.pluggy_manager.has_plugin)
        if self.pm.has_middleware("wrap_run"):
            return cast(RunOutcome, await self.pm.wrap_run(self.ctx, self._run))
        return await self._run()

    async def _run(self) -> RunOutcome:
        _log.info("run %s started on session %s", self.ctx.request_id, self.session.session_id)
        _SESSIONS_IN_USE.add(self.session)
        self._task = asyncio.current_task()
        if self._aborted and self._task is not None:  # aborted before it started: stop at the first await
            self._task.cancel(INTERRUPTED_MARKER)
        clock, self.session.clock = self.session.clock, self.effects.now  # every time the run records
        try:
            return await self._run_and_hand_over()
        finally:
            self.session.clock = clock

    async def _run_and_hand_over(self) -> RunOutcome:
        timeout = self.settings.request_timeout
        scope: asyncio.Timeout | None = None
        try:
            async with asyncio.timeout(timeout) as scope:
                if self._aborted:
                    await asyncio.sleep(0)  # aborted before it started: the cancellation lands here
                if not self.counter.loaded:  # reading the BPE file (0.2 s, once) off the loop
                    await _off_loop(self.counter.load)
                await self._resume()
                output = None
                if not await self._resume_approvals():
                    await self._prepare()
                    output = await self._iterate()
        except BaseException as exc:
            kind: _Kind = "error"
            if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | UserAbort):
                kind = "abort"
            if isinstance(exc, TimeoutError) and scope is not None and scope.expired():
                kind = "timeout"
            if self._aborted and isinstance(exc, asyncio.CancelledError):
                kind = "abort"
            _log.info("run %s stopped (%s): %s: %s", self.ctx.request_id, kind, type(exc).__name__, exc)
            notes = await finish_shielded(self._recover(kind, exc))
            events, self._events = self._events, []
            notes += await flush_events(events, self.writer.tool_event, self._notify_tool)
            error = run_error(
                kind, exc, timeout, aborted=self._aborted, session=self.session, state=self.ctx.run
            )
            for note in notes:  # on the error the caller sees, never lost on a chained cause
                error.add_note(note)
            if error is exc:
                raise
            raise error from exc
        finally:
            self._task = None
            _SESSIONS_IN_USE.discard(self.session)
        await self._hand_over()  # a failing count is logged, and the built-in counter's count kept
        _log.info(
            "run %s %s after %d request(s), %s",
            self.ctx.request_id,
            self.status,
            self.ctx.iteration,
            self.ctx.usage,
        )
        return RunOutcome(
            output=output,
            new_messages=self.new_messages(),
            all_messages=list(self.history),
            usage=self.ctx.usage,
            request_id=self.ctx.request_id,
            iterations=self.ctx.iteration,
            state=self.ctx.run,
            status=self.status,
            pending_approvals=self.pending,
        )

    def new_messages(self) -> list[CanonicalMessage]:
        """The messages this run added (the tail of the history)."""
        count = min(self.added, len(self.history))
        return self.history[len(self.history) - count :] if count else []

    # ---------------------------------------------------------------- steps

    async def _resume(self) -> None:
        """Answer the calls a stopped run left unanswered (see :mod:`harness.durable.resume`)."""
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
        await self.writer.step((), self.session.current_model)
        self.ctx.messages = list(self.session.messages)

    async def _resume_approvals(self) -> bool:
        """Answer the calls a paused run held back; ``True`` when some are still held (the run pauses).

        A call that finished keeps its answer even when another call of the batch stops the
        run (a wrapper raising), so a resumed call never runs twice.
        """
        held = held_calls(self.session.messages)
        if not held:
            return False
        self.ctx.messages = list(self.session.messages)
        try:
            await self.executor.run_batch(held)
        finally:
            # Finished answers (and fresh placeholders) replace the old placeholders; a call
            # that did not finish stays held.
            self.history[-1] = replace_answers(self.history[-1], self.executor.results)
            await self.writer.step(self.thoughts, self.session.current_model)
        return self._pause_if_deferred()

    def _pause_if_deferred(self) -> bool:
        deferred = self.executor.deferred
        if not deferred:
            return False
        self.status, self.pending = "awaiting_approval", tuple(deferred)
        _log.info("run %s paused: %d call(s) await approval", self.ctx.request_id, len(deferred))
        if self.events is not None:
            self.events(ApprovalNeeded(self.pending))
        return True

    async def _prepare(self) -> None:
        request = None
        if self.ctx.prompt is not None:
            request = CanonicalMessage.request(UserPromptPart(self.ctx.prompt, timestamp=self.effects.now()))
            if self.settings.continuity.pin_anchors and not has_user_prompt(self.history):
                request = pin(request, "task")
        before = self.history  # the session's messages, or what resuming approvals made of them
        messages = prepare_history(before, self.ctx.prompt, self.counter, request=request)
        self.added = 1
        # One pass over the parts; ``message.tool_calls`` would build a tuple per message.
        self._known_ids = {
            part.tool_call_id for m in messages for part in m.parts if isinstance(part, ToolCallPart)
        }
        self.ctx.messages = messages
        await self.writer.prepared(before, messages, request)

    async def _iterate(self) -> str | None:
        while True:
            state = self.ctx.run
            if state.current_iteration >= self.settings.max_iterations:
                raise MaxIterationsExceeded(self.settings.max_iterations)
            state.current_iteration = state.iteration_count = state.current_iteration + 1
            ctx, outgoing = await self._send_prepare()
            if self.continuity.should_pause(ctx):
                self.status = "paused_after_compaction"
                return None
            log_request(
                self.ctx.request_id, state.current_iteration, len(outgoing.messages), self.model.model_name
            )
            raw = await self.caller.call(ctx, outgoing)
            response = normalise_response(raw, self.model.model_name, now=self.effects.now)
            if self.pm.has_middleware("after_model_response"):
                response = await self.pm.run_after_model_response(ctx, response)
            done, output = await self._process(response, outgoing.messages)
            if done:
                return output

    async def _send_prepare(self) -> tuple[RequestContext, ModelRequestUnit]:
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
        ctx.on_event = compaction_reporter(self.ctx.request_id, self.events)
        self._request_ctx = ctx  # a capability's own model call (ctx.request_model) is wrapped with it
        before = len(self.history)
        snapshot = list(self.history) if self.session.store is not None else None
        self.continuity.before_capabilities(self.history)
        try:
            await self.pm.run_before_model_request(ctx)
            self.continuity.after_capabilities(ctx)
        finally:
            self._adopt(ctx, before)
            if snapshot is not None:
                await self.writer.edited(snapshot, ctx.events)
        if not self.history or self.history[-1].kind != "request":
            raise HarnessError("before_model_request left a history that does not end with the request")
        if any(is_placeholder(part) for part in self.history[-1].parts):
            raise HarnessError(
                "a tool call awaiting approval would be sent unanswered; resume with approvals"
            )
        system = await system_parts(self.settings, self.ctx)
        view: Sequence[CanonicalMessage] = self.history
        delta = None
        if self._deltas:
            view = list(self.history)
            previous = self._last_view or []
            keep = common_prefix(previous, view)
            delta = RequestDelta(keep, tuple(view[keep:]), tuple(system), tuple(ctx.request_scoped))
            self._last_view = view
        return ctx, ModelRequestUnit(
            index=0,  # numbered when sent (ModelCaller)
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
        unit = ModelCaller.capability_unit(model, messages, tools, settings, source, self.session.session_id)
        response = await self.caller.call(self._request_ctx, unit)
        return normalise_response(response, model.model_name, now=self.effects.now)

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
        await self._append(response)
        if self.events is not None:
            announce_calls(self.events, calls, self.caller.streamed_call_ids)
        await self.pm.notify_after_node(self.ctx, request_node)

        usage = response.usage or Usage()
        if not calls:
            self._batch = None
            output = "".join(p.content for p in response.parts if isinstance(p, TextPart)) or None
            await self.pm.notify_after_node(self.ctx, CallToolsNode(response, iteration, thought, usage))
            await self.pm.notify_after_node(self.ctx, EndNode(output, response, iteration))
            return True, output

        results = await self.executor.run_batch(calls)
        await self._append(results)
        self._batch = None
        node: Node = CallToolsNode(
            response, iteration, thought, usage, calls, results, used_fallback=used_fallback
        )
        await self.pm.notify_after_node(self.ctx, node)
        if self._pause_if_deferred():
            return True, None
        if self.executor.budget_exceeded is not None:
            name, budget, last = self.executor.budget_exceeded
            raise ToolRetryBudgetExceeded(name, budget, last)
        return False, None

    async def _append(self, message: CanonicalMessage) -> None:
        self.history.append(message)
        self.added += 1
        await self.writer.step(self.thoughts, self.model.model_name)

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
        if self.events is not None:
            self.events(RetryPrompt(nudge))
        # Checkpointed now: the next request unit's revision is the stored view it is built from.
        await self.writer.step(self.thoughts, self.model.model_name)

    async def _emit(self, event: ToolEvent) -> None:
        await self.writer.tool_event(event)
        await self._notify_tool(event)

    async def _notify_tool(self, event: ToolEvent) -> None:
        await self.pm.notify_tool(self.ctx, event)

    # ---------------------------------------------------------------- finish / recover

    async def _hand_over(self) -> list[str]:
        """The run's last write to the session (:meth:`~harness.run.persist.SessionWriter.hand_over`)."""
        return await self.writer.hand_over(
            self.history,
            self.thoughts,
            self.model.model_name,
            count=lambda: self.counter.count_messages(self.history),
        )

    async def _recover(self, kind: _Kind, exc: BaseException) -> list[str]:
        """Answer the unfinished calls, repair and save the history after ``exc``.

        Calls still running get a bounded wait (:meth:`ToolExecutor.settle_unfinished
        <harness.run.executor.ToolExecutor.settle_unfinished>`); the repairs are synchronous.
        The caller awaits it to its end even when cancelled again (``finish_shielded``):
        a second cancellation is raised only once the session is saved.

        Returns:
            Notes for the run's error: what else failed while recovering.
        """
        notes: list[str] = []
        reason = {"abort": "aborted", "timeout": "timed out"}.get(kind, f"run failed: {type(exc).__name__}")
        try:
            self._events += await self.executor.settle_unfinished(reason, self.settings.tool_settle_timeout)
        except Exception as failure:  # never mask the original error; the calls are answered below
            notes.append(f"harness: answering the unfinished tool calls failed: {failure!r}")
        registry = self.ctx.run.tool_registry
        self._events += [registry.cancel(record.tool_call_id, reason) for record in registry.unfinished()]
        began = {e.record.tool_call_id: e.answer for e in self._events if e.answer and e.record.attempts}
        if began and self.history and self.history[-1].kind == "request":  # resumed approvals that ran
            self.history[-1] = replace_answers(self.history[-1], began)  # held again only if they never began
        results, partial = self.executor.results, self.caller.partial_text
        self.added += repair_stopped(
            self.history,
            kind,
            self._batch or (),
            results,
            self.model.model_name,
            partial=partial,
            now=self.effects.now,
        )
        self._batch = None
        try:
            return notes + await self._hand_over()
        except Exception as save_error:  # never mask the original error
            return [*notes, f"harness: saving the session after the failure also failed: {save_error}"]
