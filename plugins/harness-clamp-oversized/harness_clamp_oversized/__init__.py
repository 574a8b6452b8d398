"""ClampOversizedMessages: cut any oversized tool result or user prompt to head + marker + tail.

Experimental: importing this package emits :class:`harness.HarnessExperimentalWarning` once.

Example:
    >>> from harness_clamp_oversized import ClampOversizedMessages
    >>> ClampOversizedMessages(max_tokens=2000, per_tool={"read_file": None}).limit_for("read_file") is None
    True
"""

from __future__ import annotations

from harness.errors import warn_experimental

warn_experimental("harness_clamp_oversized")

from harness_clamp_oversized.capability import (  # noqa: E402
    DEFAULT_MAX_TOKENS,
    MARK_KEY,
    RECALL_TOOLS,
    ClampOversizedMessages,
)
from harness_clamp_oversized.config import MIN_LIMIT  # noqa: E402
from harness_clamp_oversized.cut import Cut, Recall, clamp_text, marker_text  # noqa: E402

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "MARK_KEY",
    "MIN_LIMIT",
    "RECALL_TOOLS",
    "ClampOversizedMessages",
    "Cut",
    "Recall",
    "clamp_text",
    "marker_text",
]
