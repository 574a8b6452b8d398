"""DeduplicateFileReads: replace earlier reads of a file with a pointer to the latest read.

Experimental: importing this package emits :class:`harness.HarnessExperimentalWarning` once.

Example:
    >>> from harness_dedupe_file_reads import DeduplicateFileReads
    >>> DeduplicateFileReads().trigger.configured
    False
"""

from __future__ import annotations

from harness.errors import warn_experimental

warn_experimental("harness_dedupe_file_reads")

from harness.capabilities import CacheVerdict, cache_pays, remaining_requests  # noqa: E402
from harness_dedupe_file_reads.capability import (  # noqa: E402
    DEFAULT_PLACEHOLDER,
    DeduplicateFileReads,
    render_placeholder,
)
from harness_dedupe_file_reads.keys import (  # noqa: E402
    FILE_KEYS,
    FileKey,
    FileRead,
    auto_file_key,
    describe_read,
    parse_shell_read,
    read_tool_key,
    shell_cat_key,
)

__all__ = [
    "DEFAULT_PLACEHOLDER",
    "FILE_KEYS",
    "CacheVerdict",
    "DeduplicateFileReads",
    "FileKey",
    "FileRead",
    "auto_file_key",
    "cache_pays",
    "describe_read",
    "parse_shell_read",
    "read_tool_key",
    "remaining_requests",
    "render_placeholder",
    "shell_cat_key",
]
