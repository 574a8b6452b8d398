"""Each model call of a run: its unit index, the ``wrap_model_request`` chain, streaming events.

:class:`ModelCaller` sends the run's request units (and the capabilities' own calls)
through the run's effects. With ``wrap_model_request`` wrappers installed, each call goes
through them, and every call the chain makes becomes a unit of its own (a retry or a
fallback model is journaled like any request). With an event sink (a streamed run), it
reports each request's start and end and forwards the model's deltas as they arrive,
keeping the text streamed so far for an abort to save.
"""

from __future__ import annotations

__all__ = ["ModelCaller"]

from collections.abc import Sequence

import attrs

from harness.capabilities.calls import ModelCall
from harness.capabilities.context import RequestContext
from harness.core.effects import Effects, ModelRequestUnit
from harness.core.messages import CanonicalMessage, Usage
from harness.core.model import Model, ModelSettings, ToolDefinition
from harness.core.streaming import TextDelta, ThinkingDelta, ToolCallDelta
from harness.hooks.manager import PluginManager
from harness.run.events import EventSink, RequestFinished, RequestStarted, ToolCallStarted


class ModelCaller:
    """Sends one run's model-request units (see the module documentation).

    Args:
        effects: The run's effects.
        plugin_manager: Whose ``wrap_model_request`` wrappers the calls go through.
        events: The streamed run's event sink, or ``None``.
    """

    def __init__(self, effects: Effects, plugin_manager: PluginManager, events: EventSink | None) -> None:
        self.effects = effects
        self.pm = plugin_manager
        self.events = events
        self.units = 0
        """Units sent so far (the last unit's index)."""
        self.streamed_call_ids: set[str] = set()
        """Provider ids of the tool calls the current request streamed."""
        self._partial: list[str] = []
        self._in_flight = False

    @property
    def partial_text(self) -> str:
        """The text the run's request in flight has streamed so far (``""`` when none is in flight)."""
        return "".join(self._partial) if self._in_flight else ""

    @staticmethod
    def capability_unit(
        model: Model,
        messages: Sequence[CanonicalMessage],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings,
        source: str,
        session_id: str,
    ) -> ModelRequestUnit:
        """The unit of a capability's own model call (the summarizer's): its messages whole."""
        return ModelRequestUnit(
            index=0,  # numbered when sent
            purpose="capability",
            source=source,
            model=model,
            messages=list(messages),
            view=list(messages),
            tools=tuple(tools),
            settings=settings,
            session_id=session_id,
        )

    async def call(self, ctx: RequestContext | None, unit: ModelRequestUnit) -> CanonicalMessage:
        """Send ``unit`` (through the wrappers when there are any and ``ctx`` is given)."""
        if ctx is None or not self.pm.has_middleware("wrap_model_request"):
            return await self._send(unit, None)
        request = ModelCall.from_unit(unit)

        async def send(wrapped: ModelCall) -> CanonicalMessage:
            return await self._send(unit, wrapped)

        return await self.pm.wrap_model_request(ctx, request, send)

    async def _send(self, base: ModelRequestUnit, request: ModelCall | None) -> CanonicalMessage:
        self.units += 1
        unit = attrs.evolve(base, index=self.units)
        if request is not None:
            if request.attempts or _changed(base, request):
                messages = list(request.messages)
                unit = attrs.evolve(
                    unit,
                    model=request.model,
                    messages=messages,
                    view=messages,
                    delta=None,  # a changed or repeated request ships whole
                    tools=tuple(request.tools),
                    settings=request.settings,
                )
            request.attempts += 1
        events = self.events
        if events is not None:
            events(RequestStarted(unit.index, unit.model.model_name, unit.purpose, unit.source))
            if unit.purpose == "request":
                self._partial = []
                self.streamed_call_ids = set()
                self._in_flight = True
                unit = attrs.evolve(unit, stream=self._forward)
        # Not reset when the request fails: an abort keeps the text streamed so far.
        response = await self.effects.model_request(unit)
        if unit.purpose == "request":
            self._in_flight = False
        name = response.model_name or unit.model.model_name
        if request is not None:
            request.answered_by = name
        if events is not None:
            events(RequestFinished(unit.index, name, response.usage or Usage(), response))
        return response

    def _forward(self, delta: TextDelta | ThinkingDelta | ToolCallDelta) -> None:
        events = self.events
        if events is None:  # pragma: no cover - only installed with a sink
            return
        if isinstance(delta, TextDelta):
            self._partial.append(delta.text)
        elif (
            isinstance(delta, ToolCallDelta)
            and delta.tool_call_id is not None
            and delta.tool_call_id not in self.streamed_call_ids
        ):
            self.streamed_call_ids.add(delta.tool_call_id)
            events(ToolCallStarted(delta.tool_call_id, delta.tool_name or ""))
        events(delta)


def _changed(unit: ModelRequestUnit, request: ModelCall) -> bool:
    """Whether a wrapper changed what ``unit`` sends (constant time but for the tools)."""
    return (
        request.model is not unit.model
        or request.settings is not unit.settings
        or request.messages_edited
        or tuple(request.tools) != tuple(unit.tools)
    )
