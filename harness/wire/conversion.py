"""The :mod:`cattrs` converter of the wire format and its hand-written hooks.

One module-level converter, :data:`converter`, holds structure and unstructure hooks for
:class:`~harness.core.messages.CanonicalMessage`, each part class, the ``Part`` union,
:class:`~harness.core.messages.Usage` and :class:`datetime.datetime`. The part hooks are
built from the specs in :mod:`harness.wire.fields` and dispatch on ``part_kind`` through
precomputed tables, so loading costs one pass over each part's keys. Part of
:mod:`harness.wire`; import the public API from there.
"""

from __future__ import annotations

__all__ = [
    "MESSAGE_STRUCTURE",
    "MESSAGE_UNSTRUCTURE",
    "PART_STRUCTURE",
    "PART_UNSTRUCTURE",
    "REQUEST_STRUCTURE",
    "RESPONSE_STRUCTURE",
    "converter",
]

import operator
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final, cast

import cattrs

from harness.core.messages import CanonicalMessage, MessageKind, Part, UnknownPart, Usage
from harness.errors import WireFormatError
from harness.wire.fields import (
    PART_SPECS,
    REQUEST_PART_KINDS,
    RESPONSE_PART_KINDS,
    Spec,
    make_field_reader,
    make_field_writer,
    read_message_fields,
    write_message_fields,
)
from harness.wire.legacy import structure_legacy
from harness.wire.values import (
    MISSING,
    check_usage,
    dump_usage,
    format_timestamp,
    is_array,
    is_object,
    parse_timestamp,
    preview,
    relocated,
    type_name,
)

converter: Final = cattrs.Converter()
"""The converter every load and dump goes through.

It holds hand-written structure and unstructure hooks for :class:`CanonicalMessage`, each
part class, :class:`~harness.core.messages.Usage` and :class:`datetime.datetime`. Other modules
may register hooks for their own classes on it; do not replace the hooks registered here.
"""


# ---------------------------------------------------------------------------------------
# Part hooks
# ---------------------------------------------------------------------------------------


def _keyword_maker(cls: type[Any], keys: tuple[str, ...]) -> Callable[..., Any]:
    """``cls`` called with ``keys`` as keywords, from positional values (fields are keyword-only)."""
    names = [f"v{index}" for index in range(len(keys))]
    arguments = ", ".join(f"{key}={name}" for key, name in zip(keys, names, strict=True))
    namespace: dict[str, Any] = {"cls": cls}
    exec(f"def make({', '.join(names)}):\n    return cls({arguments})\n", namespace)  # keys are identifiers
    return cast("Callable[..., Any]", namespace["make"])


def _make_part_hooks(
    spec: Spec,
) -> tuple[Callable[[Any, Any], Any], Callable[[Any], dict[str, Any]]]:
    read = make_field_reader(spec)
    write = make_field_writer(spec)
    cls = spec.cls
    tag = spec.tag

    fast_keys = spec.fast_keys
    fast_size = len(fast_keys) + 1
    fast_types = spec.fast_types
    fast_checked = len(fast_types)
    fast_id = spec.fast_id
    fast_get = cast("Callable[[Any], Any]", operator.itemgetter(*fast_keys) if fast_keys else len)
    fast_single = len(fast_keys) == 1
    fast_make = _keyword_maker(cls, fast_keys)

    def structure(data: Any, _type: Any = cls) -> Any:
        if type(data) is dict:
            # Fast path: exactly the common minimal shape with exactly the expected types.
            if fast_keys and len(cast("dict[str, Any]", data)) == fast_size and "part_kind" in data:
                try:
                    values = fast_get(cast("dict[str, Any]", data))
                except KeyError:
                    pass
                else:
                    if fast_single:
                        values = (values,)
                    if tuple(map(type, values[:fast_checked])) == fast_types and (not fast_id or values[0]):
                        return fast_make(*values)
        elif not isinstance(data, Mapping):
            raise WireFormatError(f"a part must be a JSON object, got {type_name(data)}")
        return cls(**read(cast("Mapping[str, Any]", data)))

    def unstructure(part: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"part_kind": tag}
        write(part, out)
        return out

    return structure, unstructure


def _structure_datetime(value: Any, _type: Any = datetime) -> datetime:
    return parse_timestamp(value, "timestamp")


def _structure_unknown(data: Any, _type: Any = UnknownPart) -> UnknownPart:
    if not is_object(data):
        raise WireFormatError(f"a part must be a JSON object, got {type_name(data)}")
    kind: object = data.get("part_kind")
    if not isinstance(kind, str):
        raise WireFormatError(f"must be a string, got {type_name(kind)}", field="part_kind")
    return UnknownPart(kind, data=data)


def _unstructure_unknown(part: UnknownPart) -> dict[str, Any]:
    out = dict(part.data)
    out["part_kind"] = part.kind
    return out


PART_STRUCTURE: Final[dict[str, Callable[[Any, Any], Any]]] = {}
"""The structure hook of each modelled ``part_kind``."""

PART_UNSTRUCTURE: Final[dict[type[Any], Callable[[Any], dict[str, Any]]]] = {}
"""The unstructure hook of each part class (:class:`UnknownPart` included)."""

for _spec in PART_SPECS:
    _structure_hook, _unstructure_hook = _make_part_hooks(_spec)
    converter.register_structure_hook(_spec.cls, _structure_hook)
    converter.register_unstructure_hook(_spec.cls, _unstructure_hook)
converter.register_structure_hook(UnknownPart, _structure_unknown)
converter.register_unstructure_hook(UnknownPart, _unstructure_unknown)
converter.register_structure_hook(Usage, check_usage)
converter.register_unstructure_hook(Usage, dump_usage)
converter.register_structure_hook(datetime, _structure_datetime)
converter.register_unstructure_hook(datetime, format_timestamp)

for _spec in PART_SPECS:
    assert _spec.tag is not None
    PART_STRUCTURE[_spec.tag] = converter.get_structure_hook(_spec.cls)
    PART_UNSTRUCTURE[_spec.cls] = converter.get_unstructure_hook(_spec.cls)
PART_UNSTRUCTURE[UnknownPart] = converter.get_unstructure_hook(UnknownPart)

REQUEST_STRUCTURE: Final = {kind: hook for kind, hook in PART_STRUCTURE.items() if kind in REQUEST_PART_KINDS}
"""The structure hooks of the part kinds a request may hold."""

RESPONSE_STRUCTURE: Final = {
    kind: hook for kind, hook in PART_STRUCTURE.items() if kind in RESPONSE_PART_KINDS
}
"""The structure hooks of the part kinds a response may hold."""


def _structure_part(data: Any, kind: str) -> Part:
    """Load one part of a ``kind`` message (WireFormatError carries no part index yet)."""
    if not is_object(data):
        raise WireFormatError(f"a part must be a JSON object, got {type_name(data)}")
    part_kind: object = data.get("part_kind", MISSING)
    if part_kind is MISSING:
        raise WireFormatError("missing required field", field="part_kind")
    if not isinstance(part_kind, str):
        raise WireFormatError(f"must be a string, got {type_name(part_kind)}", field="part_kind")
    hooks = REQUEST_STRUCTURE if kind == "request" else RESPONSE_STRUCTURE
    hook = hooks.get(part_kind)
    if hook is not None:
        return hook(data, None)
    if part_kind in PART_STRUCTURE:
        raise WireFormatError(f"a {kind} cannot hold a {part_kind!r} part", field="part_kind")
    return UnknownPart(part_kind, data=data)


def _structure_parts_slowly(raw_parts: list[Any], kind: str) -> list[Part]:
    parts: list[Part] = []
    for part_index, raw_part in enumerate(raw_parts):
        try:
            parts.append(_structure_part(raw_part, kind))
        except WireFormatError as exc:
            raise relocated(exc, part_index=part_index) from exc.__cause__
    return parts


def _structure_any_part(data: Any, _type: Any = Part) -> Part:
    """Load one part of either message kind (the converter's hook for the ``Part`` union)."""
    if is_object(data):
        part_kind: object = data.get("part_kind")
        if isinstance(part_kind, str) and part_kind in RESPONSE_STRUCTURE:
            return _structure_part(data, "response")
    return _structure_part(data, "request")


def _unstructure_any_part(part: Any) -> dict[str, Any]:
    hook = PART_UNSTRUCTURE.get(cast("type[Any]", type(part)))
    if hook is None:
        raise WireFormatError(f"not a message part: {type(part).__name__}", field="parts")
    return hook(part)


converter.register_structure_hook(Part, _structure_any_part)
converter.register_unstructure_hook(Part, _unstructure_any_part)


# ---------------------------------------------------------------------------------------
# Message hooks
# ---------------------------------------------------------------------------------------


def _structure_message(data: Any, _type: Any = CanonicalMessage) -> CanonicalMessage:
    """Load one message (WireFormatError carries no message index yet)."""
    if not is_object(data):
        raise WireFormatError(f"a message must be a JSON object, got {type_name(data)}")
    kind: object = data.get("kind", MISSING)
    if kind is MISSING and "parts" not in data:
        legacy = structure_legacy(data)
        if legacy is not None:
            return legacy
    if kind is MISSING:
        raise WireFormatError("missing required field", field="kind")
    message_kind: MessageKind
    if kind == "request":
        message_kind = "request"
    elif kind == "response":
        message_kind = "response"
    else:
        raise WireFormatError(f"must be 'request' or 'response', got {preview(kind)}", field="kind")
    raw_parts: Any = data.get("parts", MISSING)
    if raw_parts is MISSING:
        raise WireFormatError("missing required field", field="parts")
    if not is_array(raw_parts):
        raise WireFormatError(f"must be an array, got {type_name(raw_parts)}", field="parts")
    hooks = REQUEST_STRUCTURE if message_kind == "request" else RESPONSE_STRUCTURE
    parts: list[Part]
    try:
        parts = [hooks[raw_part["part_kind"]](raw_part, None) for raw_part in raw_parts]
    except (KeyError, TypeError, IndexError, WireFormatError):
        # Not an object, no or odd part_kind, a kind we do not model, or an invalid part:
        # go again part by part, to keep unknown parts and to locate the error.
        parts = _structure_parts_slowly(raw_parts, message_kind)
    if len(data) == 2:  # only "kind" and "parts"
        return CanonicalMessage(message_kind, parts)
    return CanonicalMessage(message_kind, parts, **read_message_fields(data))


def _unstructure_message(message: CanonicalMessage) -> dict[str, Any]:
    try:
        parts = [PART_UNSTRUCTURE[type(part)](part) for part in message.parts]
    except KeyError:
        for part_index, part in enumerate(message.parts):
            if type(part) not in PART_UNSTRUCTURE:
                raise WireFormatError(
                    f"not a message part: {type(part).__name__}", part_index=part_index, field="parts"
                ) from None
        raise  # pragma: no cover - a KeyError from a hook itself
    out: dict[str, Any] = {"kind": message.kind, "parts": parts}
    write_message_fields(message, out)
    return out


converter.register_structure_hook(CanonicalMessage, _structure_message)
converter.register_unstructure_hook(CanonicalMessage, _unstructure_message)

MESSAGE_STRUCTURE: Final = converter.get_structure_hook(CanonicalMessage)
"""Loads one message; a :class:`~harness.errors.WireFormatError` carries no message index yet."""

MESSAGE_UNSTRUCTURE: Final = converter.get_unstructure_hook(CanonicalMessage)
"""Dumps one message; a :class:`~harness.errors.WireFormatError` carries no message index yet."""
