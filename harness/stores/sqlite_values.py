"""How :class:`~harness.stores.sqlite.SqliteStore` writes values and reads them back.

* Text with a lone surrogate (a non-UTF-8 file name) cannot be bound by ``sqlite3``: it
  is stored as its ``surrogatepass`` bytes (a BLOB in a TEXT column) and read back as the
  same ``str``.
* A message body of 512 bytes or more is stored zlib-compressed (a BLOB that starts with
  a NUL byte and ``z``, which no JSON text does) when that saves a tenth of it.
* The searchable text of a stored body, exactly as the FTS index holds it, so a delete
  from the contentless index removes what was inserted.
"""

from __future__ import annotations

__all__ = [
    "bind",
    "bind_row",
    "is_text",
    "pack_body",
    "text_of_body",
    "unbind",
    "unbind_row",
    "unpack_body",
]

import json
import zlib
from collections.abc import Sequence
from typing import Any, cast

from harness.session.text import searchable_text


def is_text(value: str) -> bool:
    """``value`` encodes as UTF-8 (holds no lone surrogate), so sqlite3 can bind it as text."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def bind(value: Any) -> Any:
    """A value sqlite3 can bind: text with a lone surrogate (a non-UTF-8 path) goes in as its bytes.

    sqlite3 cannot bind such a ``str``; its ``surrogatepass`` bytes are stored instead (a
    BLOB in a TEXT column) and :func:`unbind` turns them back into the same ``str``.
    """
    if isinstance(value, str) and not is_text(value):
        return value.encode("utf-8", "surrogatepass")
    return value


def unbind(value: Any) -> Any:
    """The ``str`` :func:`bind` stored (other values unchanged)."""
    return value.decode("utf-8", "surrogatepass") if isinstance(value, bytes) else value


_PACKED = b"\x00z"
"""How a compressed body starts (no JSON text does)."""


def pack_body(body: str | None) -> Any:
    """A message body as stored: zlib-compressed when it has 512+ bytes and shrinks by a tenth."""
    if body is None or len(body) < 512:
        return bind(body)
    raw = body.encode("utf-8", "surrogatepass")
    packed = zlib.compress(raw, 1)
    if len(packed) + len(_PACKED) > len(raw) * 0.9:
        return bind(body)
    return _PACKED + packed


def unpack_body(value: Any) -> Any:
    """The body :func:`pack_body` stored (``zlib.error`` for a corrupt one)."""
    if isinstance(value, bytes) and value.startswith(_PACKED):
        return zlib.decompress(value[len(_PACKED) :]).decode("utf-8", "surrogatepass")
    return unbind(value)


def bind_row(row: Sequence[Any]) -> tuple[Any, ...]:
    """:func:`bind` of every value of a row."""
    return tuple(bind(v) for v in row)


def unbind_row(row: Sequence[Any]) -> tuple[Any, ...]:
    """:func:`unbind` of every value of a row."""
    return tuple(unbind(v) for v in row)


def text_of_body(body: str | bytes) -> str:
    """The searchable text of a stored body, as the FTS index holds it (lone surrogates replaced)."""
    try:
        data = json.loads(unpack_body(body))
    except (ValueError, zlib.error):
        return ""
    if not isinstance(data, dict):
        return ""
    text = searchable_text(cast(dict[str, Any], data))
    return text if is_text(text) else text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
