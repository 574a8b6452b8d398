"""SummarizingCompaction: replace the older history with one incremental summary.

Experimental: importing this package emits :class:`harness.HarnessExperimentalWarning`.
"""

from harness import warn_experimental

warn_experimental("harness_summarizing")

from harness_summarizing.digest import Digest, StructuralDigest, extract_file_paths  # noqa: E402
from harness_summarizing.prompt import (  # noqa: E402
    DEFAULT_INSTRUCTIONS,
    DEFAULT_SUMMARY_PROMPT,
    PLACEHOLDERS,
    render_template,
    render_transcript,
)
from harness_summarizing.summarizer import ModelSummarizer, Summarizer, Summary, SummaryRequest  # noqa: E402
from harness_summarizing.summarizing import (  # noqa: E402
    FALLBACKS,
    SUMMARY_KIND,
    Fallback,
    SummarizingCompaction,
    find_summary_parts,
    summary_text,
)

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "DEFAULT_SUMMARY_PROMPT",
    "FALLBACKS",
    "PLACEHOLDERS",
    "SUMMARY_KIND",
    "Digest",
    "Fallback",
    "ModelSummarizer",
    "StructuralDigest",
    "Summarizer",
    "Summary",
    "SummaryRequest",
    "SummarizingCompaction",
    "extract_file_paths",
    "find_summary_parts",
    "render_template",
    "render_transcript",
    "summary_text",
]
