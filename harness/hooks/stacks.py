"""Capabilities from stack entries and stack strings, through the installed entry points.

One mechanism builds every configured capability: the command line's ``--stack``, a
``harness.toml`` (:mod:`harness.config`), and the strings given to
``Agent(capabilities=[...])`` or :meth:`~harness.hooks.manager.PluginManager.add_capabilities`.
A name is looked up among the capability classes published under the ``harness`` entry
points; every parameter is checked against the class's constructor *before* it is
constructed, and converted by the parameter's annotation. It lives in this layer because
it needs the entry points and nothing above them; file loading and discovery stay in
:mod:`harness.config`.
"""

from __future__ import annotations

__all__ = [
    "TRIGGER_PARAMETERS",
    "build_entries",
    "installed_capability_classes",
    "resolve_capabilities",
]

import functools
import inspect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, cast

import attrs

from harness.capabilities._parameters import ANY_SHAPE, MismatchError, Shape, convert, shape_of
from harness.capabilities._stack_entries import StackEntry, stack_error
from harness.capabilities._stack_grammar import is_entry_list, parse_stack
from harness.capabilities.base import Capability
from harness.errors import HarnessError
from harness.hooks.bundled import missing_plugin_hint
from harness.hooks.entrypoints import hook_names
from harness.hooks.installed import installed_capabilities, installed_selection

TRIGGER_PARAMETERS: Final = ("max_messages", "max_tokens", "max_fraction")
"""An entry setting none of these gets the capability's ``default_trigger``."""


def installed_capability_classes() -> Mapping[str, type]:
    """Capability classes published through the ``harness`` entry points, by name.

    Honours ``HARNESS_LOAD_PLUGINS`` / ``HARNESS_DISABLE_PLUGINS``. Listing the names
    imports nothing; looking one up imports that plugin only (and keeps it for the
    process), so a broken plugin breaks only the stacks that name it.

    Raises:
        PluginLoadError: On lookup, when that capability's plugin failed to import.
    """
    return installed_capabilities()


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
    """The parameter an error message names first (``model`` in ``"model must be ... context_window"``)."""
    found: list[tuple[int, int, str]] = []
    for name in names:
        match = re.search(rf"\b{re.escape(name)}\b", message)
        if match is not None:
            found.append((match.start(), -len(name), name))
    return min(found)[2] if found else None


def _build_entry(
    entry: StackEntry,
    classes: Mapping[str, type],
    context_window: int | None,
    excluded: Mapping[str, str] | None = None,
    resolve_model: Callable[[str], object] | None = None,
) -> Capability:
    source = entry.source or f"stack entry {entry.name!r}"
    cls = classes.get(entry.name)
    if cls is None:
        # an installed plugin the allow or block list left out: say so, not "unknown"
        reason = (installed_selection().excluded if excluded is None else excluded).get(entry.name)
        if reason is not None:
            raise stack_error(f"capability {entry.name!r} is installed but {reason}", source=source)
        hint = missing_plugin_hint([entry.name])
        if hint is not None:  # a bundled capability on a core-only install: say what to install
            raise stack_error(f"unknown capability {entry.name!r}: {hint}", source=source)
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
                _build_entry(sub, classes, context_window, excluded, resolve_model)
                for sub in cast("Sequence[StackEntry]", value)
            ]
            continue
        shape = signature.shapes.get(key, ANY_SHAPE)
        try:
            kwargs[key] = convert(value, shape, resolve_model=resolve_model)
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


def build_entries(
    entries: Sequence[StackEntry],
    classes: Mapping[str, type],
    *,
    context_window: int | None = None,
    excluded: Mapping[str, str] | None = None,
    resolve_model: Callable[[str], object] | None = None,
) -> list[Capability]:
    """Instantiate the capabilities of a stack from ``classes`` (entry-point name to class).

    The rules are those of :func:`harness.config.build_stack`, which calls this with the
    installed classes or a plugin manager's.

    Args:
        entries: The stack.
        classes: The capability classes, by entry-point name.
        context_window: As for :func:`harness.config.build_stack`.
        excluded: Why installed entry points missing from ``classes`` were left out, by
            name (:meth:`~harness.hooks.manager.PluginManager.excluded_plugins`), so that
            naming one is reported as disabled rather than unknown; default: what
            ``HARNESS_LOAD_PLUGINS`` / ``HARNESS_DISABLE_PLUGINS`` leave out.
        resolve_model: Turns a model string given to a parameter that takes a harness
            ``Model`` (``summarizing:model=openai:gpt-4o``) into the model; this layer
            cannot resolve one itself (``harness.models`` is above it), so without it
            such a value is refused, naming the parameter.

    Raises:
        StackConfigError: An unknown or disabled capability, an unknown or missing
            parameter, a value of the wrong type, or a value the constructor refused.
    """
    return [_build_entry(entry, classes, context_window, excluded, resolve_model) for entry in entries]


def _describe(item: object) -> str:
    text = repr(item)
    return text if len(text) <= 60 else text[:57] + "..."


def resolve_capabilities(
    items: Sequence[object] | str,
    classes: Callable[[], Mapping[str, type]],
    *,
    name: str = "capabilities",
    resolve_model: Callable[[str], object] | None = None,
) -> list[object]:
    """Turn what a user passed as capabilities into capability objects, in order.

    Each item is a capability (an object implementing at least one ``harness`` hook, such as
    any :class:`~harness.capabilities.base.Capability` instance, or a plugin module), a
    :class:`~harness.capabilities._stack_entries.StackEntry`, or a short-form stack string
    (``"sliding_window:max_messages=80,keep_messages=10"``; one string may hold several
    entries). A single string stands for a one-item list. Strings and entries are built
    exactly as a ``--stack`` option is.

    Args:
        items: The capabilities, entries and stack strings.
        classes: Returns the capability classes to look names up in; called only when an
            item needs it.
        name: How the sequence is named in errors (``capabilities[1] entry 1``).
        resolve_model: As for :func:`build_entries`.

    Returns:
        The capability objects; classes (rather than instances) are passed through for the
        plugin manager to reject with its own message.

    Raises:
        TypeError: An item is neither a capability nor a string nor an entry (the message
            names its index and type), or ``items`` is not a list.
        StackConfigError: A string breaks the grammar, or an entry cannot be built (the
            message names ``<name>[<index>]``, the entry, the parameter).
    """
    given = cast("object", items)  # typed as a sequence, but called with whatever users pass
    if isinstance(given, str):
        sequence: Sequence[object] = [given]
    elif isinstance(given, Iterable):
        sequence = list(cast("Iterable[object]", given))
    else:
        raise TypeError(
            f"{name} must be a list of capabilities, stack strings or entries, got "
            f"{type(given).__qualname__} {_describe(given)}; wrap it in a list"
        )
    resolved: list[object] = []
    for index, item in enumerate(sequence):
        where = f"{name}[{index}]"
        if isinstance(item, str):
            resolved.extend(
                build_entries(parse_stack(item, source=where), classes(), resolve_model=resolve_model)
            )
        elif isinstance(item, StackEntry):
            entry = item if item.source else StackEntry(item.name, item.params, where)
            resolved.extend(build_entries([entry], classes(), resolve_model=resolve_model))
        elif isinstance(item, type) or hook_names(item):
            resolved.append(item)
        else:
            raise TypeError(
                f"{where} is {type(item).__qualname__} {_describe(item)}, not a capability: pass a "
                "capability object (one implementing a harness hook, e.g. a Capability instance), a "
                "stack string such as 'sliding_window:max_messages=80', or a StackEntry"
            )
    return resolved
