"""Entry-point plugins: discovery, the allow and block lists, loading, listing.

Plugins are published under the ``harness`` entry-point group
(``[project.entry-points.harness]``). An entry point's name says what it provides, so
harness imports a plugin only when that is asked for (:func:`provides`):

* ``<name>``: a capability class, imported when a stack names ``<name>``;
* ``store.<scheme>``: a module answering ``resolve_store``, imported when a ``<scheme>://``
  URL is opened (one entry point per scheme);
* ``engine.<name>``: a module answering ``resolve_engine``, imported by ``harness worker <name>``;
* ``model.<prefix>``: a plugin answering ``resolve_model``, imported when an agent's model
  string starts with ``<prefix>:``;
* ``plugin.<name>``: an observer registered in every default plugin manager (``Agent()``,
  ``harness.open_store()``, the CLI): installing it turns it on.

``HARNESS_LOAD_PLUGINS`` and
``HARNESS_DISABLE_PLUGINS`` filter which ones are loaded (:func:`select_entry_points`, which
also says why each one left out was, and warns with
:class:`~harness.errors.UnknownPluginNameWarning` about an entry that matches no installed
plugin); :func:`load_entry_point` imports one and checks it implements a hook;
:class:`PluginInfo` is what :meth:`PluginManager.list_plugins` reports.
"""

from __future__ import annotations

__all__ = [
    "DISABLE_ENV",
    "ENTRY_POINT_GROUP",
    "KINDS",
    "LOAD_ENV",
    "EntryPointSelection",
    "PluginInfo",
    "PluginKind",
    "PluginSource",
    "Provided",
    "hook_names",
    "load_entry_point",
    "plugin_info",
    "provides",
    "registration_error",
    "select_entry_points",
]

import difflib
import importlib.metadata
import inspect
import os
import re
from collections.abc import Iterable, Mapping
from typing import Final, Literal, TypeAlias, cast

import attrs

from harness.capabilities.base import Capability
from harness.core.markers import PROJECT_NAME
from harness.errors import PluginLoadError, UnknownPluginNameWarning, warn_at_caller

ENTRY_POINT_GROUP: Final = PROJECT_NAME
"""The entry-point group plugins are published under: ``[project.entry-points.harness]``."""

LOAD_ENV: Final = "HARNESS_LOAD_PLUGINS"
"""Allow-list of entry points to load (names or distribution names, comma separated).

Unset loads every entry point; set but empty loads none.
"""

DISABLE_ENV: Final = "HARNESS_DISABLE_PLUGINS"
"""Block-list of entry points not to load (names or distribution names, comma separated)."""

PluginKind: TypeAlias = Literal["capability", "plugin", "available"]
"""How a plugin is known to the manager (see :attr:`PluginInfo.kind`)."""

_IMPL_ATTR: Final = f"{PROJECT_NAME}_impl"

Provided: TypeAlias = Literal["capability", "store", "engine", "model", "plugin"]
"""What an entry point provides, read from its name (see :func:`provides`)."""

KINDS: Final[tuple[Provided, ...]] = ("store", "engine", "model", "plugin")
"""The entry-point name prefixes (``store.``, ``engine.``, ``model.``, ``plugin.``); others: capabilities."""


def provides(name: str) -> tuple[Provided, str]:
    """What the entry point ``name`` provides, and for which key.

    ``"store.postgresql"`` is ``("store", "postgresql")``, ``"engine.dbos"``
    ``("engine", "dbos")``, ``"model.mine"`` ``("model", "mine")``, ``"plugin.otel"``
    ``("plugin", "otel")``; any other name is a capability of that name:
    ``"sliding_window"`` is ``("capability", "sliding_window")``. Keys compare lower-cased.
    """
    prefix, dot, key = name.partition(".")
    for kind in KINDS:
        if dot and prefix == kind and key:
            return kind, key.lower()
    return "capability", name


@attrs.frozen
class PluginInfo:
    """One plugin as :meth:`PluginManager.list_plugins` reports it (like ``llm plugins``).

    Attributes:
        name: Registration name (the entry-point name for entry-point plugins).
        kind: ``"capability"`` (registered capability), ``"plugin"`` (registered
            plugin) or ``"available"`` (a capability class found through an entry point,
            not registered until configured).
        hooks: Names of the hooks it implements, sorted.
        distribution: Name of the distribution it came from, for entry-point plugins.
        version: Version of that distribution.
        entry_point: The entry point's value, e.g. ``"harness_window:SlidingWindow"``.
    """

    name: str
    kind: PluginKind
    hooks: tuple[str, ...]
    distribution: str | None = None
    version: str | None = None
    entry_point: str | None = None


@attrs.frozen
class PluginSource:
    """Where an entry-point plugin came from.

    Attributes:
        distribution: Name of the distribution publishing it, when known.
        version: That distribution's version, when known.
        entry_point: The entry point's value (``"module:attribute"``).
    """

    distribution: str | None
    version: str | None
    entry_point: str

    @classmethod
    def of(cls, ep: importlib.metadata.EntryPoint) -> PluginSource:
        """The source of ``ep``, read from its distribution's metadata."""
        dist = ep.dist
        if dist is None:
            return cls(None, None, ep.value)
        return cls(dist.metadata["Name"], dist.version, ep.value)


def hook_names(obj: object) -> tuple[str, ...]:
    """Names of the hooks ``obj`` (a module, class or instance) implements, sorted.

    A ``specname`` given to ``@hookimpl`` counts instead of the attribute's name.
    """
    found: set[str] = set()
    for attribute in dir(obj):
        try:
            value: object = inspect.getattr_static(obj, attribute)
        except AttributeError:
            continue
        value = getattr(value, "__func__", value)  # staticmethod / classmethod
        opts: object = getattr(value, _IMPL_ATTR, None)
        if isinstance(opts, Mapping):
            specname: object = opts.get("specname")  # pyright: ignore[reportUnknownMemberType,reportUnknownVariableType]
            found.add(specname if isinstance(specname, str) else attribute)
    return tuple(sorted(found))


def plugin_info(name: str, obj: object, kind: PluginKind, source: PluginSource | None) -> PluginInfo:
    """The :class:`PluginInfo` of ``obj``, registered (or listed) as ``name``."""
    return PluginInfo(
        name=name,
        kind=kind,
        hooks=hook_names(obj),
        distribution=source.distribution if source else None,
        version=source.version if source else None,
        entry_point=source.entry_point if source else None,
    )


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@attrs.frozen
class EntryPointSelection:
    """The entry points the allow and block lists let through, and why the others were left out.

    Attributes:
        selected: Each entry point let through, with its source, in discovery order.
        excluded: Why each entry point left out was, by entry-point name, phrased to follow
            "is": ``"disabled by HARNESS_DISABLE_PLUGINS (entry 'summarizing')"``.
    """

    selected: tuple[tuple[importlib.metadata.EntryPoint, PluginSource], ...]
    excluded: Mapping[str, str]


@attrs.frozen
class _NameList:
    """One allow or block list: where it came from and its entries, normalized to as written."""

    label: str
    variable: str
    entries: Mapping[str, str]

    @classmethod
    def read(cls, given: Iterable[str] | None, variable: str, argument: str) -> _NameList | None:
        """The list passed as ``argument`` (``given``), else the one in ``variable``; ``None``: unset."""
        if given is not None:
            items, label, where = list(given), f"the {argument} list", argument
        else:
            value = os.environ.get(variable)
            if value is None:
                return None
            items, label, where = value.split(","), variable, variable
        entries = {_normalize(item.strip()): item.strip() for item in items if item.strip()}
        return cls(label, where, entries)

    def match(self, keys: Iterable[str]) -> str | None:
        """The entry, as written, that one of ``keys`` (normalized names) matches."""
        return next((self.entries[key] for key in keys if key in self.entries), None)


_warned_entries: set[tuple[str, str]] = set()
"""(variable, normalized entry) pairs already warned about in this process."""


def _warn_unmatched(names: _NameList, known: Mapping[str, str], installed: Iterable[str]) -> None:
    shown = sorted(set(installed))
    for key, entry in names.entries.items():
        if key in known or (names.variable, key) in _warned_entries:
            continue
        _warned_entries.add((names.variable, key))
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
        suggestion = known[close[0]] if close else None
        hint = f"; did you mean {suggestion!r}?" if suggestion else ""
        listing = f"installed: {', '.join(shown)}" if shown else "no harness plugin is installed"
        warn_at_caller(
            UnknownPluginNameWarning(
                f"{names.label} entry {entry!r} matches no installed harness plugin "
                f"(entry-point or distribution name){hint} ({listing})",
                variable=names.variable,
                entry=entry,
                installed=shown,
                suggestion=suggestion,
            )
        )


def select_entry_points(
    *, allow: Iterable[str] | None = None, block: Iterable[str] | None = None
) -> EntryPointSelection:
    """The entry points of :data:`ENTRY_POINT_GROUP` the allow and block lists let through.

    Names compare case-insensitively, with ``-``, ``_`` and ``.`` equivalent; an entry
    point matches a list by its own name or its distribution's. The block list wins.
    An entry of either list that matches no installed entry point or distribution emits
    :class:`~harness.errors.UnknownPluginNameWarning` (once per process per list and entry).

    Args:
        allow: Entry-point or distribution names to load (``None``: read
            :data:`LOAD_ENV`; unset there loads every entry point).
        block: Names not to load (``None``: read :data:`DISABLE_ENV`).

    Returns:
        The entry points let through, and why each other one was left out.
    """
    allowed = _NameList.read(allow, LOAD_ENV, "allow")
    blocked = _NameList.read(block, DISABLE_ENV, "block")
    selected: list[tuple[importlib.metadata.EntryPoint, PluginSource]] = []
    excluded: dict[str, str] = {}
    known: dict[str, str] = {}
    installed: list[str] = []
    discovered = list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
    # entry points naming the same object (one store module for two schemes) are one plugin
    siblings: dict[str, list[str]] = {}
    for ep in discovered:
        siblings.setdefault(ep.value, []).extend({ep.name, provides(ep.name)[1]})
    for ep in discovered:
        source = PluginSource.of(ep)
        names = siblings[ep.value] + ([source.distribution] if source.distribution else [])
        known.update({_normalize(name): name for name in names})
        installed.append(ep.name)
        keys = [_normalize(name) for name in names]
        blocked_by = blocked.match(keys) if blocked is not None else None
        if blocked is not None and blocked_by is not None:
            excluded[ep.name] = f"disabled by {blocked.label} (entry {blocked_by!r})"
        elif allowed is not None and allowed.match(keys) is None:
            listed = ", ".join(allowed.entries.values())
            excluded[ep.name] = (
                f"not listed in {allowed.label} ({listed})"
                if listed
                else f"not loaded because {allowed.label} is set but empty"
            )
        else:
            selected.append((ep, source))
    for names in (allowed, blocked):
        if names is not None:
            _warn_unmatched(names, known, installed)
    return EntryPointSelection(tuple(selected), excluded)


def load_entry_point(ep: importlib.metadata.EntryPoint, source: PluginSource) -> object:
    """Import the object ``ep`` names and check that it implements a hook.

    Returns:
        The object: a class (a :class:`~harness.capabilities.base.Capability` subclass
        or any class with hook implementations, to be configured before it is
        registered), or a module or instance to register as it is.

    Raises:
        PluginLoadError: The import failed (chained), or the object implements no hook.
            It names the entry point, its value, the distribution and its version.
    """
    try:
        obj = ep.load()
    except Warning:
        raise  # a warning the filters turned into an error (-W error): not a broken plugin
    except Exception as exc:
        raise _load_error(ep, source, "failed to import", exc) from exc
    if isinstance(obj, type):
        cls = cast("type[object]", obj)
        if not (issubclass(cls, Capability) or hook_names(cls)):
            what = f"points to the class {cls.__qualname__}, which has no hook implementations"
            raise _load_error(ep, source, what)
        return cls
    if not hook_names(obj):
        raise _load_error(ep, source, f"points to {obj!r}, which has no hook implementations")
    return obj


def registration_error(
    ep: importlib.metadata.EntryPoint, source: PluginSource, cause: PluginLoadError
) -> PluginLoadError:
    """The error to raise (chained to ``cause``) when registering ``ep``'s plugin failed."""
    return _load_error(ep, source, "failed to register", cause)


def _load_error(
    ep: importlib.metadata.EntryPoint,
    source: PluginSource,
    what: str,
    cause: BaseException | None = None,
) -> PluginLoadError:
    dist = source.distribution or "an unknown distribution"
    version = f" {source.version}" if source.version else ""
    reason = what if cause is None else f"{what}: {type(cause).__name__}: {cause}"
    text = f"harness plugin {ep.name!r} (entry point {ep.name} = {ep.value}) from {dist}{version} {reason}"
    return PluginLoadError(
        f"{text}. Disable it with {DISABLE_ENV}={ep.name}, or uninstall {dist}.",
        plugin_name=ep.name,
        distribution=source.distribution,
        version=source.version,
        entry_point=source.entry_point,
        reason=reason,
    )
