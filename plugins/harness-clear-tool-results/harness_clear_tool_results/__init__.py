"""ClearToolResults: replace the content of old tool results with a short placeholder.

A cleared result keeps its failure lines, the paths and the names it named
(:mod:`harness_clear_tool_results.excerpt`); pinned parts are never cleared; the
``cache_aware`` trigger weighs the tokens saved against the prompt-cache write
(:mod:`harness.capabilities.cache`).

Experimental: importing this package emits :class:`harness.HarnessExperimentalWarning` once.

Example:
    >>> from harness_clear_tool_results import ClearToolResults
    >>> ClearToolResults(max_tokens=100_000, keep_pairs=5).keep_pairs
    5
"""

from __future__ import annotations

from harness.errors import warn_experimental

warn_experimental("harness_clear_tool_results")

from harness.capabilities import CacheVerdict, cache_pays, remaining_requests  # noqa: E402
from harness_clear_tool_results.capability import (  # noqa: E402
    CLEARED_ARGS_KEY,
    DEFAULT_PLACEHOLDER,
    ClearToolResults,
)
from harness_clear_tool_results.excerpt import (  # noqa: E402
    Excerpt,
    defined_names,
    excerpt,
    failure_lines,
    named_paths,
)

__all__ = [
    "CLEARED_ARGS_KEY",
    "DEFAULT_PLACEHOLDER",
    "CacheVerdict",
    "ClearToolResults",
    "Excerpt",
    "cache_pays",
    "defined_names",
    "excerpt",
    "failure_lines",
    "named_paths",
    "remaining_requests",
]
