"""The request orchestrator: one ``Agent.run``, step by step, following the contract.

Sequence (the contract's "Request Loop Contract"):

1. **Context + id**: ``request_id = str(uuid4())[:8]``, stored on ``session.runtime``.
2. **Runtime reset**: iteration counters, batch counter, tool registry and the empty
   response counter are reset; ``original_query`` is set only when not already set.
3. **History preparation**: ``prune_old_tool_outputs``, ``run_cleanup_loop``, the new
   user request merged into a trailing request (merged, never dropped), and
   ``sanitize_for_resume``. The prepared history *is* the session history.
4. **Iterative loop**: before every model request ``before_model_request`` runs on the
   history (edits persist; request-scoped parts are sent once, never stored); the
   system prompt and dynamic instructions are built fresh and sent in front of the
   first request, never stored. Each response is processed (usage, thoughts, empty
   detection, fallback tool calls, tool dispatch) and every node goes to ``after_node``.
   A response without tool calls ends the run.
5. **Finalize**: the authoritative history stays on the session, usage is added to the
   session total, the token count is refreshed after every mutation, and the session is
   saved when it has a path.
6. **Abort / timeout / failure**: every completed tool result is kept; calls still
   pending or running get a synthetic ``"Tool execution aborted"`` return and are
   cancelled in the registry; on abort and timeout an ``[INTERRUPTED]`` response is
   appended (merged into a trailing response, never two in a row); the history is
   checked with ``check_invariants``, saved, and the error re-raised.
"""

from __future__ import annotations

__all__ = [
    "ABORTED_TOOL_CONTENT",
    "EMPTY_RESPONSE_NUDGE",
    "INTERRUPTED_MARKER",
    "NON_RETRYABLE",
    "EmptyResponseError",
    "MaxIterationsExceeded",
    "RequestOrchestrator",
    "RequestTimeout",
    "RunError",
    "RunOutcome",
    "ToolRetryBudgetExceeded",
    "UserAbort",
    "build_outgoing",
    "is_blank_response",
    "tool_content",
]

import asyncio
import dataclasses
import inspect
import json
import random
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

import attrs

from harness import history as hist
from harness.errors import HarnessError, MessageError
from harness.fallback import with_fallback_tool_calls
from harness.messages import (
    CanonicalMessage,
    Part,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    Usage,
    UserPromptPart,
    with_harness_mark,
)
from harness.models.function import ModelResponseError
from harness.nodes import CallToolsNode, EndNode, ModelRequestNode, Node
from harness.registry import ToolEvent
from harness.run_context import RunContext
from harness.tools import Tool, ToolArgumentsError, ToolRetry

if TYPE_CHECKING:
    from harness.agent import Agent
    from harness.plugins import PluginManager
    from harness.session import Session
    from harness.tokens import TokenCounter

ABORTED_TOOL_CONTENT = "Tool execution aborted"
"""Content of the synthetic return given to calls still pending or running on abort."""

INTERRUPTED_MARKER = "[INTERRUPTED]"
"""Text of the response appended when a run is aborted or times out."""

EMPTY_RESPONSE_NUDGE = (
    "Your previous response was empty: it had no text and no tool call. "
    "Answer the request, or call one of the available tools."
)
"""Retry prompt sent after an empty response."""

_FIX = "Fix the errors and try again."
_BACKOFF_CAP = 5.0


# ------------------------------------------------------------------------------ errors


class RunError(HarnessError):
    """A run stopped with an error after saving its history.

    Attributes:
        session: The session holding the saved history (also for runs started without
            one), set by the loop before raising.
    """

    session: Session | None = None


class MaxIterationsExceeded(RunError):  # noqa: N818 - name fixed by the API
    """The run needed more model requests than ``max_iterations`` allows."""

    def __init__(self, max_iterations: int) -> None:
        self.max_iterations = max_iterations
        super().__init__(
            f"the run reached max_iterations={max_iterations} model requests without a final answer "
            "(the model kept calling tools); the history was saved, raise max_iterations or continue "
            "the run with another prompt"
        )


class EmptyResponseError(RunError):
    """The model kept answering with empty responses after being nudged."""

    def __init__(self, count: int, max_empty_responses: int) -> None:
        self.count = count
        self.max_empty_responses = max_empty_responses
        super().__init__(
            f"the model returned {count} empty responses in a row (no text, no tool call); "
            f"max_empty_responses={max_empty_responses} nudges did not help"
        )


class ToolRetryBudgetExceeded(RunError):  # noqa: N818 - name fixed by the API
    """A tool used up its retry budget (consecutive retry prompts)."""

    def __init__(self, tool_name: str, budget: int, last_error: str) -> None:
        self.tool_name = tool_name
        self.budget = budget
        self.last_error = last_error
        super().__init__(
            f"tool {tool_name!r} exceeded its retry budget of {budget} consecutive retries; "
            f"last problem: {last_error}"
        )


class RequestTimeout(RunError, TimeoutError):  # noqa: N818 - name fixed by the API
    """The run exceeded the agent's ``request_timeout``."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        super().__init__(f"the run exceeded request_timeout={timeout}s; completed work was saved")


class UserAbort(RunError):  # noqa: N818 - name fixed by the API
    """The user aborted the run (``Agent.abort()``, or raised by a tool)."""


NON_RETRYABLE: tuple[type[BaseException], ...] = (
    ToolRetry,
    ToolArgumentsError,
    UserAbort,
    asyncio.CancelledError,
    KeyboardInterrupt,
    SystemExit,
    HarnessError,
)
"""Exceptions a tool raises that are never retried as transient failures.

``ToolRetry`` and argument errors become retry prompts; the others (user abort,
cancellation, configuration errors, which are all ``HarnessError``) stop the run.
"""


# ------------------------------------------------------------------------------ helpers


def build_outgoing(
    history: Sequence[CanonicalMessage],
    system_parts: Sequence[SystemPromptPart],
    request_scoped: Sequence[Part],
) -> list[CanonicalMessage]:
    """Return the message list to send: system parts up front, request-scoped parts last.

    Only the first and the last message are rebuilt; every other message is the same
    object as in ``history`` (one O(n) list copy of references).
    """
    out = list(history)
    if system_parts:
        if out and out[0].kind == "request":
            out[0] = out[0].replace(parts=(*system_parts, *out[0].parts))
        else:
            out.insert(0, CanonicalMessage.request(*system_parts))
    if request_scoped and out:
        last = out[-1]
        out[-1] = last.replace(parts=(*last.parts, *request_scoped))
    return out


def is_blank_response(response: CanonicalMessage) -> bool:
    """True when a response has no non-blank text and no tool call (thinking alone is empty)."""
    for part in response.parts:
        if isinstance(part, ToolCallPart):
            return False
        if isinstance(part, TextPart) and part.content.strip():
            return False
    return True


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


def _now() -> datetime:
    return datetime.now(UTC)


@attrs.frozen
class RunOutcome:
    """What the orchestrator hands back to :class:`~harness.agent.Agent`."""

    output: str | None
    new_messages: list[CanonicalMessage]
    all_messages: list[CanonicalMessage]
    usage: Usage
    request_id: str
    iterations: int


_Kind = Literal["abort", "timeout", "error"]


# ------------------------------------------------------------------------------ orchestrator


class RequestOrchestrator:
    """Runs one prompt against a session; create one per run (see :meth:`Agent.run`)."""

    def __init__(
        self,
        agent: Agent,
        session: Session,
        prompt: str | None,
        *,
        plugin_manager: PluginManager,
    ) -> None:
        self.agent = agent
        self.session = session
        self.prompt = prompt
        self.pm = plugin_manager
        self.model = agent.model
        self.counter: TokenCounter = plugin_manager.token_counter(agent.model.model_name)
        self.request_id = str(uuid.uuid4())[:8]
        self.history: list[CanonicalMessage] = session.messages
        self.usage = Usage()
        self.iteration = 0
        self.added = 0
        self.run_ctx = RunContext(agent=agent, model=agent.model, session=session, prompt=prompt)
        self._retries: dict[str, int] = {}
        self._budget_exceeded: tuple[str, int, str] | None = None
        self._batch: tuple[ToolCallPart, ...] | None = None
        self._results: dict[str, Part] = {}
        self._task: asyncio.Task[Any] | None = None
        self._aborted = False
        self._events: list[ToolEvent] = []
        self._known_ids: set[str] = set()

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
        if self.session.runtime.active:
            raise HarnessError(
                f"session {self.session.session_id} is already used by a run in progress; "
                "runs on one session must not overlap"
            )
        self.session.runtime.active = True
        self._task = asyncio.current_task()
        timeout = self.agent.request_timeout
        scope: asyncio.Timeout | None = None
        try:
            self._start()
            async with asyncio.timeout(timeout) as scope:
                output = await self._loop()
        except BaseException as exc:
            kind: _Kind = "error"
            if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | UserAbort):
                kind = "abort"
            if isinstance(exc, TimeoutError) and scope is not None and scope.expired():
                kind = "timeout"
            if self._aborted and isinstance(exc, asyncio.CancelledError):
                kind = "abort"
            self._recover(kind, exc)
            await self._flush_events()
            if kind == "timeout" and timeout is not None:
                error = RequestTimeout(timeout)
                error.session = self.session
                raise error from exc
            if self._aborted and isinstance(exc, asyncio.CancelledError):
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()
                error = UserAbort("the run was aborted by the user; completed work was saved")
                error.session = self.session
                raise error from exc
            if isinstance(exc, RunError):
                exc.session = self.session
            raise
        finally:
            self._task = None
            self.session.runtime.active = False
        self._finish()
        return RunOutcome(
            output=output,
            new_messages=self.new_messages(),
            all_messages=list(self.history),
            usage=self.usage,
            request_id=self.request_id,
            iterations=self.iteration,
        )

    def new_messages(self) -> list[CanonicalMessage]:
        """The messages this run added (the tail of the history)."""
        count = min(self.added, len(self.history))
        return self.history[len(self.history) - count :] if count else []

    # ---------------------------------------------------------------- setup

    def _start(self) -> None:
        session = self.session
        runtime = session.runtime
        runtime.request_id = self.request_id
        runtime.reset()
        if not runtime.original_query and self.prompt is not None:
            runtime.original_query = self.prompt
        session.current_model = self.model.model_name
        self.run_ctx.request_id = self.request_id
        self._prepare_history()

    def _prepare_history(self) -> None:
        messages: list[CanonicalMessage] = list(self.session.messages)
        messages = hist.prune_old_tool_outputs(messages, counter=self.counter).messages
        messages = hist.run_cleanup_loop(messages).messages
        if self.prompt is not None:
            request = CanonicalMessage.request(UserPromptPart(self.prompt, timestamp=_now()))
            messages = hist.merge_trailing_request(messages, request).messages
            self.added = 1
        elif not messages or messages[-1].kind != "request":
            raise HarnessError(
                "Agent.run(prompt=None) continues a pending request, but the history does not end with one"
            )
        else:
            self.added = 1
        messages = hist.sanitize_for_resume(messages).messages
        self._known_ids = {
            part.tool_call_id for m in messages for part in m.parts if isinstance(part, ToolCallPart)
        }
        self.history = messages
        self.session.messages = messages
        self.run_ctx.messages = messages
        self._touch()

    def _touch(self) -> None:
        """Refresh the session's token count after a history mutation (cached, incremental)."""
        self.session.total_tokens = self.counter.count_messages(self.history)

    def _append(self, message: CanonicalMessage) -> None:
        self.history.append(message)
        self.added += 1
        self._touch()

    # ---------------------------------------------------------------- the loop

    async def _system_parts(self) -> list[SystemPromptPart]:
        parts: list[SystemPromptPart] = []
        agent = self.agent
        if agent.system_prompt:
            parts.append(SystemPromptPart(agent.system_prompt))
        if agent.instructions is not None:
            text = agent.instructions(self.run_ctx)
            if inspect.isawaitable(text):
                text = await text
            if text:
                parts.append(SystemPromptPart(str(text), dynamic_ref="instructions"))
        return parts

    async def _loop(self) -> str | None:
        from harness.context import RequestContext

        agent = self.agent
        runtime = self.session.runtime
        while True:
            if self.iteration >= agent.max_iterations:
                raise MaxIterationsExceeded(agent.max_iterations)
            self.iteration += 1
            runtime.current_iteration = runtime.iteration_count = self.iteration
            self.run_ctx.iteration = self.iteration

            ctx = RequestContext(
                messages=self.history,
                token_counter=self.counter,
                model=self.model,
                model_name=self.model.model_name,
                context_window=self.model.context_window,
                usage=self.usage,
                requests=self.iteration - 1,
                max_iterations=agent.max_iterations,
                request_id=self.request_id,
                state=self.run_ctx.state,  # per-run storage, shared by every request of the run
            )
            before = len(self.history)
            try:
                await self.pm.run_before_model_request(ctx)
            finally:
                self._adopt(ctx, before)
            if not self.history or self.history[-1].kind != "request":
                raise HarnessError("before_model_request left a history that does not end with the request")

            system_parts = await self._system_parts()
            outgoing = build_outgoing(self.history, system_parts, ctx.request_scoped)
            response = await self.model.request(outgoing, agent.tool_definitions, agent.settings)
            response = self._normalise(response)
            self.usage = self.usage + (response.usage or Usage())
            self.run_ctx.usage = self.usage
            request_node = ModelRequestNode(self.history[-1], self.iteration, tuple(outgoing))
            thought = "\n".join(p.content for p in response.parts if isinstance(p, ThoughtPart)) or None
            if thought:
                self.session.thoughts.append(thought)

            if is_blank_response(response):
                await self._handle_empty(response, request_node, thought)
                continue
            runtime.consecutive_empty_responses = 0

            used_fallback = False
            if not response.tool_calls and agent.tools and agent.fallback_tool_calls:
                with_calls = with_fallback_tool_calls(response, agent.tools.keys())
                if with_calls is not None:
                    response = with_calls
                    used_fallback = True
            response = self._unique_ids(response)
            calls = response.tool_calls
            self._batch = calls or None
            self._results = {}
            self._append(response)
            await self.pm.notify_after_node(self.run_ctx, request_node)

            if not calls:
                self._batch = None
                output = "".join(p.content for p in response.parts if isinstance(p, TextPart)) or None
                await self.pm.notify_after_node(
                    self.run_ctx,
                    CallToolsNode(response, self.iteration, thought, response.usage or Usage()),
                )
                await self.pm.notify_after_node(self.run_ctx, EndNode(output, response, self.iteration))
                return output

            results = await self._run_tools(calls)
            self._append(results)
            self._batch = None
            node: Node = CallToolsNode(
                response,
                self.iteration,
                thought,
                response.usage or Usage(),
                calls,
                results,
                used_fallback=used_fallback,
            )
            await self.pm.notify_after_node(self.run_ctx, node)
            if self._budget_exceeded is not None:
                name, budget, last = self._budget_exceeded
                raise ToolRetryBudgetExceeded(name, budget, last)

    def _adopt(self, ctx: Any, before: int) -> None:
        """Make the capabilities' edits the session history and charge their usage."""
        if ctx.messages is not self.history:
            self.history[:] = ctx.messages
        after = len(self.history)
        if after < before:
            # Compaction removed messages; this run's messages are still the tail.
            self.added = min(self.added, after)
        self.usage = ctx.usage
        self.run_ctx.usage = self.usage
        self._touch()

    def _normalise(self, response: object) -> CanonicalMessage:
        if not isinstance(response, CanonicalMessage) or response.kind != "response":
            raise ModelResponseError(
                f"model {self.model.model_name!r} returned {type(response).__name__}"
                + (" (a request)" if isinstance(response, CanonicalMessage) else "")
                + "; Model.request must return a response CanonicalMessage"
            )
        changes: dict[str, Any] = {}
        usage: object = response.usage
        if usage is not None and not isinstance(usage, Usage):  # pyright: ignore[reportUnnecessaryIsInstance]
            changes["usage"] = Usage.from_any(usage) if isinstance(usage, Mapping) else Usage()  # pyright: ignore[reportUnknownArgumentType]
        if response.model_name is None:
            changes["model_name"] = self.model.model_name
        if response.timestamp is None:
            changes["timestamp"] = _now()
        return response.replace(**changes) if changes else response

    def _unique_ids(self, response: CanonicalMessage) -> CanonicalMessage:
        """Give duplicate tool call ids (within the run or the history) a fresh suffix."""
        calls = response.tool_calls
        if not calls:
            return response
        registry = self.session.runtime.tool_registry
        seen: set[str] = set()
        clash = False
        for call in calls:
            if call.tool_call_id in registry or call.tool_call_id in seen:
                clash = True
            seen.add(call.tool_call_id)
        if not clash and self._known_ids.isdisjoint(seen):
            self._known_ids.update(seen)
            return response
        taken = self._known_ids | {r.tool_call_id for r in registry}
        parts: list[Part] = []
        for part in response.parts:
            if isinstance(part, ToolCallPart):
                if part.tool_call_id in taken:
                    new_id = f"{part.tool_call_id}_{uuid.uuid4().hex[:8]}"
                    part = with_harness_mark(
                        attrs.evolve(part, tool_call_id=new_id), original_id=part.tool_call_id
                    )
                taken.add(part.tool_call_id)
            parts.append(part)
        self._known_ids.update(taken)
        return response.replace(parts=tuple(parts))

    async def _handle_empty(
        self, response: CanonicalMessage, request_node: ModelRequestNode, thought: str | None
    ) -> None:
        runtime = self.session.runtime
        runtime.consecutive_empty_responses += 1
        count = runtime.consecutive_empty_responses
        await self.pm.notify_after_node(self.run_ctx, request_node)
        await self.pm.notify_after_node(
            self.run_ctx,
            CallToolsNode(response, self.iteration, thought, response.usage or Usage(), is_empty=True),
        )
        if count > self.agent.max_empty_responses:
            raise EmptyResponseError(count, self.agent.max_empty_responses)
        # The empty response is not stored (it would be an empty message); its thinking
        # went to session.thoughts. The nudge joins the request that was just sent.
        nudge = with_harness_mark(
            RetryPromptPart(EMPTY_RESPONSE_NUDGE, timestamp=_now()), empty_response=count
        )
        last = self.history[-1]
        self.history[-1] = last.replace(parts=(*last.parts, nudge))
        self._touch()

    # ---------------------------------------------------------------- tools

    async def _emit(self, event: ToolEvent) -> None:
        await self.pm.notify_tool(self.run_ctx, event)

    async def _run_tools(self, calls: Sequence[ToolCallPart]) -> CanonicalMessage:
        runtime = self.session.runtime
        registry = runtime.tool_registry
        events = [registry.register(call) for call in calls]
        runtime.batch_counter += 1
        for event in events:
            await self._emit(event)
        semaphore = asyncio.Semaphore(self.agent.max_parallel_tools)
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
        parts = [self._results[call.tool_call_id] for call in calls]
        return CanonicalMessage.request(*parts)

    def _retry_part(self, call: ToolCallPart, message: str, *, hint: bool = True) -> RetryPromptPart:
        content = f"{message}\n\n{_FIX}" if hint and not message.endswith(_FIX) else message
        return RetryPromptPart(
            content, tool_name=call.tool_name, tool_call_id=call.tool_call_id, timestamp=_now()
        )

    async def _finish_call(self, call: ToolCallPart, part: Part, event: ToolEvent) -> None:
        self._results[call.tool_call_id] = part
        await self._emit(event)

    def _note_retry(self, call: ToolCallPart, tool: Tool | None, message: str) -> None:
        name = call.tool_name
        count = self._retries.get(name, 0) + 1
        self._retries[name] = count
        budget = tool.retry_budget if tool is not None and tool.retry_budget is not None else None
        if budget is None:
            budget = self.agent.tool_retry_budget
        if count > budget and self._budget_exceeded is None:
            self._budget_exceeded = (name, budget, message)

    async def _execute(self, call: ToolCallPart) -> None:
        registry = self.session.runtime.tool_registry
        await self._emit(registry.start(call.tool_call_id))
        tool = self.agent.tools.get(call.tool_name)
        if tool is None:
            available = ", ".join(sorted(self.agent.tools)) or "none"
            message = f"Unknown tool name: {call.tool_name!r}. Available tools: {available}."
            self._note_retry(call, None, message)
            await self._finish_call(
                call, self._retry_part(call, message), registry.fail(call.tool_call_id, message)
            )
            return
        try:
            raw: Any = call.args
            if isinstance(raw, str):
                raw = json.loads(raw) if raw.strip() else {}
            elif raw is None:
                raw = {}
            arguments = tool.validate(raw)
        except (json.JSONDecodeError, MessageError) as exc:
            message = f"The arguments of {call.tool_name!r} are not valid JSON: {exc}"
            self._note_retry(call, tool, message)
            await self._finish_call(
                call, self._retry_part(call, message), registry.fail(call.tool_call_id, message)
            )
            return
        except ToolArgumentsError as exc:
            message = str(exc)
            self._note_retry(call, tool, message)
            await self._finish_call(
                call, self._retry_part(call, message), registry.fail(call.tool_call_id, message)
            )
            return

        ctx = self.run_ctx.for_tool(call.tool_call_id, call.tool_name, self._retries.get(call.tool_name, 0))
        attempts = max(1, self.agent.tool_max_retries)
        for attempt in range(1, attempts + 1):
            registry.note_attempt(call.tool_call_id)
            try:
                result = await tool.call(arguments, ctx)
            except ToolRetry as exc:
                self._note_retry(call, tool, exc.message)
                await self._finish_call(
                    call,
                    self._retry_part(call, exc.message, hint=exc.hint),
                    registry.fail(call.tool_call_id, exc.message),
                )
                return
            except ToolArgumentsError as exc:  # a tool validating further arguments itself
                message = str(exc)
                self._note_retry(call, tool, message)
                await self._finish_call(
                    call, self._retry_part(call, message), registry.fail(call.tool_call_id, message)
                )
                return
            except NON_RETRYABLE as exc:
                if isinstance(exc, asyncio.CancelledError):
                    raise
                if isinstance(exc, UserAbort | KeyboardInterrupt):
                    reason = f"{ABORTED_TOOL_CONTENT}: {exc}" if str(exc) else ABORTED_TOOL_CONTENT
                    part = with_harness_mark(
                        ToolReturnPart(call.tool_call_id, call.tool_name, reason, timestamp=_now()),
                        aborted=True,
                    )
                    await self._finish_call(call, part, registry.cancel(call.tool_call_id, reason))
                    raise
                error = f"{type(exc).__name__}: {exc}"
                part = with_harness_mark(
                    ToolReturnPart(
                        call.tool_call_id, call.tool_name, f"Tool failed: {error}", timestamp=_now()
                    ),
                    tool_error=True,
                )
                await self._finish_call(call, part, registry.fail(call.tool_call_id, error))
                raise
            except Exception as exc:
                if attempt < attempts:
                    await asyncio.sleep(self._backoff(attempt))
                    continue
                error = f"{type(exc).__name__}: {exc}"
                content = f"Tool {call.tool_name!r} failed after {attempts} attempt(s): {error}"
                part = with_harness_mark(
                    ToolReturnPart(call.tool_call_id, call.tool_name, content, timestamp=_now()),
                    tool_error=True,
                )
                await self._finish_call(call, part, registry.fail(call.tool_call_id, error))
                return
            self._retries[call.tool_name] = 0
            content = tool_content(result)
            part = ToolReturnPart(call.tool_call_id, call.tool_name, content, timestamp=_now())
            await self._finish_call(call, part, registry.complete(call.tool_call_id, _short(content)))
            return

    def _backoff(self, attempt: int) -> float:
        base = self.agent.tool_retry_base_delay
        delay = min(base * 2 ** (attempt - 1), _BACKOFF_CAP)
        return delay * (1 + random.random() * 0.1)

    # ---------------------------------------------------------------- finish / recover

    def _finish(self) -> None:
        self.session.usage = self.session.usage + self.usage
        self.session.messages = self.history
        self._touch()
        if self.session.path is not None:
            self.session.save()

    def _recover(self, kind: _Kind, exc: BaseException) -> None:
        """Repair and save the history after ``exc`` (synchronous: no await can interrupt it)."""
        registry = self.session.runtime.tool_registry
        batch = self._batch
        history = self.history
        if batch is not None and history and history[-1].kind == "response":
            last_ids = {c.tool_call_id for c in history[-1].tool_calls}
            if all(c.tool_call_id in last_ids for c in batch):
                parts: list[Part] = []
                for call in batch:
                    part = self._results.get(call.tool_call_id)
                    if part is None:
                        part = with_harness_mark(
                            ToolReturnPart(
                                call.tool_call_id, call.tool_name, ABORTED_TOOL_CONTENT, timestamp=_now()
                            ),
                            aborted=True,
                        )
                    parts.append(part)
                history.append(CanonicalMessage.request(*parts))
                self.added += 1
        self._batch = None
        reason = {"abort": "aborted", "timeout": "timed out", "error": f"run failed: {type(exc).__name__}"}[
            kind
        ]
        for record in registry.unfinished():
            self._events.append(registry.cancel(record.tool_call_id, reason))
        if kind != "error":
            self._append_interrupted()
        if hist.check_invariants(history):
            repaired = hist.run_cleanup_loop(history, dangling="answer").messages
            history[:] = repaired
        self.session.messages = history
        self.session.usage = self.session.usage + self.usage
        try:
            self._touch()
            if self.session.path is not None:
                self.session.save()
        except Exception as save_error:  # never mask the original error
            exc.add_note(f"harness: saving the session after the failure also failed: {save_error}")

    def _append_interrupted(self) -> None:
        history = self.history
        marker = with_harness_mark(TextPart(INTERRUPTED_MARKER), interrupted=True)
        if history and history[-1].kind == "response":
            last = history[-1]
            history[-1] = last.replace(parts=(*last.parts, marker))
        else:
            history.append(
                with_harness_mark(
                    CanonicalMessage.response(marker, model_name=self.model.model_name, timestamp=_now()),
                    interrupted=True,
                )
            )
            self.added += 1

    async def _flush_events(self) -> None:
        events, self._events = self._events, []
        for event in events:
            try:
                await self._emit(event)
            except Exception:  # observers must not mask the run's error
                continue
