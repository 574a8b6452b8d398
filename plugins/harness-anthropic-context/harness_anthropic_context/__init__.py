"""harness-anthropic-context: Anthropic's server-side context editing and compaction, as a capability.

:class:`AnthropicContextManagement` adds the ``context_management`` request parameter
(``clear_tool_uses_20250919``, ``clear_thinking_20251015``, ``compact_20260112``) and its
``anthropic-beta`` header to every request that goes to an ``AnthropicModel``, reports what
the server cleared or compacted as a :class:`~harness.CompactionEvent`, and makes a history
holding server-side compaction blocks portable to any other provider (each block becomes
a text part with its summary, in that request only).

Experimental: importing this package emits :class:`harness.HarnessExperimentalWarning`
once per process.
"""

from harness import warn_experimental
from harness_anthropic_context._capability import SOURCE, AnthropicContextManagement, is_anthropic
from harness_anthropic_context._edits import (
    CLEAR_THINKING,
    CLEAR_TOOL_USES,
    COMPACT,
    COMPACTION_BETA,
    CONTEXT_MANAGEMENT_BETA,
    EDIT_FIELDS,
    EditConfig,
    build_edit,
)
from harness_anthropic_context._history import (
    COMPACTION_KIND,
    NO_SUMMARY,
    PAUSE_TEXT,
    SUMMARY_PREFIX,
    applied_edits,
    compaction_parts,
    compaction_summary,
    is_compaction_pause,
    portable_messages,
    sendable_messages,
    with_pause_text,
)

warn_experimental("harness_anthropic_context")

__all__ = [
    "CLEAR_THINKING",
    "CLEAR_TOOL_USES",
    "COMPACT",
    "COMPACTION_BETA",
    "COMPACTION_KIND",
    "CONTEXT_MANAGEMENT_BETA",
    "EDIT_FIELDS",
    "NO_SUMMARY",
    "PAUSE_TEXT",
    "SOURCE",
    "SUMMARY_PREFIX",
    "AnthropicContextManagement",
    "EditConfig",
    "applied_edits",
    "build_edit",
    "compaction_parts",
    "compaction_summary",
    "is_anthropic",
    "is_compaction_pause",
    "portable_messages",
    "sendable_messages",
    "with_pause_text",
]
