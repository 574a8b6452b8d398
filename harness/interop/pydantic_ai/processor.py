"""A harness capability stack as a pydantic-ai history processor.

:func:`as_history_processor` builds a :class:`HarnessHistoryProcessor`, which runs the
stack (through :func:`harness.run.compaction.compact`, with the invariant guard) over
the converted history before every request. pydantic-ai stores a history processor's
output as the run's history, so request-scoped parts are stored too; the processor
removes the ones it added on the next request.
"""

from __future__ import annotations

__all__ = ["OnEvent", "ProcessedHistory", "HarnessHistoryProcessor", "as_history_processor"]

import dataclasses
import operator
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Final

import attrs
from pydantic_ai.tools import RunContext

from harness.capabilities.context import CompactionEvent, RequestContext
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
    ) -> ProcessedHistory:
        """Run the stack over ``messages`` (ending with the request about to be sent).

        Args:
            messages: The pydantic-ai history; never mutated.
            model_name: The model the request goes to (picks the tokenizer) when the
                processor was built without one.
            run_id: Keys the per-run capability state.

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
        context = RequestContext(
            messages=[],
            token_counter=counter,
            model_name=name,
            context_window=self.context_window,
            state=self._state(run_id),
        )
        result = await compact(canonical, None, context=context, plugin_manager=self._manager)
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
            ctx: pydantic-ai's run context (supplies the model name and the run id).
            messages: The history about to be sent.
        """
        model = getattr(ctx, "model", None)
        processed = await self.process(
            messages,
            model_name=getattr(model, "model_name", None),
            run_id=getattr(ctx, "run_id", None),
        )
        return processed.sent


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
