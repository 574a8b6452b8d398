"""Safe cut points: where a history can be cut (keeping ``messages[c:]``) without splitting a tool pair."""

from __future__ import annotations

__all__ = [
    "is_safe_cutoff",
    "safe_cutoff",
    "safe_token_cutoff",
]

from collections.abc import Callable, Sequence

from harness.core.messages import CanonicalMessage, RetryPromptPart, ToolCallPart, ToolReturnPart


def _spans(messages: Sequence[CanonicalMessage]) -> dict[str, tuple[int, int]]:
    """For every id carried by a call or an answer: (first, last) message index carrying it."""
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for index, message in enumerate(messages):
        for part in message.parts:
            if isinstance(part, (ToolCallPart, ToolReturnPart)):
                carried = part.tool_call_id
            elif isinstance(part, RetryPromptPart) and part.tool_name is not None and part.tool_call_id:
                carried = part.tool_call_id
            else:
                continue
            first.setdefault(carried, index)
            last[carried] = index
    return {carried: (start, last[carried]) for carried, start in first.items()}


def _unsafe_cuts(messages: Sequence[CanonicalMessage]) -> list[bool]:
    """``unsafe[c]`` for every cut 0..len: true when some id sits on both sides of ``c``."""
    total = len(messages)
    delta = [0] * (total + 2)
    for first, last in _spans(messages).values():
        if first < last:  # cut c splits the span when first < c <= last
            delta[first + 1] += 1
            delta[last + 1] -= 1
    unsafe: list[bool] = []
    running = 0
    for cut in range(total + 1):
        running += delta[cut]
        unsafe.append(running > 0)
    return unsafe


def is_safe_cutoff(messages: Sequence[CanonicalMessage], cut: int) -> bool:
    """True when keeping ``messages[cut:]`` separates no tool call from any of its answers.

    Every message carrying a given tool call id (the call, returns, retry prompts naming
    it) must be on the same side of the cut, however far apart they are. ``0`` and
    ``len(messages)`` are always safe.

    Raises:
        ValueError: ``cut`` is outside ``0..len(messages)``.
    """
    if not 0 <= cut <= len(messages):
        raise ValueError(f"is_safe_cutoff: cut must be in 0..{len(messages)}, got {cut}")
    return all(not first < cut <= last for first, last in _spans(messages).values())


def safe_cutoff(messages: Sequence[CanonicalMessage], keep: int) -> int:
    """The cut ``c`` keeping ``messages[c:]``: the fewest messages, at least ``keep``, splitting no pair.

    Returns the largest safe ``c`` with ``len(messages) - c >= keep``. The last message
    (the request being sent) is always kept, so ``keep <= 0`` behaves like ``keep=1`` and
    a non-empty history never gets ``c == len(messages)``. ``keep >= len(messages)`` and
    the empty history give ``0``. Pairs at any distance are respected (unlike the
    reference's ±5-message window).
    """
    total = len(messages)
    if total == 0 or keep >= total:
        return 0
    unsafe = _unsafe_cuts(messages)
    cut = total - max(keep, 1)
    while cut > 0 and unsafe[cut]:
        cut -= 1
    return cut


def safe_token_cutoff(
    messages: Sequence[CanonicalMessage],
    keep_tokens: int,
    count_message: Callable[[CanonicalMessage], int],
) -> int:
    """The cut index ``c`` keeping as much of the newest history as fits ``keep_tokens``.

    Returns the smallest safe ``c`` whose suffix ``messages[c:]`` totals at most
    ``keep_tokens`` (so it keeps the most that fits). When no safe suffix fits (for
    example the last message alone is too big, or the only fitting suffixes would split
    a pair), returns the largest safe ``c`` below the fitting range — the smallest
    over-budget suffix that splits nothing. The last message is always kept.

    Messages are counted once each, newest first, and counting stops at the first one
    that does not fit.

    Args:
        messages: The history.
        keep_tokens: Token budget for the kept suffix.
        count_message: Token count of one message (e.g. ``TokenCounter.count_message``).
    """
    total = len(messages)
    if total == 0:
        return 0
    start = total  # smallest index whose suffix fits
    used = 0
    while start > 0:
        tokens = count_message(messages[start - 1])
        if used + tokens > keep_tokens:
            break
        used += tokens
        start -= 1
    if start == 0:
        return 0
    unsafe = _unsafe_cuts(messages)
    for cut in range(start, total):
        if not unsafe[cut]:
            return cut
    cut = min(start, total - 1)
    while cut > 0 and unsafe[cut]:
        cut -= 1
    return cut
