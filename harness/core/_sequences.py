"""Where two message lists start to differ, found at C speed.

List comparison compares identical elements by identity first, so comparing slices of two
histories that share their message objects costs about a nanosecond a message. A binary
search that only compares the window between the known-equal and the known-different
length copies O(n) references in all.
"""

from __future__ import annotations

__all__ = ["common_prefix", "common_suffix"]

from typing import Any


def common_prefix(a: list[Any], b: list[Any]) -> int:
    """Length of the longest common prefix of ``a`` and ``b``."""
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    # invariant: a[:lo] == b[:lo] and a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def common_suffix(a: list[Any], b: list[Any], limit: int) -> int:
    """Length (at most ``limit``) of the longest common suffix of ``a`` and ``b``."""
    if limit <= 0 or a[-1] != b[-1]:
        return 0
    la, lb = len(a), len(b)
    if a[la - limit :] == b[lb - limit :]:
        return limit
    # invariant: the last ``lo`` items are equal, the last ``hi`` are not
    lo, hi = 1, limit
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[la - mid : la - lo] == b[lb - mid : lb - lo]:
            lo = mid
        else:
            hi = mid
    return lo
