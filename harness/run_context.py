"""The run context: what tools, dynamic instructions and hooks see about the current run."""

from __future__ import annotations

__all__ = ["RunContext"]

from typing import TYPE_CHECKING, Any

import attrs

from harness.messages import CanonicalMessage, Usage

if TYPE_CHECKING:
    from harness.models import Model
    from harness.session import Session


@attrs.define(eq=False)
class RunContext:
    """State of one ``Agent.run``, passed to ``after_node`` / ``on_tool`` hooks and to tools.

    A tool whose first parameter is annotated ``RunContext`` receives a copy with
    ``tool_call_id``, ``tool_name`` and ``retry`` filled in. Dynamic instructions (the
    agent's ``instructions`` callable) receive it before every model request.

    Attributes:
        agent: The running agent.
        model: The agent's model.
        session: The session the run reads and writes.
        prompt: The user prompt of this run (``None`` when continuing a pending request).
        request_id: The run's request id (first 8 characters of a uuid4).
        messages: The session history as it stands (the authoritative list).
        usage: Usage of this run so far (responses and capability requests).
        iteration: Number of model requests made so far in this run.
        tool_call_id: For a tool: the id of the call being executed.
        tool_name: For a tool: the name of the tool being executed.
        retry: For a tool: how many consecutive retries this tool already used.
        state: Free-form per-run storage.
    """

    agent: Any
    model: Model
    session: Session
    prompt: str | None = None
    request_id: str = ""
    messages: list[CanonicalMessage] = attrs.field(factory=list[CanonicalMessage])
    usage: Usage = attrs.field(factory=Usage)
    iteration: int = 0
    tool_call_id: str | None = None
    tool_name: str | None = None
    retry: int = 0
    state: dict[str, Any] = attrs.field(factory=dict[str, Any])

    def for_tool(self, tool_call_id: str, tool_name: str, retry: int) -> RunContext:
        """Return a copy for one tool call (shares messages, usage and state)."""
        return attrs.evolve(self, tool_call_id=tool_call_id, tool_name=tool_name, retry=retry)
