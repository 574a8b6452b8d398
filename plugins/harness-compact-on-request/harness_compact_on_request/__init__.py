"""harness-compact-on-request: a ``compact_context`` tool the model calls to compact its context now.

With :class:`CompactOnRequest` in an agent's stack the model can call
``compact_context(reason)``; the configured stack then runs, forced, before its next
turn. A guard refuses to compact twice in a row or while another compaction runs.

Experimental: importing this package emits :class:`harness.HarnessExperimentalWarning`
once per process.
"""

from __future__ import annotations

from harness import warn_experimental

warn_experimental("harness_compact_on_request")

from harness_compact_on_request.capability import COMPACTION_CAPABILITIES, CompactOnRequest  # noqa: E402
from harness_compact_on_request.decisions import (  # noqa: E402
    MARK_KEY,
    PERFORMED,
    STATUSES,
    TOOL_NAME,
    Decision,
    decide,
    is_activity,
    pending_returns,
    status_of,
)

__all__ = [
    "COMPACTION_CAPABILITIES",
    "MARK_KEY",
    "PERFORMED",
    "STATUSES",
    "TOOL_NAME",
    "CompactOnRequest",
    "Decision",
    "decide",
    "is_activity",
    "pending_returns",
    "status_of",
]
