"""The shapes a history document comes in: a message list, a request body, transcript records.

A document is a list of messages (a JSON array, or JSON Lines with one message per line),
an object holding a ``messages`` list (a Chat Completions or Messages API request body,
whose ``system`` is read too), or a single message. In a list, an object whose
``message`` is a role-shaped message is a *record* around it, as in Claude Code
transcripts (``{"type": "assistant", "message": {...}, "uuid": ..., "timestamp": ...}``):
the message is read and the record's other keys are kept. Once a document holds records,
its objects that carry no message (Claude Code's ``summary``, ``system``,
``file-history-snapshot``, ``queue-operation``... lines) are skipped and counted by their
``type``. When some message records are marked ``isSidechain`` (a sub-agent's turns
written into the main transcript) and others are not, the sidechain ones are skipped too,
counted as ``"sidechain"``. Part of :mod:`harness.wire`; import the public API from there.
"""

from __future__ import annotations

__all__ = ["Entry", "document_messages", "entries_of", "is_bookkeeping", "is_record"]

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final, cast

import attrs

from harness.errors import WireFormatError
from harness.wire.foreign import Slot, is_mapping, leftovers
from harness.wire.values import type_name

_MESSAGE_KEYS: Final = ("role", "kind", "parts")
"""Keys that make an object a message rather than a record or a bookkeeping line."""

_EMPTY: Final[Mapping[str, Any]] = {}

_EXPECTED: Final = "expected a list of messages (a JSON array, or JSON Lines of messages or records)"


@attrs.frozen
class Entry:
    """One message of a document, with the record around it.

    Attributes:
        index: The message's (or record's) index in the document.
        message: The message.
        slots: Values of the record that have a slot (its ``timestamp``).
        record_rest: The record's other keys (empty for a bare message).
    """

    index: int
    message: Any
    slots: tuple[Slot, ...] = ()
    record_rest: Mapping[str, Any] = _EMPTY


def is_record(item: object) -> bool:
    """True for an object around a role-shaped ``message`` (a transcript record)."""
    if not is_mapping(item):
        return False
    data = cast("Mapping[str, Any]", item)
    if any(key in data for key in _MESSAGE_KEYS):
        return False
    message: object = data.get("message")
    return is_mapping(message) and "role" in cast("Mapping[str, Any]", message)


def is_bookkeeping(item: object) -> bool:
    """True for a typed object that is neither a message nor a record (a ``summary`` line...)."""
    if not is_mapping(item):
        return False
    data = cast("Mapping[str, Any]", item)
    return isinstance(data.get("type"), str) and not any(key in data for key in (*_MESSAGE_KEYS, "message"))


def document_messages(value: Any) -> tuple[list[Any], Any]:
    """The message list of a parsed document and its top-level ``system`` (or ``None``).

    Raises:
        WireFormatError: The document is not a list, a request body or a message.
    """
    if isinstance(value, list):
        return cast("list[Any]", value), None
    if is_mapping(value):
        data = cast("Mapping[str, Any]", value)
        messages: object = data.get("messages")
        if isinstance(messages, list):
            return cast("list[Any]", messages), data.get("system")
        if any(key in data for key in _MESSAGE_KEYS) or is_record(data):
            return [data], None
        keys = ", ".join(repr(key) for key in list(data)[:6]) or "no keys"
        raise WireFormatError(
            f"a JSON object without a 'messages' key (it has {keys}): {_EXPECTED}, or an object with a "
            "'messages' list"
        )
    raise WireFormatError(f"a JSON scalar ({type_name(value)}): {_EXPECTED}")


def _record_entry(index: int, record: Mapping[str, Any]) -> Entry:
    message = cast("Mapping[str, Any]", record["message"])
    consumed = ["message"]
    slots: list[Slot] = []
    if record.get("type") == message.get("role"):
        consumed.append("type")
    stamp: object = record.get("timestamp")
    if isinstance(stamp, str):
        try:
            parsed = datetime.fromisoformat(stamp)
        except ValueError:
            pass  # kept verbatim with the record's other keys
        else:
            slots.append(Slot("timestamp", parsed, "timestamp", stamp, in_record=True))
            consumed.append("timestamp")
    return Entry(index, message, tuple(slots), leftovers(record, consumed))


def entries_of(
    items: Sequence[Any], *, lines: Sequence[int] | None = None
) -> tuple[list[Entry], Counter[str]]:
    """The messages of a document's items, records unwrapped, and the count of skipped items by type.

    Without records, every item is a message. With records, bare messages are read too,
    objects without a message are skipped, and so are sidechain records when the main
    conversation is there.

    Raises:
        WireFormatError: In a document with records, an item is not a JSON object.
    """
    skipped: Counter[str] = Counter()
    if not any(is_record(item) for item in items):
        return [Entry(index, item) for index, item in enumerate(items)], skipped
    entries: list[Entry] = []
    sidechain: list[bool] = []
    for index, item in enumerate(items):
        if not is_mapping(item):
            line = lines[index] if lines is not None and index < len(lines) else None
            raise WireFormatError(
                f"a transcript record must be a JSON object, got {type_name(item)}",
                message_index=index,
                line=line,
            )
        data = cast("Mapping[str, Any]", item)
        if is_record(data):
            entries.append(_record_entry(index, data))
            sidechain.append(data.get("isSidechain") is True)
        elif any(key in data for key in _MESSAGE_KEYS):
            entries.append(Entry(index, data))
            sidechain.append(False)
        else:
            kind: object = data.get("type")
            skipped[kind if isinstance(kind, str) else "(no type)"] += 1
    if any(sidechain) and not all(sidechain):
        kept = [entry for entry, side in zip(entries, sidechain, strict=True) if not side]
        skipped["sidechain"] += len(entries) - len(kept)
        entries = kept
    return entries, skipped
