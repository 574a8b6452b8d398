"""Where a history comes from: files, standard input, compressed data, JSON or JSON Lines.

:func:`read_document` takes bytes, text, a path, ``"-"`` (standard input) or a binary
file object, undoes gzip, bzip2 or xz compression (recognised by the data's first bytes,
not the file name) and parses the result as one JSON document or, when that fails, as
JSON Lines: one JSON value per non-blank line, as Claude Code transcripts and many chat
logs are written. ``NaN`` and infinities read as ``null``, as in every harness document
(see :mod:`harness.wire.jsontext`). Part of :mod:`harness.wire`; import the public API from there.
"""

from __future__ import annotations

__all__ = ["Source", "SourceDocument", "parse_document", "read_document", "read_source"]

import bz2
import gzip
import json
import lzma
import os
import sys
import zlib
from pathlib import Path
from typing import IO, Any, Final, TypeAlias

import attrs

from harness.errors import WireFormatError
from harness.wire.jsontext import DECODER

Source: TypeAlias = "bytes | bytearray | memoryview | str | os.PathLike[str] | IO[bytes]"
"""What :func:`read_document` reads.

Bytes are the document. A string that starts (after blanks) with ``[`` or ``{`` is the
document's text; ``"-"`` means standard input; any other string is a file path. A path
(``"-"`` included) is a file; a binary file object is read to its end.
"""

_MAGIC: Final = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
)
_ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"


@attrs.frozen
class SourceDocument:
    """A parsed document, before it is read as a history.

    Attributes:
        value: The parsed JSON: the document's value, or for JSON Lines the list of the
            lines' values.
        name: Where it came from: the path, ``"<stdin>"``, or ``"<bytes>"``/``"<text>"``.
        json_lines: Whether it was read as JSON Lines.
        compression: ``"gzip"``, ``"bzip2"`` or ``"xz"`` when it was compressed, else ``None``.
        lines: For JSON Lines, the 1-based line number of each item of ``value``.
    """

    value: Any
    name: str
    json_lines: bool = False
    compression: str | None = None
    lines: tuple[int, ...] | None = None

    def line_of(self, index: int) -> int | None:
        """The line of item ``index`` of a JSON Lines document, else ``None``."""
        if self.lines is None or not 0 <= index < len(self.lines):
            return None
        return self.lines[index]


def _is_text_document(text: str) -> bool:
    return text.lstrip(" \t\r\n\ufeff")[:1] in ("[", "{")


def read_source(source: Source) -> tuple[bytes | str, str]:
    """The raw data of ``source`` (bytes, still compressed, or the document's text) and its name.

    Raises:
        OSError: A file cannot be read (it is missing, a folder...).
        TypeError: ``source`` is none of the accepted types.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source), "<bytes>"
    if isinstance(source, str):
        if _is_text_document(source):
            return source, "<text>"
        source = Path(source)
    if isinstance(source, os.PathLike):
        path = Path(source)
        if str(path) == "-":
            return sys.stdin.buffer.read(), "<stdin>"
        return path.read_bytes(), str(path)
    read: object = getattr(source, "read", None)
    if callable(read):
        data: object = read()
        if isinstance(data, (bytes, bytearray)):
            return bytes(data), str(getattr(source, "name", "<stream>"))
        raise TypeError("a history stream must be opened in binary mode")
    raise TypeError(f"cannot read a history from a {type(source).__name__}")


def _decompress(raw: bytes) -> tuple[bytes, str | None]:
    if raw.startswith(_ZSTD_MAGIC):
        raise WireFormatError(
            "the data is zstd-compressed; decompress it first (gzip, bzip2 and xz are read)"
        )
    for magic, name in _MAGIC:
        if raw.startswith(magic):
            try:
                if name == "gzip":
                    return gzip.decompress(raw), name
                if name == "bzip2":
                    return bz2.decompress(raw), name
                return lzma.decompress(raw), name
            except (OSError, EOFError, ValueError, lzma.LZMAError, zlib.error) as exc:
                raise WireFormatError(f"the {name} data is corrupt or truncated: {exc}") from exc
    return raw, None


def _json_error(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    return str(exc)


def _parse_lines(text: str) -> tuple[list[Any], tuple[int, ...]] | None:
    """Parse ``text`` as JSON Lines; ``None`` when its first value is not on one line."""
    values: list[Any] = []
    numbers: list[int] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            values.append(DECODER.decode(line))
        except (ValueError, RecursionError) as exc:
            if not values:
                return None
            reason = _json_error(exc) if isinstance(exc, ValueError) else str(exc)
            raise WireFormatError(f"not valid JSON Lines: {reason}", line=number) from exc
        numbers.append(number)
    return values, tuple(numbers)


def parse_document(raw: bytes | str, name: str = "<bytes>") -> SourceDocument:
    """Decompress and parse ``raw`` as JSON or, failing that, as JSON Lines.

    Args:
        raw: The data (UTF-8, possibly compressed) or the document's text.
        name: Where it came from, for :attr:`SourceDocument.name`.

    Raises:
        WireFormatError: The data is empty, corrupt compressed data, not UTF-8, or not
            JSON and not JSON Lines (a JSON Lines error names the line).
    """
    compression: str | None = None
    if isinstance(raw, str):
        text = raw
    else:
        data, compression = _decompress(raw)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise WireFormatError(f"not valid JSON: invalid UTF-8 at byte {exc.start}") from exc
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text.strip():
        raise WireFormatError("the document is empty")
    try:
        return SourceDocument(DECODER.decode(text), name, compression=compression)
    except (ValueError, RecursionError) as exc:
        whole_error = exc
    parsed = _parse_lines(text)
    if parsed is None or len(parsed[0]) < 2:
        reason = _json_error(whole_error) if isinstance(whole_error, ValueError) else str(whole_error)
        raise WireFormatError(f"not valid JSON (truncated or corrupt?): {reason}") from whole_error
    values, numbers = parsed
    return SourceDocument(values, name, json_lines=True, compression=compression, lines=numbers)


def read_document(source: Source) -> SourceDocument:
    """Read and parse ``source`` (see :data:`Source`).

    Raises:
        OSError: A file cannot be read.
        WireFormatError: The data cannot be parsed (see :func:`parse_document`).
    """
    raw, name = read_source(source)
    return parse_document(raw, name)
