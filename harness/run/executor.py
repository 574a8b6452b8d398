"""The tool executor: one batch of tool calls, in parallel, with retries and the registry.

Every call moves through the run's :class:`~harness.tools.lifecycle.ToolCallRegistry`
(registered, started, then completed, failed or cancelled), and each transition goes to
the ``on_tool`` hook. Results come back in call order whatever order the calls finish in.

What a tool raises decides what happens (the policy of :mod:`harness.tools.tool`):

* ``ToolRetry`` and argument errors become retry prompts (counted by the retry budget);
* :data:`NON_RETRYABLE` errors (abort, cancellation, harness errors) stop the run;
* a *transient* error (:meth:`Tool.is_transient <harness.tools.tool.Tool.is_transient>`) is
  retried up to ``tool_max_retries`` attempts with backoff, unless the tool is not
  idempotent; the last failure becomes the tool's result;
* any other error is deterministic: it becomes the tool's result at once, never re-run.
"""

from __future__ import annotations

__all__ = ["AWAITING_APPROVAL_CONTENT", "NON_RETRYABLE", "ToolExecutor", "tool_content"]

# When a run stops (abort, timeout, a fatal error), every call still pending or running is
# answered by :meth:`ToolExecutor.settle_unfinished`, as it happened: a call that never
# ran is "aborted"; a sync call whose thread finishes within ``tool_settle_timeout`` gets
# its result; any other call that began (a sync one still running, an async one cancelled
# part way) may or may not have taken effect, and says so.

import asyncio
import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, cast

from harness.capabilities.calls import ToolCall
from harness.core.effects import (
    NON_RETRYABLE,
    Effects,
    InProcessEffects,
    ToolCallUnit,
    ToolOutcome,
    tool_content,
)
from harness.core.messages import (
    CanonicalMessage,
    Part,
    RetryPromptPart,
    ToolCallPart,
    ToolReturnPart,
    with_harness_mark,
)
from harness.durable.resume import OUTCOME_UNKNOWN_CONTENT
from harness.errors import CapabilityError, MessageError, ToolArgumentsError, ToolRetry, UserAbort
from harness.hooks.manager import PluginManager
from harness.hooks.middleware import DEFERRED_BY
from harness.run.events import EventSink, RetryPrompt, ToolResult
from harness.run.recovery import ABORTED_TOOL_CONTENT, INTERRUPTED_UNKNOWN_CONTENT
from harness.run.settings import RunSettings
from harness.run.threads import CallThreads, ThreadState
from harness.tools.context import RunContext
from harness.tools.lifecycle import ToolCallRecord, ToolEvent
from harness.tools.tool import Tool

_log = logging.getLogger("harness.run")

_FIX = "Fix the errors and try again."

AWAITING_APPROVAL_CONTENT = "[awaiting approval] This call has not run: it waits for a human decision."
"""The placeholder answer of a held-back call while the run is paused (never sent to a model)."""


def _parsed_args(raw: Any) -> dict[str, Any] | str:
    """The model's arguments for wrappers: a dict when they parse as a JSON object, else the text."""
    if isinstance(raw, Mapping):
        return dict(cast(Mapping[str, Any], raw))
    if raw is None:
        return {}
    if isinstance(raw, str):
        try:
            parsed: Any = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            return raw
        if isinstance(parsed, dict):
            return cast(dict[str, Any], parsed)
        return raw
    return str(raw)


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text[:500]


def _failure_content(name: str, error: str, attempts: int, *, transient: bool, idempotent: bool) -> str:
    """What the model reads when a call failed: the error, and whether it was retried."""
    if not idempotent:
        why = "It was not retried: the tool" if transient else "The tool"
        return (
            f"Tool {name!r} failed: {error}. {why} is not idempotent, and the call may have taken "
            "effect before it failed; check before calling it again."
        )
    if transient:
        return f"Tool {name!r} failed after {attempts} attempt(s): {error}"
    return f"Tool {name!r} failed: {error}"


class ToolExecutor:
    """Runs the tool calls of a run's responses, one batch at a time.

    Args:
        settings: The run's settings (tools, retries, parallelism).
        run: The run context; its registry records every call.
        emit: Sends a registry event to the ``on_tool`` hook.
        effects: Where each call runs (:meth:`~harness.core.effects.Effects.tool_call`) and
            the clock of the answers' timestamps.
        plugin_manager: Whose ``wrap_tool_call`` wrappers each call goes through.
        decisions: Human decisions for held-back calls, by call id (``call.decision``).
        events: Receives a :class:`~harness.run.events.ToolResult` or
            :class:`~harness.run.events.RetryPrompt` for each answer (a streamed run).
    """

    def __init__(
        self,
        settings: RunSettings,
        run: RunContext,
        emit: Callable[[ToolEvent], Awaitable[None]],
        effects: Effects | None = None,
        *,
        plugin_manager: PluginManager | None = None,
        decisions: Mapping[str, object] | None = None,
        events: EventSink | None = None,
    ) -> None:
        self.pm = plugin_manager
        self.decisions: Mapping[str, object] = decisions or {}
        self.events = events
        self.deferred_by: dict[str, str] = {}
        """The plugin that held each deferred call back, by call id."""
        self.deferred: list[ToolCallPart] = []
        """Calls of the current batch a wrapper held back (``"deferred"``), in the order they settled."""
        self.effects: Effects = effects if effects is not None else InProcessEffects()
        self.settings = settings
        self.run = run
        self.emit = emit
        self.results: dict[str, Part] = {}
        """Finished results of the current batch, by call id (kept on abort)."""
        self.budget_exceeded: tuple[str, int, str] | None = None
        """``(tool, budget, last problem)`` once a tool used up its retry budget."""
        self.threads = CallThreads(settings.tool_threads)
        """The run's sync-tool threads by call id, in the agent's pool."""
        self._retries: dict[str, int] = {}
        self._held: list[ToolEvent] | None = None

    async def run_batch(self, calls: Sequence[ToolCallPart]) -> CanonicalMessage:
        """Run ``calls`` (bounded concurrency) and return the request holding their results.

        Raises:
            BaseException: The first fatal error of the batch (in call order), after every
                call finished; cancellation cancels the calls still running.
        """
        self.results = {}
        self.deferred = []
        self.threads.forget()
        state = self.run.run
        registry = state.tool_registry
        events = [registry.register(call) for call in calls]
        state.batch_counter += 1
        for event in events:
            await self.emit(event)
        semaphore = asyncio.Semaphore(self.settings.max_parallel_tools)
        fatal: list[tuple[int, BaseException]] = []

        async def one(index: int, call: ToolCallPart) -> None:
            try:
                async with semaphore:
                    await self._execute(call)
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # fatal: stops the run after the batch
                fatal.append((index, exc))

        if len(calls) == 1:
            await one(0, calls[0])
        else:
            tasks = [asyncio.create_task(one(i, c)) for i, c in enumerate(calls)]
            try:
                await asyncio.gather(*tasks)
            except BaseException:
                for task in tasks:
                    task.cancel()
                await asyncio.wait(tasks)
                raise
        if fatal:
            fatal.sort(key=lambda item: item[0])
            raise fatal[0][1]
        return CanonicalMessage.request(*(self.results[call.tool_call_id] for call in calls))

    # ---------------------------------------------------------------- one call

    def _retry_part(self, call: ToolCallPart, message: str, *, hint: bool = True) -> RetryPromptPart:
        content = f"{message}\n\n{_FIX}" if hint and not message.endswith(_FIX) else message
        return RetryPromptPart(
            content, tool_name=call.tool_name, tool_call_id=call.tool_call_id, timestamp=self.effects.now()
        )

    async def _finish(self, call: ToolCallPart, part: Part, event: ToolEvent) -> None:
        self.results[call.tool_call_id] = part
        event = ToolEvent(event.kind, event.record, part)  # the event carries its answer
        if self._held is not None:  # recovering: the run sends the events once it saved
            self._held.append(event)
        else:
            await self.emit(event)
        if self.events is not None and event.kind != "deferred":
            if isinstance(part, RetryPromptPart):
                self.events(RetryPrompt(part))
            elif isinstance(part, ToolReturnPart):
                self.events(ToolResult(part))

    async def _retry_prompt(
        self, call: ToolCallPart, tool: Tool | None, message: str, *, hint: bool = True
    ) -> None:
        self._note_retry(call, tool, message)
        registry = self.run.run.tool_registry
        await self._finish(
            call, self._retry_part(call, message, hint=hint), registry.fail(call.tool_call_id, message)
        )

    def _note_retry(self, call: ToolCallPart, tool: Tool | None, message: str) -> None:
        name = call.tool_name
        count = self._retries.get(name, 0) + 1
        self._retries[name] = count
        budget = tool.retry_budget if tool is not None and tool.retry_budget is not None else None
        if budget is None:
            budget = self.settings.tool_retry_budget
        if count > budget and self.budget_exceeded is None:
            self.budget_exceeded = (name, budget, message)

    def _arguments(self, raw: Any, tool: Tool, name: str) -> dict[str, Any] | str:
        """The validated arguments, or the problem to send back as a retry prompt."""
        try:
            if isinstance(raw, str):
                raw = json.loads(raw) if raw.strip() else {}
            elif raw is None:
                raw = {}
            return tool.validate(raw)
        except (json.JSONDecodeError, MessageError) as exc:
            return f"The arguments of {name!r} are not valid JSON: {exc}"
        except ToolArgumentsError as exc:
            return str(exc)

    async def _execute(self, call: ToolCallPart) -> None:
        registry = self.run.run.tool_registry
        await self.emit(registry.start(call.tool_call_id))
        tool = self.settings.tools.get(call.tool_name)
        # One context per call: the wrappers and the tool see the same object.
        ctx = self.run.for_tool(call.tool_call_id, call.tool_name, self._retries.get(call.tool_name, 0))
        if self.pm is None or not self.pm.has_middleware("wrap_tool_call"):
            outcome = await self._call(call, tool, call.args, ctx)
        else:
            request = ToolCall(
                args=_parsed_args(call.args),
                part=call,
                tool=tool,
                decision=self.decisions.get(call.tool_call_id),
            )

            async def innermost(wrapped: ToolCall) -> ToolOutcome:
                return await self._call(call, tool, wrapped.args, ctx)

            outcome = await self.pm.wrap_tool_call(ctx, request, innermost)
            if outcome.kind == "deferred":
                self.deferred_by[call.tool_call_id] = str(request.notes.get(DEFERRED_BY, ""))
        await self._settle(call, tool, outcome)

    async def _call(
        self, call: ToolCallPart, tool: Tool | None, raw_args: Any, ctx: RunContext
    ) -> ToolOutcome:
        """Validate the arguments and run the tool through the effects: the innermost call."""
        if tool is None:
            available = ", ".join(sorted(self.settings.tools)) or "none"
            return ToolOutcome(
                "retry", error=f"Unknown tool name: {call.tool_name!r}. Available tools: {available}."
            )
        arguments = self._arguments(raw_args, tool, call.tool_name)
        if isinstance(arguments, str):
            return ToolOutcome("retry", error=arguments)
        registry = self.run.run.tool_registry
        noted = 0  # attempts made in this process (an engine may run them elsewhere)

        async def attempt() -> Any:
            nonlocal noted
            noted += 1
            registry.note_attempt(call.tool_call_id)
            return tool_content(
                await tool.call(arguments, ctx, run_sync=self.threads.runner(call.tool_call_id))
            )

        unit = ToolCallUnit(
            call=call,
            arguments=arguments,
            idempotent=tool.idempotent,
            max_attempts=max(1, self.settings.tool_max_retries) if tool.idempotent else 1,
            base_delay=self.settings.tool_retry_base_delay,
            attempt=attempt,
            is_transient=tool.is_transient,
            session_id=self.run.session.session_id,
            revision=self.run.session.revision if self.run.session.store is not None else None,
        )
        try:
            outcome = await self.effects.tool_call(unit)
        except NON_RETRYABLE as exc:
            try:
                await self._fatal(call, exc)
            except Exception as failure:  # the ledger or an on_tool observer: noted, never masking ``exc``
                what = f"the result of tool call {call.tool_call_id!r}"
                if isinstance(failure, CapabilityError):
                    exc.add_note(
                        f"harness: the on_tool hook failed on {what} while the run was stopping: {failure}"
                    )
                else:
                    exc.add_note(
                        f"harness: recording {what} in the session's tool-effect ledger failed while the run "
                        f"was stopping: {type(failure).__name__}: {failure}"
                    )
            raise
        for _ in range(outcome.attempts - noted):  # attempts the effects made out of process
            registry.note_attempt(call.tool_call_id)
        return outcome

    async def _settle(self, call: ToolCallPart, tool: Tool | None, outcome: ToolOutcome) -> None:
        """Turn a call's outcome into its answer and its registry event."""
        registry = self.run.run.tool_registry
        if _log.isEnabledFor(logging.DEBUG):
            _log.debug(
                "tool call %s %s: %s after %d attempt(s)%s",
                call.tool_call_id,
                call.tool_name,
                outcome.kind,
                outcome.attempts,
                f" ({outcome.error})" if outcome.error else "",
            )
        if call.tool_call_id in self.results:  # answered already (a wrapper swallowed an abort)
            return
        if outcome.kind == "deferred":
            reason = outcome.error or "awaiting approval"
            part = with_harness_mark(
                ToolReturnPart(
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    content=AWAITING_APPROVAL_CONTENT,
                    timestamp=self.effects.now(),
                ),
                awaiting_approval=True,
                reason=reason,
                deferred_by=self.deferred_by.get(call.tool_call_id) or None,
            )
            self.deferred.append(call)
            await self._finish(call, part, registry.defer(call.tool_call_id, reason))
            return
        if outcome.kind == "retry":
            await self._retry_prompt(call, tool, outcome.error or "", hint=outcome.hint)
            return
        if outcome.kind == "returned":
            self._retries[call.tool_name] = 0
            part = ToolReturnPart(
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                content=outcome.content,
                timestamp=self.effects.now(),
            )
            await self._finish(call, part, registry.complete(call.tool_call_id, _short(outcome.content)))
            return
        if outcome.kind == "unknown":
            part = with_harness_mark(
                ToolReturnPart(
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    content=OUTCOME_UNKNOWN_CONTENT,
                    timestamp=self.effects.now(),
                ),
                outcome_unknown=True,
            )
            error = outcome.error or "the worker stopped while the call ran; its outcome is unknown"
            await self._finish(call, part, registry.fail(call.tool_call_id, error))
            return
        error = outcome.error or "the tool failed"
        content = _failure_content(
            call.tool_name,
            error,
            outcome.attempts,
            transient=outcome.transient,
            idempotent=tool.idempotent if tool is not None else True,
        )
        part = with_harness_mark(
            ToolReturnPart(
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                content=content,
                timestamp=self.effects.now(),
            ),
            tool_error=True,
        )
        await self._finish(call, part, registry.fail(call.tool_call_id, error))

    async def settle_unfinished(self, reason: str, timeout: float) -> list[ToolEvent]:
        """Answer every call still pending or running, as it happened; return the events to send.

        Waits up to ``timeout`` seconds for sync calls still running (queued ones are
        cancelled: they never run). Each answer goes to :attr:`results`; the events (each
        carrying its answer) are returned unsent, for the run to send once it saved.

        * never began (no attempt, or a queued thread cancelled): an "aborted" return,
          ``cancelled``;
        * its thread finished meanwhile: its result (or failure) as usual;
        * otherwise (a thread still running, an async tool cancelled part way, an attempt
          that failed before): it may or may not have taken effect, so an "outcome
          unknown" return, ``cancelled`` with the answer marked ``outcome_unknown`` (the
          ledger says ``unknown``).
        """
        registry = self.run.run.tool_registry
        records = registry.unfinished()
        if not records:
            return []
        began = [r.tool_call_id for r in records if r.attempts > 0]
        states = await self.threads.settle(began, timeout)
        held: list[ToolEvent] = []
        self._held = held
        try:
            for record in records:
                await self._settle_stopped(record, states.get(record.tool_call_id, "none"), reason)
        finally:
            self._held = None
        return held

    async def _settle_stopped(self, record: ToolCallRecord, state: ThreadState, reason: str) -> None:
        registry = self.run.run.tool_registry
        call_id, name, attempts, now = (
            record.tool_call_id,
            record.tool_name,
            record.attempts,
            self.effects.now(),
        )
        future = self.threads.outcome(call_id)
        call = ToolCallPart(tool_name=name, args=None, tool_call_id=call_id)
        if attempts == 0 or (attempts == 1 and state == "never_ran"):
            part = with_harness_mark(
                ToolReturnPart(
                    tool_call_id=call_id, tool_name=name, content=ABORTED_TOOL_CONTENT, timestamp=now
                ),
                aborted=True,
            )
            await self._finish(call, part, registry.cancel(call_id, reason))
            return
        if state == "finished" and future is not None:
            error = future.exception()
            if error is None and not inspect.isawaitable(future.result()):
                content = tool_content(future.result())
                outcome = ToolOutcome("returned", content=content, attempts=attempts)
            elif isinstance(error, ToolRetry):
                outcome = ToolOutcome("retry", error=error.message, hint=error.hint, attempts=attempts)
            elif error is not None and not isinstance(error, NON_RETRYABLE):
                tool = self.settings.tools.get(name)
                transient = tool.is_transient(error) if tool is not None else False
                outcome = ToolOutcome("failed", error=f"{type(error).__name__}: {error}", transient=transient)
            else:
                outcome = None
            if outcome is not None:
                await self._settle(call, self.settings.tools.get(name), outcome)
                return
        part = with_harness_mark(
            ToolReturnPart(
                tool_call_id=call_id, tool_name=name, content=INTERRUPTED_UNKNOWN_CONTENT, timestamp=now
            ),
            outcome_unknown=True,
        )
        why = f"{reason} while the tool was running; its outcome is unknown"
        await self._finish(call, part, registry.cancel(call_id, why))

    async def _fatal(self, call: ToolCallPart, exc: BaseException) -> None:
        """Record the result of a call that stops the run (abort, or a harness error)."""
        if isinstance(exc, asyncio.CancelledError):
            return
        registry = self.run.run.tool_registry
        if isinstance(exc, UserAbort | KeyboardInterrupt):
            reason = f"{ABORTED_TOOL_CONTENT}: {exc}" if str(exc) else ABORTED_TOOL_CONTENT
            part = with_harness_mark(
                ToolReturnPart(
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    content=reason,
                    timestamp=self.effects.now(),
                ),
                aborted=True,
            )
            await self._finish(call, part, registry.cancel(call.tool_call_id, reason))
            return
        error = f"{type(exc).__name__}: {exc}"
        part = with_harness_mark(
            ToolReturnPart(
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                content=f"Tool failed: {error}",
                timestamp=self.effects.now(),
            ),
            tool_error=True,
        )
        await self._finish(call, part, registry.fail(call.tool_call_id, error))
