"""harness-limit-warner: warn the model, request-scoped, as a run nears its limits.

Experimental: importing this package emits :class:`harness.HarnessExperimentalWarning`
once per process.
"""

from harness import warn_experimental
from harness_limit_warner._warner import KINDS, SOURCE, LimitKind, LimitStatus, LimitWarner, is_warning_part

warn_experimental("harness_limit_warner")

__all__ = ["KINDS", "SOURCE", "LimitKind", "LimitStatus", "LimitWarner", "is_warning_part"]
