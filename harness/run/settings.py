"""The frozen settings of a run: everything the orchestrator needs from the agent, once.

:class:`~harness.run.agent.Agent` validates its arguments and builds one
:class:`RunSettings`; the orchestrator reads only this object, never the agent, so a run
cannot observe an agent changed while it runs and the loop has one typed input.
"""

from __future__ import annotations

__all__ = ["InstructionsFunction", "RunSettings"]

from collections.abc import Awaitable, Callable, Mapping
from typing import TypeAlias

import attrs

from harness.core.model import Model, ModelSettings, ToolDefinition
from harness.run.continuity import ContinuitySettings
from harness.run.threads import ToolThreads
from harness.tools.context import RunContext
from harness.tools.tool import Tool

InstructionsFunction: TypeAlias = Callable[[RunContext], Awaitable[str | None] | str | None]
"""Dynamic instructions: ``callable(RunContext) -> str | None``, sync or async."""


@attrs.frozen
class RunSettings:
    """What one run is allowed to do, fixed when the agent is built.

    Attributes:
        model: The model every request goes to.
        tools: The agent's tools by name.
        tool_definitions: What the model is told about ``tools``, in order.
        system_prompt: Static system prompt, sent in front of every request, never stored.
        instructions: Dynamic instructions evaluated before every request, never stored.
        max_iterations: Maximum model requests per run.
        request_timeout: Seconds a whole run may take; ``None`` for no limit.
        tool_max_retries: Attempts per call for transient tool failures (see
            :meth:`Tool.is_transient <harness.tools.tool.Tool.is_transient>`).
        tool_retry_budget: Consecutive retry prompts a tool may cause.
        max_parallel_tools: Maximum tool calls of one response running at once.
        max_empty_responses: Nudges after empty responses before failing.
        model_settings: Settings sent with every request.
        tool_retry_base_delay: First backoff delay in seconds.
        fallback_tool_calls: Parse tool calls written as text.
        continuity: Anchors, the post-compaction receipt, pausing after a compaction.
        tool_threads: The pool sync tools run in (see :mod:`harness.run.threads`).
        tool_settle_timeout: Seconds a stopping run waits for sync calls still running.
    """

    model: Model
    tools: Mapping[str, Tool] = attrs.field(factory=dict[str, Tool])
    tool_definitions: tuple[ToolDefinition, ...] = ()
    system_prompt: str | None = None
    instructions: InstructionsFunction | None = None
    max_iterations: int = 25
    request_timeout: float | None = None
    tool_max_retries: int = 3
    tool_retry_budget: int = 3
    max_parallel_tools: int = 8
    max_empty_responses: int = 2
    model_settings: ModelSettings = attrs.field(factory=ModelSettings)
    tool_retry_base_delay: float = 0.5
    fallback_tool_calls: bool = True
    continuity: ContinuitySettings = attrs.field(factory=ContinuitySettings)
    tool_threads: ToolThreads = attrs.field(factory=ToolThreads)
    tool_settle_timeout: float = 1.0
