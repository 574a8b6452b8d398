"""Building a configured stack: :func:`build_stack` and the precedence of :func:`resolve_stack`.

Building itself is :mod:`harness.hooks.stacks` (shared with ``Agent(capabilities=[...])``).
"""

from __future__ import annotations

__all__ = [
    "TRIGGER_PARAMETERS",
    "build_stack",
    "installed_capability_classes",
    "resolve_stack",
]

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.capabilities._stack_entries import StackEntry
from harness.capabilities._stack_grammar import parse_stack
from harness.capabilities.base import Capability
from harness.config._files import CONFIG_FILE_NAME, PYPROJECT_FILE_NAME, find_stack_file, load_stack_file
from harness.errors import StackConfigError
from harness.hooks.manager import PluginManager
from harness.hooks.stacks import TRIGGER_PARAMETERS, build_entries, installed_capability_classes
from harness.models.resolve import resolve_model


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
    built the same way. A string given to a parameter that takes a harness ``Model``
    (``summarizing:model=openai:gpt-4o``) is resolved as a model string, by the
    manager's ``resolve_model`` hook and then the built-in providers.

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
            ``TypeError`` / harness error is chained). A capability that is installed but
            left out by ``HARNESS_DISABLE_PLUGINS`` / ``HARNESS_LOAD_PLUGINS`` (or the
            manager's allow and block lists) is reported as such, not as unknown.
        PluginLoadError: An installed entry point failed to load.
    """
    if plugin_manager is not None:
        classes: Mapping[str, type] = plugin_manager.available_capabilities()
        excluded: Mapping[str, str] | None = plugin_manager.excluded_plugins()
    else:
        classes, excluded = installed_capability_classes(), None  # None: the environment's exclusions
    return build_entries(
        entries,
        classes,
        context_window=context_window,
        excluded=excluded,
        resolve_model=functools.partial(resolve_model, plugin_manager=plugin_manager),
    )


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
