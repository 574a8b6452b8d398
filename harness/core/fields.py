"""The field specs of the part classes: which keys each has and how each value is checked.

One table serves both the constructor and the wire loader, so that what constructs also
loads. :data:`PART_FIELDS` lists, per ``part_kind``, the part's fields in constructor
order: whether each is required, the check the wire loader applies to its JSON value
(:mod:`harness.wire.fields` builds its readers and writers from these same fields), and
the Python types the constructor accepts for it. The constructor
(:mod:`harness.core._init`) tests those types inline and, on a mismatch, raises a
:class:`~harness.errors.PartFieldError` with the reason the wire check gives.

The value checks and conversions live here because the constructor needs them and the
core imports nothing above it; :mod:`harness.wire.values` re-exports them.
"""

from __future__ import annotations

__all__ = [
    "PART_FIELDS",
    "USAGE_TOKEN_KEYS",
    "Check",
    "Dump",
    "Field",
    "check_args",
    "check_content",
    "check_id",
    "check_str",
    "check_datetime",
    "check_typed_content",
    "check_usage",
    "dump_args",
    "dump_content",
    "dump_usage",
    "format_timestamp",
    "is_array",
    "is_object",
    "parse_timestamp",
    "preview",
    "type_name",
    "METADATA",
    "TIMESTAMP",
]

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final, cast

import attrs

from harness.core.usage import USAGE_TOKEN_KEYS, Usage
from harness.errors import WireFormatError

Check = Callable[[Any, str], Any]
"""Validates and converts one wire value; raises ``WireFormatError`` naming the field."""

Dump = Callable[[Any], Any]
"""Converts one typed field value back to its wire value."""


# ---------------------------------------------------------------------------------------
# Describing values
# ---------------------------------------------------------------------------------------


def type_name(value: object) -> str:
    """The JSON name of ``value``'s type (``"null"``, ``"string"``, ``"object"``...)."""
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


def preview(value: object, limit: int = 60) -> str:
    """``repr(value)``, shortened to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_object(value: Any) -> bool:
    """True for a JSON object (a dict, or any mapping given to the jsonable API)."""
    return type(value) is dict or isinstance(value, Mapping)


# ---------------------------------------------------------------------------------------
# Value checks (load side)
# ---------------------------------------------------------------------------------------


def is_array(value: Any) -> bool:
    """True for a JSON array (a list)."""
    return isinstance(value, list)


def check_str(value: Any, key: str) -> str:
    """A string field."""
    if isinstance(value, str):
        return value
    raise WireFormatError(f"must be a string, got {type_name(value)}", field=key)


def check_id(value: Any, key: str) -> str:
    """A tool-call id: a non-empty string."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, str):
        raise WireFormatError("must be a non-empty string", field=key)
    raise WireFormatError(f"must be a non-empty string, got {type_name(value)}", field=key)


def check_content(value: Any, key: str) -> str | tuple[Any, ...]:
    """Prompt content: a string, or an array (which becomes a tuple)."""
    if isinstance(value, str):
        return value
    if is_array(value):
        return tuple(value)
    raise WireFormatError(f"must be a string or an array, got {type_name(value)}", field=key)


def check_args(value: Any, key: str) -> Mapping[str, Any] | str:
    """Tool-call arguments: an object or a string, kept exactly as given."""
    if isinstance(value, str) or is_object(value):
        return value
    raise WireFormatError(f"must be an object, a string or null, got {type_name(value)}", field=key)


def parse_timestamp(value: Any, key: str) -> datetime:
    """An ISO-8601 timestamp (``Z`` accepted)."""
    if not isinstance(value, str):
        raise WireFormatError(f"must be an ISO-8601 string, got {type_name(value)}", field=key)
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise WireFormatError(f"is not an ISO-8601 timestamp: {preview(value)}", field=key) from None


def check_usage(value: Any, key: str) -> Usage:
    """A ``usage`` object in pydantic-ai's ``RequestUsage`` shape."""
    if not is_object(value):
        raise WireFormatError(f"must be an object, got {type_name(value)}", field=key)
    for token_key in USAGE_TOKEN_KEYS:
        count: object = value.get(token_key, 0)
        if not isinstance(count, int) or isinstance(count, bool):
            raise WireFormatError(f"must be an integer, got {type_name(count)}", field=f"{key}.{token_key}")
    return Usage.from_pydantic_ai(value)


# ---------------------------------------------------------------------------------------
# Value conversions (dump side)
# ---------------------------------------------------------------------------------------


def format_timestamp(value: datetime) -> str:
    """Write ``value`` the way pydantic does: ISO-8601, ``Z`` for a zero UTC offset."""
    text = value.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def dump_content(value: Any) -> Any:
    """Prompt content: a tuple becomes a list, anything else is written as is."""
    return list(cast("tuple[Any, ...]", value)) if type(value) is tuple else value


def dump_args(value: Any) -> Any:
    """Tool-call arguments: a mapping other than a dict becomes a dict."""
    if type(value) is dict or type(value) is str or not is_object(value):
        return cast("Any", value)
    return dict(cast("Mapping[str, Any]", value))


def dump_usage(value: Usage) -> dict[str, Any]:
    """``usage`` in pydantic-ai's shape: its four token counts plus the extra keys."""
    data: dict[str, Any] = dict(value.extra) if value.extra else {}
    data["input_tokens"] = value.request_tokens
    data["output_tokens"] = value.response_tokens
    data["cache_read_tokens"] = value.cached_tokens
    data["cache_write_tokens"] = value.cache_write_tokens
    return data


# ---------------------------------------------------------------------------------------
# Typed-value checks (constructor side, where the typed form differs from the wire form)
# ---------------------------------------------------------------------------------------


def check_datetime(value: Any, key: str) -> datetime:
    """A timestamp given to a constructor: a :class:`~datetime.datetime`."""
    if isinstance(value, datetime):
        return value
    raise WireFormatError(f"must be a datetime, got {type_name(value)}", field=key)


def check_typed_content(value: Any, key: str) -> str | tuple[Any, ...]:
    """Prompt content given to a constructor: a string or a tuple (a list is converted first)."""
    if isinstance(value, str | tuple):
        return cast("str | tuple[Any, ...]", value)
    raise WireFormatError(
        f"must be a string or a sequence of content items, got {type_name(value)}", field=key
    )


# ---------------------------------------------------------------------------------------
# The field specs
# ---------------------------------------------------------------------------------------


@attrs.frozen
class Field:
    """One field of a part (or message): its wire key, its checks on both sides.

    Attributes:
        key: The wire key, which is also the constructor's argument name.
        required: Whether a JSON object must hold the key.
        check: Validates and converts the loaded JSON value (``None``: any JSON value).
        dump: Converts the typed value back to its JSON value (``None``: written as is).
        types: The Python types the constructor accepts (``None`` is accepted for an
            optional field); ``None``: any value.
        typed: Gives the reason for a constructor value outside ``types`` (raises
            ``WireFormatError``); default ``check``, where the typed value is the JSON value.
        non_empty: The constructor also refuses an empty value.
    """

    key: str
    required: bool = False
    check: Check | None = None
    dump: Dump | None = None
    types: tuple[type[Any], ...] | None = None
    typed: Check | None = None
    non_empty: bool = False


def _req(
    key: str,
    check: Check | None = None,
    dump: Dump | None = None,
    *,
    types: tuple[type[Any], ...] | None = None,
    typed: Check | None = None,
    non_empty: bool = False,
) -> Field:
    return Field(key, True, check, dump, types, typed, non_empty)


def _opt(
    key: str,
    check: Check | None = None,
    dump: Dump | None = None,
    *,
    types: tuple[type[Any], ...] | None = None,
    typed: Check | None = None,
) -> Field:
    return Field(key, False, check, dump, types, typed)


TIMESTAMP: Final = _opt(
    "timestamp", parse_timestamp, format_timestamp, types=(datetime,), typed=check_datetime
)
METADATA: Final = _opt("metadata")
_STR: Final = (str,)
_CONTENT: Final = (str, tuple)

PART_FIELDS: Final[Mapping[str, tuple[Field, ...]]] = {
    "system-prompt": (
        _req("content", check_str, types=_STR),
        TIMESTAMP,
        _opt("dynamic_ref", check_str, types=_STR),
        METADATA,
    ),
    "user-prompt": (
        _req("content", check_content, dump_content, types=_CONTENT, typed=check_typed_content),
        TIMESTAMP,
        METADATA,
    ),
    "tool-return": (
        _req("tool_call_id", check_id, types=_STR, non_empty=True),
        _opt("tool_name", check_str, types=_STR),
        _req("content"),
        TIMESTAMP,
        METADATA,
    ),
    "retry-prompt": (
        _req("content", check_content, dump_content, types=_CONTENT, typed=check_typed_content),
        _opt("tool_name", check_str, types=_STR),
        _opt("tool_call_id", check_str, types=_STR),
        TIMESTAMP,
        METADATA,
    ),
    "text": (_req("content", check_str, types=_STR), METADATA),
    "thinking": (
        _req("content", check_str, types=_STR),
        _opt("signature", check_str, types=_STR),
        _opt("provider_name", check_str, types=_STR),
        METADATA,
    ),
    "tool-call": (
        _req("tool_call_id", check_id, types=_STR, non_empty=True),
        _req("tool_name", check_str, types=_STR),
        _opt("args", check_args, dump_args, types=(dict, str, Mapping)),
        METADATA,
    ),
}
"""The fields of each modelled part kind, in constructor order (``extra`` is implicit)."""
