"""The run context: what tools, dynamic instructions and hooks see about the current run.

It lives below the hook layer (hooks' signatures name it) and is owned by the run
(:mod:`harness.run`), which creates one per ``Agent.run`` and is its only writer.
"""

from __future__ import annotations

__all__ = ["RunContext", "RunState"]

from typing import TYPE_CHECKING, Any

import attrs

from harness.core.messages import CanonicalMessage, Usage
from harness.tools.lifecycle import ToolCallRegistry

if TYPE_CHECKING:
    from harness.core.model import Model
    from harness.session import Session


@attrs.define(eq=False)
class RunState:
    """The runtime state of one run: counters and the tool-call registry. Never persisted.

    The contract's "runtime" record. It belongs to the run, not to the session: two runs
    never share one, and a finished run's state is on :attr:`harness.run.RunResult.state`.

    Attributes:
        request_id: The run's request id (first 8 characters of a uuid4).
        current_iteration: Model request number of the current run.
        iteration_count: Model requests made in the current run.
        batch_counter: Tool batches executed in the current run.
        consecutive_empty_responses: Empty responses in a row.
        original_query: The first prompt of the task (kept when the session already had one).
        tool_registry: The run's tool-call registry, the single source of truth for the
            status of every tool call of the run.
    """

    request_id: str = ""
    current_iteration: int = 0
    iteration_count: int = 0
    batch_counter: int = 0
    consecutive_empty_responses: int = 0
    original_query: str | None = None
    tool_registry: ToolCallRegistry = attrs.field(factory=ToolCallRegistry)


@attrs.define(eq=False)
class RunContext:
    """State of one ``Agent.run``, passed to ``after_node`` / ``on_tool`` hooks and to tools.

    A tool whose first parameter is annotated ``RunContext`` receives a copy with
    ``tool_call_id``, ``tool_name`` and ``retry`` filled in. Dynamic instructions (the
    agent's ``instructions`` callable) receive it before every model request.

    The run owns one history and one usage total, and they are these two attributes.
    During a run ``session.messages`` is that same history, whatever the store (a stored
    session is checkpointed at every step; any other is saved when the run ends). Under a
    durable engine a tool runs on a worker and gets a context of the fields that cross the
    boundary (see :func:`harness.tools.remote_context`).

    Attributes:
        model: The agent's model.
        session: The session the run reads and will hand its result to.
        prompt: The user prompt of this run (``None`` when continuing a pending request).
        run: The run's counters and tool-call registry.
        messages: The run's history as it stands: the one authoritative list.
        usage: Usage of this run so far (responses and capability requests).
        tool_call_id: For a tool: the id of the call being executed.
        tool_name: For a tool: the name of the tool being executed.
        retry: For a tool: how many consecutive retries this tool already used.
        state: Free-form per-run storage, shared by every request of the run.
    """

    model: Model
    session: Session
    prompt: str | None = None
    run: RunState = attrs.field(factory=RunState)
    messages: list[CanonicalMessage] = attrs.field(factory=list[CanonicalMessage])
    usage: Usage = attrs.field(factory=Usage)
    tool_call_id: str | None = None
    tool_name: str | None = None
    retry: int = 0
    state: dict[str, Any] = attrs.field(factory=dict[str, Any])

    @property
    def request_id(self) -> str:
        """The run's request id."""
        return self.run.request_id

    @property
    def iteration(self) -> int:
        """Number of model requests made so far in this run."""
        return self.run.current_iteration

    def for_tool(self, tool_call_id: str, tool_name: str, retry: int) -> RunContext:
        """Return a copy for one tool call (shares messages, run state and ``state``)."""
        return attrs.evolve(self, tool_call_id=tool_call_id, tool_name=tool_name, retry=retry)
