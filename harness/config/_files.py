"""Stacks in TOML files: ``harness.toml`` and ``[tool.harness]`` in ``pyproject.toml``."""

from __future__ import annotations

__all__ = [
    "CONFIG_FILE_NAME",
    "PYPROJECT_FILE_NAME",
    "find_stack_file",
    "load_stack_file",
]

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, cast

from harness.capabilities._stack_entries import NAME_RE, TIERS, StackEntry, stack_error
from harness.capabilities._stack_grammar import parse_stack
from harness.errors import StackConfigError

CONFIG_FILE_NAME: Final = "harness.toml"
"""The dedicated configuration file :func:`find_stack_file` looks for first."""

PYPROJECT_FILE_NAME: Final = "pyproject.toml"
"""The project file whose ``[tool.harness]`` table :func:`find_stack_file` accepts."""


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
    raise stack_error(
        f"a TOML {type(value).__name__} is not a supported value (use numbers, booleans, strings "
        "or arrays of them)",
        source=source,
        parameter=key,
    )


def _toml_entry(table: Mapping[str, Any], source: str) -> StackEntry:
    name: object = table.get("name")
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise stack_error(
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
        raise stack_error(
            "is a single table; write one [[...]] table per capability (an array of tables)",
            source=label,
        )
    if not isinstance(value, list):
        raise stack_error(
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
            raise stack_error(
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
            raise stack_error(
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
