"""The mutable calls the middleware hooks wrap: :class:`ModelCall` and :class:`ToolCall`.

``wrap_model_request(ctx, request)`` receives a :class:`ModelCall` and
``wrap_tool_call(ctx, call)`` a :class:`ToolCall`. A wrapper changes what is sent by
assigning to their fields before it yields (the rest of the chain, and finally the model
or the tool, see the changed values); the fields it may not change are read-only
properties.
"""

from __future__ import annotations

__all__ = ["ModelCall", "ToolCall"]

from typing import Any

import attrs

from harness.core.effects import ModelRequestUnit, TrackedMessages, UnitPurpose
from harness.core.messages import CanonicalMessage, ToolCallPart
from harness.core.model import Model, ModelSettings, ToolDefinition
from harness.tools.tool import Tool


@attrs.define(eq=False)
class ModelCall:
    """One model call as ``wrap_model_request`` wrappers see it.

    Attributes:
        model: The model to call; a fallback wrapper assigns another one and yields again.
        messages: The whole request (system prompt first, request-scoped parts last).
            Replace or edit the list to change what is sent; the invariant guard checks
            the change.
        tools: The tool definitions sent.
        settings: The model settings sent.
        attempts: How many times the innermost call has been made for this request so
            far (``0`` before the first).
        answered_by: The name of the model whose response the chain returned, once one did.
        notes: Free-form annotations wrappers leave for each other and for observers.
    """

    model: Model
    messages: list[CanonicalMessage]
    tools: list[ToolDefinition]
    settings: ModelSettings
    attempts: int = 0
    answered_by: str | None = None
    notes: dict[str, Any] = attrs.field(factory=dict[str, Any])
    _unit: ModelRequestUnit = attrs.field(alias="unit", repr=False, kw_only=True)
    _sent: TrackedMessages | None = attrs.field(default=None, init=False, repr=False)
    _edited: bool = attrs.field(default=False, init=False, repr=False)

    @classmethod
    def from_unit(cls, unit: ModelRequestUnit) -> ModelCall:
        """The call for ``unit``: its messages list itself when it is a :class:`TrackedMessages`.

        The run's requests are (``build_outgoing`` makes one per request), so wrapping
        costs no copy of the request; the list keeps its original on the first edit.
        """
        given = unit.messages
        messages = given if isinstance(given, TrackedMessages) else TrackedMessages(given)
        call = cls(
            model=unit.model, messages=messages, tools=list(unit.tools), settings=unit.settings, unit=unit
        )
        call._sent = messages
        return call

    def messages_changed(self) -> bool:
        """Whether a wrapper replaced or edited :attr:`messages` since the last check (constant time)."""
        sent = self._sent
        return sent is None or self.messages is not sent or sent.changed

    def mark_checked(self) -> None:
        """Take the current :attr:`messages` as checked by the invariant guard."""
        if not self.messages_changed():
            return
        self._edited = True
        messages = self.messages
        sent = messages if isinstance(messages, TrackedMessages) else TrackedMessages(messages)
        sent.changed, sent.original = False, None
        self.messages = sent
        self._sent = sent

    @property
    def messages_edited(self) -> bool:
        """Whether :attr:`messages` differs from the unit's, by any wrapper so far."""
        return self._edited or self.messages_changed()

    @property
    def unit(self) -> ModelRequestUnit:
        """The request unit the run built, before any wrapper changed anything."""
        return self._unit

    @property
    def purpose(self) -> UnitPurpose:
        """``"request"`` for the run's own requests, ``"capability"`` for a capability's call."""
        return self._unit.purpose

    @property
    def source(self) -> str:
        """``"agent"``, or the capability making the call."""
        return self._unit.source


@attrs.define(eq=False)
class ToolCall:
    """One tool call as ``wrap_tool_call`` wrappers see it.

    Attributes:
        args: The arguments: a dict when the model's JSON parsed, else the raw text.
            Assign new arguments to change what the tool receives (they are validated
            against the tool's schema after the wrappers, like the model's).
        decision: The human decision for this call given to ``agent.run(...,
            approvals={call_id: decision})`` when the run resumes, else ``None``. What a
            decision is (``Approve()``, ``Reject(reason)``, ``Edit(args)``) is up to the
            wrapper that reads it (``harness-tool-approval``).
        notes: Free-form annotations wrappers leave for each other and for observers.
    """

    args: dict[str, Any] | str
    _part: ToolCallPart = attrs.field(alias="part", repr=False, kw_only=True)
    _tool: Tool | None = attrs.field(alias="tool", default=None, repr=False, kw_only=True)
    decision: object | None = None
    notes: dict[str, Any] = attrs.field(factory=dict[str, Any])

    @property
    def tool_name(self) -> str:
        """The tool the model called (a wrapper cannot rename a call)."""
        return self._part.tool_name

    @property
    def tool_call_id(self) -> str:
        """The call's id."""
        return self._part.tool_call_id

    @property
    def part(self) -> ToolCallPart:
        """The model's call, as it is in the history."""
        return self._part

    @property
    def tool(self) -> Tool | None:
        """The agent's tool for this call; ``None`` when the model called an unknown tool."""
        return self._tool
