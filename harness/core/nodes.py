"""The explicit nodes of a run, passed to the ``after_node`` hook.

A run alternates :class:`ModelRequestNode` (a request was sent and answered) and
:class:`CallToolsNode` (the response was processed: usage counted, thoughts captured,
tools dispatched) and finishes with an :class:`EndNode`. The attribute names follow the
contract's ``process_node``: ``request``, ``model_response``, ``thought``, ``result``.
"""

from __future__ import annotations

__all__ = ["CallToolsNode", "EndNode", "ModelRequestNode", "Node"]

from typing import TypeAlias

import attrs

from harness.core.messages import CanonicalMessage, ToolCallPart, Usage


@attrs.frozen
class ModelRequestNode:
    """A model request that was sent.

    Attributes:
        request: The stored request (its tool returns are the results of the previous
            node's calls). The system prompt and request-scoped parts are not in it.
        iteration: 1-based number of this model request in the run.
        sent: The exact message list sent to the model (system prompt and request-scoped
            parts included).
    """

    request: CanonicalMessage
    iteration: int
    sent: tuple[CanonicalMessage, ...] = attrs.field(default=(), repr=False)


@attrs.frozen
class CallToolsNode:
    """A model response after it was processed.

    Attributes:
        model_response: The stored response (fallback tool calls included).
        iteration: The model request that produced it.
        thought: Text of its thinking parts, if any.
        usage: Its normalised usage.
        tool_calls: The tool calls dispatched.
        tool_results: The request holding the answers to ``tool_calls`` (``None`` when
            there were no calls).
        is_empty: Whether the response had no text and no tool call.
        used_fallback: Whether the calls were parsed from text.
    """

    model_response: CanonicalMessage
    iteration: int
    thought: str | None = None
    usage: Usage = attrs.field(factory=Usage)
    tool_calls: tuple[ToolCallPart, ...] = ()
    tool_results: CanonicalMessage | None = None
    is_empty: bool = False
    used_fallback: bool = False


@attrs.frozen
class EndNode:
    """The run finished.

    Attributes:
        result: The final text output (``None`` when the final response had no text).
        model_response: The final response.
        iteration: Number of model requests the run made.
    """

    result: str | None
    model_response: CanonicalMessage
    iteration: int


Node: TypeAlias = ModelRequestNode | CallToolsNode | EndNode
