"""Pins: parts no built-in capability may clear, supersede, summarize or drop.

A part is pinned when its harness mark (``metadata["harness"]``) holds ``"pinned"``
with a truthy value: a string saying who pinned it (``"user"``, ``"task"``,
``"instructions"``, a capability's name) or ``True``. Pin a part in three ways:

* write the mark yourself: ``UserPromptPart("...", metadata={"harness": {"pinned": True}})``;
* call :func:`pin` on a part or a whole message (``harness.pin(...)``);
* let a capability pin it (the agent's ``pin=`` setting pins the first user request and the
  instructions with :func:`pin_anchors`).

The invariant guard compares the pinned parts of a history before and after every
capability edit (:func:`lost_pins`): an edit that loses one is rejected like any other
violation and the history restored. A pinned tool call keeps its result (and a pinned
result its call): the pair stays together whatever a capability drops.
"""

from __future__ import annotations

__all__ = [
    "PIN_KEY",
    "is_pinned",
    "lost_pins",
    "pin",
    "pin_reason",
    "pinned_call_ids",
    "pinned_parts",
]

from collections.abc import Iterator, Sequence
from typing import Final, TypeAlias, TypeVar, cast

from harness.core._sequences import common_prefix, common_suffix
from harness.core.messages import (
    CanonicalMessage,
    Part,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UnknownPart,
    UserPromptPart,
    harness_mark,
    replace,
    with_harness_mark,
)
from harness.errors import MessageError

PIN_KEY: Final = "pinned"
"""Key of the pin inside a part's harness mark."""

_KnownPart: TypeAlias = (
    SystemPromptPart
    | UserPromptPart
    | TextPart
    | ThoughtPart
    | ToolCallPart
    | ToolReturnPart
    | RetryPromptPart
)
_Pinnable = TypeVar("_Pinnable", bound="Part | CanonicalMessage")


def pin_reason(part: Part | CanonicalMessage) -> str | None:
    """Who pinned ``part`` (``"user"`` for ``True``), or ``None`` when it is not pinned."""
    if getattr(part, "metadata", None) is None:  # most parts: no mapping to look into
        return None
    mark = harness_mark(part)
    if mark is None:
        return None
    value = mark.get(PIN_KEY)
    if not value:
        return None
    return value if isinstance(value, str) else "user"


def is_pinned(part: Part | CanonicalMessage) -> bool:
    """True when ``part`` (or, for a message, the message itself) carries a pin."""
    return pin_reason(part) is not None


def pin(obj: _Pinnable, reason: str = "user") -> _Pinnable:
    """Return a copy of a part, or of a message with every part, pinned by ``reason``.

    Args:
        obj: A part or a :class:`~harness.core.messages.CanonicalMessage`.
        reason: Who pins it; kept in the mark so a report can say why a part stayed.

    An :class:`~harness.core.messages.UnknownPart` carries no metadata: pinning one raises,
    and pinning a message leaves its unknown parts as they are.

    Raises:
        MessageError: A part's ``metadata`` is set and is not a mapping, or ``obj`` is an
            ``UnknownPart``.
    """
    if isinstance(obj, CanonicalMessage):
        parts = tuple(_pinned(p, reason) if not isinstance(p, UnknownPart) else p for p in obj.parts)
        return cast("_Pinnable", replace(obj, parts=parts))
    if isinstance(obj, UnknownPart):
        raise MessageError("an UnknownPart carries no metadata and cannot be pinned")
    return cast("_Pinnable", _pinned(cast("_KnownPart", obj), reason))


def _pinned(part: _KnownPart, reason: str) -> _KnownPart:
    return part if is_pinned(part) else with_harness_mark(part, **{PIN_KEY: reason})


def pinned_parts(messages: Sequence[CanonicalMessage]) -> Iterator[tuple[int, int, Part]]:
    """Yield ``(message index, part index, part)`` for every pinned part, in order."""
    for mi, message in enumerate(messages):
        for pi, part in enumerate(message.parts):
            if getattr(part, "metadata", None) is not None and is_pinned(part):
                yield mi, pi, part


def pinned_call_ids(messages: Sequence[CanonicalMessage]) -> frozenset[str]:
    """Tool call ids whose call or answer is pinned: the pair a capability must keep whole."""
    return frozenset(
        part.tool_call_id
        for _, _, part in pinned_parts(messages)
        if isinstance(part, ToolCallPart | ToolReturnPart | RetryPromptPart) and part.tool_call_id
    )


def lost_pins(before: Sequence[CanonicalMessage], after: Sequence[CanonicalMessage]) -> list[Part]:
    """The pinned parts of ``before`` that ``after`` no longer holds unchanged.

    Only the changed span is read, so the cost grows with what an edit touched. A pinned
    part counts as kept when an equal part (content and ids; metadata may gain marks) is
    anywhere in the changed span of ``after``: moving a pinned prompt to the front is
    allowed, changing or dropping it is not. Two equal pinned parts need two copies.
    """
    start, stop_before, stop_after = _span(before, after)
    pinned = [part for mi in range(start, stop_before) for part in before[mi].parts if is_pinned(part)]
    if not pinned:
        return []
    candidates = [part for mi in range(start, stop_after) for part in after[mi].parts]
    lost: list[Part] = []
    for part in pinned:
        match = next((i for i, other in enumerate(candidates) if other is part or _same(other, part)), None)
        if match is None:
            lost.append(part)
        else:
            del candidates[match]
    return lost


def _same(a: Part, b: Part) -> bool:
    """Equal but for metadata: a capability may add its own marks to a part it keeps."""
    if type(a) is not type(b) or isinstance(a, UnknownPart) or isinstance(b, UnknownPart):
        return False
    return replace(a, metadata=None) == replace(b, metadata=None)


def _span(before: Sequence[CanonicalMessage], after: Sequence[CanonicalMessage]) -> tuple[int, int, int]:
    """``(start, stop in before, stop in after)`` of the messages an edit changed, found at C speed."""
    a = before if isinstance(before, list) else list(before)
    b = after if isinstance(after, list) else list(after)
    start = common_prefix(a, b)
    end = common_suffix(a, b, min(len(a), len(b)) - start)
    return start, len(a) - end, len(b) - end
