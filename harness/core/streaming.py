"""What a model streams while it answers, and the protocol of a model that can stream.

A model that can stream implements :class:`StreamingModel`: besides ``request`` it has
``request_stream(messages, tools, settings)``, an async iterator of :data:`StreamDelta`
values that ends with exactly one :class:`ResponseDone` holding the whole response (the
same message ``request`` would have returned). The loop forwards every delta to the
consumer of :meth:`Agent.run_stream <harness.run.agent.Agent.run_stream>` as it arrives
and acts on the final message only, so a provider's streaming quirks never reach the
history.

Deltas name the part they extend by ``index`` (the part's position in the response as
the provider numbers it), so text, thinking and tool-call arguments that interleave are
told apart.
"""

from __future__ import annotations

__all__ = [
    "ResponseDone",
    "StreamDelta",
    "StreamSink",
    "StreamingModel",
    "TextDelta",
    "collect_stream",
    "ThinkingDelta",
    "ToolCallDelta",
    "supports_streaming",
]

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Protocol, TypeAlias, runtime_checkable

import attrs

from harness.core.messages import CanonicalMessage
from harness.core.model import ModelSettings, ToolDefinition
from harness.errors import ModelResponseError


@attrs.frozen
class TextDelta:
    """More text of a response's text part.

    Attributes:
        text: The new text (append it to what came before for the same ``index``).
        index: The part it extends.
    """

    text: str
    index: int = 0


@attrs.frozen
class ThinkingDelta:
    """More of a thinking (reasoning) part, or its signature.

    Attributes:
        text: The new thinking text (may be empty when only the signature arrives).
        index: The part it extends.
        signature: The provider's signature of the thinking block (Anthropic), when it arrives.
    """

    text: str
    index: int = 0
    signature: str | None = None


@attrs.frozen
class ToolCallDelta:
    """More of a tool call: its start (id and name), then fragments of its JSON arguments.

    Attributes:
        index: The part it extends.
        tool_call_id: The call's id as the provider gave it (set on the first delta of the
            call; ``None`` after, when the provider does not repeat it).
        tool_name: The tool's name (first delta of the call; ``None`` after).
        args_delta: A fragment of the arguments' JSON text (may be empty).
    """

    index: int
    tool_call_id: str | None = None
    tool_name: str | None = None
    args_delta: str = ""


@attrs.frozen
class ResponseDone:
    """The end of a stream: the whole response, as ``request`` would have returned it."""

    message: CanonicalMessage


StreamDelta: TypeAlias = TextDelta | ThinkingDelta | ToolCallDelta | ResponseDone
"""Anything :meth:`StreamingModel.request_stream` yields."""

StreamSink: TypeAlias = Callable[[TextDelta | ThinkingDelta | ToolCallDelta], None]
"""Receives each delta of a streamed request as it arrives (never the final message)."""


@runtime_checkable
class StreamingModel(Protocol):
    """A model that can stream its answer (see the module documentation)."""

    @property
    def model_name(self) -> str:
        """The model's name."""
        ...

    def request_stream(
        self,
        messages: Sequence[CanonicalMessage],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings,
    ) -> AsyncIterator[StreamDelta]:
        """Send ``messages`` and yield the answer's deltas, then one :class:`ResponseDone`."""
        ...


def supports_streaming(model: object) -> bool:
    """Whether ``model`` has a callable ``request_stream`` (a :class:`StreamingModel`)."""
    return callable(getattr(model, "request_stream", None))


async def collect_stream(
    model: StreamingModel,
    messages: Sequence[CanonicalMessage],
    tools: Sequence[ToolDefinition],
    settings: ModelSettings,
    sink: StreamSink | None,
) -> CanonicalMessage:
    """Run ``model.request_stream``, pass each delta to ``sink``, and return the final message.

    After each delta passed to ``sink`` it yields to the event loop once: the consumer sees
    the delta before the next one is made, and an abort (a cancellation) lands before the
    next one, also with a model whose stream never waits (``TestModel``, a replay).

    Raises:
        ModelResponseError: The stream ended without a :class:`ResponseDone`, or yielded
            something that is not a delta.
    """
    final: CanonicalMessage | None = None
    stream = model.request_stream(messages, tools, settings)
    try:
        async for item in stream:
            if isinstance(item, ResponseDone):
                final = item.message
                continue
            if not isinstance(item, TextDelta | ThinkingDelta | ToolCallDelta):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise ModelResponseError(
                    f"request_stream of {model.model_name!r} yielded {type(item).__name__}, "
                    "not a TextDelta, ThinkingDelta, ToolCallDelta or ResponseDone",
                    model_name=model.model_name,
                )
            if sink is not None:
                sink(item)
                await asyncio.sleep(0)  # the consumer's turn: an abort stops the stream here
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()
    if final is None:
        raise ModelResponseError(
            f"the stream of {model.model_name!r} ended without its final response (ResponseDone)",
            model_name=model.model_name,
        )
    return final
