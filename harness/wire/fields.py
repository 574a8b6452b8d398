"""Which wire keys each message and part class has, and the readers and writers built from them.

Every modelled class is described once by a :class:`Spec`: its tag (``part_kind``), its
keys in constructor order, which are required, how each value is checked on load and
converted on dump, and the common minimal shape that takes the fast path. The field
readers and writers are compiled from these specs once, at import. Part of
:mod:`harness.wire`; import the public API from there.
"""

from __future__ import annotations

__all__ = [
    "MESSAGE_OWN_KEYS",
    "MESSAGE_SPEC",
    "PART_SPECS",
    "REQUEST_PART_KINDS",
    "RESPONSE_PART_KINDS",
    "Check",
    "Dump",
    "Field",
    "Spec",
    "make_field_reader",
    "make_field_writer",
    "read_message_fields",
    "write_message_fields",
]

import operator
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from harness.core.fields import (
    METADATA,
    PART_FIELDS,
    TIMESTAMP,
    Check,
    Dump,
    Field,
    check_str,
    check_usage,
    dump_usage,
)
from harness.core.messages import (
    CanonicalMessage,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from harness.errors import WireFormatError


@attrs.frozen
class Spec:
    """How one modelled class maps to a JSON object."""

    cls: type[Any]
    tag_key: str
    tag: str | None
    fields: tuple[Field, ...]
    defaults: Mapping[str, Any] = attrs.field(factory=dict[str, Any])
    fast_keys: tuple[str, ...] = ()
    """Keys of the common minimal shape, in constructor order (fast path when exactly these)."""
    fast_types: tuple[type[Any], ...] = ()
    """Exact types required of the first ``len(fast_types)`` fast values."""
    fast_id: bool = False
    """Whether the first fast value is a tool-call id that must be non-empty."""


_TIMESTAMP: Final = TIMESTAMP
_METADATA: Final = METADATA


def _opt(key: str, check: Check | None = None, dump: Dump | None = None) -> Field:
    return Field(key, required=False, check=check, dump=dump)


PART_SPECS: Final = (
    Spec(
        SystemPromptPart,
        "part_kind",
        "system-prompt",
        PART_FIELDS["system-prompt"],
        fast_keys=("content",),
        fast_types=(str,),
    ),
    Spec(
        UserPromptPart,
        "part_kind",
        "user-prompt",
        PART_FIELDS["user-prompt"],
        fast_keys=("content",),
        fast_types=(str,),
    ),
    Spec(
        ToolReturnPart,
        "part_kind",
        "tool-return",
        PART_FIELDS["tool-return"],
        defaults={"tool_name": None},
        fast_keys=("tool_call_id", "tool_name", "content"),
        fast_types=(str, str),
        fast_id=True,
    ),
    Spec(RetryPromptPart, "part_kind", "retry-prompt", PART_FIELDS["retry-prompt"]),
    Spec(
        TextPart,
        "part_kind",
        "text",
        PART_FIELDS["text"],
        fast_keys=("content",),
        fast_types=(str,),
    ),
    Spec(
        ThoughtPart,
        "part_kind",
        "thinking",
        PART_FIELDS["thinking"],
        fast_keys=("content",),
        fast_types=(str,),
    ),
    Spec(
        ToolCallPart,
        "part_kind",
        "tool-call",
        PART_FIELDS["tool-call"],
        fast_keys=("tool_call_id", "tool_name", "args"),
        fast_types=(str, str, dict),
        fast_id=True,
    ),
)
"""One spec per modelled part class; its fields are :data:`harness.core.fields.PART_FIELDS`."""

REQUEST_PART_KINDS: Final = frozenset({"system-prompt", "user-prompt", "tool-return", "retry-prompt"})
"""The modelled part kinds a request may hold."""

RESPONSE_PART_KINDS: Final = frozenset({"text", "thinking", "tool-call"})
"""The modelled part kinds a response may hold."""

MESSAGE_SPEC: Final = Spec(
    CanonicalMessage,
    "kind",
    None,
    (
        _TIMESTAMP,
        _opt("model_name", check_str),
        _opt("usage", check_usage, dump_usage),
        _opt("run_id", check_str),
        _opt("provider_name", check_str),
        _opt("provider_response_id", check_str),
        _opt("finish_reason", check_str),
        _METADATA,
        _opt("instructions", check_str),
    ),
)
"""The message's own fields (its ``parts`` are read by the converter)."""

MESSAGE_OWN_KEYS: Final = frozenset({"kind", "parts"})
"""Keys of a message object that are neither fields nor ``extra``."""


def make_field_reader(spec: Spec) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """Build the function turning a JSON object into constructor keyword arguments."""

    def unknown(value: Any, key: str) -> Any:  # pragma: no cover - a sentinel, never called
        return value

    checks: dict[str, Check | None] = {f.key: f.check for f in spec.fields}
    optional = frozenset(f.key for f in spec.fields if not f.required)
    required = frozenset(f.key for f in spec.fields if f.required)
    required_order = tuple(f.key for f in spec.fields if f.required)
    skipped = MESSAGE_OWN_KEYS if spec.cls is CanonicalMessage else frozenset({spec.tag_key})
    defaults = dict(spec.defaults)

    def read(data: Mapping[str, Any]) -> dict[str, Any]:
        kwargs: dict[str, Any] = dict(defaults) if defaults else {}
        extra: dict[str, Any] | None = None
        for key, value in data.items():
            check = checks.get(key, unknown)
            if check is unknown:
                if key not in skipped:
                    if extra is None:
                        extra = {}
                    extra[key] = value
            elif value is None and key in optional:
                if extra is None:
                    extra = {}
                extra[key] = None
            elif check is None:
                kwargs[key] = value
            else:
                kwargs[key] = check(value, key)
        if not required <= kwargs.keys():
            missing = next(key for key in required_order if key not in kwargs)
            raise WireFormatError("missing required field", field=missing)
        if extra is not None:
            kwargs["extra"] = extra
        return kwargs

    return read


def make_field_writer(spec: Spec) -> Callable[[Any, dict[str, Any]], None]:
    """Build the function writing an object's typed fields and ``extra`` into a dict."""
    required = tuple((f.key, f.dump) for f in spec.fields if f.required)
    optional = tuple((f.key, f.dump) for f in spec.fields if not f.required)
    optional_keys = tuple(key for key, _ in optional)
    if len(optional_keys) == 1:
        only_key = optional_keys[0]

        def get_single(obj: Any) -> tuple[Any, ...]:
            return (getattr(obj, only_key),)

        get_optional: Callable[[Any], tuple[Any, ...]] = get_single
    else:
        get_optional = operator.attrgetter(*optional_keys)

    all_none = (None,) * len(optional_keys)
    own = frozenset({spec.tag_key, *(MESSAGE_OWN_KEYS if spec.cls is CanonicalMessage else ())})

    def write(obj: Any, out: dict[str, Any]) -> None:
        extra: Mapping[str, Any] = obj.extra
        if extra:
            for key, value in extra.items():
                if key not in own:
                    out[key] = value
        for key, dump in required:
            value = getattr(obj, key)
            out[key] = value if dump is None else dump(value)
        values = get_optional(obj)
        if values != all_none:
            for (key, dump), value in zip(optional, values, strict=True):
                if value is not None:
                    out[key] = value if dump is None else dump(value)

    return write


read_message_fields: Final = make_field_reader(MESSAGE_SPEC)
"""A message object's fields as :class:`CanonicalMessage` keyword arguments (not ``parts``)."""

write_message_fields: Final = make_field_writer(MESSAGE_SPEC)
"""Writes a message's fields and ``extra`` into its JSON object (not ``kind`` or ``parts``)."""
