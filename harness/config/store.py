"""``harness.open_store``: a store URL opened with the installed plugins (``harness-postgres``...).

:func:`harness.stores.open_store` knows the built-in ``sqlite:`` and ``file:`` schemes
and asks the plugin manager it is given. This is the same with a manager that loaded
the ``harness`` entry points, so an installed store distribution answers its scheme with
no further setup. The CLI's ``--store`` option and ``HARNESS_STORE`` go through it.
"""

from __future__ import annotations

__all__ = ["open_store"]

import os

from harness.hooks.manager import PluginManager
from harness.session.store import SessionStore
from harness.stores import default_store_url
from harness.stores import open_store as _open_store


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
        plugin_manager: The manager to ask; default: a new one that loaded the
            ``harness`` entry points.
        read_only: Open a built-in store for reading only; it must exist (see
            :func:`harness.stores.open_store`).

    Raises:
        StoreResolutionError: No plugin and no built-in store understands the URL.
        SessionStoreError: The store exists but cannot be used (corrupt, newer schema), or
            with ``read_only`` it does not exist.
    """
    manager = plugin_manager
    if manager is None:
        manager = PluginManager()
        manager.load_entrypoint_plugins()
    return _open_store(
        url if url is not None else default_store_url(), plugin_manager=manager, read_only=read_only
    )
