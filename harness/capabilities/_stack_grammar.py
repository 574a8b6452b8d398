"""The one-line short form of a stack: parsing and formatting.

The grammar is documented in :mod:`harness.config`. It lives in this layer, below the plugin
manager and the agent, because ``Agent(capabilities=["sliding_window:max_messages=80"])``
resolves strings through the same grammar as the command line; it needs nothing but the
error types.
"""

from __future__ import annotations

__all__ = [
    "format_stack",
    "is_entry_list",
    "parse_stack",
]

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any, Final, cast

from harness.capabilities._stack_entries import (
    BARE_STOP,
    FLOAT_RE,
    INT_RE,
    KEY_RE,
    MAX_DEPTH,
    NAME_RE,
    TIERS,
    StackEntry,
)
from harness.errors import StackConfigError

# --------------------------------------------------------------------------------------
# The short form: parsing
# --------------------------------------------------------------------------------------


class _Empty:
    """An empty unquoted list item (``a|`` or ``|``)."""


_EMPTY: Final = _Empty()


def _literal(text: str) -> Any:
    """Type a bare short-form item: bool, None, int, float or str."""
    lowered = text.lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    if lowered in ("none", "null"):
        return None
    try:
        if INT_RE.fullmatch(text):
            return int(text)
        if FLOAT_RE.fullmatch(text):
            number = float(text)
            return number if math.isfinite(number) else text
    except ValueError:  # more digits than int() converts
        return text
    return text


class _Parser:
    def __init__(self, text: str, source: str) -> None:
        self.text: str = text
        self.source: str = source
        self.pos: int = 0

    def error(self, reason: str, pos: int | None = None) -> StackConfigError:
        at = self.pos if pos is None else pos
        shown = self.text if len(self.text) <= 120 else self.text[:117] + "..."
        return StackConfigError(
            f"{self.source}: {reason} at column {at + 1} of {shown!r}", source=self.source
        )

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip_space(self) -> bool:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1
        return self.pos > start

    def stack(self, prefix: str, closing: bool, depth: int) -> list[StackEntry]:
        if depth > MAX_DEPTH:
            raise self.error(f"tiers nested more than {MAX_DEPTH} levels deep")
        entries: list[StackEntry] = []
        opened = self.pos - 1
        while True:
            self.skip_space()
            char = self.peek()
            if not char:
                if closing:
                    raise self.error("missing ']' for the '[' opened here", opened)
                return entries
            if char == "]":
                if not closing:
                    raise self.error("unexpected ']'")
                self.pos += 1
                return entries
            entries.append(self.entry(f"{prefix} {len(entries) + 1}", depth))
            following = self.peek()
            if following and not following.isspace() and following != "]":
                raise self.error(
                    f"unexpected {following!r} after an entry (entries are separated by spaces, "
                    "parameters by ',')"
                )

    def entry(self, source: str, depth: int) -> StackEntry:
        match = NAME_RE.match(self.text, self.pos)
        if match is None:
            raise self.error(f"expected a capability name, found {self.peek()!r}")
        name = match.group()
        self.pos = match.end()
        params: dict[str, Any] = {}
        if self.peek() == "[":
            self.pos += 1
            params[TIERS] = self.stack(f"{source}, tiers entry", True, depth + 1)
        if self.peek() == ":":
            self.pos += 1
            while True:
                key_match = KEY_RE.match(self.text, self.pos)
                if key_match is None:
                    raise self.error(f"expected a parameter name for {name!r}, found {self.peek()!r}")
                key = key_match.group()
                if key in params:
                    raise self.error(f"parameter {key!r} of {name!r} is given twice", key_match.start())
                self.pos = key_match.end()
                if self.peek() != "=":
                    raise self.error(f"expected '=' after parameter {key!r} of {name!r}")
                self.pos += 1
                params[key] = self.value()
                if self.peek() != ",":
                    break
                self.pos += 1
                self.skip_space()
        return StackEntry(name, params, source)

    def value(self) -> Any:
        items: list[Any] = [self.item()]
        is_list = False
        while self.peek() == "|":
            is_list = True
            self.pos += 1
            items.append(self.item())
        if is_list:
            return [item for item in items if item is not _EMPTY]
        return "" if items[0] is _EMPTY else items[0]

    def item(self) -> Any:
        start = self.pos
        text = self.text
        if self.peek() == '"':
            index = start + 1
            while index < len(text) and text[index] != '"':
                index += 2 if text[index] == "\\" else 1
            if index >= len(text):
                raise self.error("unterminated quoted string", start)
            self.pos = index + 1
            try:
                decoded: object = json.loads(text[start : index + 1], strict=False)
            except ValueError as exc:
                raise self.error(f"invalid quoted string ({exc})", start) from None
            following = self.peek()
            if following and not following.isspace() and following not in ",|]":
                raise self.error(f"unexpected {following!r} after a quoted string")
            return decoded
        index = start
        while index < len(text) and text[index] not in BARE_STOP and not text[index].isspace():
            index += 1
        self.pos = index
        if index == start:
            following = self.peek()
            if following in ("[", "="):
                raise self.error(f"unexpected {following!r} in a value (quote the value)")
            return _EMPTY
        return _literal(text[start:index])


def parse_stack(spec: str, *, source: str = "--stack") -> list[StackEntry]:
    """Parse a short-form stack description (grammar in :mod:`harness.config`).

    Args:
        spec: E.g. ``"dedupe_file_reads clear_tool_results:keep_pairs=3"``.
        source: How the text is named in errors; entries are named
            ``"<source> entry <n>"`` (1-based) and nested tiers
            ``"<source> entry <n>, tiers entry <m>"``.

    Returns:
        The entries in order (empty for a blank string). Names and parameters are not
        checked here; :func:`harness.config.build_stack` does that.

    Raises:
        StackConfigError: The text does not follow the grammar; the message gives the
            column.
    """
    return _Parser(spec, source).stack(f"{source} entry", False, 0)


# --------------------------------------------------------------------------------------
# The short form: formatting
# --------------------------------------------------------------------------------------


def _format_scalar(value: Any, where: str) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise StackConfigError(f"{where}: {value!r} cannot be written in the short form", source=where)
        return repr(value)
    if isinstance(value, str):
        bare = (
            value
            and not any(char in BARE_STOP or char.isspace() for char in value)
            and _literal(value) == value
            and isinstance(_literal(value), str)
        )
        return value if bare else json.dumps(value, ensure_ascii=False)
    raise StackConfigError(
        f"{where}: a {type(value).__name__} value cannot be written in the short form", source=where
    )


def _format_value(value: Any, where: str) -> str:
    if isinstance(value, list | tuple):
        items = [_format_scalar(item, where) for item in cast("Sequence[Any]", value)]
        if len(items) == 1:
            return items[0] + "|"
        return "|".join(items) if items else "|"
    return _format_scalar(value, where)


def is_entry_list(value: object) -> bool:
    """Whether ``value`` is a non-empty list or tuple of :class:`StackEntry` (a ``tiers`` value)."""
    if not isinstance(value, list | tuple):
        return False
    items = cast("Sequence[object]", value)
    return bool(items) and all(isinstance(item, StackEntry) for item in items)


def format_stack(entries: Iterable[StackEntry]) -> str:
    """Write entries in the short form, the inverse of :func:`parse_stack`.

    Strings that would read back as another type (``"3"``, ``"true"``) or that hold
    separators are quoted; one-item lists end with ``|``; a non-empty list of entries
    under ``tiers`` is written in brackets.

    Raises:
        StackConfigError: A value has no short form (a mapping, a nested list, a
            non-finite float, entries under another parameter than ``tiers``).
    """
    parts: list[str] = []
    for entry in entries:
        where = entry.source or entry.name
        if not NAME_RE.fullmatch(entry.name):
            raise StackConfigError(f"{where}: {entry.name!r} is not a capability name", source=where)
        bad = [key for key in entry.params if not KEY_RE.fullmatch(key)]
        if bad:
            raise StackConfigError(f"{where}: {bad[0]!r} is not a parameter name", source=where)
        text = entry.name
        tiers = entry.params.get(TIERS)
        rest = dict(entry.params)
        if is_entry_list(tiers):
            text += f"[{format_stack(cast('Sequence[StackEntry]', tiers))}]"
            del rest[TIERS]
        if rest:
            text += ":" + ",".join(f"{key}={_format_value(value, where)}" for key, value in rest.items())
        parts.append(text)
    return " ".join(parts)
