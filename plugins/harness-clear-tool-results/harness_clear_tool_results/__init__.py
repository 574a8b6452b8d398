"""ClearToolResults: replace the content of old tool results with a short placeholder.

Experimental: importing this package emits :class:`harness.HarnessExperimentalWarning` once.

Example:
    >>> from harness_clear_tool_results import ClearToolResults
    >>> ClearToolResults(max_tokens=100_000, keep_pairs=5).keep_pairs
    5
"""

from __future__ import annotations

from harness.errors import warn_experimental

warn_experimental("harness_clear_tool_results")

from harness_clear_tool_results.capability import (  # noqa: E402
    CLEARED_ARGS_KEY,
    DEFAULT_PLACEHOLDER,
    ClearToolResults,
)

__all__ = ["CLEARED_ARGS_KEY", "DEFAULT_PLACEHOLDER", "ClearToolResults"]
