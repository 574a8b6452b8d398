"""The model protocol the loop drives, and the tool definitions and settings it passes to models."""

from __future__ import annotations

__all__ = ["Model", "ModelSettings", "ToolDefinition"]

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from harness.core.messages import CanonicalMessage


@attrs.frozen
class ToolDefinition:
    """What a model is told about one tool.

    Attributes:
        name: The tool's name, unique within an agent.
        description: What the tool does (from the function's docstring).
        parameters_json_schema: JSON schema of the tool's arguments (an ``object`` schema).
    """

    name: str
    description: str = ""
    parameters_json_schema: Mapping[str, Any] = attrs.field(
        factory=lambda: {"type": "object", "properties": {}}
    )


@attrs.frozen
class ModelSettings:
    """Settings passed to every model request.

    Attributes:
        max_tokens: Upper bound on response tokens, if the model supports one.
        temperature: Sampling temperature, if the model supports one.
        timeout: Per-request timeout in seconds, if the model supports one.
        extra: Provider-specific settings passed through untouched.
    """

    max_tokens: int | None = None
    temperature: float | None = None
    timeout: float | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict[str, Any])


@runtime_checkable
class Model(Protocol):
    """What the loop needs from a model.

    ``request`` receives the history to send (system prompt first, ending with a request)
    and returns one response message, with ``usage`` and ``model_name`` filled in when
    the provider reports them. Provider failures raise; the loop does not swallow them.
    """

    @property
    def model_name(self) -> str:
        """The model's name, used to pick a tokenizer and resolve its context window."""
        ...

    @property
    def context_window(self) -> int | None:
        """The model's context window in tokens, or ``None`` when unknown."""
        ...

    async def request(
        self,
        messages: Sequence[CanonicalMessage],
        tools: Sequence[ToolDefinition],
        settings: ModelSettings,
    ) -> CanonicalMessage:
        """Send ``messages`` and return the model's response message."""
        ...
