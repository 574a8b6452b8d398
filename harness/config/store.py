"""``harness.open_store``: a store URL opened with the installed plugins (``harness-postgres``...).

:func:`harness.stores.open_store` knows the built-in ``sqlite:`` and ``file:`` schemes
and asks the plugin manager it is given. This is the same with the default plugin
manager plus the installed plugins of the URL's scheme (``store.<scheme>`` entry points),
so an installed store distribution answers its scheme with no further setup, and no
other plugin is imported. The CLI's ``--store`` option and ``HARNESS_STORE`` go through it.
"""

from __future__ import annotations

__all__ = ["open_store"]

import os

from harness.hooks.defaults import add_installed, default_plugin_manager
from harness.hooks.manager import PluginManager
from harness.session.store import SessionStore
from harness.stores import default_store_url
from harness.stores import open_store as _open_store
from harness.stores.opening import url_scheme


def open_store(
    url: str | os.PathLike[str] | None = None,
    *,
    plugin_manager: PluginManager | None = None,
    read_only: bool = False,
) -> SessionStore:
    """Open a session store with the installed plugins' ``resolve_store`` hook.

    Args:
        url: ``sqlite:///sessions.db``, ``postgresql://user@host/db``, ``file:///dir``, a bare
            path, or ``None`` for :func:`~harness.stores.default_store_url`
            (``$HARNESS_STORE``, else ``sessions.db`` in the XDG data folder).
        plugin_manager: The manager to ask, as it is; default:
            :func:`~harness.hooks.defaults.default_plugin_manager` with the installed
            plugins of the URL's scheme (``store.<scheme>`` entry points) registered.
        read_only: Open a built-in store for reading only; it must exist (see
            :func:`harness.stores.open_store`).

    Raises:
        StoreResolutionError: No plugin and no built-in store understands the URL.
        PluginLoadError: The installed plugin for the URL's scheme failed to import.
        SessionStoreError: The store exists but cannot be used (corrupt, newer schema), or
            with ``read_only`` it does not exist.
    """
    text = os.fspath(url) if url is not None else default_store_url()
    manager = plugin_manager
    if manager is None:
        manager = default_plugin_manager()
        add_installed(manager, "store", url_scheme(text))
    return _open_store(text, plugin_manager=manager, read_only=read_only)
