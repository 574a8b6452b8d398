"""harness-tool-limits: per-tool and per-run limits on a run's tool calls.

A call over a limit does not run: the model reads a result saying which limit was reached
(``on_limit="block"``), or the run stops with :class:`ToolLimitExceeded` after saving its
history (``on_limit="stop"``).

Experimental: importing this package emits :class:`harness.HarnessExperimentalWarning`
once per process.
"""

from harness import warn_experimental
from harness_tool_limits._limits import (
    NOTES_KEY,
    SOURCE,
    CallCounts,
    LimitHit,
    LimitScope,
    OnLimit,
    ToolLimitExceeded,
    ToolLimits,
)

warn_experimental("harness_tool_limits")

__all__ = [
    "NOTES_KEY",
    "SOURCE",
    "CallCounts",
    "LimitHit",
    "LimitScope",
    "OnLimit",
    "ToolLimitExceeded",
    "ToolLimits",
]
