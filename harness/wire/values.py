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

from typing import Any, Final

from harness.core.fields import (
    USAGE_TOKEN_KEYS,
    check_args,
    check_content,
    check_id,
    check_str,
    check_usage,
    dump_args,
    dump_content,
    dump_usage,
    format_timestamp,
    is_object,
    parse_timestamp,
    preview,
    type_name,
)
from harness.errors import WireFormatError

MISSING: Final = object()
"""Default of ``dict.get`` telling an absent key from a ``null`` value."""


# ---------------------------------------------------------------------------------------
# Arrays and locating errors
# ---------------------------------------------------------------------------------------


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
