r"""JSON text as harness writes and reads it: lone surrogates and non-finite numbers never crash.

Two policies, shared by the wire format and session files:

* **Lone surrogates** (``"\udce9"``: what ``os.fsdecode``, ``os.listdir`` and
  ``surrogateescape`` subprocess output give for a file name that is not UTF-8) are
  written as ``\u`` escapes, which every JSON reader accepts, so the bytes are always
  valid UTF-8 and the text loads back identical. The one exception is JSON's own: a
  high surrogate directly followed by a low one is, in JSON as in UTF-16, the character
  the pair encodes, so ``"\ud83d\ude00"`` written as two code points reads back as one
  (``"😀"``). Other text is written as UTF-8, or as ``\u`` escapes with ``ascii=True``.
* **Non-finite floats** (``NaN``, ``Infinity``, ``-Infinity``, for example in a tool
  result) are written as ``null``, as pydantic and JavaScript write them: strict JSON has
  no such numbers, and a file holding the ``NaN`` token that Python's ``json`` writes is
  refused by most other readers. Reading accepts those tokens (older session files hold
  them) and reads them as ``null`` too, so a history loads to exactly what it saves as.

Both cost nothing on the common path: the fast C encoder runs first, and a document is
rewritten only when it holds a lone surrogate or a non-finite float. Part of
:mod:`harness.wire`; import from there.
"""

from __future__ import annotations

__all__ = ["DECODER", "decode_json", "encode_json", "finite"]

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Final, cast

from harness.wire.values import format_timestamp


def _constant_as_null(_name: str) -> None:
    return None


DECODER: Final = json.JSONDecoder(parse_constant=_constant_as_null)
"""The decoder of every harness document: ``NaN``, ``Infinity`` and ``-Infinity`` read as ``None``."""


def _default(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(cast("Mapping[str, Any]", value))
    if isinstance(value, (tuple, set, frozenset)):
        return list(cast("Iterable[Any]", value))
    if isinstance(value, datetime):
        return format_timestamp(value)
    raise TypeError(f"a {type(value).__name__} is not JSON serializable")


_ENCODERS: dict[tuple[int | None, bool], Callable[[Any], str]] = {}
_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _encoder(indent: int | None, ascii_only: bool) -> Callable[[Any], str]:
    encode = _ENCODERS.get((indent, ascii_only))
    if encode is None:
        separators = (",", ":") if indent is None else (",", ": ")
        encode = _ENCODERS[indent, ascii_only] = json.JSONEncoder(
            separators=separators, allow_nan=False, default=_default, ensure_ascii=ascii_only, indent=indent
        ).encode
    return encode


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def finite(value: Any) -> Any:
    """A copy of ``value`` with every non-finite float replaced by ``None`` (containers become plain).

    Mappings become dicts and lists, tuples and sets become lists; other values are kept.
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {key: finite(item) for key, item in cast("Mapping[Any, Any]", value).items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [finite(item) for item in cast("Iterable[Any]", value)]
    return value


def encode_json(value: Any, *, indent: int | None = None, ascii_only: bool = True) -> bytes:
    r"""Write ``value`` as JSON: valid UTF-8 bytes, whatever strings and numbers it holds.

    Args:
        value: Dicts, lists, strings, numbers, booleans and ``None``; any other mapping
            is written as an object, tuples and sets as arrays, datetimes as ISO-8601.
        indent: ``None`` for compact JSON (no spaces), otherwise the indentation.
        ascii_only: Write every non-ASCII character as a ``\u`` escape (plain ASCII
            output); otherwise only lone surrogates are escaped.

    Returns:
        The document. Non-finite floats are written as ``null`` (see the module docstring).

    Raises:
        TypeError: A value is of a type JSON cannot represent.
        ValueError: A circular reference, or an integer too long to write.
        RecursionError: The value is nested too deeply.
    """
    encode = _encoder(indent, ascii_only)
    try:
        text = encode(value)
    except ValueError:
        text = encode(finite(value))  # raises again when the cause was not a non-finite float
    if ascii_only:
        return text.encode("ascii")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub(_escape, text).encode("utf-8")


def decode_json(data: bytes | bytearray | memoryview | str) -> Any:
    """Read a JSON document (``NaN`` and infinities as ``None``; escaped lone surrogates kept).

    Raises:
        json.JSONDecodeError: The text is not JSON.
        UnicodeDecodeError: The bytes are not UTF-8, UTF-16 or UTF-32.
        RecursionError: The document is nested too deeply.
        ValueError: An integer too long to read.
    """
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = bytes(data)
        return json.loads(data, parse_constant=_constant_as_null)
    return DECODER.decode(data)
