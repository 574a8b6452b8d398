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

import contextlib
import gc
import json
from collections.abc import Generator, Iterable
from datetime import datetime
from typing import Any, Final, cast

from cattrs.errors import BaseValidationError, StructureHandlerNotFoundError

from harness.core.messages import CanonicalMessage
from harness.errors import MessageError, WireFormatError
from harness.wire.conversion import MESSAGE_STRUCTURE, MESSAGE_UNSTRUCTURE
from harness.wire.legacy import legacy_thought
from harness.wire.values import format_timestamp, is_array, is_object, relocated, type_name

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


def _reject_constant(name: str) -> Any:
    raise WireFormatError(f"invalid JSON: {name} is not a JSON value")


_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)


def _default(value: Any) -> Any:
    if is_object(value):
        return dict(value)
    if isinstance(value, (tuple, set, frozenset)):
        return list(cast("Iterable[Any]", value))
    if isinstance(value, datetime):
        return format_timestamp(value)
    raise TypeError(f"a {type(value).__name__} is not JSON serializable")


_ENCODER: Final = json.JSONEncoder(separators=(",", ":"), allow_nan=False, default=_default)
"""ASCII output (``\\u`` escapes): valid UTF-8, safe for lone surrogates, and faster in CPython."""


def _parse(data: bytes | bytearray | memoryview | str) -> Any:
    if isinstance(data, (bytes, bytearray, memoryview)):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise WireFormatError(f"invalid UTF-8 at byte {exc.start}") from exc
    else:
        text = data
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        return _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise WireFormatError(
            f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno} (char {exc.pos})"
        ) from exc
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, WireFormatError):
            raise
        raise WireFormatError(f"invalid JSON: {exc}") from exc


def _locate_unserializable(items: list[dict[str, Any]], exc: Exception) -> WireFormatError:
    """Find the message, part and field that ``json`` refused to encode."""
    for message_index, message in enumerate(items):
        for key, value in message.items():
            if key == "parts":
                for part_index, part in enumerate(value):
                    for part_key, part_value in part.items():
                        try:
                            _ENCODER.encode(part_value)
                        except (TypeError, ValueError, RecursionError) as inner:
                            return WireFormatError(
                                f"cannot be written as JSON: {inner}",
                                message_index=message_index,
                                part_index=part_index,
                                field=part_key,
                            )
                continue
            try:
                _ENCODER.encode(value)
            except (TypeError, ValueError, RecursionError) as inner:
                return WireFormatError(
                    f"cannot be written as JSON: {inner}", message_index=message_index, field=key
                )
    return WireFormatError(f"cannot be written as JSON: {exc}")  # pragma: no cover - defensive


# ---------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------


@contextlib.contextmanager
def _gc_paused() -> Generator[None]:
    """Pause the cyclic garbage collector while a history is built.

    Loading allocates hundreds of thousands of small, acyclic objects; each allocation
    burst triggers collections that traverse everything already alive, which made a
    10,000-message load twice as slow. Nothing built here forms a cycle, and the
    collector is re-enabled (if it was enabled) however the load ends.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _document_items(data: Any) -> list[Any]:
    if isinstance(data, (bytes, bytearray, memoryview, str)):
        data = _parse(cast("bytes | str", data))
    if not is_array(data):
        raise WireFormatError(f"a history must be a JSON array, got {type_name(data)}")
    return cast("list[Any]", data)


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
            A parsed list is not copied: the messages share its nested values.

    Returns:
        The messages, in document order.

    Raises:
        WireFormatError: The document is not valid JSON or not a valid history; the error
            names the message index, part index and field at fault.
    """
    with _gc_paused():
        return load_items(_document_items(data), None)


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
    with _gc_paused():
        messages = load_items(_document_items(data), thoughts)
    return messages, thoughts


def messages_from_jsonable(items: list[Any]) -> list[CanonicalMessage]:
    """Load a history from parsed JSON, for example the ``messages`` of a session file.

    Args:
        items: A list of message objects as :func:`messages_to_jsonable` returns them.
            The messages share nested values (args, content, metadata) with ``items``.

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
        One dict per message. Nested values (args, content, metadata) are shared with the
        messages, not copied: do not mutate them.

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
    """Write a history as compact UTF-8 JSON that pydantic-ai's ``ModelMessagesTypeAdapter`` loads.

    Args:
        messages: The history.

    Returns:
        The JSON document.

    Raises:
        WireFormatError: An element is not a message, or a value (tool arguments, tool-return
            content, metadata, ...) cannot be written as JSON (for example ``NaN`` or an
            arbitrary object); the error names the message, part and field.
    """
    items = messages_to_jsonable(messages)
    try:
        return _ENCODER.encode(items).encode("ascii")
    except (TypeError, ValueError, RecursionError) as exc:
        raise _locate_unserializable(items, exc) from exc
