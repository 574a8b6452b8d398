"""The plugin manager harness makes when none is given: installed observers on, the rest on demand.

``Agent(...)``, ``harness.open_store(...)`` and the commands that run an agent or open a
store all start from :func:`default_plugin_manager`: every installed ``plugin.<name>``
observer is registered (installing ``harness-otel`` turns its spans on), and nothing else
is imported. A capability is imported when a stack names it, a store plugin when its
scheme is opened (:func:`add_installed` with ``"store"``), an engine plugin by
``harness worker NAME`` (``"engine"``). An explicit ``PluginManager()`` stays empty.
"""

from __future__ import annotations

__all__ = ["DefaultPluginManager", "add_installed", "default_plugin_manager"]

from harness.hooks.entrypoints import Provided
from harness.hooks.installed import installed_plugins, observer_plugins
from harness.hooks.manager import PluginManager
from harness.hooks.ordering import capability_name


def _add(manager: PluginManager, plugins: list[tuple[str, object]]) -> list[str]:
    pm = manager.pluggy_manager
    added: list[str] = []
    for name, obj in plugins:
        if pm.is_registered(obj) or pm.has_plugin(name):
            continue
        added.append(manager.register(obj, name=name))
    return added


class DefaultPluginManager(PluginManager):
    """A :class:`PluginManager` that starts with every installed ``plugin.<name>`` observer.

    Registering another plugin under an observer's name replaces the installed one, so
    ``agent.plugin_manager.register(OTelPlugin(tracer_provider=provider))`` configures
    telemetry rather than failing on the name ``otel``.
    """

    def __init__(self) -> None:
        super().__init__()
        self._observers: set[str] = set()
        self._observers.update(_add(self, observer_plugins()))

    def register(self, plugin: object, name: str | None = None) -> str:
        """As :meth:`PluginManager.register`, replacing the installed observer of that name."""
        plugin_name = name or capability_name(plugin)
        if plugin_name in self._observers:
            self._observers.discard(plugin_name)
            installed = self.pluggy_manager.get_plugin(plugin_name)
            if installed is not None and installed is not plugin:
                self.unregister(installed)
        return super().register(plugin, name)


def default_plugin_manager() -> PluginManager:
    """A :class:`DefaultPluginManager`: every installed ``plugin.<name>`` observer registered.

    An observer that fails to import is skipped with one
    :class:`~harness.errors.PluginLoadWarning` per process; capability names given to
    :meth:`~PluginManager.add_capabilities` import only their own plugins.
    """
    return DefaultPluginManager()


def add_installed(manager: PluginManager, kind: Provided, key: str) -> list[str]:
    """Register in ``manager`` the installed plugins providing ``kind`` for ``key``, importing only them.

    Args:
        manager: The manager to register them in; one already registered is left alone.
        kind: ``"store"`` (``key`` is a URL scheme), ``"engine"`` (an engine name) or
            ``"model"`` (a model-string prefix).
        key: The scheme or name, compared lower-cased.

    Returns:
        The names registered by this call.

    Raises:
        PluginLoadError: A plugin providing it failed to import or to register.
    """
    return _add(manager, installed_plugins(kind, key))
