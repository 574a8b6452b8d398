"""harness-recall: placeholders that name the original content, and tools to read it back.

With :class:`Recall` in the stack of an agent whose session lives in a store, every
placeholder ClearToolResults, DeduplicateFileReads and SummarizingCompaction write ends
with `` [recall: <ref>]`` (``r12.0``, ``r0-r41``...), and the model can call
``recall(ref)`` to read the original from the session's append-only log, or
``search_history(query)`` to find it.

Experimental: importing this package emits :class:`harness.HarnessExperimentalWarning`
once per process.
"""

from __future__ import annotations

from harness import warn_experimental

warn_experimental("harness_recall")

from harness_recall.capability import COMPACTION_CAPABILITIES, Recall  # noqa: E402
from harness_recall.log import LogReader  # noqa: E402
from harness_recall.references import SessionReferences  # noqa: E402
from harness_recall.refs import HINT, REF_FORMS, Ref, call_ref, hint, parse_ref  # noqa: E402
from harness_recall.tools import TOOL_NAMES, read_reference, search_log  # noqa: E402

__all__ = [
    "COMPACTION_CAPABILITIES",
    "HINT",
    "REF_FORMS",
    "TOOL_NAMES",
    "LogReader",
    "Recall",
    "Ref",
    "SessionReferences",
    "call_ref",
    "hint",
    "parse_ref",
    "read_reference",
    "search_log",
]
