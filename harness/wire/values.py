"""Checks and conversions of single wire values, and the locating of their errors.

The load side validates one JSON value and converts it to its typed form, raising a
:class:`~harness.errors.WireFormatError` that names the field; the dump side converts a
typed value back. Part of :mod:`harness.wire`; import the public API from there.
"""

from __future__ import annotations

__all__ = [
    "MISSING",
    "USAGE_TOKEN_KEYS",
    "check_args",
    "check_content",
    "check_id",
    "check_str",
    "check_usage",
    "dump_args",
    "dump_content",
    "dump_usage",
    "format_timestamp",
    "is_array",
    "is_object",
    "parse_timestamp",
    "preview",
    "relocated",
    "type_name",
]

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final, cast

from harness.core.messages import Usage
from harness.errors import WireFormatError

MISSING: Final = object()
"""Default of ``dict.get`` telling an absent key from a ``null`` value."""


# ---------------------------------------------------------------------------------------
# Describing values and locating errors
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


def is_array(value: Any) -> bool:
    """True for a JSON array (a list)."""
    return isinstance(value, list)


def relocated(
    exc: WireFormatError, *, message_index: int | None = None, part_index: int | None = None
) -> WireFormatError:
    """Copy of ``exc`` with the location filled in where it was unknown."""
    return WireFormatError(
        exc.reason,
        message_index=exc.message_index if exc.message_index is not None else message_index,
        part_index=exc.part_index if exc.part_index is not None else part_index,
        field=exc.field,
    )


# ---------------------------------------------------------------------------------------
# Value checks (load side)
# ---------------------------------------------------------------------------------------


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


USAGE_TOKEN_KEYS: Final = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "request_tokens",
    "response_tokens",
)
"""The token counts of a ``usage`` object that must be integers when present."""


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
