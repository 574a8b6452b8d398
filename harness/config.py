r"""Capability stacks from configuration: a TOML file or a one-line ``--stack`` string.

A *stack* is an ordered list of capabilities, each named by its entry-point name in the
``harness`` group (``sliding_window``, ``clear_tool_results``, ``dedupe_file_reads``,
``limit_warner``, ``summarizing``, ``tiered``, or any third-party plugin) and configured
with keyword arguments of its class's constructor. Configuration goes through two steps:

1. :func:`parse_stack` (short form) or :func:`load_stack_file` (TOML) turn text into
   :class:`StackEntry` objects: a name, typed parameters, and where the entry came from.
2. :func:`build_stack` looks every name up among the installed capabilities, checks each
   parameter against the class's constructor signature *before* constructing it,
   converts values by the parameter's annotation, and instantiates the classes.

:func:`resolve_stack` does both with the usual precedence: an explicit ``--stack``
string, else an explicit configuration file, else a ``harness.toml`` (or a
``pyproject.toml`` with a ``[tool.harness]`` table) found in the current folder or one of
its parents, else a default short-form string.

Every problem raises :class:`StackConfigError` naming the entry (``--stack entry 2``,
``harness.toml [[stack]] 3``), the capability, the parameter and the accepted values,
with a "did you mean" suggestion when a name is close to a known one.

Short form
----------

Grammar (whitespace is any Unicode whitespace)::

    stack    := ws* ( entry ( ws+ entry )* )? ws*
    entry    := NAME ( "[" stack "]" )? ( ":" params )?
    params   := param ( "," ws* param )*
    param    := KEY "=" value
    value    := item ( "|" item )*
    item     := QUOTED | BARE | (nothing)
    NAME     := [A-Za-z0-9_.-]+           an entry-point name
    KEY      := [A-Za-z_][A-Za-z0-9_]*    a constructor parameter
    QUOTED   := a JSON string literal: "..." with JSON escapes (\" \\ \n \u00e9 ...)
    BARE     := one or more characters other than whitespace and , = [ ] " |

* Entries are separated by whitespace, parameters by commas, list items by ``|``.
* ``NAME[...]`` gives the entry's ``tiers`` parameter: the stack inside the brackets, for
  :class:`TieredCompaction <harness_tiered.TieredCompaction>`. Brackets nest.
* A bare item is typed literally: ``true`` / ``false`` (any case) are booleans,
  ``none`` / ``null`` (any case) are ``None``, ``3`` / ``-2`` / ``20_000`` are integers,
  ``0.5`` / ``1e-3`` are floats, anything else is a string. A quoted item is always a
  string (``"3"`` is the text 3; ``"a b, c"`` may hold any character).
* A value containing ``|`` is a list: ``exclude_tools=bash|grep``. Empty unquoted items
  are dropped, so ``bash|`` is a one-item list and ``|`` an empty list. ``key=`` (nothing)
  is the empty string.

Example::

    dedupe_file_reads clear_tool_results:keep_pairs=3,exclude_tools=bash|grep
    tiered[dedupe_file_reads clear_tool_results:keep_pairs=3 sliding_window]:target_fraction=0.5
    clear_tool_results:placeholder="[cleared, see log]"

:func:`format_stack` writes entries back in this form; ``parse_stack(format_stack(e))``
equals ``e`` for every stack of scalars (finite floats), lists of scalars and nested
``tiers`` stacks.

TOML
----

In ``harness.toml`` the stack is the top-level ``stack`` key; in ``pyproject.toml`` it is
``stack`` in the ``[tool.harness]`` table. It is an array of tables (one per capability:
``name`` plus its parameters), a short-form string, or an array mixing both::

    [[stack]]
    name = "dedupe_file_reads"

    [[stack]]
    name = "clear_tool_results"
    keep_pairs = 3
    exclude_tools = ["bash"]

    [[stack]]
    name = "tiered"
    target_fraction = 0.5
    tiers = [{name = "dedupe_file_reads"}, {name = "sliding_window", keep_messages = 6}]

``tiers`` may also be written as sub-tables (``[[stack.tiers]]`` after the ``[[stack]]``
it belongs to) or as a short-form string (``tiers = "dedupe_file_reads sliding_window"``).
Named stacks live under ``stacks``: ``[[stacks.small]]`` tables or
``stacks.small = "..."``, selected with ``load_stack_file(path, name="small")`` (the
``--stack-name`` option of the command line).

Values are converted by the constructor's annotation: an integer is accepted for a
``float`` parameter, a single value for a list parameter, the strings ``"3"`` /
``"true"`` for ``int`` / ``bool`` parameters, a number for a ``str`` parameter, and a list
becomes a tuple for a ``tuple`` parameter. Parameters whose annotation is not one of
``int``, ``float``, ``bool``, ``str``, ``None``, ``Literal[...]`` or a sequence of those
receive the value unchanged.

Default triggers
----------------

An entry that sets none of ``max_messages``, ``max_tokens`` and ``max_fraction`` gets the
capability class's ``default_trigger`` (see :attr:`harness.capability.Capability.default_trigger`),
so ``clear_tool_results:keep_pairs=3`` is a complete entry. A ``max_fraction`` trigger
needs the context window: the model's, or the ``context_window`` given to
:func:`build_stack` (the command line's ``--window`` / ``--budget``).
"""

from __future__ import annotations

__all__ = [
    "CONFIG_FILE_NAME",
    "PYPROJECT_FILE_NAME",
    "StackConfigError",
    "StackEntry",
    "TRIGGER_PARAMETERS",
    "build_stack",
    "find_stack_file",
    "format_stack",
    "installed_capability_classes",
    "load_stack_file",
    "parse_stack",
    "resolve_stack",
]

import ast
import builtins
import collections.abc
import difflib
import functools
import inspect
import json
import math
import os
import re
import tomllib
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, cast

import attrs

from harness.capability import Capability
from harness.errors import HarnessError
from harness.plugins import DISABLE_ENV, LOAD_ENV, PluginManager

CONFIG_FILE_NAME: Final = "harness.toml"
"""The dedicated configuration file :func:`find_stack_file` looks for first."""

PYPROJECT_FILE_NAME: Final = "pyproject.toml"
"""The project file whose ``[tool.harness]`` table :func:`find_stack_file` accepts."""

TRIGGER_PARAMETERS: Final = ("max_messages", "max_tokens", "max_fraction")
"""An entry setting none of these gets the capability's ``default_trigger``."""

TIERS: Final = "tiers"
"""The parameter the short form's ``NAME[...]`` brackets set."""

_MAX_DEPTH: Final = 16
_NAME_RE: Final = re.compile(r"[A-Za-z0-9_.\-]+")
_KEY_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT_RE: Final = re.compile(r"[+-]?[0-9]+(?:_[0-9]+)*")
_FLOAT_RE: Final = re.compile(
    r"[+-]?(?:[0-9]+(?:_[0-9]+)*\.(?:[0-9]+(?:_[0-9]+)*)?|\.[0-9]+(?:_[0-9]+)*|[0-9]+(?:_[0-9]+)*)"
    r"(?:[eE][+-]?[0-9]+)?"
)
_BARE_STOP: Final = frozenset(',=[]"|')
_TRUE: Final = frozenset({"true", "yes", "on", "1"})
_FALSE: Final = frozenset({"false", "no", "off", "0"})


# --------------------------------------------------------------------------------------
# Entries and errors
# --------------------------------------------------------------------------------------


class StackConfigError(HarnessError, ValueError):
    """A stack description is malformed, names an unknown capability or parameter, or a value is bad.

    The message names where the entry came from, the capability, the parameter and the
    accepted names or values, with a "did you mean" suggestion when one is close.

    Attributes:
        source: Where the entry came from (``"--stack entry 2"``,
            ``"harness.toml [[stack]] 3"``), or the file or string at fault.
        entry: The capability name of the entry at fault, when known.
        parameter: The parameter at fault, when known.
        accepted: The accepted capability names, parameters or values, when relevant.
        suggestion: The closest accepted name, when one is close.
    """

    def __init__(
        self,
        message: str,
        *,
        source: str = "",
        entry: str | None = None,
        parameter: str | None = None,
        accepted: Sequence[str] = (),
        suggestion: str | None = None,
    ) -> None:
        self.source = source
        self.entry = entry
        self.parameter = parameter
        self.accepted = tuple(accepted)
        self.suggestion = suggestion
        super().__init__(message)


def _stack_error(
    reason: str,
    *,
    source: str,
    entry: str | None = None,
    parameter: str | None = None,
    accepted: Sequence[str] = (),
    accepted_label: str = "accepted",
    candidate: str | None = None,
) -> StackConfigError:
    """Build a :class:`StackConfigError` with the standard message layout."""
    where = source + (f" ({entry})" if entry else "")
    text = f"{where}: " if where else ""
    if parameter is not None:
        text += f"parameter {parameter!r}: "
    text += reason
    suggestion: str | None = None
    if candidate is not None and accepted:
        close = difflib.get_close_matches(candidate, list(accepted), n=1, cutoff=0.6)
        if close:
            suggestion = close[0]
            text += f"; did you mean {suggestion!r}?"
    if accepted:
        text += f" ({accepted_label}: {', '.join(accepted)})"
    return StackConfigError(
        text, source=source, entry=entry, parameter=parameter, accepted=accepted, suggestion=suggestion
    )


@attrs.frozen
class StackEntry:
    """One capability of a stack: an entry-point name and constructor keyword arguments.

    Attributes:
        name: Entry-point name in the ``harness`` group, e.g. ``"clear_tool_results"``.
        params: Constructor keyword arguments, typed as read (int, float, bool, str,
            None, lists of those, and lists of :class:`StackEntry` for ``tiers``);
            :func:`build_stack` converts them by the constructor's annotations.
        source: Where the entry came from, for error messages (``"--stack entry 2"``,
            ``"harness.toml [[stack]] 3"``). Not part of equality.
    """

    name: str
    params: Mapping[str, Any] = attrs.field(factory=dict[str, Any])
    source: str = attrs.field(default="", eq=False)


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
        if _INT_RE.fullmatch(text):
            return int(text)
        if _FLOAT_RE.fullmatch(text):
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
        if depth > _MAX_DEPTH:
            raise self.error(f"tiers nested more than {_MAX_DEPTH} levels deep")
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
        match = _NAME_RE.match(self.text, self.pos)
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
                key_match = _KEY_RE.match(self.text, self.pos)
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
        while index < len(text) and text[index] not in _BARE_STOP and not text[index].isspace():
            index += 1
        self.pos = index
        if index == start:
            following = self.peek()
            if following in ("[", "="):
                raise self.error(f"unexpected {following!r} in a value (quote the value)")
            return _EMPTY
        return _literal(text[start:index])


def parse_stack(spec: str, *, source: str = "--stack") -> list[StackEntry]:
    """Parse a short-form stack description (grammar in the module docstring).

    Args:
        spec: E.g. ``"dedupe_file_reads clear_tool_results:keep_pairs=3"``.
        source: How the text is named in errors; entries are named
            ``"<source> entry <n>"`` (1-based) and nested tiers
            ``"<source> entry <n>, tiers entry <m>"``.

    Returns:
        The entries in order (empty for a blank string). Names and parameters are not
        checked here; :func:`build_stack` does that.

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
            and not any(char in _BARE_STOP or char.isspace() for char in value)
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


def _is_entry_list(value: object) -> bool:
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
        if not _NAME_RE.fullmatch(entry.name):
            raise StackConfigError(f"{where}: {entry.name!r} is not a capability name", source=where)
        bad = [key for key in entry.params if not _KEY_RE.fullmatch(key)]
        if bad:
            raise StackConfigError(f"{where}: {bad[0]!r} is not a parameter name", source=where)
        text = entry.name
        tiers = entry.params.get(TIERS)
        rest = dict(entry.params)
        if _is_entry_list(tiers):
            text += f"[{format_stack(cast('Sequence[StackEntry]', tiers))}]"
            del rest[TIERS]
        if rest:
            text += ":" + ",".join(f"{key}={_format_value(value, where)}" for key, value in rest.items())
        parts.append(text)
    return " ".join(parts)


# --------------------------------------------------------------------------------------
# TOML files
# --------------------------------------------------------------------------------------


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise StackConfigError(
            f"{path}: cannot read the file: {exc.strerror or exc}", source=str(path)
        ) from exc
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise StackConfigError(f"{path}: not UTF-8 text: {exc}", source=str(path)) from exc
    except tomllib.TOMLDecodeError as exc:
        raise StackConfigError(f"{path}: invalid TOML: {exc}", source=str(path)) from exc


def _harness_table(path: Path, document: Mapping[str, Any]) -> tuple[Mapping[str, Any], str] | None:
    """The table holding the stack settings and its label, or None (pyproject without it)."""
    tool: object = document.get("tool")
    if isinstance(tool, Mapping):
        table: object = cast("Mapping[str, object]", tool).get("harness")
        if isinstance(table, Mapping):
            return cast("Mapping[str, Any]", table), "tool.harness."
    if path.name == PYPROJECT_FILE_NAME:
        return None
    return document, ""


def _toml_value(value: Any, source: str, key: str) -> Any:
    if isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list):
        return [_toml_value(item, source, key) for item in cast("list[Any]", value)]
    raise _stack_error(
        f"a TOML {type(value).__name__} is not a supported value (use numbers, booleans, strings "
        "or arrays of them)",
        source=source,
        parameter=key,
    )


def _toml_entry(table: Mapping[str, Any], source: str) -> StackEntry:
    name: object = table.get("name")
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise _stack_error(
            f"every entry needs a `name` string (the capability's entry-point name), got {name!r}",
            source=source,
        )
    params: dict[str, Any] = {}
    for key, value in table.items():
        if key == "name":
            continue
        if key == TIERS and not isinstance(value, bool | int | float):
            params[key] = _toml_entries(value, f"{source}, tiers")
        else:
            params[key] = _toml_value(value, f"{source} ({name})", key)
    return StackEntry(name, params, source)


def _toml_entries(value: Any, label: str) -> list[StackEntry]:
    if isinstance(value, str):
        return parse_stack(value, source=label)
    if isinstance(value, Mapping):
        raise _stack_error(
            "is a single table; write one [[...]] table per capability (an array of tables)",
            source=label,
        )
    if not isinstance(value, list):
        raise _stack_error(
            f"expected an array of tables or a short-form string, got {type(value).__name__}",
            source=label,
        )
    entries: list[StackEntry] = []
    for index, item in enumerate(cast("list[Any]", value), start=1):
        if isinstance(item, Mapping):
            entries.append(_toml_entry(cast("Mapping[str, Any]", item), f"{label} {index}"))
        elif isinstance(item, str):
            entries.extend(parse_stack(item, source=f"{label} {index}"))
        else:
            raise _stack_error(
                f"item {index} is a {type(item).__name__}; expected a table or a short-form string",
                source=label,
            )
    return entries


def load_stack_file(path: Path, *, name: str | None = None) -> list[StackEntry]:
    """Read the stack of a ``harness.toml`` or of a ``pyproject.toml``'s ``[tool.harness]``.

    Any file with a ``[tool.harness]`` table is read from that table; any other file
    except ``pyproject.toml`` is read from its top level. Layout: see the module
    docstring.

    Args:
        path: The file.
        name: Read the named stack ``stacks.<name>`` instead of ``stack``.

    Returns:
        The entries, each with its source (``"harness.toml [[stack]] 2"``).

    Raises:
        StackConfigError: The file cannot be read, is not TOML, has no stack (or no stack
            of that name, with the names it has), or an entry is malformed.
    """
    document = _read_toml(path)
    found = _harness_table(path, document)
    if found is None:
        raise StackConfigError(
            f"{path}: no [tool.harness] table (add [[tool.harness.stack]] tables, or use {CONFIG_FILE_NAME})",
            source=str(path),
        )
    table, prefix = found
    stacks: object = table.get("stacks", {})
    if not isinstance(stacks, Mapping):
        raise StackConfigError(f"{path}: `{prefix}stacks` must be a table of named stacks", source=str(path))
    named = cast("Mapping[str, Any]", stacks)
    if name is not None:
        if name not in named:
            raise _stack_error(
                f"no stack named {name!r}",
                source=str(path),
                accepted=sorted(named),
                accepted_label="named stacks",
                candidate=name,
            )
        return _toml_entries(named[name], f"{path.name} [[{prefix}stacks.{name}]]")
    if "stack" not in table:
        hint = f"; it has named stacks ({', '.join(sorted(named))}): pick one by name" if named else ""
        raise StackConfigError(
            f"{path}: no `{prefix}stack` defined (add [[{prefix}stack]] tables or "
            f'`{prefix}stack = "..."`){hint}',
            source=str(path),
        )
    return _toml_entries(table["stack"], f"{path.name} [[{prefix}stack]]")


def _has_harness_table(path: Path) -> bool:
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    tool: object = document.get("tool")
    return isinstance(tool, Mapping) and "harness" in cast("Mapping[str, object]", tool)


def find_stack_file(start: Path | None = None) -> Path | None:
    """Find the configuration file for ``start`` (default: the current folder).

    Looks in ``start`` and then each parent folder for ``harness.toml``, then for a
    ``pyproject.toml`` holding a ``[tool.harness]`` table (an unreadable
    ``pyproject.toml`` is passed over); the first match wins.

    Returns:
        The file, or ``None`` when no folder up to the root has one.
    """
    folder = (start if start is not None else Path.cwd()).resolve()
    if folder.is_file():
        folder = folder.parent
    for candidate in (folder, *folder.parents):
        config = candidate / CONFIG_FILE_NAME
        if config.is_file():
            return config
        pyproject = candidate / PYPROJECT_FILE_NAME
        if pyproject.is_file() and _has_harness_table(pyproject):
            return pyproject
    return None


# --------------------------------------------------------------------------------------
# Annotations: what a parameter accepts
# --------------------------------------------------------------------------------------

_SCALARS: Final[Mapping[str, type]] = {"int": int, "float": float, "bool": bool, "str": str}
_SEQUENCE_ORIGINS: Final[Mapping[object, str]] = {
    list: "list",
    tuple: "tuple",
    set: "frozenset",
    frozenset: "frozenset",
    collections.abc.Sequence: "list",
    collections.abc.MutableSequence: "list",
    collections.abc.Iterable: "list",
    collections.abc.Collection: "list",
    collections.abc.Set: "frozenset",
}
_SEQUENCE_NAMES: Final[Mapping[str, str]] = {
    "list": "list",
    "tuple": "tuple",
    "set": "frozenset",
    "frozenset": "frozenset",
    "Sequence": "list",
    "MutableSequence": "list",
    "Iterable": "list",
    "Collection": "list",
    "Set": "frozenset",
    "AbstractSet": "frozenset",
    "List": "list",
    "Tuple": "tuple",
    "FrozenSet": "frozenset",
}


@attrs.frozen
class _Shape:
    """What a parameter accepts, reduced to what configuration values can be."""

    text: str
    nullable: bool = False
    scalars: tuple[type, ...] = ()
    literals: tuple[object, ...] = ()
    sequence: tuple[str, _Shape] | None = None
    anything: bool = False


_ANY: Final = _Shape("any", nullable=True, anything=True)


def _merge(text: str, shapes: Sequence[_Shape]) -> _Shape:
    sequence = next((s.sequence for s in shapes if s.sequence is not None), None)
    return _Shape(
        text,
        nullable=any(s.nullable for s in shapes),
        scalars=tuple(t for s in shapes for t in s.scalars),
        literals=tuple(v for s in shapes for v in s.literals),
        sequence=sequence,
        anything=any(s.anything for s in shapes),
    )


def _split_top(text: str, separator: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    start = 0
    for index, char in enumerate(text):
        if char in "[(":
            depth += 1
        elif char in "])":
            depth -= 1
        elif char == separator and depth == 0:
            parts.append(text[start:index].strip())
            start = index + 1
    parts.append(text[start:].strip())
    return parts


def _shape_from_text(text: str) -> _Shape:
    """Read an annotation that could not be evaluated (names imported for type checking only)."""
    text = text.strip()
    alternatives = _split_top(text, "|")
    if len(alternatives) > 1:
        return _merge(text, [_shape_from_text(a) for a in alternatives])
    head, bracket, rest = text.partition("[")
    head = head.strip().removeprefix("typing.").removeprefix("collections.abc.")
    inner = rest[:-1] if bracket and rest.endswith("]") else ""
    if head in ("None", "NoneType"):
        return _Shape(text, nullable=True)
    if head in _SCALARS and not bracket:
        return _Shape(text, scalars=(_SCALARS[head],))
    if head == "Optional" and inner:
        return _merge(text, [_shape_from_text(inner), _Shape("None", nullable=True)])
    if head == "Union" and inner:
        return _merge(text, [_shape_from_text(a) for a in _split_top(inner, ",")])
    if head == "Literal" and inner:
        try:
            values: object = ast.literal_eval(f"({inner},)")
        except (ValueError, SyntaxError):
            return _Shape(text, anything=True)
        return _Shape(text, literals=tuple(cast("tuple[object, ...]", values)))
    if head in _SEQUENCE_NAMES:
        items = _split_top(inner, ",") if inner else []
        if len(items) == 2 and items[1] == "...":
            items = items[:1]
        item = _shape_from_text(items[0]) if len(items) == 1 else _ANY
        return _Shape(text, sequence=(_SEQUENCE_NAMES[head], item))
    return _Shape(text, anything=True)


def _shape_from_type(annotation: object, text: str) -> _Shape:
    if annotation is None or annotation is type(None):
        return _Shape(text, nullable=True)
    if annotation is Any:
        return _ANY
    if isinstance(annotation, type) and annotation in _SCALARS.values():
        return _Shape(text, scalars=(annotation,))
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return _merge(text, [_shape_from_type(arg, _describe(arg)) for arg in args])
    if origin is typing.Literal:
        return _Shape(text, literals=tuple(args))
    container = _SEQUENCE_ORIGINS.get(origin if origin is not None else annotation)
    if container is not None:
        items = [arg for arg in args if arg is not Ellipsis]
        item = _shape_from_type(items[0], _describe(items[0])) if len(items) == 1 else _ANY
        return _Shape(text, sequence=(container, item))
    return _Shape(text, anything=True)


def _describe(annotation: object) -> str:
    if isinstance(annotation, str):
        return annotation
    if annotation is None or annotation is type(None):
        return "None"
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__name__
    return str(annotation).replace("typing.", "").replace("collections.abc.", "")


def _shape_of(parameter: inspect.Parameter, namespace: Mapping[str, Any]) -> _Shape:
    annotation: object = parameter.annotation
    if annotation is inspect.Parameter.empty:
        return _ANY
    if isinstance(annotation, str):
        try:
            evaluated: object = eval(annotation, {"__builtins__": builtins, **namespace})
        except Exception:
            return _shape_from_text(annotation)
        if isinstance(evaluated, str):
            return _shape_from_text(evaluated)
        return _shape_from_type(evaluated, annotation)
    return _shape_from_type(annotation, _describe(annotation))


# --------------------------------------------------------------------------------------
# Values: conversion by shape
# --------------------------------------------------------------------------------------


class _MismatchError(Exception):
    """A value does not fit a shape; ``args[0]`` says why."""


def _show(value: object) -> str:
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, bool) or value is None:
        return str(value).lower() if value is not None else "none"
    return repr(value)


def _same_literal(value: object, literal: object) -> bool:
    return type(value) is type(literal) and value == literal


def _convert(value: object, shape: _Shape) -> Any:
    """Convert a configuration value to what ``shape`` accepts, or raise :class:`_MismatchError`."""
    if value is None:
        if shape.nullable or shape.anything:
            return None
        raise _MismatchError(f"expected {shape.text}, got none")
    if shape.literals:
        for literal in shape.literals:
            if _same_literal(value, literal):
                return literal
        if isinstance(value, str):
            for literal in shape.literals:
                if not isinstance(literal, str) and str(literal).lower() == value.lower():
                    return literal
    if isinstance(value, bool):
        if bool in shape.scalars:
            return value
    elif isinstance(value, int):
        if int in shape.scalars:
            return value
        if float in shape.scalars:
            return float(value)
        if str in shape.scalars:
            return str(value)
    elif isinstance(value, float):
        if float in shape.scalars:
            return value
        if str in shape.scalars:
            return repr(value)
    elif isinstance(value, str):
        if str in shape.scalars:
            return value
        converted = _from_text(value, shape)
        if converted is not None:
            return converted
    elif _is_list(value) and shape.sequence is not None:
        container, item_shape = shape.sequence
        items = [_convert(item, item_shape) for item in cast("Sequence[Any]", value)]
        if container == "tuple":
            return tuple(items)
        return frozenset(items) if container == "frozenset" else items
    return _fallback(value, shape)


def _is_list(value: object) -> bool:
    return isinstance(value, list | tuple)


def _fallback(value: object, shape: _Shape) -> Any:
    if shape.sequence is not None and not _is_list(value):
        return _convert([value], shape)
    if shape.anything:
        return value
    if shape.literals:
        accepted = [_show(v) for v in shape.literals]
        close = difflib.get_close_matches(str(value), [str(v) for v in shape.literals], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise _MismatchError(f"expected one of {', '.join(accepted)}, got {_show(value)}{hint}")
    raise _MismatchError(f"expected {shape.text}, got {_show(value)}")


def _from_text(text: str, shape: _Shape) -> Any:
    """Read a string as an int, float or bool parameter, or ``None`` when it is neither."""
    stripped = text.strip()
    try:
        if int in shape.scalars and _INT_RE.fullmatch(stripped):
            return int(stripped)
        if float in shape.scalars and (_FLOAT_RE.fullmatch(stripped) or _INT_RE.fullmatch(stripped)):
            return float(stripped)
    except ValueError:  # more digits than int() converts
        return None
    if bool in shape.scalars:
        if stripped.lower() in _TRUE:
            return True
        if stripped.lower() in _FALSE:
            return False
    return None


# --------------------------------------------------------------------------------------
# Building capabilities
# --------------------------------------------------------------------------------------


@functools.cache
def _installed(load: str | None, disable: str | None) -> Mapping[str, type]:
    del load, disable  # cache key only: the entry points depend on these variables
    manager = PluginManager()
    manager.load_entrypoint_plugins()
    return types.MappingProxyType(manager.available_capabilities())


def installed_capability_classes() -> Mapping[str, type]:
    """Capability classes published through the ``harness`` entry points, by name.

    Honours ``HARNESS_LOAD_PLUGINS`` / ``HARNESS_DISABLE_PLUGINS``; cached per value of
    those variables for the life of the process.

    Raises:
        PluginLoadError: An entry point failed to load.
    """
    return _installed(os.environ.get(LOAD_ENV), os.environ.get(DISABLE_ENV))


@attrs.frozen
class _Signature:
    accepted: tuple[str, ...]
    required: tuple[str, ...]
    shapes: Mapping[str, _Shape]
    open: bool
    positional: tuple[str, ...] = ()


@functools.cache
def _signature_of(cls: type) -> _Signature:
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):
        return _Signature((), (), {}, open=True)
    init: object = getattr(cls, "__init__", None)
    namespace = cast("Mapping[str, Any]", getattr(init, "__globals__", {}))
    accepted: list[str] = []
    required: list[str] = []
    shapes: dict[str, _Shape] = {}
    positional: list[str] = []
    is_open = False
    for parameter in signature.parameters.values():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            is_open = True
            continue
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            if parameter.default is inspect.Parameter.empty:
                positional.append(parameter.name)
            continue
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            continue
        accepted.append(parameter.name)
        shapes[parameter.name] = _shape_of(parameter, namespace)
        if parameter.default is inspect.Parameter.empty:
            required.append(parameter.name)
    return _Signature(tuple(accepted), tuple(required), shapes, is_open, tuple(positional))


def _blamed_parameter(message: str, names: Iterable[str]) -> str | None:
    for name in sorted(names, key=len, reverse=True):
        if re.search(rf"\b{re.escape(name)}\b", message):
            return name
    return None


def _build_entry(entry: StackEntry, classes: Mapping[str, type], context_window: int | None) -> Capability:
    source = entry.source or f"stack entry {entry.name!r}"
    cls = classes.get(entry.name)
    if cls is None:
        raise _stack_error(
            f"unknown capability {entry.name!r}",
            source=source,
            accepted=sorted(classes),
            accepted_label="installed",
            candidate=entry.name,
        )
    signature = _signature_of(cls)
    if signature.positional:
        raise _stack_error(
            f"{cls.__qualname__} requires the positional-only argument(s) "
            f"{', '.join(signature.positional)}, which a configuration cannot give",
            source=source,
            entry=entry.name,
        )
    kwargs: dict[str, Any] = {}
    for key, value in entry.params.items():
        if key not in signature.shapes and not signature.open:
            raise _stack_error(
                f"unknown parameter {key!r}",
                source=source,
                entry=entry.name,
                accepted=signature.accepted,
                candidate=key,
            )
        if _is_entry_list(value):
            kwargs[key] = [
                _build_entry(sub, classes, context_window) for sub in cast("Sequence[StackEntry]", value)
            ]
            continue
        shape = signature.shapes.get(key, _ANY)
        try:
            kwargs[key] = _convert(value, shape)
        except _MismatchError as exc:
            raise _stack_error(str(exc), source=source, entry=entry.name, parameter=key) from None
    default_trigger: Mapping[str, Any] = getattr(cls, "default_trigger", {})
    if default_trigger and not any(key in kwargs for key in TRIGGER_PARAMETERS):
        kwargs.update(default_trigger)
    if context_window is not None and "context_window" in signature.shapes and "context_window" not in kwargs:
        kwargs["context_window"] = context_window
    missing = [name for name in signature.required if name not in kwargs]
    if missing:
        raise _stack_error(
            f"missing required parameter{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}",
            source=source,
            entry=entry.name,
        )
    try:
        capability: object = cls(**kwargs)
    except (ValueError, TypeError, HarnessError) as exc:
        parameter = _blamed_parameter(str(exc), kwargs)
        raise _stack_error(
            f"{type(exc).__name__}: {exc}", source=source, entry=entry.name, parameter=parameter
        ) from exc
    return cast("Capability", capability)


def build_stack(
    entries: Sequence[StackEntry],
    *,
    plugin_manager: PluginManager | None = None,
    context_window: int | None = None,
) -> list[Capability]:
    """Instantiate the capabilities of a stack.

    Each entry's name is looked up among the installed capability classes; its
    parameters are checked against the class's constructor signature (unknown and
    missing parameters are reported before anything is constructed) and converted by the
    parameters' annotations (see the module docstring); nested ``tiers`` entries are
    built the same way.

    Args:
        entries: The stack, e.g. from :func:`parse_stack` or :func:`load_stack_file`.
        plugin_manager: Look the classes up in this manager's
            :meth:`~harness.plugins.PluginManager.available_capabilities` (load its entry
            points first) instead of the installed entry points.
        context_window: Passed as ``context_window`` to every capability (nested ones
            included) whose constructor accepts it and whose entry does not set it.

    Returns:
        The configured capabilities, in the entries' order.

    Raises:
        StackConfigError: An unknown capability, an unknown or missing parameter, a value
            of the wrong type, or a value the constructor refused (its ``ValueError`` /
            ``TypeError`` / harness error is chained).
        PluginLoadError: An installed entry point failed to load.
    """
    if plugin_manager is not None:
        classes: Mapping[str, type] = plugin_manager.available_capabilities()
    else:
        classes = installed_capability_classes()
    return [_build_entry(entry, classes, context_window) for entry in entries]


def resolve_stack(
    spec: str | None = None,
    *,
    config: Path | None = None,
    default: str | None = None,
    context_window: int | None = None,
    name: str | None = None,
    plugin_manager: PluginManager | None = None,
) -> tuple[list[Capability], list[StackEntry]]:
    """Find, parse and build the stack to use.

    Precedence: ``spec`` (a short-form string; ``""`` is an empty stack), else the
    ``config`` file, else the file :func:`find_stack_file` discovers from the current
    folder, else ``default`` (a short-form string), else an empty stack.

    Args:
        spec: A short-form stack, e.g. the ``--stack`` option.
        config: A ``harness.toml`` / ``pyproject.toml`` to read.
        default: The short-form stack used when nothing else is configured.
        context_window: As for :func:`build_stack`.
        name: Read the named stack ``stacks.<name>`` of the configuration file.
        plugin_manager: As for :func:`build_stack`.

    Returns:
        The capabilities and the entries they were built from.

    Raises:
        StackConfigError: As :func:`parse_stack`, :func:`load_stack_file` and
            :func:`build_stack`; also when ``name`` is combined with ``spec`` or no
            configuration file exists to hold it.
    """
    if spec is not None:
        if name is not None:
            raise StackConfigError(
                "a stack name selects a stack of a configuration file; it cannot be combined "
                "with a short-form stack",
                source="--stack",
            )
        entries = parse_stack(spec)
    else:
        path = config if config is not None else find_stack_file()
        if path is not None:
            entries = load_stack_file(path, name=name)
        elif name is not None:
            raise StackConfigError(
                f"stack {name!r} requested, but no {CONFIG_FILE_NAME} or {PYPROJECT_FILE_NAME} "
                "with [tool.harness] was found in this folder or its parents",
                source=name,
            )
        elif default is not None:
            entries = parse_stack(default, source="default stack")
        else:
            entries = []
    capabilities = build_stack(entries, plugin_manager=plugin_manager, context_window=context_window)
    return capabilities, entries
