"""A converter that caches conversions by object identity, for use across a run's requests.

pydantic-ai hands a history processor (and a capability's ``before_model_request``) the
same message objects on every request of a run, so :class:`MessageConverter` converts
each message once and converts back only the messages a stack changed.
"""

from __future__ import annotations

__all__ = ["MessageConverter"]

from collections.abc import Sequence
from typing import Any, cast

from harness.core.messages import CanonicalMessage, Part
from harness.interop.pydantic_ai.convert import (
    ModelMessage,
    check_canonical,
    check_pydantic_ai,
    convert_from_pydantic_ai,
    convert_to_pydantic_ai,
)


def _signature(message: ModelMessage) -> tuple[Any, ...]:
    """What a cached conversion of ``message`` depends on (pydantic-ai mutates the tail).

    The parts by identity (a copy of the list, which may be changed in place), every
    field value, and a copy of ``metadata`` (the one mutable field pydantic-ai updates).
    """
    metadata = message.metadata
    return (tuple(message.parts), tuple(vars(message).values()), None if metadata is None else dict(metadata))


_Entry = tuple[ModelMessage, tuple[Any, ...], CanonicalMessage]
"""A cached conversion: the pydantic-ai message, its signature, the harness message."""


class MessageConverter:
    """Converts histories both ways, caching each conversion by object identity.

    pydantic-ai hands a history processor (and a capability's ``before_model_request``) the
    same message objects on every request of a run, so with one converter per run only new
    or changed messages are converted. Converting harness messages back returns the very
    pydantic-ai object a harness message came from, and a message the stack changed reuses
    the pydantic-ai part objects of its unchanged parts.

    A cached pydantic-ai conversion is used only while the message still has the same
    parts (by identity) and field values, so pydantic-ai filling in a request's
    ``run_id``, ``timestamp`` or ``instructions`` after the fact is picked up.
    """

    def __init__(self) -> None:
        """Create a converter with empty caches."""
        self._forward: dict[int, _Entry] = {}
        self._backward: dict[int, tuple[CanonicalMessage, ModelMessage]] = {}
        self._parts: dict[int, tuple[Part, Any]] = {}

    def to_canonical(self, messages: Sequence[ModelMessage]) -> list[CanonicalMessage]:
        """Convert pydantic-ai messages to harness messages (cached per message object).

        Raises:
            InteropError: An element is not a pydantic-ai message.
            WireFormatError: A message cannot be read (names the message index).
        """
        forward = self._forward
        out: list[Any] = []
        misses: list[int] = []
        for index, message in enumerate(messages):
            entry = forward.get(id(message))
            if entry is not None and entry[0] is message and entry[1] == _signature(message):
                out.append(entry[2])
            else:
                out.append(None)
                misses.append(index)
        if misses:
            missed = check_pydantic_ai(messages[i] for i in misses)
            converted = convert_from_pydantic_ai(missed, misses)
            for index, message, canonical in zip(misses, missed, converted, strict=True):
                out[index] = canonical
                self._remember(canonical, message)
        if len(forward) > 2 * len(out) + 64:
            self._prune(messages, out)
        return cast("list[CanonicalMessage]", out)

    def to_pydantic_ai(self, messages: Sequence[CanonicalMessage]) -> list[ModelMessage]:
        """Convert harness messages to pydantic-ai messages.

        A message this converter produced (or converted from pydantic-ai) comes back as the
        same pydantic-ai object; others are converted, reusing cached pydantic-ai parts.

        Raises:
            InteropError: An element is not a harness message, or pydantic-ai refuses a
                converted message (for example a tool return without a tool name).
        """
        checked = check_canonical(messages)
        backward = self._backward
        out: list[ModelMessage | None] = []
        misses: list[int] = []
        for index, canonical in enumerate(checked):
            entry = backward.get(id(canonical))
            if entry is not None and entry[0] is canonical:
                out.append(entry[1])
            else:
                out.append(None)
                misses.append(index)
        if misses:
            converted = convert_to_pydantic_ai([checked[i] for i in misses], misses, self._parts)
            for index, message in zip(misses, converted, strict=True):
                canonical = checked[index]
                out[index] = message
                self._remember(canonical, message)
        return cast("list[ModelMessage]", out)

    def _remember(self, canonical: CanonicalMessage, message: ModelMessage) -> None:
        """Cache the conversion both ways, and its parts for reuse."""
        self._forward[id(message)] = (message, _signature(message), canonical)
        self._backward[id(canonical)] = (canonical, message)
        if len(canonical.parts) != len(message.parts):  # pragma: no cover - wire keeps parts 1:1
            return
        parts = self._parts
        for ours, theirs in zip(canonical.parts, message.parts, strict=True):
            parts[id(ours)] = (ours, theirs)

    def _prune(self, messages: Sequence[ModelMessage], canonical: Sequence[CanonicalMessage]) -> None:
        """Forget conversions of messages no longer in the history (amortised O(1) per message)."""
        old = self._forward
        self._forward = {id(m): old[id(m)] for m in messages if id(m) in old}
        self._backward = {id(c): (c, m) for c, m in zip(canonical, messages, strict=True)}
        self._parts = {}
        for message, _, ours in self._forward.values():
            if len(ours.parts) == len(message.parts):
                for part, theirs in zip(ours.parts, message.parts, strict=True):
                    self._parts[id(part)] = (part, theirs)
