"""Whole documents: parsing and writing JSON, and the public load and dump functions.

Part of :mod:`harness.wire`; import these functions from there.
"""

from __future__ import annotations

__all__ = [
    "dump_messages",
    "load_items",
    "load_messages",
    "load_messages_and_thoughts",
    "messages_from_jsonable",
    "messages_to_jsonable",
]

import json
import re
from collections.abc import Callable, Iterable
from typing import Any, Final, cast

from cattrs.errors import BaseValidationError, StructureHandlerNotFoundError

from harness.core.messages import CanonicalMessage
from harness.errors import MessageError, WireFormatError
from harness.wire.conversion import MESSAGE_STRUCTURE, MESSAGE_UNSTRUCTURE
from harness.wire.jsontext import DECODER, encode_json
from harness.wire.legacy import legacy_thought
from harness.wire.values import is_array, relocated, type_name

_UNEXPECTED_ERRORS: Final = (
    MessageError,
    BaseValidationError,
    StructureHandlerNotFoundError,
    TypeError,
    ValueError,
    KeyError,
    AttributeError,
    RecursionError,
)
"""Errors a hook is not meant to raise; loading wraps them in a located WireFormatError."""


# ---------------------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------------------


def _parse(data: bytes | bytearray | memoryview | str) -> Any:
    text = _text(data)
    try:
        return DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise WireFormatError(
            f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno} (char {exc.pos})"
        ) from exc
    except (ValueError, RecursionError) as exc:
        raise WireFormatError(f"invalid JSON: {exc}") from exc


def _locate_unserializable(items: list[dict[str, Any]], exc: Exception) -> WireFormatError:
    """Find the message, part and field that ``json`` refused to encode."""
    for message_index, message in enumerate(items):
        for key, value in message.items():
            if key == "parts":
                for part_index, part in enumerate(value):
                    for part_key, part_value in part.items():
                        try:
                            encode_json(part_value)
                        except (TypeError, ValueError, RecursionError) as inner:
                            return WireFormatError(
                                f"cannot be written as JSON: {inner}",
                                message_index=message_index,
                                part_index=part_index,
                                field=part_key,
                            )
                continue
            try:
                encode_json(value)
            except (TypeError, ValueError, RecursionError) as inner:
                return WireFormatError(
                    f"cannot be written as JSON: {inner}", message_index=message_index, field=key
                )
    return WireFormatError(f"cannot be written as JSON: {exc}")  # pragma: no cover - defensive


# ---------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------


_SPACE: Final = re.compile(r"[ \t\n\r]*")
_SEPARATOR: Final = re.compile(r"[ \t\n\r]*([,\]])[ \t\n\r]*")
_BLANKS: Final = frozenset(" \t\n\r")
_STREAM_FROM: Final = 8_000_000
"""Documents of at least this many characters are loaded message by message (see :func:`_stream`)."""


def _text(data: bytes | bytearray | memoryview | str) -> str:
    if isinstance(data, str):
        text = data
    else:
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise WireFormatError(f"invalid UTF-8 at byte {exc.start}") from exc
    return text[1:] if text.startswith("\ufeff") else text


def _stream(text: str, thoughts: list[str] | None) -> list[CanonicalMessage] | None:
    """Parse and load the array one message at a time; ``None`` when anything is amiss.

    Each message's parsed JSON is dropped as soon as the message is built, so a load never
    holds the whole document's JSON tree besides the history: a third less peak memory,
    and far fewer objects for the garbage collector to traverse while the history is built
    (which is what once made loading pause the collector process-wide; at 30,000 messages
    19 MB, this is a quarter faster than one parse). Each message costs a scanner call, though,
    which one parse of a small document does not pay, so documents shorter than
    :data:`_STREAM_FROM` characters are parsed whole. Any irregularity (a JSON error, an
    invalid message) returns ``None`` and the caller takes the careful path, which parses
    the whole document and locates the error.
    """
    scan = cast("Callable[[str, int], tuple[Any, int]]", DECODER.scan_once)  # pyright: ignore[reportAttributeAccessIssue,reportUnknownMemberType]
    hook = MESSAGE_STRUCTURE
    separator = _SEPARATOR.match
    messages: list[CanonicalMessage] = []
    append = messages.append
    try:
        pos = _SPACE.match(text).end()  # pyright: ignore[reportOptionalMemberAccess]
        if text[pos : pos + 1] != "[":
            return None
        pos = _SPACE.match(text, pos + 1).end()  # pyright: ignore[reportOptionalMemberAccess]
        if text[pos : pos + 1] == "]":
            pos += 1
        else:
            while True:
                item, pos = scan(text, pos)
                if thoughts is not None and (thought := legacy_thought(item)) is not None:
                    thoughts.append(thought)
                else:
                    append(hook(item, CanonicalMessage))
                if text[pos] == "," and text[pos + 1] not in _BLANKS:  # compact JSON: no regex
                    pos += 1
                    continue
                found = separator(text, pos)
                if found is None:
                    return None
                pos = found.end()
                if found.group(1) == "]":
                    break
    except Exception:
        return None
    return messages if _SPACE.match(text, pos).end() == len(text) else None  # pyright: ignore[reportOptionalMemberAccess]


def _load_document(data: Any, thoughts: list[str] | None) -> list[CanonicalMessage]:
    if isinstance(data, (bytes, bytearray, memoryview, str)):
        text = _text(cast("bytes | str", data))
        found: list[str] | None = None if thoughts is None else []
        messages = _stream(text, found) if len(text) >= _STREAM_FROM else None
        if messages is not None:
            if thoughts is not None and found:
                thoughts.extend(found)
            return messages
        data = _parse(text)
    if not is_array(data):
        raise WireFormatError(f"a history must be a JSON array, got {type_name(data)}")
    return load_items(cast("list[Any]", data), thoughts)


def load_items(items: list[Any], thoughts: list[str] | None) -> list[CanonicalMessage]:
    """Load parsed message objects, locating any error by message index.

    Args:
        items: The parsed JSON array.
        thoughts: ``None`` to read legacy thought entries as messages; otherwise a list
            that receives their text instead.

    Raises:
        WireFormatError: An item is not a valid message (names its index).
    """
    hook = MESSAGE_STRUCTURE
    if thoughts is None:
        try:
            return [hook(item, CanonicalMessage) for item in items]
        except Exception:
            pass
    messages: list[CanonicalMessage] = []
    append = messages.append
    for index, item in enumerate(items):
        try:
            if thoughts is not None:
                thought = legacy_thought(item)
                if thought is not None:
                    thoughts.append(thought)
                    continue
            append(hook(item, CanonicalMessage))
        except WireFormatError as exc:
            raise relocated(exc, message_index=index) from exc.__cause__
        except _UNEXPECTED_ERRORS as exc:
            raise WireFormatError(f"{type(exc).__name__}: {exc}", message_index=index) from exc
    return messages


def load_messages(data: bytes | bytearray | memoryview | str | list[Any]) -> list[CanonicalMessage]:
    """Load a history from JSON (bytes or text) or from already-parsed JSON (a list).

    Legacy entries are converted: ``{"content": ...}`` becomes a request with one
    :class:`~harness.core.messages.UserPromptPart`, ``{"thought": ...}`` a response with one
    :class:`~harness.core.messages.ThoughtPart`.

    Args:
        data: The document: UTF-8 JSON bytes, a JSON string, or a parsed JSON array.
            A parsed list is not copied: the messages share its tool-call ``args``,
            tool-return ``content`` and prompt content items (``extra`` and ``metadata``
            are frozen copies). ``NaN`` and infinities read as ``null`` and escaped lone
            surrogates are kept (see :mod:`harness.wire.jsontext`).

    Returns:
        The messages, in document order.

    Raises:
        WireFormatError: The document is not valid JSON or not a valid history; the error
            names the message index, part index and field at fault.
    """
    return _load_document(data, None)


def load_messages_and_thoughts(
    data: bytes | bytearray | memoryview | str | list[Any],
) -> tuple[list[CanonicalMessage], list[str]]:
    """Load a history, taking legacy ``{"thought": ...}`` entries out as a separate list.

    Args:
        data: As for :func:`load_messages`.

    Returns:
        The messages and, in document order, the text of every legacy thought entry.

    Raises:
        WireFormatError: As for :func:`load_messages`.
    """
    thoughts: list[str] = []
    messages = _load_document(data, thoughts)
    return messages, thoughts


def messages_from_jsonable(items: list[Any]) -> list[CanonicalMessage]:
    """Load a history from parsed JSON, for example the ``messages`` of a session file.

    Args:
        items: A list of message objects as :func:`messages_to_jsonable` returns them.
            The messages share tool-call ``args``, tool-return ``content`` and prompt
            content items with ``items``.

    Returns:
        The messages, in order.

    Raises:
        WireFormatError: ``items`` is not a list or holds an invalid message.
    """
    if not isinstance(items, list):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise WireFormatError(f"a history must be a JSON array, got {type_name(items)}")
    return load_items(items, None)


# ---------------------------------------------------------------------------------------
# Dumping
# ---------------------------------------------------------------------------------------


def messages_to_jsonable(messages: Iterable[CanonicalMessage]) -> list[dict[str, Any]]:
    """Convert a history to JSON-ready lists and dicts, for embedding in another document.

    Args:
        messages: The history.

    Returns:
        One dict per message. Nested values are shared with the messages, not copied:
        ``extra`` values and ``metadata`` are read-only (:class:`~harness.core.frozen.FrozenDict`,
        :class:`~harness.core.frozen.FrozenList`, which JSON writes as objects and arrays);
        do not mutate ``args`` or ``content`` either.

    Raises:
        WireFormatError: An element is not a :class:`~harness.core.messages.CanonicalMessage`
            or holds a part of an unknown class.
    """
    hook = MESSAGE_UNSTRUCTURE
    out: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if not isinstance(message, CanonicalMessage):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise WireFormatError(
                f"expected a CanonicalMessage, got {type(message).__name__}", message_index=index
            )
        try:
            out.append(hook(message))
        except WireFormatError as exc:
            raise relocated(exc, message_index=index) from exc.__cause__
    return out


def dump_messages(messages: Iterable[CanonicalMessage]) -> bytes:
    r"""Write a history as compact UTF-8 JSON that pydantic-ai's ``ModelMessagesTypeAdapter`` loads.

    Args:
        messages: The history.

    Returns:
        The JSON document, plain ASCII. Non-finite floats are written as ``null`` and lone
        surrogates as ``\u`` escapes (see :mod:`harness.wire.jsontext`).

    Raises:
        WireFormatError: An element is not a message, or a value (tool arguments, tool-return
            content, metadata, ...) cannot be written as JSON (an arbitrary object, a
            circular reference); the error names the message, part and field.
    """
    items = messages_to_jsonable(messages)
    try:
        return encode_json(items)
    except (TypeError, ValueError, RecursionError) as exc:
        raise _locate_unserializable(items, exc) from exc
