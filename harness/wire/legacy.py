"""The legacy history entries: ``{"content": ...}`` and ``{"thought": ...}``.

An entry without ``kind`` and ``parts`` is read as a legacy entry: ``{"content": ...}``
is a request holding one user prompt, ``{"thought": ...}`` a response holding one
thinking part; its other keys are read like a message's own fields. When loading with
:func:`~harness.wire.load_messages_and_thoughts`, thought entries are taken out as a
separate list instead. Dumping always writes the current form.

The legacy form never applies to an object with a ``role`` key (an OpenAI or Anthropic
chat message) or with a ``message`` object (a transcript record such as Claude Code's):
reading one as a user prompt would turn every assistant turn into a prompt and the
content blocks into prompt text. Such an entry is an error that points to
:func:`~harness.wire.load_history`, which reads those formats. Part of
:mod:`harness.wire`; import the public API from there.
"""

from __future__ import annotations

__all__ = ["is_chat_shaped", "legacy_thought", "structure_legacy"]

from collections.abc import Mapping
from typing import Any, cast

from harness.core.messages import CanonicalMessage, ThoughtPart, UserPromptPart
from harness.errors import WireFormatError
from harness.wire.fields import read_message_fields
from harness.wire.values import check_content, check_str


def is_chat_shaped(data: Mapping[str, Any]) -> bool:
    """True for an object the legacy form must not read: a chat message or a transcript record."""
    return "role" in data or isinstance(data.get("message"), Mapping)


def _not_legacy(data: Mapping[str, Any]) -> WireFormatError:
    what = "a chat message with a 'role'" if "role" in data else "a transcript record around a 'message'"
    return WireFormatError(
        f"{what} (OpenAI or Anthropic format), not harness's wire format: read it with "
        "harness.wire.load_history() or the command line's --format auto",
        field="role" if "role" in data else "message",
    )


def _legacy_fields(data: Mapping[str, Any], key: str) -> dict[str, Any]:
    """Message fields of a legacy entry: its keys other than ``key``, read like a message's."""
    if len(data) == 1:
        return {}
    return read_message_fields({k: v for k, v in data.items() if k != key})


def structure_legacy(data: Mapping[str, Any]) -> CanonicalMessage | None:
    """Load a legacy entry (one that has neither ``kind`` nor ``parts``).

    Returns:
        The message, or ``None`` when ``data`` has neither ``thought`` nor ``content``.

    Raises:
        WireFormatError: The entry's value or one of its fields is invalid, or the entry
            is a chat message or transcript record (no index yet).
    """
    if is_chat_shaped(data):
        raise _not_legacy(data)
    if "thought" in data:
        thought = check_str(data["thought"], "thought")
        return CanonicalMessage("response", (ThoughtPart(thought),), **_legacy_fields(data, "thought"))
    if "content" in data:
        content = check_content(data["content"], "content")
        return CanonicalMessage("request", (UserPromptPart(content),), **_legacy_fields(data, "content"))
    return None


def legacy_thought(item: Any) -> str | None:
    """The text of a legacy ``{"thought": ...}`` entry, or ``None`` for any other item.

    Raises:
        WireFormatError: The entry's ``thought`` is not a string (no index yet).
    """
    if isinstance(item, Mapping) and "thought" in item and "kind" not in item and "parts" not in item:
        data = cast("Mapping[str, Any]", item)
        if is_chat_shaped(data):
            raise _not_legacy(data)
        return check_str(data["thought"], "thought")
    return None
