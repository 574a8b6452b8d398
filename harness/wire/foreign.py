"""What the readers of foreign formats share: format names, kept keys and turn assembly.

A foreign history (OpenAI Chat Completions messages, Anthropic Messages API messages,
Claude Code transcript records) is read message by message. Each foreign message becomes
some parts on one side (request or response); :class:`TurnBuilder` joins consecutive
messages of the same side into one :class:`~harness.core.messages.CanonicalMessage`, so
requests and responses alternate as the loop expects.

Nothing is dropped silently. What the canonical model has no slot for is kept in the
``extra`` mapping of the parts made from it:

* keys of a content block or tool call: under their own names (``cache_control``,
  ``citations``, ``is_error``...); a key that is also a wire key of the part (for example
  a block's own ``content`` or ``metadata``) is kept in ``extra["block"]`` instead;
* keys of the foreign message (``name``, ``annotations``, ``type``...): in
  ``extra["message"]`` of every part made from that message;
* keys of a JSON Lines record around the message (``uuid``, ``parentUuid``, ``cwd``,
  ``toolUseResult``...): in ``extra["record"]``.

A message-level value that has a slot (``model``, ``id``, ``usage``, ``stop_reason``, a
record's ``timestamp``) fills that slot of the canonical message; when several foreign
messages are joined and a later one holds a different value, that value is kept with the
later message's other keys. A key whose value is ``null`` is read as absent. Part of
:mod:`harness.wire`; import the public API from there.
"""

from __future__ import annotations

__all__ = [
    "HISTORY_FORMATS",
    "HistoryFormat",
    "Slot",
    "TurnBuilder",
    "block_extra",
    "content_item",
    "data_url_item",
    "is_mapping",
    "leftovers",
    "located",
    "unknown_part",
]

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal, TypeAlias, cast

import attrs

from harness.core.messages import (
    CanonicalMessage,
    MessageKind,
    Part,
    TextPart,
    UnknownPart,
    UserPromptPart,
    replace,
)
from harness.errors import WireFormatError
from harness.wire.fields import PART_SPECS

HistoryFormat: TypeAlias = Literal["pydantic-ai", "openai", "anthropic"]
"""A format :func:`harness.wire.load_history` reads."""

HISTORY_FORMATS: Final[tuple[HistoryFormat, ...]] = ("pydantic-ai", "openai", "anthropic")
"""Every :data:`HistoryFormat`, in the order error messages list them."""

_KEPT_KEYS: Final = frozenset({"block", "message", "record"})
"""The ``extra`` keys the readers fill themselves."""

_RESERVED: Final[dict[type[Any], frozenset[str]]] = {
    spec.cls: frozenset({spec.tag_key, *(field.key for field in spec.fields)}) | _KEPT_KEYS
    for spec in PART_SPECS
}
_RESERVED[UnknownPart] = frozenset({"part_kind"}) | _KEPT_KEYS


def is_mapping(value: object) -> bool:
    """True for a JSON object."""
    return isinstance(value, Mapping)


def located(
    exc: WireFormatError,
    *,
    format: str | None,
    message_index: int | None = None,
    line: int | None = None,
) -> WireFormatError:
    """Copy of ``exc`` with the format, the message index and the line filled in where unknown."""
    return WireFormatError(
        exc.reason,
        message_index=exc.message_index if exc.message_index is not None else message_index,
        part_index=exc.part_index,
        field=exc.field,
        line=exc.line if exc.line is not None else line,
        format=exc.format if exc.format is not None else format,
    )


def leftovers(data: Mapping[str, Any], consumed: Iterable[str]) -> dict[str, Any]:
    """The keys of ``data`` not in ``consumed`` whose value is not ``null``."""
    used = consumed if isinstance(consumed, (set, frozenset)) else frozenset(consumed)
    return {key: value for key, value in data.items() if key not in used and value is not None}


def block_extra(cls: type[Any], rest: Mapping[str, Any]) -> dict[str, Any]:
    """``rest`` (a block's unmodelled keys) as the ``extra`` of a ``cls`` part.

    Keys are kept under their own names, except keys the part's wire form already uses
    (and the readers' own ``block``, ``message`` and ``record``), which go to ``extra["block"]``.
    """
    if not rest:
        return {}
    reserved = _RESERVED.get(cls, _KEPT_KEYS)
    out: dict[str, Any] = {}
    nested: dict[str, Any] = {}
    for key, value in rest.items():
        (nested if key in reserved else out)[key] = value
    if nested:
        out["block"] = nested
    return out


def unknown_part(kind: str, block: Mapping[str, Any]) -> UnknownPart:
    """A block harness does not model, kept whole as an :class:`~harness.core.messages.UnknownPart`.

    Its ``data`` holds ``part_kind`` too, as a part loaded from the wire format does, so
    writing and reading the history gives back the same part.
    """
    return UnknownPart(kind, data={**block, "part_kind": kind})


def _cache_point(value: object) -> dict[str, Any] | None:
    """pydantic-ai's ``cache-point`` item for an ephemeral ``cache_control``, else ``None``."""
    if not is_mapping(value):
        return None
    control = cast("Mapping[str, Any]", value)
    if control.get("type") != "ephemeral" or not set(control) <= {"type", "ttl"}:
        return None
    ttl: object = control.get("ttl")
    if ttl is None:
        return {"kind": "cache-point"}
    return {"kind": "cache-point", "ttl": ttl}


def content_item(item: Any, rest: Mapping[str, Any]) -> list[Any]:
    """A user-content item in pydantic-ai's shape, with its foreign block's other keys.

    An ephemeral ``cache_control`` becomes a ``{"kind": "cache-point"}`` item after it,
    as pydantic-ai writes prompt-cache marks; other keys are kept on the item (a string
    item becomes ``{"kind": "text", "content": ...}`` to hold them), keys the item
    already has going to its ``block`` key.

    Returns:
        The item, and the cache point when there is one.
    """
    kept = dict(rest)
    point = _cache_point(kept.get("cache_control"))
    if point is not None:
        del kept["cache_control"]
    if kept:
        base: dict[str, Any] = {"kind": "text", "content": item} if isinstance(item, str) else dict(item)
        nested = {key: value for key, value in kept.items() if key in base or key == "block"}
        base.update({key: value for key, value in kept.items() if key not in nested})
        if nested:
            base["block"] = nested
        item = base
    return [item] if point is None else [item, point]


def data_url_item(url: str) -> dict[str, Any]:
    """pydantic-ai's item for an image URL: ``binary`` for a base64 ``data:`` URL, else ``image-url``."""
    if url.startswith("data:"):
        header, comma, payload = url[5:].partition(",")
        media_type, _, encoding = header.partition(";")
        if comma and encoding == "base64" and media_type and ";" not in media_type:
            return {"kind": "binary", "media_type": media_type, "data": payload}
    return {"kind": "image-url", "url": url}


def _with_kept(part: Part, key: str, value: Mapping[str, Any]) -> Part:
    if isinstance(part, UnknownPart):
        data = dict(part.data)
        if key in data:  # the block itself has such a key: keep both
            block = data.get("block")
            data["block"] = {
                **(cast("Mapping[str, Any]", block) if is_mapping(block) else {}),
                key: data[key],
            }
        data[key] = dict(value)
        return UnknownPart(part.kind, data=data)
    return replace(part, extra={**part.extra, key: dict(value)})


@attrs.frozen
class Slot:
    """A message-level foreign value that fills a field of the canonical message.

    Attributes:
        field: The :class:`~harness.core.messages.CanonicalMessage` field (``"model_name"``,
            ``"usage"``...), or ``"provider_details"`` for ``extra["provider_details"]``.
        value: The canonical value.
        key: The foreign key it was read from.
        raw: The foreign value, kept when the slot already holds another value.
        in_record: Whether the key belongs to the JSON Lines record (else to the message).
    """

    field: str
    value: Any
    key: str
    raw: Any
    in_record: bool = False


_EMPTY: Final[Mapping[str, Any]] = {}


class TurnBuilder:
    """Joins the parts of consecutive same-side foreign messages into alternating messages.

    Attributes:
        call_names: The tool name of every tool call seen so far, by id (tool results in
            OpenAI and Anthropic messages do not repeat it).
    """

    def __init__(self) -> None:
        self.call_names: dict[str, str] = {}
        self._messages: list[CanonicalMessage] = []
        self._kind: MessageKind | None = None
        self._parts: list[Part] = []
        self._fields: dict[str, Any] = {}
        self._details: dict[str, Any] = {}

    def add(
        self,
        kind: MessageKind,
        parts: Sequence[Part],
        *,
        slots: Sequence[Slot] = (),
        message_rest: Mapping[str, Any] = _EMPTY,
        record_rest: Mapping[str, Any] = _EMPTY,
        placeholder: Part | None = None,
    ) -> None:
        """Add the parts of one foreign message.

        Args:
            kind: The side the message is on.
            parts: Its parts (without the kept message and record keys, added here).
            slots: Its message-level values with a slot.
            message_rest: Its message keys without a slot.
            record_rest: The keys of the JSON Lines record around it without a slot.
            placeholder: The part a message that made no part gets, so it is not lost
                (default: an empty user prompt for a request, an empty text for a response).
        """
        if kind != self._kind:
            self._flush()
            self._kind = kind
        message_kept = dict(message_rest)
        record_kept = dict(record_rest)
        for slot in slots:
            target = self._details if slot.field == "provider_details" else self._fields
            name = "finish_reason" if slot.field == "provider_details" else slot.field
            if name not in target:
                target[name] = slot.value
            elif target[name] != slot.value:
                (record_kept if slot.in_record else message_kept)[slot.key] = slot.raw
        made = list(parts)
        if not made:
            if placeholder is None:
                placeholder = UserPromptPart("") if kind == "request" else TextPart("")
            made.append(placeholder)
        if message_kept:
            made = [_with_kept(part, "message", message_kept) for part in made]
        if record_kept:
            made = [_with_kept(part, "record", record_kept) for part in made]
        self._parts.extend(made)

    def _flush(self) -> None:
        if self._kind is None:
            return
        fields = dict(self._fields)
        if self._details:
            fields["extra"] = {"provider_details": dict(self._details)}
        self._messages.append(CanonicalMessage(self._kind, tuple(self._parts), **fields))
        self._parts = []
        self._fields = {}
        self._details = {}
        self._kind = None

    def build(self) -> list[CanonicalMessage]:
        """The canonical messages, in order (the builder is empty afterwards)."""
        self._flush()
        messages, self._messages = self._messages, []
        return messages
