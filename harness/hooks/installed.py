"""The installed plugins, each imported only when what it provides is first asked for.

An entry point's name says what it provides (:func:`~harness.hooks.entrypoints.provides`),
so reading the names (the distributions' metadata, no import) is enough to know which one
to import for a capability name, a URL scheme or an engine. A plugin that fails to import
breaks only what needs it: asking for its capability, scheme or engine raises
:class:`~harness.errors.PluginLoadError`; a ``plugin.<name>`` observer that fails is
skipped with one :class:`~harness.errors.PluginLoadWarning` per process. What the allow and
block lists (``HARNESS_LOAD_PLUGINS`` / ``HARNESS_DISABLE_PLUGINS``) let through is read
once per value of those variables (and of ``sys.path``); an imported object is kept while
its module stays imported.
"""

from __future__ import annotations

__all__ = [
    "InstalledCapabilities",
    "installed_capabilities",
    "installed_plugins",
    "installed_selection",
    "observer_plugins",
]

import functools
import importlib.metadata
import os
import sys
from collections.abc import Iterator, Mapping

from harness.errors import PluginLoadError, PluginLoadWarning, warn_at_caller
from harness.hooks.entrypoints import (
    DISABLE_ENV,
    LOAD_ENV,
    EntryPointSelection,
    PluginSource,
    Provided,
    load_entry_point,
    provides,
    select_entry_points,
)

_warned: set[str] = set()
"""``plugin.<name>`` entry points already warned about as failing to load."""


@functools.lru_cache(maxsize=8)
def _selection(load: str | None, disable: str | None, path: tuple[str, ...]) -> EntryPointSelection:
    del load, disable, path  # cache key only: the selection depends on these
    return select_entry_points()


def _key() -> tuple[str | None, str | None, tuple[str, ...]]:
    return os.environ.get(LOAD_ENV), os.environ.get(DISABLE_ENV), tuple(sys.path)


def installed_selection() -> EntryPointSelection:
    """The installed entry points the allow and block lists let through (no plugin imported).

    Reading the distributions' metadata takes about 10 ms, so it is read once per value of
    ``HARNESS_LOAD_PLUGINS``, ``HARNESS_DISABLE_PLUGINS`` and ``sys.path``.
    """
    return _selection(*_key())


_loaded: dict[tuple[str, str], tuple[object, object]] = {}
"""(name, value) -> (the module it came from, the object), while that module stays imported."""


def _load(ep: importlib.metadata.EntryPoint, source: PluginSource) -> object:
    """The object ``ep`` names, imported and checked once while its module stays in ``sys.modules``."""
    key = (ep.name, ep.value)
    cached = _loaded.get(key)
    if cached is not None and sys.modules.get(ep.module) is cached[0]:
        return cached[1]
    obj = load_entry_point(ep, source)
    _loaded[key] = (sys.modules.get(ep.module), obj)
    return obj


def installed_plugins(kind: Provided, key: str) -> list[tuple[str, object]]:
    """Import the installed plugins providing ``kind`` for ``key`` (a scheme, an engine name).

    Returns:
        ``(name, object)`` per plugin, in discovery order; entry points naming an object
        already returned are left out, and ``name`` is the first one's key (``"postgres"``
        for ``store.postgres`` and ``store.postgresql``).

    Raises:
        PluginLoadError: One of them failed to import: what asked for ``key`` needs it.
    """
    found: list[tuple[str, object]] = []
    wanted = key.strip().lower()
    for ep, source in installed_selection().selected:
        if provides(ep.name) != (kind, wanted):
            continue
        obj = _load(ep, source)
        if not any(seen is obj for _, seen in found):
            found.append((_first_key(ep.value, kind), obj))
    return found


def _first_key(value: str, kind: Provided) -> str:
    for ep, _ in installed_selection().selected:
        ep_kind, ep_key = provides(ep.name)
        if ep.value == value and ep_kind == kind:
            return ep_key
    return value  # pragma: no cover - the entry point itself is always selected


def observer_plugins() -> list[tuple[str, object]]:
    """Import every installed ``plugin.<name>`` observer, skipping those that fail.

    A failure is warned about once per process (:class:`~harness.errors.PluginLoadWarning`,
    at the user's line) and the others still load: nothing that does not need the
    broken plugin fails because of it.
    """
    found: list[tuple[str, object]] = []
    for ep, source in installed_selection().selected:
        kind, key = provides(ep.name)
        if kind != "plugin":
            continue
        try:
            obj = _load(ep, source)
        except PluginLoadError as exc:
            if ep.name not in _warned:
                _warned.add(ep.name)
                text, dist = f"{exc}; skipped", source.distribution
                warn_at_caller(PluginLoadWarning(text, plugin_name=ep.name, distribution=dist))
            continue
        if not any(seen is obj for _, seen in found):
            found.append((key, obj))
    return found


class InstalledCapabilities(Mapping[str, type]):
    """The installed capability classes by entry-point name, each imported on first lookup.

    Iterating, ``len`` and listing the names import nothing; ``classes[name]`` (and
    ``get``, ``in``) imports that one plugin. A name whose entry point names something
    other than a class (an old-style observer published under a bare name) is absent.

    Raises:
        PluginLoadError: On lookup, when that capability's plugin fails to import.
    """

    def __init__(self, selection: EntryPointSelection) -> None:
        self._entries: dict[str, tuple[importlib.metadata.EntryPoint, PluginSource]] = {}
        for ep, source in selection.selected:
            if provides(ep.name)[0] == "capability":
                self._entries.setdefault(ep.name, (ep, source))  # the first one found wins
        self._names = list(self._entries)

    def __getitem__(self, name: str) -> type:
        entry = self._entries.get(name)
        if entry is None:
            raise KeyError(name)
        obj = _load(*entry)
        if not isinstance(obj, type):
            raise KeyError(name)
        return obj

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        return f"InstalledCapabilities({self._names!r})"


@functools.lru_cache(maxsize=8)
def _capabilities(load: str | None, disable: str | None, path: tuple[str, ...]) -> Mapping[str, type]:
    return InstalledCapabilities(_selection(load, disable, path))


def installed_capabilities() -> Mapping[str, type]:
    """The :class:`InstalledCapabilities` of :func:`installed_selection` (cached as it is)."""
    return _capabilities(*_key())
