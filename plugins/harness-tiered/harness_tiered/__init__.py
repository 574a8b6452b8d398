"""TieredCompaction: run cheaper compaction strategies first, stop as soon as the history fits.

Experimental: importing this package emits :class:`harness.HarnessExperimentalWarning`.
"""

from harness import warn_experimental

warn_experimental("harness_tiered")

from harness_tiered.tiered import CompactionTier, TieredCompaction, tier_name  # noqa: E402

__all__ = ["CompactionTier", "TieredCompaction", "tier_name"]
