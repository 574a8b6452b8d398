"""Cutting one oversized text to head + marker + tail, at or under a token limit.

Pure functions of the text, a measuring function and the marker's wording: nothing here
knows about messages or capabilities. :func:`clamp_text` is what
:class:`~harness_clamp_oversized.ClampOversizedMessages` calls for each part it clamps.

The cut is on line boundaries: the head is the longest run of whole lines from the start
that fits its share of the budget, the tail the longest run of whole lines from the end
that fits the rest. Only when not even one whole line fits a side (a single enormous line,
such as minified JSON) is that side cut inside the line, at a character boundary.
"""

from __future__ import annotations

__all__ = ["Cut", "Recall", "clamp_text", "marker_text"]

from collections.abc import Callable

import attrs

_MAX_ATTEMPTS = 8  # shrink-and-measure rounds before settling for the marker alone


@attrs.frozen
class Recall:
    """How the marker says the cut text can be read back.

    Attributes:
        reference: The recall reference of the original part (``r12.0``), when a recall
            capability named one.
        offsets: Whether ``recall(reference, offset=...)`` reads the original as this text
            (string content; a prompt of several items is rendered as JSON by recall).
        stored: Whether the session's stored log keeps the original (a session in a store).
    """

    reference: str | None = None
    offsets: bool = True
    stored: bool = False


@attrs.frozen
class Cut:
    """The result of :func:`clamp_text`.

    Attributes:
        text: Head, marker line and tail.
        head: The text kept from the start.
        tail: The text kept from the end.
        marker: The marker line (without the newlines around it).
        cut_tokens: Tokens of the text removed from the middle.
        cut_lines: Lines the removed text touches.
        cut_chars: Characters removed.
    """

    text: str
    head: str
    tail: str
    marker: str
    cut_tokens: int
    cut_lines: int
    cut_chars: int


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}" if count == 1 else f"{count:,} {word}s"


def marker_text(
    *, what: str, cut_tokens: int, cut_lines: int, cut_chars: int, offset: int, recall: Recall
) -> str:
    """The marker line that stands where text was cut.

    ``[... 41,200 tokens (1,020 lines, 180,345 characters) cut from the middle of this tool
    result; recall("r12.0", offset=5120) reads them]``; without a reference the end says
    ``the full text is in this session's stored log`` (a stored session) or ``the full text
    was not kept``.

    Args:
        what: What was cut: ``"tool result"`` or ``"prompt"``.
        cut_tokens: Tokens removed.
        cut_lines: Lines the removed text touches.
        cut_chars: Characters removed.
        offset: Character offset of the removed text in the original.
        recall: How the original can be read back.
    """
    amount = (
        f"{_plural(cut_tokens, 'token')} ({_plural(cut_lines, 'line')}, {_plural(cut_chars, 'character')})"
    )
    if recall.reference is not None:
        call = (
            f'recall("{recall.reference}", offset={offset})'
            if recall.offsets
            else f'recall("{recall.reference}")'
        )
        how = f"{call} reads them"
    elif recall.stored:
        how = "the full text is in this session's stored log"
    else:
        how = "the full text was not kept"
    return f"[... {amount} cut from the middle of this {what}; {how}]"


def _head(text: str, budget: int, count: Callable[[str], int]) -> int:
    """Length of the longest prefix of whole lines within ``budget`` tokens (else a character cut)."""
    if budget <= 0:
        return 0
    used = end = 0
    while end < len(text):
        newline = text.find("\n", end)
        stop = len(text) if newline < 0 else newline + 1
        tokens = count(text[end:stop])
        if used + tokens > budget:
            break
        used += tokens
        end = stop
    if end == 0:  # not one whole line fits: cut the first line at a character
        return _longest(lambda n: count(text[:n]) <= budget, min(len(text), budget * 32))
    return end


def _tail(text: str, start: int, budget: int, count: Callable[[str], int]) -> int:
    """Start of the longest suffix of whole lines after ``start`` within ``budget`` tokens."""
    if budget <= 0 or start >= len(text):
        return len(text)
    used = 0
    begin = len(text)
    while begin > start:
        newline = text.rfind("\n", start, begin - 1)
        line_start = start if newline < 0 else newline + 1
        tokens = count(text[line_start:begin])
        if used + tokens > budget:
            break
        used += tokens
        begin = line_start
    if begin == len(text):  # not one whole line fits: cut the last line at a character
        room = min(len(text) - start, budget * 32)
        return len(text) - _longest(lambda n: count(text[len(text) - n :]) <= budget, room)
    return begin


def _longest(fits: Callable[[int], bool], upper: int) -> int:
    """The largest ``n`` in ``[0, upper]`` with ``fits(n)`` (``fits`` is monotone, ``fits(0)``)."""
    low, high = 0, upper
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    return low


def _lines(text: str) -> int:
    """Lines ``text`` touches: its newlines, plus one for a last line without one."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def _assemble(text: str, head_end: int, tail_start: int, marker: str) -> str:
    head, tail = text[:head_end], text[tail_start:]
    before = "" if not head or head.endswith("\n") else "\n"
    after = "\n" if tail else ""
    return f"{head}{before}{marker}{after}{tail}"


def clamp_text(
    text: str,
    *,
    limit: int,
    measure: Callable[[str], int],
    count: Callable[[str], int],
    head_fraction: float,
    what: str,
    recall: Recall,
    total_tokens: int | None = None,
) -> Cut:
    """Cut the middle of ``text`` so that ``measure(result) <= limit``.

    The head gets ``head_fraction`` of the tokens left after the marker, the tail the rest;
    each side ends on a line boundary when at least one whole line fits it. The result is
    measured exactly; while it is over ``limit`` the budget shrinks by the excess and the
    cut is made again. When even the marker alone is over ``limit`` (a limit smaller than
    the marker, or a part whose other content already fills it), the result is the marker
    alone.

    Args:
        text: The text to cut.
        limit: Token limit for ``measure`` of the result.
        measure: Tokens of the part that holds a given text in place of ``text`` (the
            part's framing and other items included).
        count: Tokens of a text (the request's token counter).
        head_fraction: Share of the budget the head gets, in ``[0, 1]``.
        what: What the text is, for the marker (``"tool result"``, ``"prompt"``).
        recall: How the marker says the original can be read back.
        total_tokens: An upper bound of ``count(text)`` when the caller knows one (the
            part's count): sizes the first marker without counting the whole text again.

    Returns:
        The cut. ``cut_tokens`` counts the removed text on its own.
    """

    def marker_for(head_end: int, tail_start: int, cut_tokens: int) -> str:
        middle = text[head_end:tail_start]
        return marker_text(
            what=what,
            cut_tokens=cut_tokens,
            cut_lines=_lines(middle),
            cut_chars=len(middle),
            offset=head_end,
            recall=recall,
        )

    # The widest marker: the numbers of cutting everything (as many digits as any real cut).
    widest = marker_for(0, len(text), count(text) if total_tokens is None else total_tokens)
    available = limit - measure(_assemble("", 0, 0, widest))
    for _ in range(_MAX_ATTEMPTS):
        if available <= 0:
            break
        head_budget = int(available * head_fraction)
        head_end = _head(text, head_budget, count)
        tail_start = max(_tail(text, head_end, available - head_budget, count), head_end)
        middle = text[head_end:tail_start]
        cut_tokens = count(middle)
        marker = marker_for(head_end, tail_start, cut_tokens)
        result = _assemble(text, head_end, tail_start, marker)
        excess = measure(result) - limit
        if excess <= 0:
            return Cut(
                text=result,
                head=text[:head_end],
                tail=text[tail_start:],
                marker=marker,
                cut_tokens=cut_tokens,
                cut_lines=_lines(middle),
                cut_chars=len(middle),
            )
        available -= excess
    marker = marker_for(0, len(text), count(text))
    return Cut(
        text=marker,
        head="",
        tail="",
        marker=marker,
        cut_tokens=count(text),
        cut_lines=_lines(text),
        cut_chars=len(text),
    )
