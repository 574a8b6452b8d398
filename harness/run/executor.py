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

__all__ = ["NON_RETRYABLE", "ToolExecutor", "tool_content"]

import asyncio
import dataclasses
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs

from harness.core.effects import NON_RETRYABLE, Effects, InProcessEffects, ToolCallUnit, ToolOutcome
from harness.core.messages import (
    CanonicalMessage,
    Part,
    RetryPromptPart,
    ToolCallPart,
    ToolReturnPart,
    with_harness_mark,
)
from harness.errors import MessageError, ToolArgumentsError, UserAbort
from harness.run.recovery import ABORTED_TOOL_CONTENT
from harness.run.resume import OUTCOME_UNKNOWN_CONTENT
from harness.run.settings import RunSettings
from harness.tools.context import RunContext
from harness.tools.lifecycle import ToolEvent
from harness.tools.tool import Tool

_FIX = "Fix the errors and try again."


def tool_content(value: Any) -> Any:
    """Turn a tool's return value into JSON-ready content (``str()`` as a last resort).

    attrs classes and dataclasses become dicts, objects with ``model_dump`` (pydantic
    models) are dumped in JSON mode; anything ``json`` cannot encode becomes ``str(value)``.
    """
    if value is None or isinstance(value, str | int | float | bool):
        return value
    converted: Any = value
    kind: type[Any] = type(value)  # pyright: ignore[reportUnknownVariableType]
    if attrs.has(kind):
        converted = attrs.asdict(value)
    elif dataclasses.is_dataclass(kind):
        converted = dataclasses.asdict(value)
    else:
        dump: Any = getattr(value, "model_dump", None)
        if callable(dump):
            try:
                converted = dump(mode="json")
            except TypeError:
                converted = dump()
    try:
        json.dumps(converted)
    except (TypeError, ValueError):
        return str(value)
    return converted


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text[:500]


def _failure_content(name: str, error: str, attempts: int, *, transient: bool, tool: Tool) -> str:
    """What the model reads when a call failed: the error, and whether it was retried."""
    if not tool.idempotent:
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
    """

    def __init__(
        self,
        settings: RunSettings,
        run: RunContext,
        emit: Callable[[ToolEvent], Awaitable[None]],
        effects: Effects | None = None,
    ) -> None:
        self.effects: Effects = effects if effects is not None else InProcessEffects()
        self.settings = settings
        self.run = run
        self.emit = emit
        self.results: dict[str, Part] = {}
        """Finished results of the current batch, by call id (kept on abort)."""
        self.budget_exceeded: tuple[str, int, str] | None = None
        """``(tool, budget, last problem)`` once a tool used up its retry budget."""
        self._retries: dict[str, int] = {}

    async def run_batch(self, calls: Sequence[ToolCallPart]) -> CanonicalMessage:
        """Run ``calls`` (bounded concurrency) and return the request holding their results.

        Raises:
            BaseException: The first fatal error of the batch (in call order), after every
                call finished; cancellation cancels the calls still running.
        """
        self.results = {}
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
        await self.emit(event)

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

    def _arguments(self, call: ToolCallPart, tool: Tool) -> dict[str, Any] | str:
        """The validated arguments, or the problem to send back as a retry prompt."""
        try:
            raw: Any = call.args
            if isinstance(raw, str):
                raw = json.loads(raw) if raw.strip() else {}
            elif raw is None:
                raw = {}
            return tool.validate(raw)
        except (json.JSONDecodeError, MessageError) as exc:
            return f"The arguments of {call.tool_name!r} are not valid JSON: {exc}"
        except ToolArgumentsError as exc:
            return str(exc)

    async def _execute(self, call: ToolCallPart) -> None:
        registry = self.run.run.tool_registry
        await self.emit(registry.start(call.tool_call_id))
        tool = self.settings.tools.get(call.tool_name)
        if tool is None:
            available = ", ".join(sorted(self.settings.tools)) or "none"
            await self._retry_prompt(
                call, None, f"Unknown tool name: {call.tool_name!r}. Available tools: {available}."
            )
            return
        arguments = self._arguments(call, tool)
        if isinstance(arguments, str):
            await self._retry_prompt(call, tool, arguments)
            return

        ctx = self.run.for_tool(call.tool_call_id, call.tool_name, self._retries.get(call.tool_name, 0))

        noted = 0  # attempts made in this process (an engine may run them elsewhere)

        async def attempt() -> Any:
            nonlocal noted
            noted += 1
            registry.note_attempt(call.tool_call_id)
            return tool_content(await tool.call(arguments, ctx))

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
            except Exception as failure:  # an on_tool observer: noted, never masking ``exc``
                exc.add_note(
                    f"harness: the on_tool hook failed on the result of tool call "
                    f"{call.tool_call_id!r} while the run was stopping: {failure}"
                )
            raise
        for _ in range(outcome.attempts - noted):  # attempts the effects made out of process
            registry.note_attempt(call.tool_call_id)
        await self._settle(call, tool, outcome)

    async def _settle(self, call: ToolCallPart, tool: Tool, outcome: ToolOutcome) -> None:
        """Turn a call's outcome into its answer and its registry event."""
        registry = self.run.run.tool_registry
        if outcome.kind == "retry":
            await self._retry_prompt(call, tool, outcome.error or "", hint=outcome.hint)
            return
        if outcome.kind == "returned":
            self._retries[call.tool_name] = 0
            part = ToolReturnPart(
                call.tool_call_id, call.tool_name, outcome.content, timestamp=self.effects.now()
            )
            await self._finish(call, part, registry.complete(call.tool_call_id, _short(outcome.content)))
            return
        if outcome.kind == "unknown":
            part = with_harness_mark(
                ToolReturnPart(
                    call.tool_call_id, call.tool_name, OUTCOME_UNKNOWN_CONTENT, timestamp=self.effects.now()
                ),
                outcome_unknown=True,
            )
            error = outcome.error or "the worker stopped while the call ran; its outcome is unknown"
            await self._finish(call, part, registry.fail(call.tool_call_id, error))
            return
        error = outcome.error or "the tool failed"
        content = _failure_content(
            call.tool_name, error, outcome.attempts, transient=outcome.transient, tool=tool
        )
        part = with_harness_mark(
            ToolReturnPart(call.tool_call_id, call.tool_name, content, timestamp=self.effects.now()),
            tool_error=True,
        )
        await self._finish(call, part, registry.fail(call.tool_call_id, error))

    async def _fatal(self, call: ToolCallPart, exc: BaseException) -> None:
        """Record the result of a call that stops the run (abort, or a harness error)."""
        if isinstance(exc, asyncio.CancelledError):
            return
        registry = self.run.run.tool_registry
        if isinstance(exc, UserAbort | KeyboardInterrupt):
            reason = f"{ABORTED_TOOL_CONTENT}: {exc}" if str(exc) else ABORTED_TOOL_CONTENT
            part = with_harness_mark(
                ToolReturnPart(call.tool_call_id, call.tool_name, reason, timestamp=self.effects.now()),
                aborted=True,
            )
            await self._finish(call, part, registry.cancel(call.tool_call_id, reason))
            return
        error = f"{type(exc).__name__}: {exc}"
        part = with_harness_mark(
            ToolReturnPart(
                call.tool_call_id, call.tool_name, f"Tool failed: {error}", timestamp=self.effects.now()
            ),
            tool_error=True,
        )
        await self._finish(call, part, registry.fail(call.tool_call_id, error))
