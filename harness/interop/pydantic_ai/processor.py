"""A harness capability stack as a pydantic-ai history processor.

:func:`as_history_processor` builds a :class:`HarnessHistoryProcessor`, which runs the
stack (through :func:`harness.run.compaction.compact`, with the invariant guard) over
the converted history before every request. pydantic-ai stores a history processor's
output as the run's history, so request-scoped parts are stored too; the processor
removes the ones it added on the next request.

The capabilities see the pydantic-ai run's usage, request count and request limit (see
:func:`run_limits`), and tokens they charge to the run (a summarizer's) are added to
pydantic-ai's usage.
"""

from __future__ import annotations

__all__ = [
    "HarnessHistoryProcessor",
    "OnEvent",
    "ProcessedHistory",
    "RunLimits",
    "as_history_processor",
    "run_limits",
]

import copy
import dataclasses
import operator
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Final

import attrs
from pydantic_ai.tools import RunContext
from pydantic_ai.usage import RequestUsage, RunUsage

from harness.capabilities.context import CompactionEvent, RequestContext
from harness.core.messages import Usage
from harness.hooks.manager import PluginManager
from harness.interop.pydantic_ai.cache import MessageConverter
from harness.interop.pydantic_ai.convert import ModelMessage
from harness.interop.pydantic_ai.stash import STASH_KEY
from harness.run.compaction import CompactionResult, compact
from harness.tokens import TokenCounter

OnEvent = Callable[[CompactionEvent], object]
"""Called with every compaction event the stack reports."""


@attrs.frozen
class ProcessedHistory:
    """What one pass of the capability stack produced.

    Attributes:
        persistent: The history to keep (the input objects wherever the stack changed
            nothing).
        sent: The history to send with this request: ``persistent`` with the
            request-scoped parts appended to its last request (``persistent`` itself when
            there are none).
        result: The stack's :class:`~harness.run.compaction.CompactionResult` (harness
            messages, events, request-scoped parts, token counts).
        changed: Whether ``persistent`` differs from the input.
        scoped: Whether ``sent`` carries request-scoped parts (differs from ``persistent``).
    """

    persistent: list[ModelMessage]
    sent: list[ModelMessage]
    result: CompactionResult
    changed: bool
    scoped: bool


@attrs.frozen
class RunLimits:
    """What a harness capability sees of a pydantic-ai run's usage and limits.

    Attributes:
        usage: The run's usage so far (``RunContext.usage``): ``input_tokens`` become
            ``request_tokens``, ``output_tokens`` ``response_tokens``,
            ``cache_read_tokens`` ``cached_tokens``, ``cache_write_tokens`` stay.
        requests: Model requests already made in the run (``RunContext.usage.requests``,
            not counting the one about to be sent).
        max_iterations: The run's ``UsageLimits.request_limit`` (pydantic-ai has no
            iteration limit of its own; it stops a run at its request limit, 50 unless the
            run was given other ``usage_limits``); ``None`` without one.
    """

    usage: Usage = attrs.field(factory=Usage)
    requests: int = 0
    max_iterations: int | None = None


def run_limits(ctx: RunContext[Any] | None) -> RunLimits:
    """Read the usage, request count and request limit of a pydantic-ai run context.

    Args:
        ctx: pydantic-ai's run context; ``None`` (or a context without usage) gives empty
            usage and no limit.
    """
    run_usage = getattr(ctx, "usage", None)
    limits = getattr(ctx, "usage_limits", None)
    max_iterations = getattr(limits, "request_limit", None)
    if not isinstance(run_usage, RunUsage):
        return RunLimits(max_iterations=max_iterations)
    usage = Usage(
        request_tokens=run_usage.input_tokens,
        response_tokens=run_usage.output_tokens,
        cached_tokens=run_usage.cache_read_tokens,
        cache_write_tokens=run_usage.cache_write_tokens,
    )
    return RunLimits(usage, run_usage.requests, max_iterations)


def _charge(ctx: RunContext[Any] | None, before: Usage, after: Usage) -> None:
    """Add to the run's usage the tokens the stack charged (``after`` minus ``before``).

    Only tokens: harness usage does not count requests, so ``usage.requests`` is unchanged.
    """
    run_usage = getattr(ctx, "usage", None)
    if not isinstance(run_usage, RunUsage) or after == before:
        return
    run_usage.incr(
        RequestUsage(
            input_tokens=max(after.request_tokens - before.request_tokens, 0),
            output_tokens=max(after.response_tokens - before.response_tokens, 0),
            cache_read_tokens=max(after.cached_tokens - before.cached_tokens, 0),
            cache_write_tokens=max(after.cache_write_tokens - before.cache_write_tokens, 0),
        )
    )


_MAX_RUN_STATES: Final = 16


class HarnessHistoryProcessor:
    """A harness capability stack as a pydantic-ai history processor.

    Use it with ``pydantic_ai.capabilities.ProcessHistory(processor)`` (pydantic-ai 2.62
    takes history processors as capabilities), or call :meth:`process` directly. Build it
    with :func:`as_history_processor`.

    Per run (keyed by pydantic-ai's ``run_id``) the capabilities share one
    ``RequestContext.state``; conversions are cached across requests.
    """

    def __init__(
        self,
        capabilities: Sequence[object],
        *,
        context_window: int | None = None,
        model_name: str | None = None,
        token_counter: TokenCounter | None = None,
        on_event: OnEvent | None = None,
    ) -> None:
        """Create the processor; see :func:`as_history_processor` for the arguments."""
        self._manager = PluginManager()
        self._manager.add_capabilities(list(capabilities))
        self.context_window = context_window
        self.model_name = model_name
        self._token_counter = token_counter
        self.on_event = on_event
        self.converter = MessageConverter()
        self._states: OrderedDict[str | None, dict[str, Any]] = OrderedDict()
        self._scoped: tuple[ModelMessage, ModelMessage, tuple[Any, ...]] | None = None
        self.last: ProcessedHistory | None = None
        """The outcome of the latest pass (``None`` before the first)."""

    @property
    def plugin_manager(self) -> PluginManager:
        """The manager running the stack (register ``on_compaction`` observers here)."""
        return self._manager

    def _state(self, run_id: str | None) -> dict[str, Any]:
        state = self._states.get(run_id)
        if state is None:
            state = {}
            self._states[run_id] = state
            while len(self._states) > _MAX_RUN_STATES:
                self._states.popitem(last=False)
        else:
            self._states.move_to_end(run_id)
        return state

    def _without_scoped(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """Undo the request-scoped parts this processor added to a request pydantic-ai stored.

        pydantic-ai may have filled in fields of the sent request (``run_id``,
        ``instructions``...) after it was sent; those are kept, the added parts and their
        stash entries are dropped.
        """
        scoped, self._scoped = self._scoped, None
        if scoped is None:
            return messages
        sent, persistent, added = scoped
        count = len(added)
        for index, message in enumerate(messages):
            if message is not sent:
                continue
            tail = message.parts[len(message.parts) - count :]
            if len(tail) == count and all(a is b for a, b in zip(tail, added, strict=True)):
                metadata = {k: v for k, v in (message.metadata or {}).items() if k != STASH_KEY}
                if persistent.metadata and STASH_KEY in persistent.metadata:
                    metadata[STASH_KEY] = persistent.metadata[STASH_KEY]
                messages = list(messages)
                messages[index] = dataclasses.replace(
                    message,
                    parts=list(message.parts[:-count]),
                    metadata=metadata or (None if persistent.metadata is None else metadata),
                )
            break
        return messages

    async def process(
        self,
        messages: Sequence[ModelMessage],
        *,
        model_name: str | None = None,
        run_id: str | None = None,
        run_context: RunContext[Any] | None = None,
    ) -> ProcessedHistory:
        """Run the stack over ``messages`` (ending with the request about to be sent).

        Args:
            messages: The pydantic-ai history; never mutated.
            model_name: The model the request goes to (picks the tokenizer) when the
                processor was built without one.
            run_id: Keys the per-run capability state (default: the run context's).
            run_context: pydantic-ai's run context: the capabilities see its usage,
                request count and request limit (:func:`run_limits`), and the tokens they
                charge (a summarizer's) are added to its usage.

        Returns:
            The history to keep, the history to send and the stack's result.

        Raises:
            CapabilityError: A capability failed or broke the history's invariants (the
                input is left as it was).
            InteropError: A message cannot be converted.
        """
        checked = list(messages)
        source = self._without_scoped(checked)
        converter = self.converter
        canonical = converter.to_canonical(source)
        name = self.model_name or model_name
        counter = self._token_counter or self._manager.token_counter(name)
        limits = run_limits(run_context)
        if run_id is None and run_context is not None:
            run_id = run_context.run_id
        context = RequestContext(
            messages=[],
            token_counter=counter,
            model_name=name,
            context_window=self.context_window,
            usage=limits.usage,
            requests=limits.requests,
            max_iterations=limits.max_iterations,
            state=self._state(run_id),
        )
        result = await compact(canonical, None, context=context, force=False, plugin_manager=self._manager)
        _charge(run_context, limits.usage, result.usage)
        edited = len(result.messages) != len(canonical) or not all(
            map(operator.is_, result.messages, canonical)
        )
        persistent = converter.to_pydantic_ai(result.messages) if edited else source
        sent = persistent
        if result.request_scoped and result.messages and result.messages[-1].kind == "request":
            last = result.messages[-1]
            with_scoped = last.replace(parts=(*last.parts, *result.request_scoped))
            sent_last = converter.to_pydantic_ai([with_scoped])[0]
            sent = [*persistent[:-1], sent_last]
            self._scoped = (sent_last, persistent[-1], tuple(sent_last.parts[len(last.parts) :]))
        if self.on_event is not None:
            for event in result.events:
                self.on_event(event)
        processed = ProcessedHistory(
            persistent=list(persistent),
            sent=list(sent),
            result=result,
            changed=edited or source is not checked,
            scoped=sent is not persistent,
        )
        self.last = processed
        return processed

    async def __call__(self, ctx: RunContext[Any], messages: list[ModelMessage]) -> list[ModelMessage]:
        """The history processor: run the stack and return the history to send.

        Args:
            ctx: pydantic-ai's run context (supplies the model name, the run id, the usage
                and the request limit).
            messages: The history about to be sent.
        """
        model = getattr(ctx, "model", None)
        processed = await self.process(
            messages,
            model_name=getattr(model, "model_name", None),
            run_id=getattr(ctx, "run_id", None),
            run_context=ctx,
        )
        return processed.sent

    def for_run(self) -> HarnessHistoryProcessor:
        """A processor for one more run, sharing the stack, the token counters and the conversions.

        Its per-run state and request-scoped bookkeeping are its own.
        :class:`HarnessCapabilities` takes one per run, so concurrent runs do not share
        request-scoped parts while each run's counts and conversions start warm (and the
        token counter remembers the instructions earlier runs were sent with).
        """
        run = copy.copy(self)
        run._states = OrderedDict()
        run._scoped = None
        run.last = None
        return run


def as_history_processor(
    capabilities: Sequence[object],
    *,
    context_window: int | None = None,
    model_name: str | None = None,
    token_counter: TokenCounter | None = None,
    on_event: OnEvent | None = None,
) -> HarnessHistoryProcessor:
    """Wrap a harness capability stack as a pydantic-ai history processor.

    ::

        from pydantic_ai import Agent
        from pydantic_ai.capabilities import ProcessHistory

        processor = as_history_processor([ClearToolResults(max_messages=40), SlidingWindow(max_messages=80)])
        agent = Agent(model, capabilities=[ProcessHistory(processor)])

    pydantic-ai stores what a history processor returns as the run's history, so the
    stack's edits persist; so do request-scoped parts, until the processor's next call
    removes them. :class:`HarnessCapabilities` keeps them out of the stored history.

    Args:
        capabilities: Harness capabilities (any pluggy plugin objects), in the user's order.
        context_window: The model's context window, for fraction-based triggers.
        model_name: Picks the tokenizer; defaults to the name of the model each request
            goes to.
        token_counter: A token counter to use instead of the model's.
        on_event: Called with every :class:`~harness.capabilities.context.CompactionEvent`.

    Raises:
        CapabilityOrderError: The capabilities' ordering cannot be satisfied.
    """
    return HarnessHistoryProcessor(
        capabilities,
        context_window=context_window,
        model_name=model_name,
        token_counter=token_counter,
        on_event=on_event,
    )
