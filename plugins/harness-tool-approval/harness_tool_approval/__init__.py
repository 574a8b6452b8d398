"""harness-tool-approval: human approval of tool calls.

A call that needs approval pauses the run (``RunResult.status == "awaiting_approval"``);
the pending calls are stored in the session, and
``agent.run(None, session=..., approvals={call_id: Approve() | Reject(reason) | Edit(args)})``
resumes it, in this process or another one.

Experimental: importing this package emits :class:`harness.HarnessExperimentalWarning`
once per process.
"""

from harness import warn_experimental
from harness_tool_approval._decisions import DEFAULT_REASON, Approve, Decision, DecisionError, Edit, Reject
from harness_tool_approval._plugin import (
    DEFAULT_REJECTION,
    NOTES_KEY,
    SOURCE,
    Approver,
    Rejection,
    Requirement,
    ToolApproval,
)

warn_experimental("harness_tool_approval")

__all__ = [
    "DEFAULT_REASON",
    "DEFAULT_REJECTION",
    "NOTES_KEY",
    "SOURCE",
    "Approve",
    "Approver",
    "Decision",
    "DecisionError",
    "Edit",
    "Reject",
    "Rejection",
    "Requirement",
    "ToolApproval",
]
