"""What the server left in the history: compaction blocks, applied edits, and their portable form.

A response from Anthropic keeps a server-side ``compaction`` block as an
:class:`~harness.core.UnknownPart` of kind :data:`COMPACTION_KIND` (the block whole, sent
back verbatim by ``AnthropicModel``) and the edits the server applied in
``extra["provider_details"]["context_management"]["applied_edits"]``. Another provider
cannot take the block: :func:`portable_messages` turns each one into a text part holding its
summary, for the request only (the stored history keeps the block).

With ``pause_after_compaction`` the server answers with the block alone. The loop takes a
response without text or tool calls for an empty one (it drops it and asks again), so the
capability adds a marked :data:`PAUSE_TEXT` part to it (:func:`with_pause_text`): the
response is stored and the run ends there. That part is never sent (:func:`sendable_messages`).
"""

from __future__ import annotations

__all__ = [
    "COMPACTION_KIND",
    "NO_SUMMARY",
    "PAUSE_TEXT",
    "SUMMARY_PREFIX",
    "applied_edits",
    "compaction_parts",
    "compaction_summary",
    "is_compaction_pause",
    "portable_messages",
    "sendable_messages",
    "with_pause_text",
]

from collections.abc import Mapping, Sequence
from typing import Any, Final, cast

from harness.core import (
    CanonicalMessage,
    Part,
    TextPart,
    ToolCallPart,
    UnknownPart,
    harness_mark,
    thaw,
    with_harness_mark,
)

COMPACTION_KIND: Final = "anthropic-compaction"
"""``UnknownPart.kind`` of a server-side compaction block (``harness.models.anthropic.COMPACTION_KIND``)."""

SUMMARY_PREFIX: Final = "[Summary of the earlier conversation, written when the provider compacted it]"
"""First line of the text part that stands for a compaction block in another provider's request."""

NO_SUMMARY: Final = "[The provider compacted the earlier conversation here; it returned no summary.]"
"""The text part for a compaction block without a summary (a failed compaction)."""

PAUSE_TEXT: Final = "[Paused: the provider compacted the conversation. Send the next message to continue.]"
"""The text part added to a compaction-only response (``pause_after_compaction``); the run's output."""

_SOURCE: Final = "anthropic_context_management"


def compaction_parts(message: CanonicalMessage) -> list[UnknownPart]:
    """The compaction blocks of ``message`` (a response), in order."""
    return [p for p in message.parts if isinstance(p, UnknownPart) and p.kind == COMPACTION_KIND]


def compaction_summary(part: UnknownPart) -> str | None:
    """The summary a compaction block carries, or ``None`` (a failed compaction has none)."""
    content = part.data.get("content")
    return content if isinstance(content, str) and content.strip() else None


def applied_edits(message: CanonicalMessage) -> list[dict[str, Any]]:
    """The edits the server reported applying for the request ``message`` answers.

    Read from ``extra["provider_details"]["context_management"]["applied_edits"]``, as
    ``AnthropicModel`` stores it (``[]`` when there is none).
    """
    details = message.extra.get("provider_details")
    if not isinstance(details, Mapping):
        return []
    management = cast(Mapping[str, object], details).get("context_management")
    if not isinstance(management, Mapping):
        return []
    edits = cast(Mapping[str, object], management).get("applied_edits")
    if not isinstance(edits, Sequence) or isinstance(edits, str):
        return []
    return [cast(dict[str, Any], thaw(e)) for e in cast(Sequence[object], edits) if isinstance(e, Mapping)]


def is_compaction_pause(message: CanonicalMessage) -> bool:
    """Whether ``message`` is the response of a compaction with ``pause_after_compaction``.

    The server then answers with the compaction block alone (``stop_reason`` ``"compaction"``):
    the run ends there, and the next prompt continues from the compacted context.
    """
    details = message.extra.get("provider_details")
    reason = (
        cast(Mapping[str, object], details).get("finish_reason") if isinstance(details, Mapping) else None
    )
    return message.kind == "response" and reason == "compaction"


def _is_pause_text(part: Part) -> bool:
    mark = harness_mark(part) if isinstance(part, TextPart) else None
    return mark is not None and mark.get("source") == _SOURCE and mark.get("compaction_pause") is True


def with_pause_text(message: CanonicalMessage) -> CanonicalMessage | None:
    """``message`` plus :data:`PAUSE_TEXT` when it holds a compaction block and no answer, else ``None``."""
    if message.kind != "response" or not compaction_parts(message):
        return None
    for part in message.parts:
        if isinstance(part, ToolCallPart) or (isinstance(part, TextPart) and part.content.strip()):
            return None
    text = with_harness_mark(TextPart(PAUSE_TEXT), source=_SOURCE, compaction_pause=True)
    return message.replace(parts=(*message.parts, text))


def _portable(part: Part) -> Part | None:
    if _is_pause_text(part):
        return None
    if not isinstance(part, UnknownPart) or part.kind != COMPACTION_KIND:
        return part
    summary = compaction_summary(part)
    text = f"{SUMMARY_PREFIX}\n{summary}" if summary is not None else NO_SUMMARY
    return with_harness_mark(TextPart(text), source=_SOURCE, compaction_summary=True)


def portable_messages(messages: Sequence[CanonicalMessage]) -> list[CanonicalMessage]:
    """``messages`` with each compaction block replaced by a text part holding its summary.

    Only responses holding a compaction block change; every other message is the same
    object. Nothing is dropped: the messages the server had compacted are still in the
    history, so another provider sees them all (the local capability stack compacts them as
    it would any history) plus the summary where the server wrote it.
    """
    result: list[CanonicalMessage] = []
    for message in messages:
        if message.kind != "response" or not compaction_parts(message):
            result.append(message)
            continue
        parts = [p for p in (_portable(part) for part in message.parts) if p is not None]
        result.append(message.replace(parts=tuple(parts)))
    return result


def sendable_messages(messages: Sequence[CanonicalMessage], *, anthropic: bool) -> list[CanonicalMessage]:
    """What is sent: without :data:`PAUSE_TEXT` parts, and :func:`portable_messages` unless ``anthropic``.

    Only messages that change are new objects.
    """
    if not anthropic:
        return portable_messages(messages)
    result: list[CanonicalMessage] = []
    for message in messages:
        if message.kind == "response" and any(_is_pause_text(part) for part in message.parts):
            message = message.replace(parts=tuple(p for p in message.parts if not _is_pause_text(p)))
        result.append(message)
    return result
