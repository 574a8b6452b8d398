"""Lossless conversion between harness and pydantic-ai messages, both ways.

Both directions go through the JSON form both libraries share (see :mod:`harness.wire`):
pydantic-ai's ``ModelMessagesTypeAdapter`` dumps or validates it, :mod:`harness.wire`
reads or writes it, and :mod:`~harness.interop.pydantic_ai.stash` keeps aside, in the
pydantic-ai message's ``metadata``, what pydantic-ai has no field for.
"""

from __future__ import annotations

__all__ = [
    "ModelMessage",
    "check_canonical",
    "check_pydantic_ai",
    "convert_from_pydantic_ai",
    "convert_to_pydantic_ai",
    "messages_from_pydantic_ai",
    "messages_to_pydantic_ai",
]

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any, Final, cast

import pydantic
from pydantic_ai import messages as _pai

from harness.core.messages import TOOL_KIND_KEY, CanonicalMessage, Part
from harness.errors import InteropError, WireFormatError
from harness.interop.pydantic_ai.stash import restore, stashed_metadata
from harness.wire import messages_from_jsonable, messages_to_jsonable

ModelMessage = _pai.ModelRequest | _pai.ModelResponse
"""A pydantic-ai message (``pydantic_ai.messages.ModelMessage`` without its annotation)."""

_ADAPTER: Final = _pai.ModelMessagesTypeAdapter
_MESSAGE_TYPES: Final = (_pai.ModelRequest, _pai.ModelResponse)


# ---------------------------------------------------------------------------------------
# JSON forms
# ---------------------------------------------------------------------------------------


def _dump(messages: Sequence[ModelMessage]) -> list[dict[str, Any]]:
    """pydantic-ai messages as JSON-ready dicts (pydantic-ai's own serialisation)."""
    return cast("list[dict[str, Any]]", _ADAPTER.dump_python(list(messages), mode="json"))


def _refused_kinds(items: list[dict[str, Any]], exc: pydantic.ValidationError) -> list[dict[str, Any]] | None:
    """``items`` with the ``tool_kind`` of every refused typed tool part dropped (``None``: none refused).

    pydantic-ai validates a part with a core ``tool_kind`` (``"tool-search"``) as its typed
    subclass, whose content has a declared structure. A capability that rewrote that content
    (a placeholder) made it unsubstantiated; pydantic-ai's own ``narrow_type`` strips such a
    kind, so the part is sent as a plain tool return instead of aborting the run. The stash
    keeps the harness form (with its kind) for the way back.
    """
    out = list(items)
    relaxed: set[tuple[int, int]] = set()
    for error in exc.errors():
        location = list(error["loc"])
        if not location or not isinstance(location[0], int) or "parts" not in location:
            return None
        after = location[location.index("parts") + 1 :]
        if not after or not isinstance(after[0], int):
            return None
        position, index = location[0], after[0]
        if (position, index) in relaxed:
            continue
        parts: list[Any] = out[position].get("parts") or []
        part: object = parts[index] if index < len(parts) else None
        if not isinstance(part, dict) or cast("dict[str, Any]", part).get(TOOL_KIND_KEY) is None:
            return None  # a refusal the kind does not explain
        parts = list(parts)
        parts[index] = {**cast("dict[str, Any]", part), TOOL_KIND_KEY: None}
        out[position] = {**out[position], "parts": parts}
        relaxed.add((position, index))
    return out if relaxed else None


def _validate(items: list[dict[str, Any]], indices: Sequence[int]) -> list[ModelMessage]:
    try:
        return list(_ADAPTER.validate_python(items))
    except pydantic.ValidationError as exc:
        relaxed = _refused_kinds(items, exc)
        if relaxed is not None:
            try:
                return list(_ADAPTER.validate_python(relaxed))
            except pydantic.ValidationError:
                pass  # report the first refusal
        error = exc.errors()[0]
        location = list(error["loc"])
        position = location[0] if location and isinstance(location[0], int) else 0
        where = f"message {indices[position] if position < len(indices) else position}"
        if "parts" in location:
            after = location[location.index("parts") + 1 :]
            if after and isinstance(after[0], int):
                where += f", part {after[0]}"
                fields = [str(item) for item in after[2:] if not isinstance(item, int)]
                if fields:
                    where += f", field {'.'.join(fields)!r}"
        raise InteropError(f"{where}: pydantic-ai refuses it: {error['msg']}") from exc


def _from_dumped(items: list[dict[str, Any]], indices: Sequence[int]) -> list[CanonicalMessage]:
    restored = [restore(item) for item in items]
    try:
        return messages_from_jsonable(restored)
    except WireFormatError as exc:
        index = exc.message_index if exc.message_index is not None else 0
        raise WireFormatError(
            exc.reason,
            message_index=indices[index] if index < len(indices) else exc.message_index,
            part_index=exc.part_index,
            field=exc.field,
        ) from exc


# ---------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------


def check_pydantic_ai(messages: Iterable[object]) -> list[ModelMessage]:
    """The messages as a list, each checked to be a pydantic-ai message.

    Raises:
        InteropError: An element is not a ``ModelRequest`` or ``ModelResponse``.
    """
    out: list[ModelMessage] = []
    for index, message in enumerate(messages):
        if not isinstance(message, _MESSAGE_TYPES):
            raise InteropError(
                f"message {index}: expected a pydantic-ai ModelRequest or ModelResponse, "
                f"got {type(message).__name__}"
            )
        out.append(message)
    return out


def check_canonical(messages: Iterable[object]) -> list[CanonicalMessage]:
    """The messages as a list, each checked to be a harness message.

    Raises:
        InteropError: An element is not a :class:`~harness.core.messages.CanonicalMessage`.
    """
    out: list[CanonicalMessage] = []
    for index, message in enumerate(messages):
        if not isinstance(message, CanonicalMessage):
            raise InteropError(f"message {index}: expected a CanonicalMessage, got {type(message).__name__}")
        out.append(message)
    return out


# ---------------------------------------------------------------------------------------
# Conversions (no cache)
# ---------------------------------------------------------------------------------------


def convert_from_pydantic_ai(
    messages: Sequence[ModelMessage], indices: Sequence[int]
) -> list[CanonicalMessage]:
    """Convert checked pydantic-ai messages, restoring stashed harness values.

    Args:
        messages: The messages (checked with :func:`check_pydantic_ai`).
        indices: The position of each message in the caller's history, for errors.

    Raises:
        WireFormatError: A message cannot be read (names its index in ``indices``).
    """
    return _from_dumped(_dump(messages), indices)


def convert_to_pydantic_ai(
    messages: list[CanonicalMessage],
    indices: Sequence[int],
    known_parts: dict[int, tuple[Part, Any]] | None = None,
) -> list[ModelMessage]:
    """Convert checked harness messages, stashing what pydantic-ai cannot hold.

    Args:
        messages: The messages (checked with :func:`check_canonical`).
        indices: The position of each message in the caller's history, for errors.
        known_parts: ``id(harness part) -> (harness part, pydantic-ai part)`` of parts
            converted before, whose pydantic-ai objects are reused.

    Raises:
        InteropError: pydantic-ai refuses a converted message.
        WireFormatError: A value cannot be written as JSON.
    """
    try:
        items = messages_to_jsonable(messages)
    except WireFormatError as exc:
        index = exc.message_index if exc.message_index is not None else 0
        raise WireFormatError(
            exc.reason, message_index=indices[index], part_index=exc.part_index, field=exc.field
        ) from exc
    built = _validate(items, indices)
    if known_parts:
        for position, (canonical, message) in enumerate(zip(messages, built, strict=True)):
            reused = [
                known[1] if (known := known_parts.get(id(part))) is not None and known[0] is part else None
                for part in canonical.parts
            ]
            if any(part is not None for part in reused):
                parts = [
                    ours if ours is not None else theirs
                    for ours, theirs in zip(reused, message.parts, strict=True)
                ]
                built[position] = dataclasses.replace(message, parts=parts)
    dumped = _dump(built)
    back = messages_from_jsonable([restore(dict(item)) for item in dumped])
    for position, (canonical, again) in enumerate(zip(messages, back, strict=True)):
        if again != canonical:
            message = built[position]
            metadata = stashed_metadata(message.metadata, items[position], dumped[position], canonical, again)
            built[position] = dataclasses.replace(message, metadata=metadata)
    return built


def messages_from_pydantic_ai(messages: Sequence[ModelMessage]) -> list[CanonicalMessage]:
    """Convert pydantic-ai messages to harness messages.

    Args:
        messages: ``ModelRequest`` and ``ModelResponse`` objects, e.g. ``result.all_messages()``.

    Returns:
        One :class:`~harness.core.messages.CanonicalMessage` per message, parts one to one.

    Raises:
        InteropError: An element is not a pydantic-ai message.
        WireFormatError: A message cannot be read as a harness message (names its index).
    """
    checked = check_pydantic_ai(messages)
    return convert_from_pydantic_ai(checked, range(len(checked)))


def messages_to_pydantic_ai(messages: Sequence[CanonicalMessage]) -> list[ModelMessage]:
    """Convert harness messages to pydantic-ai messages.

    Args:
        messages: The history.

    Returns:
        One ``ModelRequest`` or ``ModelResponse`` per message, parts one to one (a harness
        retry prompt becomes pydantic-ai 2.x's retried ``ToolReturnPart`` or a
        ``RetryFeedbackPart``).

    Raises:
        InteropError: An element is not a harness message, or pydantic-ai refuses a
            message (names the message, part and field; e.g. a tool return without a
            tool name).
        WireFormatError: A value cannot be written as JSON.
    """
    checked = check_canonical(messages)
    if not checked:
        return []
    return convert_to_pydantic_ai(checked, range(len(checked)))
