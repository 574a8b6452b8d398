r"""Any Python string in a PostgreSQL ``text`` or ``json`` column, losslessly.

PostgreSQL text is valid UTF-8 without NUL, but a session's strings may hold a NUL or a
lone surrogate (a file name decoded with ``os.fsdecode``, a tool's raw output). So:

* raw text columns (the working directory, the model, the original query, thoughts, a
  ledger entry's tool name, result and error) go through :func:`escape` /
  :func:`unescape`. These map NUL to ``U+E000 0``, a lone surrogate to ``U+E000 u`` and
  four hex digits, and the escape character U+E000 (private use) to itself twice. Any
  other string is stored unchanged, so ordinary text reads the same in ``psql``;
* JSON columns are PostgreSQL ``json`` (kept verbatim), fed with :func:`ascii_json`:
  JSON text whose non-ASCII characters are ``\u`` escapes, which ``json`` accepts for
  lone surrogates and NUL alike (``jsonb`` would refuse them). As everywhere in harness's
  JSON (:mod:`harness.wire.jsontext`), a high surrogate directly followed by a low one
  reads back as the one character the pair encodes.

Message bodies are the wire format's JSON text, which already escapes both, and are
stored verbatim.
"""

from __future__ import annotations

__all__ = ["ESCAPE", "ascii_json", "escape", "unescape"]

import json
import re
from typing import TypeVar, cast

T = TypeVar("T")

ESCAPE = "\ue000"
"""The escape character (the first private-use code point)."""

_SPECIAL = re.compile("[\x00\ud800-\udfff\ue000]")
_ESCAPED = re.compile("\ue000(\ue000|0|u[0-9a-f]{4})")


def _escape_one(match: re.Match[str]) -> str:
    char = match.group(0)
    if char == ESCAPE:
        return ESCAPE + ESCAPE
    if char == "\x00":
        return ESCAPE + "0"
    return f"{ESCAPE}u{ord(char):04x}"


def _unescape_one(match: re.Match[str]) -> str:
    code = match.group(1)
    if code == ESCAPE:
        return ESCAPE
    if code == "0":
        return "\x00"
    return chr(int(code[1:], 16))


def escape(value: str | None) -> str | None:
    """``value`` as PostgreSQL text can hold it (unchanged unless it has NUL, a lone surrogate or U+E000)."""
    if value is None or not _SPECIAL.search(value):
        return value
    return _SPECIAL.sub(_escape_one, value)


def unescape(value: T) -> T:
    """The string :func:`escape` was given (anything that is not an escaped string is returned as is)."""
    if not isinstance(value, str) or ESCAPE not in value:
        return value
    return cast(T, _ESCAPED.sub(_unescape_one, value))


def ascii_json(text: str) -> str:
    """JSON text that PostgreSQL's ``json`` type accepts and reads back as the same value."""
    if text.isascii():
        return text
    return json.dumps(json.loads(text), ensure_ascii=True, separators=(",", ":"))
