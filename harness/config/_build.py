"""Building capabilities from stack entries through the ``harness`` entry points."""

from __future__ import annotations

__all__ = [
    "TRIGGER_PARAMETERS",
    "build_stack",
    "installed_capability_classes",
    "resolve_stack",
]

import functools
import inspect
import os
import re
import types
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, cast

import attrs

from harness.capabilities.base import Capability
from harness.config._convert import ANY_SHAPE, MismatchError, Shape, convert, shape_of
from harness.config._entries import StackEntry, stack_error
from harness.config._files import CONFIG_FILE_NAME, PYPROJECT_FILE_NAME, find_stack_file, load_stack_file
from harness.config._shortform import is_entry_list, parse_stack
from harness.errors import HarnessError, StackConfigError
from harness.hooks.entrypoints import DISABLE_ENV, LOAD_ENV
from harness.hooks.manager import PluginManager

TRIGGER_PARAMETERS: Final = ("max_messages", "max_tokens", "max_fraction")
"""An entry setting none of these gets the capability's ``default_trigger``."""


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
    shapes: Mapping[str, Shape]
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
    shapes: dict[str, Shape] = {}
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
        shapes[parameter.name] = shape_of(parameter, namespace)
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
        raise stack_error(
            f"unknown capability {entry.name!r}",
            source=source,
            accepted=sorted(classes),
            accepted_label="installed",
            candidate=entry.name,
        )
    signature = _signature_of(cls)
    if signature.positional:
        raise stack_error(
            f"{cls.__qualname__} requires the positional-only argument(s) "
            f"{', '.join(signature.positional)}, which a configuration cannot give",
            source=source,
            entry=entry.name,
        )
    kwargs: dict[str, Any] = {}
    for key, value in entry.params.items():
        if key not in signature.shapes and not signature.open:
            raise stack_error(
                f"unknown parameter {key!r}",
                source=source,
                entry=entry.name,
                accepted=signature.accepted,
                candidate=key,
            )
        if is_entry_list(value):
            kwargs[key] = [
                _build_entry(sub, classes, context_window) for sub in cast("Sequence[StackEntry]", value)
            ]
            continue
        shape = signature.shapes.get(key, ANY_SHAPE)
        try:
            kwargs[key] = convert(value, shape)
        except MismatchError as exc:
            raise stack_error(str(exc), source=source, entry=entry.name, parameter=key) from None
    default_trigger: Mapping[str, Any] = getattr(cls, "default_trigger", {})
    if default_trigger and not any(key in kwargs for key in TRIGGER_PARAMETERS):
        kwargs.update(default_trigger)
    if context_window is not None and "context_window" in signature.shapes and "context_window" not in kwargs:
        kwargs["context_window"] = context_window
    missing = [name for name in signature.required if name not in kwargs]
    if missing:
        raise stack_error(
            f"missing required parameter{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}",
            source=source,
            entry=entry.name,
        )
    try:
        capability: object = cls(**kwargs)
    except (ValueError, TypeError, HarnessError) as exc:
        parameter = _blamed_parameter(str(exc), kwargs)
        raise stack_error(
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
            :meth:`~harness.hooks.manager.PluginManager.available_capabilities` (load its entry
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
