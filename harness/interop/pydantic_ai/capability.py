"""A pydantic-ai capability running a harness capability stack before each request."""

from __future__ import annotations

__all__ = ["HarnessCapabilities"]

import copy
import dataclasses
from collections.abc import Sequence
from typing import Any

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.tools import RunContext

from harness.interop.pydantic_ai.processor import HarnessHistoryProcessor, OnEvent, as_history_processor
from harness.tokens import TokenCounter


@dataclasses.dataclass
class HarnessCapabilities(AbstractCapability[Any]):
    """A pydantic-ai capability that runs a harness capability stack before each request.

    ::

        agent = Agent(model, capabilities=[HarnessCapabilities([ClearToolResults(max_messages=40)])])

    Its ``before_model_request`` converts the history, runs the stack, writes the edited
    history back to the run's stored history (``RunContext.messages``) and sends it, with
    the stack's request-scoped parts (e.g. a limit warning) added to the request being
    sent only: they never reach the stored history. Each run gets its own processor
    (``for_run``), so per-run capability state starts empty; the token counters and the
    conversion cache are shared between runs.

    The stack sees the run's usage, request count and request limit
    (``RequestContext.usage``, ``requests``, ``max_iterations``; see
    :func:`~harness.interop.pydantic_ai.processor.run_limits`), and tokens it charges (a
    summarizer's) are added to the run's usage.

    Attributes:
        stack: The harness capabilities, in the user's order.
        context_window: The model's context window, for fraction-based triggers.
        model_name: Picks the tokenizer; defaults to the request's model name.
        token_counter: A token counter to use instead of the model's.
        on_compaction: Called with every compaction event (``on_event`` is pydantic-ai's
            own hook name, for stream events).
    """

    stack: Sequence[object] = ()
    context_window: int | None = None
    model_name: str | None = None
    token_counter: TokenCounter | None = None
    on_compaction: OnEvent | None = None
    processor: HarnessHistoryProcessor = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Build the processor (checks the stack's ordering)."""
        self.processor = as_history_processor(
            self.stack,
            context_window=self.context_window,
            model_name=self.model_name,
            token_counter=self.token_counter,
            on_event=self.on_compaction,
        )

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """Not constructible from an agent spec (it holds Python objects)."""
        return None

    async def for_run(self, ctx: RunContext[Any]) -> HarnessCapabilities:
        """A copy for the run with its own per-run state (counts and conversions stay warm)."""
        run = copy.copy(self)
        run.processor = self.processor.for_run()
        return run

    async def before_model_request(
        self,
        ctx: RunContext[Any],
        request_context: ModelRequestContext,
    ) -> ModelRequestContext:
        """Run the stack; persist its edits and send its request-scoped parts once."""
        messages = list(request_context.messages)
        processed = await self.processor.process(
            messages,
            model_name=getattr(request_context.model, "model_name", None),
            run_id=ctx.run_id,
            run_context=ctx,
        )
        if processed.changed:
            ctx.messages[:] = processed.persistent
        if processed.changed or processed.scoped:
            request_context.messages = list(processed.sent)
        return request_context
