"""harness-sliding-window: keep the newest messages once a trigger fires.

Experimental: importing this package emits :class:`harness.HarnessExperimentalWarning`
once per process.
"""

from harness import warn_experimental
from harness_sliding_window._window import SOURCE, SlidingWindow, is_preserved_part, is_receipt_part

warn_experimental("harness_sliding_window")

__all__ = ["SOURCE", "SlidingWindow", "is_preserved_part", "is_receipt_part"]
