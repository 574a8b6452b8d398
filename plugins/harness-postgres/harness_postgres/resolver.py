"""The ``resolve_store`` hook: ``postgresql://`` and ``postgres://`` URLs open a :class:`PostgresStore`.

This module is the plugin: the ``harness`` entry point ``postgres`` names it, so
``PluginManager.load_entrypoint_plugins()`` registers it and ``harness.open_store`` (the
CLI's ``--store`` and ``HARNESS_STORE`` included) answers those schemes with no setup.
"""

from __future__ import annotations

__all__ = ["resolve_store"]

from harness.hooks import hookimpl
from harness_postgres.dsn import SCHEMES
from harness_postgres.store import PostgresStore


@hookimpl
def resolve_store(url: str, read_only: bool) -> PostgresStore | None:
    """A :class:`PostgresStore` for a ``postgresql://`` / ``postgres://`` URL; ``None`` for any other.

    ``?schema=name`` in the URL picks the PostgreSQL schema (default ``harness``). With
    ``read_only`` the store must exist and is opened for reading only (no DDL, no write).

    Raises:
        StoreResolutionError: The URL does not parse or names an invalid schema.
        SessionStoreError: The server cannot be reached, or the schema is newer or not
            a session store (with ``read_only``: or holds no store yet).
    """
    scheme, sep, _ = url.partition("://")
    if not sep or scheme.lower() not in SCHEMES:
        return None
    return PostgresStore(url, read_only=read_only)
