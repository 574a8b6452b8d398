"""The cache arithmetic of a cache-aware trigger: does an edit pay for the cache write it causes?

A provider's prompt cache bills the prefix a request shares with the previous one as a
cheap *read* and everything from the first changed token on as a dearer *write*
(Anthropic: reads at 0.1 times the base input price, writes at 1.25 times). An edit of an
old message saves tokens on every later request but turns the cached suffix after it into
a write once. :func:`cache_pays` weighs the two. ``ClearToolResults`` and
``DeduplicateFileReads`` use it for their ``cache_aware`` option; any capability that edits
old messages can.
"""

from __future__ import annotations

__all__ = ["CacheVerdict", "cache_pays", "check_cache_settings", "remaining_requests"]

import math

import attrs

from harness.capabilities.context import RequestContext


@attrs.frozen
class CacheVerdict:
    """The cache arithmetic of one edit (see :func:`cache_pays`).

    Attributes:
        saved_tokens: Tokens the edit frees (``S``).
        rewritten_tokens: Tokens from the first changed message to the end, after the edit (``P``).
        remaining_requests: Requests the saving is counted over (``R``).
        benefit: ``S * R * read``, in units of the base input price.
        cost: ``P * (write - read)``, in the same units.
    """

    saved_tokens: int
    rewritten_tokens: int
    remaining_requests: int
    benefit: float
    cost: float

    @property
    def pays(self) -> bool:
        """True when the benefit is strictly greater than the cost."""
        return self.benefit > self.cost

    def describe(self) -> str:
        """One line for an event's reason."""
        verb = ">" if self.pays else "<="
        return (
            f"cache-aware: saves {self.saved_tokens} tokens x {self.remaining_requests} requests "
            f"= {self.benefit:g} {verb} rewrites {self.rewritten_tokens} tokens = {self.cost:g}"
        )


def cache_pays(
    saved_tokens: int,
    rewritten_tokens: int,
    remaining_requests: int,
    *,
    write_multiplier: float = 1.25,
    read_multiplier: float = 0.1,
) -> CacheVerdict:
    """Whether an edit pays for the prompt-cache write it causes.

    An edit that changes message ``f`` makes the provider write the prompt from ``f`` to
    the end again (``P`` tokens, billed at ``write_multiplier`` times the base input price)
    where it would have read it from the cache (at ``read_multiplier``): the edit costs
    ``P * (write - read)``. Each of the ``R`` requests that follow (this one included)
    then sends ``S`` fewer tokens, which would have been cache reads: the edit saves
    ``S * R * read``. It pays when ``S * R * read > P * (write - read)``.

    With Anthropic's multipliers (1.25 and 0.1): ``S * R * 0.1 > P * 1.15``, i.e.
    ``S * R > 11.5 * P``. Example: an edit frees ``S = 3000`` tokens and leaves
    ``P = 1000`` tokens from the first changed message to the end. With ``R = 4`` the
    benefit is ``3000 * 4 * 0.1 = 1200`` and the cost ``1000 * 1.15 = 1150``: it pays.
    With ``R = 3`` the benefit is ``900``: it does not.

    Args:
        saved_tokens: ``S``.
        rewritten_tokens: ``P``.
        remaining_requests: ``R``.
        write_multiplier: Price of a cache write, in base input prices.
        read_multiplier: Price of a cache read, in base input prices.
    """
    benefit = saved_tokens * remaining_requests * read_multiplier
    cost = rewritten_tokens * (write_multiplier - read_multiplier)
    return CacheVerdict(saved_tokens, rewritten_tokens, remaining_requests, benefit, cost)


def remaining_requests(ctx: RequestContext, expected: int | None) -> int:
    """``R`` for :func:`cache_pays`: ``expected``, or an estimate from the run so far.

    The estimate (``expected=None``) is the number of model requests the run already made
    (``ctx.requests``, at least 1): a run is expected to go on about as long again as it
    has gone. It is capped by the requests ``max_iterations`` still allows, when set.
    """
    if expected is not None:
        return expected
    estimate = max(1, ctx.requests)
    if ctx.max_iterations is not None:
        estimate = max(1, min(estimate, ctx.max_iterations - ctx.requests))
    return estimate


def check_cache_settings(expected: object, write: object, read: object) -> None:
    """Validate the cache-aware parameters.

    Raises:
        ValueError: One is out of range; the message names it.
    """
    if expected is not None and (not isinstance(expected, int) or isinstance(expected, bool) or expected < 1):
        raise ValueError(f"expected_remaining_requests must be a positive integer or None, got {expected!r}.")
    for name, value in (("cache_write_multiplier", write), ("cache_read_multiplier", read)):
        if (
            not isinstance(value, int | float)
            or isinstance(value, bool)
            or not math.isfinite(value)
            or value < 0
        ):
            raise ValueError(f"{name} must be a finite, non-negative number, got {value!r}.")
