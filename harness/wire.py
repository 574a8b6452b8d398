r"""The JSON wire format of message histories.

A history is written as a JSON array of message objects, UTF-8 encoded. The format is
pydantic-ai's ``ModelMessagesTypeAdapter`` format, so files written here load in
pydantic-ai and its dumps load here::

    [
      {"kind": "request", "parts": [
        {"part_kind": "user-prompt", "content": "list the files"}]},
      {"kind": "response", "parts": [
        {"part_kind": "text", "content": "Sure."},
        {"part_kind": "tool-call", "tool_call_id": "tc_1", "tool_name": "bash",
         "args": {"command": "ls"}}]},
      {"kind": "request", "parts": [
        {"part_kind": "tool-return", "tool_call_id": "tc_1", "tool_name": "bash",
         "content": "README.md"}]}
    ]

Reading:

* A message needs ``kind`` (``"request"`` or ``"response"``) and a ``parts`` list; a part
  needs ``part_kind``. Tool calls and tool returns need a non-empty ``tool_call_id``.
* The part kinds harness models are ``system-prompt``, ``user-prompt``, ``tool-return``,
  ``retry-prompt`` (requests) and ``text``, ``thinking``, ``tool-call`` (responses). A
  request holding a response kind (or the reverse) is an error. Any other ``part_kind``
  (``builtin-tool-call``, ``file``, ``retry-feedback``, ...) becomes an
  :class:`~harness.messages.UnknownPart` that keeps every key verbatim.
* Keys a modelled part or message does not name (``provider_details``, ``id``,
  ``outcome``, ``state`` ...) go to its ``extra`` mapping verbatim.
* A key the model names but whose value is ``null`` cannot be told apart from an absent
  key by the typed field (which is ``None`` either way), so it is recorded in ``extra`` as
  ``key: None``. This is what makes the round trip exact for pydantic-ai dumps, which
  write every optional key, and for minimal files, which write none.
* Tool-call ``args`` stay exactly as given (a JSON object or a JSON string). User-prompt
  and retry-prompt content lists become tuples; their items are kept as they are.
* Timestamps are ISO-8601 strings (``Z`` accepted) and become :class:`datetime.datetime`.
* ``usage`` is pydantic-ai's ``RequestUsage`` shape and becomes
  :class:`~harness.messages.Usage` through :meth:`~harness.messages.Usage.from_pydantic_ai`.
* Legacy entries are accepted: ``{"content": ...}`` (no ``kind``/``parts``) is a request
  holding one user prompt, ``{"thought": ...}`` a response holding one thinking part (or,
  with :func:`load_messages_and_thoughts`, an entry of the separate thoughts list).

Writing:

* Required fields are always written; an optional field is written when it is not
  ``None``; then every ``extra`` key is written, except that a typed field that is set
  wins over an ``extra`` entry of the same name, and ``extra`` never overrides
  ``part_kind``, ``kind`` or ``parts``.
* Hence ``dump(load(doc))`` reproduces every key and value of ``doc``, with three
  normalisations: timestamps are spelled the way pydantic writes them (ISO-8601, ``Z``
  for UTC), ``usage`` is written in its full shape (below) and legacy entries are written
  in the current form. Every corpus file and every pydantic-ai dump round-trips exactly.
* And ``load(dump(history)) == history`` for every history whose ``extra`` mappings use
  modelled key names only as null markers (value ``None`` while the field is ``None``).
* pydantic-ai requires ``tool_name`` on a tool return; a
  :class:`~harness.messages.ToolReturnPart` without one (allowed by the contract's
  minimal form) is written without the key, which pydantic-ai refuses.
* pydantic-ai 2.x loads such a file but drops what it has no field for: ``metadata`` on
  user-prompt, text, thinking and tool-call parts (where harness keeps its marks), and it
  reads ``retry-prompt`` parts as other kinds. To hand a history to pydantic-ai code
  without losing those, use :mod:`harness.interop.pydantic_ai`, which keeps them aside.
* ``usage`` is always written in pydantic-ai's shape: ``input_tokens``,
  ``output_tokens``, ``cache_read_tokens``, ``cache_write_tokens`` plus its extra keys.
* The output is compact JSON (no spaces) with non-ASCII characters written as ``\u``
  escapes, so it is plain ASCII and therefore valid UTF-8 whatever the strings hold (a
  lone surrogate included); CPython's encoder is also fastest in this mode. ``NaN`` and
  infinities are refused on both sides, as in strict JSON.

Every problem is reported as a :class:`~harness.errors.WireFormatError` naming the
message index, the part index and the field.

All conversions go through one module-level :mod:`cattrs` converter, :data:`converter`,
whose hooks for the message classes are hand-written and dispatch on ``part_kind`` through
a precomputed table, so loading costs one pass over each part's keys.
"""

from __future__ import annotations

__all__ = [
    "converter",
    "dump_messages",
    "load_messages",
    "load_messages_and_thoughts",
    "messages_from_jsonable",
    "messages_to_jsonable",
]

import contextlib
import gc
import json
import operator
from collections.abc import Callable, Generator, Iterable, Mapping
from datetime import datetime
from typing import Any, Final, cast

import attrs
import cattrs
from cattrs.errors import BaseValidationError, StructureHandlerNotFoundError

from harness.errors import MessageError, WireFormatError
from harness.messages import (
    CanonicalMessage,
    MessageKind,
    Part,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UnknownPart,
    Usage,
    UserPromptPart,
)

converter: Final = cattrs.Converter()
"""The converter every load and dump goes through.

It holds hand-written structure and unstructure hooks for :class:`CanonicalMessage`, each
part class, :class:`~harness.messages.Usage` and :class:`datetime.datetime`. Other modules
may register hooks for their own classes on it; do not replace the hooks registered here.
"""

_MISSING: Final = object()

_Check = Callable[[Any, str], Any]
"""Validates and converts one wire value; raises ``WireFormatError`` naming the field."""

_Dump = Callable[[Any], Any]
"""Converts one typed field value back to its wire value."""


# ---------------------------------------------------------------------------------------
# Value checks (load side)
# ---------------------------------------------------------------------------------------


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _preview(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_object(value: Any) -> bool:
    """True for a JSON object (a dict, or any mapping given to the jsonable API)."""
    return type(value) is dict or isinstance(value, Mapping)


def _is_array(value: Any) -> bool:
    return isinstance(value, list)


def _check_str(value: Any, key: str) -> str:
    if isinstance(value, str):
        return value
    raise WireFormatError(f"must be a string, got {_type_name(value)}", field=key)


def _check_id(value: Any, key: str) -> str:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, str):
        raise WireFormatError("must be a non-empty string", field=key)
    raise WireFormatError(f"must be a non-empty string, got {_type_name(value)}", field=key)


def _check_content(value: Any, key: str) -> str | tuple[Any, ...]:
    if isinstance(value, str):
        return value
    if _is_array(value):
        return tuple(value)
    raise WireFormatError(f"must be a string or an array, got {_type_name(value)}", field=key)


def _check_args(value: Any, key: str) -> Mapping[str, Any] | str:
    if isinstance(value, str) or _is_object(value):
        return value
    raise WireFormatError(f"must be an object, a string or null, got {_type_name(value)}", field=key)


def _parse_timestamp(value: Any, key: str) -> datetime:
    if not isinstance(value, str):
        raise WireFormatError(f"must be an ISO-8601 string, got {_type_name(value)}", field=key)
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise WireFormatError(f"is not an ISO-8601 timestamp: {_preview(value)}", field=key) from None


_USAGE_TOKEN_KEYS: Final = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "request_tokens",
    "response_tokens",
)


def _check_usage(value: Any, key: str) -> Usage:
    if not _is_object(value):
        raise WireFormatError(f"must be an object, got {_type_name(value)}", field=key)
    for token_key in _USAGE_TOKEN_KEYS:
        count: object = value.get(token_key, 0)
        if not isinstance(count, int) or isinstance(count, bool):
            raise WireFormatError(f"must be an integer, got {_type_name(count)}", field=f"{key}.{token_key}")
    return Usage.from_pydantic_ai(value)


# ---------------------------------------------------------------------------------------
# Value conversions (dump side)
# ---------------------------------------------------------------------------------------


def _format_timestamp(value: datetime) -> str:
    """Write ``value`` the way pydantic does: ISO-8601, ``Z`` for a zero UTC offset."""
    text = value.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _dump_content(value: Any) -> Any:
    return list(cast("tuple[Any, ...]", value)) if type(value) is tuple else value


def _dump_args(value: Any) -> Any:
    if type(value) is dict or type(value) is str or not _is_object(value):
        return cast("Any", value)
    return dict(cast("Mapping[str, Any]", value))


def _dump_usage(value: Usage) -> dict[str, Any]:
    data: dict[str, Any] = dict(value.extra) if value.extra else {}
    data["input_tokens"] = value.request_tokens
    data["output_tokens"] = value.response_tokens
    data["cache_read_tokens"] = value.cached_tokens
    data["cache_write_tokens"] = value.cache_write_tokens
    return data


# ---------------------------------------------------------------------------------------
# Field specifications and the hooks built from them
# ---------------------------------------------------------------------------------------


@attrs.frozen
class _Field:
    """One wire key of a modelled class.

    ``check`` validates the loaded value (``None``: any JSON value is accepted);
    ``dump`` converts the typed value back (``None``: written as is).
    """

    key: str
    required: bool = False
    check: _Check | None = None
    dump: _Dump | None = None


@attrs.frozen
class _Spec:
    """How one modelled class maps to a JSON object."""

    cls: type[Any]
    tag_key: str
    tag: str | None
    fields: tuple[_Field, ...]
    defaults: Mapping[str, Any] = attrs.field(factory=dict[str, Any])
    fast_keys: tuple[str, ...] = ()
    """Keys of the common minimal shape, in constructor order (fast path when exactly these)."""
    fast_types: tuple[type[Any], ...] = ()
    """Exact types required of the first ``len(fast_types)`` fast values."""
    fast_id: bool = False
    """Whether the first fast value is a tool-call id that must be non-empty."""


def _req(key: str, check: _Check | None = None, dump: _Dump | None = None) -> _Field:
    return _Field(key, required=True, check=check, dump=dump)


def _opt(key: str, check: _Check | None = None, dump: _Dump | None = None) -> _Field:
    return _Field(key, required=False, check=check, dump=dump)


_TIMESTAMP: Final = _opt("timestamp", _parse_timestamp, _format_timestamp)
_METADATA: Final = _opt("metadata")

_PART_SPECS: Final = (
    _Spec(
        SystemPromptPart,
        "part_kind",
        "system-prompt",
        (_req("content", _check_str), _TIMESTAMP, _opt("dynamic_ref", _check_str), _METADATA),
        fast_keys=("content",),
        fast_types=(str,),
    ),
    _Spec(
        UserPromptPart,
        "part_kind",
        "user-prompt",
        (_req("content", _check_content, _dump_content), _TIMESTAMP, _METADATA),
        fast_keys=("content",),
        fast_types=(str,),
    ),
    _Spec(
        ToolReturnPart,
        "part_kind",
        "tool-return",
        (
            _req("tool_call_id", _check_id),
            _opt("tool_name", _check_str),
            _req("content"),
            _TIMESTAMP,
            _METADATA,
        ),
        defaults={"tool_name": None},
        fast_keys=("tool_call_id", "tool_name", "content"),
        fast_types=(str, str),
        fast_id=True,
    ),
    _Spec(
        RetryPromptPart,
        "part_kind",
        "retry-prompt",
        (
            _req("content", _check_content, _dump_content),
            _opt("tool_name", _check_str),
            _opt("tool_call_id", _check_str),
            _TIMESTAMP,
            _METADATA,
        ),
    ),
    _Spec(
        TextPart,
        "part_kind",
        "text",
        (_req("content", _check_str), _METADATA),
        fast_keys=("content",),
        fast_types=(str,),
    ),
    _Spec(
        ThoughtPart,
        "part_kind",
        "thinking",
        (
            _req("content", _check_str),
            _opt("signature", _check_str),
            _opt("provider_name", _check_str),
            _METADATA,
        ),
        fast_keys=("content",),
        fast_types=(str,),
    ),
    _Spec(
        ToolCallPart,
        "part_kind",
        "tool-call",
        (
            _req("tool_call_id", _check_id),
            _req("tool_name", _check_str),
            _opt("args", _check_args, _dump_args),
            _METADATA,
        ),
        fast_keys=("tool_call_id", "tool_name", "args"),
        fast_types=(str, str, dict),
        fast_id=True,
    ),
)

_MESSAGE_SPEC: Final = _Spec(
    CanonicalMessage,
    "kind",
    None,
    (
        _TIMESTAMP,
        _opt("model_name", _check_str),
        _opt("usage", _check_usage, _dump_usage),
        _opt("run_id", _check_str),
        _opt("provider_name", _check_str),
        _opt("provider_response_id", _check_str),
        _opt("finish_reason", _check_str),
        _METADATA,
        _opt("instructions", _check_str),
    ),
)

_MESSAGE_OWN_KEYS: Final = frozenset({"kind", "parts"})


def _make_field_reader(spec: _Spec) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """Build the function turning a JSON object into constructor keyword arguments."""

    def unknown(value: Any, key: str) -> Any:  # pragma: no cover - a sentinel, never called
        return value

    checks: dict[str, _Check | None] = {f.key: f.check for f in spec.fields}
    optional = frozenset(f.key for f in spec.fields if not f.required)
    required = frozenset(f.key for f in spec.fields if f.required)
    required_order = tuple(f.key for f in spec.fields if f.required)
    skipped = _MESSAGE_OWN_KEYS if spec.cls is CanonicalMessage else frozenset({spec.tag_key})
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


def _make_field_writer(spec: _Spec) -> Callable[[Any, dict[str, Any]], None]:
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
    own = frozenset({spec.tag_key, *(_MESSAGE_OWN_KEYS if spec.cls is CanonicalMessage else ())})

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


def _make_part_hooks(
    spec: _Spec,
) -> tuple[Callable[[Any, Any], Any], Callable[[Any], dict[str, Any]]]:
    read = _make_field_reader(spec)
    write = _make_field_writer(spec)
    cls = spec.cls
    tag = spec.tag

    fast_keys = spec.fast_keys
    fast_size = len(fast_keys) + 1
    fast_types = spec.fast_types
    fast_checked = len(fast_types)
    fast_id = spec.fast_id
    fast_get = cast("Callable[[Any], Any]", operator.itemgetter(*fast_keys) if fast_keys else len)
    fast_single = len(fast_keys) == 1

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
                        return cls(*values)
        elif not isinstance(data, Mapping):
            raise WireFormatError(f"a part must be a JSON object, got {_type_name(data)}")
        return cls(**read(cast("Mapping[str, Any]", data)))

    def unstructure(part: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"part_kind": tag}
        write(part, out)
        return out

    return structure, unstructure


def _structure_datetime(value: Any, _type: Any = datetime) -> datetime:
    return _parse_timestamp(value, "timestamp")


def _structure_unknown(data: Any, _type: Any = UnknownPart) -> UnknownPart:
    if not _is_object(data):
        raise WireFormatError(f"a part must be a JSON object, got {_type_name(data)}")
    kind: object = data.get("part_kind")
    if not isinstance(kind, str):
        raise WireFormatError(f"must be a string, got {_type_name(kind)}", field="part_kind")
    return UnknownPart(kind, data)


def _unstructure_unknown(part: UnknownPart) -> dict[str, Any]:
    out = dict(part.data)
    out["part_kind"] = part.kind
    return out


_PART_STRUCTURE: dict[str, Callable[[Any, Any], Any]] = {}
_PART_UNSTRUCTURE: dict[type[Any], Callable[[Any], dict[str, Any]]] = {}

for _spec in _PART_SPECS:
    _structure_hook, _unstructure_hook = _make_part_hooks(_spec)
    converter.register_structure_hook(_spec.cls, _structure_hook)
    converter.register_unstructure_hook(_spec.cls, _unstructure_hook)
converter.register_structure_hook(UnknownPart, _structure_unknown)
converter.register_unstructure_hook(UnknownPart, _unstructure_unknown)
converter.register_structure_hook(Usage, _check_usage)
converter.register_unstructure_hook(Usage, _dump_usage)
converter.register_structure_hook(datetime, _structure_datetime)
converter.register_unstructure_hook(datetime, _format_timestamp)

for _spec in _PART_SPECS:
    assert _spec.tag is not None
    _PART_STRUCTURE[_spec.tag] = converter.get_structure_hook(_spec.cls)
    _PART_UNSTRUCTURE[_spec.cls] = converter.get_unstructure_hook(_spec.cls)
_PART_UNSTRUCTURE[UnknownPart] = converter.get_unstructure_hook(UnknownPart)

_REQUEST_STRUCTURE: Final = {
    kind: hook
    for kind, hook in _PART_STRUCTURE.items()
    if kind in ("system-prompt", "user-prompt", "tool-return", "retry-prompt")
}
_RESPONSE_STRUCTURE: Final = {
    kind: hook for kind, hook in _PART_STRUCTURE.items() if kind in ("text", "thinking", "tool-call")
}


def _structure_part(data: Any, kind: str) -> Part:
    """Load one part of a ``kind`` message (WireFormatError carries no part index yet)."""
    if not _is_object(data):
        raise WireFormatError(f"a part must be a JSON object, got {_type_name(data)}")
    part_kind: object = data.get("part_kind", _MISSING)
    if part_kind is _MISSING:
        raise WireFormatError("missing required field", field="part_kind")
    if not isinstance(part_kind, str):
        raise WireFormatError(f"must be a string, got {_type_name(part_kind)}", field="part_kind")
    hooks = _REQUEST_STRUCTURE if kind == "request" else _RESPONSE_STRUCTURE
    hook = hooks.get(part_kind)
    if hook is not None:
        return hook(data, None)
    if part_kind in _PART_STRUCTURE:
        raise WireFormatError(f"a {kind} cannot hold a {part_kind!r} part", field="part_kind")
    return UnknownPart(part_kind, data)


def _structure_parts_slowly(raw_parts: list[Any], kind: str) -> list[Part]:
    parts: list[Part] = []
    for part_index, raw_part in enumerate(raw_parts):
        try:
            parts.append(_structure_part(raw_part, kind))
        except WireFormatError as exc:
            raise _relocated(exc, part_index=part_index) from exc.__cause__
    return parts


def _structure_any_part(data: Any, _type: Any = Part) -> Part:
    """Load one part of either message kind (the converter's hook for the ``Part`` union)."""
    if _is_object(data):
        part_kind: object = data.get("part_kind")
        if isinstance(part_kind, str) and part_kind in _RESPONSE_STRUCTURE:
            return _structure_part(data, "response")
    return _structure_part(data, "request")


def _unstructure_any_part(part: Any) -> dict[str, Any]:
    hook = _PART_UNSTRUCTURE.get(cast("type[Any]", type(part)))
    if hook is None:
        raise WireFormatError(f"not a message part: {type(part).__name__}", field="parts")
    return hook(part)


converter.register_structure_hook(Part, _structure_any_part)
converter.register_unstructure_hook(Part, _unstructure_any_part)

_read_message_fields: Final = _make_field_reader(_MESSAGE_SPEC)
_write_message_fields: Final = _make_field_writer(_MESSAGE_SPEC)


def _relocated(
    exc: WireFormatError, *, message_index: int | None = None, part_index: int | None = None
) -> WireFormatError:
    """Copy of ``exc`` with the location filled in where it was unknown."""
    return WireFormatError(
        exc.reason,
        message_index=exc.message_index if exc.message_index is not None else message_index,
        part_index=exc.part_index if exc.part_index is not None else part_index,
        field=exc.field,
    )


def _legacy_fields(data: Mapping[str, Any], key: str) -> dict[str, Any]:
    """Message fields of a legacy entry: its keys other than ``key``, read like a message's."""
    if len(data) == 1:
        return {}
    return _read_message_fields({k: v for k, v in data.items() if k != key})


def _structure_message(data: Any, _type: Any = CanonicalMessage) -> CanonicalMessage:
    """Load one message (WireFormatError carries no message index yet)."""
    if not _is_object(data):
        raise WireFormatError(f"a message must be a JSON object, got {_type_name(data)}")
    kind: object = data.get("kind", _MISSING)
    if kind is _MISSING and "parts" not in data:
        if "thought" in data:
            thought = _check_str(data["thought"], "thought")
            return CanonicalMessage("response", (ThoughtPart(thought),), **_legacy_fields(data, "thought"))
        if "content" in data:
            content = _check_content(data["content"], "content")
            return CanonicalMessage("request", (UserPromptPart(content),), **_legacy_fields(data, "content"))
    if kind is _MISSING:
        raise WireFormatError("missing required field", field="kind")
    message_kind: MessageKind
    if kind == "request":
        message_kind = "request"
    elif kind == "response":
        message_kind = "response"
    else:
        raise WireFormatError(f"must be 'request' or 'response', got {_preview(kind)}", field="kind")
    raw_parts: Any = data.get("parts", _MISSING)
    if raw_parts is _MISSING:
        raise WireFormatError("missing required field", field="parts")
    if not _is_array(raw_parts):
        raise WireFormatError(f"must be an array, got {_type_name(raw_parts)}", field="parts")
    hooks = _REQUEST_STRUCTURE if message_kind == "request" else _RESPONSE_STRUCTURE
    parts: list[Part]
    try:
        parts = [hooks[raw_part["part_kind"]](raw_part, None) for raw_part in raw_parts]
    except (KeyError, TypeError, IndexError, WireFormatError):
        # Not an object, no or odd part_kind, a kind we do not model, or an invalid part:
        # go again part by part, to keep unknown parts and to locate the error.
        parts = _structure_parts_slowly(raw_parts, message_kind)
    if len(data) == 2:  # only "kind" and "parts"
        return CanonicalMessage(message_kind, parts)
    return CanonicalMessage(message_kind, parts, **_read_message_fields(data))


def _unstructure_message(message: CanonicalMessage) -> dict[str, Any]:
    try:
        parts = [_PART_UNSTRUCTURE[type(part)](part) for part in message.parts]
    except KeyError:
        for part_index, part in enumerate(message.parts):
            if type(part) not in _PART_UNSTRUCTURE:
                raise WireFormatError(
                    f"not a message part: {type(part).__name__}", part_index=part_index, field="parts"
                ) from None
        raise  # pragma: no cover - a KeyError from a hook itself
    out: dict[str, Any] = {"kind": message.kind, "parts": parts}
    _write_message_fields(message, out)
    return out


converter.register_structure_hook(CanonicalMessage, _structure_message)
converter.register_unstructure_hook(CanonicalMessage, _unstructure_message)

_MESSAGE_STRUCTURE: Final = converter.get_structure_hook(CanonicalMessage)
_MESSAGE_UNSTRUCTURE: Final = converter.get_unstructure_hook(CanonicalMessage)

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


# ---------------------------------------------------------------------------------------
# Document level
# ---------------------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise WireFormatError(f"invalid JSON: {name} is not a JSON value")


_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)


def _default(value: Any) -> Any:
    if _is_object(value):
        return dict(value)
    if isinstance(value, (tuple, set, frozenset)):
        return list(cast("Iterable[Any]", value))
    if isinstance(value, datetime):
        return _format_timestamp(value)
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
    if not _is_array(data):
        raise WireFormatError(f"a history must be a JSON array, got {_type_name(data)}")
    return cast("list[Any]", data)


def _load_items(items: list[Any], thoughts: list[str] | None) -> list[CanonicalMessage]:
    hook = _MESSAGE_STRUCTURE
    if thoughts is None:
        try:
            return [hook(item, CanonicalMessage) for item in items]
        except Exception:
            pass
    messages: list[CanonicalMessage] = []
    append = messages.append
    for index, item in enumerate(items):
        try:
            if (
                thoughts is not None
                and isinstance(item, Mapping)
                and "thought" in item
                and "kind" not in item
                and "parts" not in item
            ):
                thoughts.append(_check_str(item["thought"], "thought"))
                continue
            append(hook(item, CanonicalMessage))
        except WireFormatError as exc:
            raise _relocated(exc, message_index=index) from exc.__cause__
        except _UNEXPECTED_ERRORS as exc:
            raise WireFormatError(f"{type(exc).__name__}: {exc}", message_index=index) from exc
    return messages


def load_messages(data: bytes | bytearray | memoryview | str | list[Any]) -> list[CanonicalMessage]:
    """Load a history from JSON (bytes or text) or from already-parsed JSON (a list).

    Legacy entries are converted: ``{"content": ...}`` becomes a request with one
    :class:`~harness.messages.UserPromptPart`, ``{"thought": ...}`` a response with one
    :class:`~harness.messages.ThoughtPart`.

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
        return _load_items(_document_items(data), None)


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
        messages = _load_items(_document_items(data), thoughts)
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
        raise WireFormatError(f"a history must be a JSON array, got {_type_name(items)}")
    return _load_items(items, None)


def messages_to_jsonable(messages: Iterable[CanonicalMessage]) -> list[dict[str, Any]]:
    """Convert a history to JSON-ready lists and dicts, for embedding in another document.

    Args:
        messages: The history.

    Returns:
        One dict per message. Nested values (args, content, metadata) are shared with the
        messages, not copied: do not mutate them.

    Raises:
        WireFormatError: An element is not a :class:`~harness.messages.CanonicalMessage`
            or holds a part of an unknown class.
    """
    hook = _MESSAGE_UNSTRUCTURE
    out: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if not isinstance(message, CanonicalMessage):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise WireFormatError(
                f"expected a CanonicalMessage, got {type(message).__name__}", message_index=index
            )
        try:
            out.append(hook(message))
        except WireFormatError as exc:
            raise _relocated(exc, message_index=index) from exc.__cause__
    return out


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
