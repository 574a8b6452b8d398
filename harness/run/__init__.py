"""The run: ``Agent``, the request orchestrator and its steps, the tool executor, compaction.

* :mod:`harness.run.agent`: :class:`Agent` and :class:`RunResult`.
* :mod:`harness.run.settings`: the frozen :class:`RunSettings` an agent hands each run.
* :mod:`harness.run.orchestrator`: one run, step by step (prepare, send, process).
* :mod:`harness.run.prepare`, :mod:`harness.run.outgoing`, :mod:`harness.run.responses`:
  the history preparation, the request to send, the checks on each response.
* :mod:`harness.run.executor`: tool calls, in parallel, with retries.
* :mod:`harness.run.recovery`: abort, timeout and failure recovery.
* :mod:`harness.run.fallback`: tool calls written as text.
* :mod:`harness.run.compaction`: :func:`compact` a history outside a run.
* :mod:`harness.durable.fingerprint`: the agent fingerprint a durable run checks before it resumes.
* :mod:`harness.run.events`, :mod:`harness.run.stream`: ``Agent.run_stream`` and its events.
* :mod:`harness.run.approvals`: calls held back for a human decision, and resuming them.
* :mod:`harness.run.model_calls`: each model call through the ``wrap_model_request`` chain.
"""

from __future__ import annotations

from harness.durable.fingerprint import FINGERPRINT_COMPONENTS, agent_fingerprint, check_fingerprint
from harness.durable.resume import OUTCOME_UNKNOWN_CONTENT
from harness.run.agent import Agent, RunResult
from harness.run.compaction import CompactionResult, compact, compact_sync
from harness.run.events import (
    ApprovalNeeded,
    Compaction,
    RequestFinished,
    RequestStarted,
    RetryPrompt,
    RunEvent,
    RunFinished,
    ToolCallReady,
    ToolCallStarted,
    ToolResult,
)
from harness.run.executor import AWAITING_APPROVAL_CONTENT, NON_RETRYABLE, ToolExecutor, tool_content
from harness.run.fallback import FALLBACK_ID_PREFIX, extract_fallback_tool_calls, with_fallback_tool_calls
from harness.run.orchestrator import RequestOrchestrator, RunOutcome
from harness.run.outgoing import build_outgoing, system_parts
from harness.run.prepare import prepare_history
from harness.run.recovery import ABORTED_TOOL_CONTENT, INTERRUPTED_MARKER, INTERRUPTED_UNKNOWN_CONTENT
from harness.run.responses import (
    EMPTY_RESPONSE_NUDGE,
    is_blank_response,
    normalise_response,
    unique_tool_call_ids,
)
from harness.run.result import RunStatus
from harness.run.settings import InstructionsFunction, RunSettings
from harness.run.stream import RunStream
from harness.run.threads import DEFAULT_TOOL_THREADS, ToolThreads

__all__ = [
    "ABORTED_TOOL_CONTENT",
    "ApprovalNeeded",
    "AWAITING_APPROVAL_CONTENT",
    "Compaction",
    "RequestFinished",
    "RequestStarted",
    "RetryPrompt",
    "RunEvent",
    "RunFinished",
    "RunStatus",
    "RunStream",
    "ToolCallReady",
    "ToolCallStarted",
    "ToolResult",
    "agent_fingerprint",
    "check_fingerprint",
    "FINGERPRINT_COMPONENTS",
    "OUTCOME_UNKNOWN_CONTENT",
    "Agent",
    "compact",
    "compact_sync",
    "CompactionResult",
    "EMPTY_RESPONSE_NUDGE",
    "extract_fallback_tool_calls",
    "FALLBACK_ID_PREFIX",
    "InstructionsFunction",
    "INTERRUPTED_MARKER",
    "INTERRUPTED_UNKNOWN_CONTENT",
    "is_blank_response",
    "NON_RETRYABLE",
    "normalise_response",
    "prepare_history",
    "RequestOrchestrator",
    "RunOutcome",
    "RunResult",
    "RunSettings",
    "build_outgoing",
    "system_parts",
    "tool_content",
    "ToolExecutor",
    "ToolThreads",
    "DEFAULT_TOOL_THREADS",
    "unique_tool_call_ids",
    "with_fallback_tool_calls",
]
