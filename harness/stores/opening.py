"""``open_store``: the store a URL names, from a plugin's ``resolve_store`` hook or a built-in scheme."""

from __future__ import annotations

__all__ = ["open_store", "url_scheme"]

import os
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from harness.errors import StoreResolutionError
from harness.session.store import SessionStore, StoreResolver
from harness.stores.urls import default_store_url, store_path, store_url


def _builtin(url: str, scheme: str, *, read_only: bool) -> SessionStore | None:
    if scheme == "sqlite":
        from harness.stores.sqlite import SqliteStore

        if url.rstrip("/").endswith(":memory:"):
            return SqliteStore(":memory:")
        return SqliteStore(store_path(url), read_only=read_only)
    if scheme == "file":
        from harness.stores.jsonfile import JsonFileStore

        return JsonFileStore(store_path(url), read_only=read_only)
    return None


_BUILTIN_SCHEMES: Sequence[str] = ("sqlite", "file")


def url_scheme(url: str) -> str:
    """The scheme :func:`open_store` reads ``url`` as, lower-cased.

    A bare path is ``"file"`` when it is an existing directory, else ``"sqlite"``.
    """
    text = url.strip()
    scheme = urlsplit(text).scheme.lower() if "://" in text else ""
    return scheme or ("file" if Path(text).is_dir() else "sqlite")


def open_store(
    url: str | os.PathLike[str] | None = None,
    *,
    plugin_manager: StoreResolver | None = None,
    read_only: bool = False,
) -> SessionStore:
    """Open the store a URL names (default :func:`default_store_url`).

    ``plugin_manager``'s ``resolve_store`` hook is asked first (so a plugin can add a
    scheme or replace a built-in one), then the built-in ``sqlite:`` and ``file:``
    schemes answer. A bare path is taken as a SQLite file, or as a ``file:`` folder when
    it is an existing directory.

    With ``read_only`` (what read-only commands such as ``harness sessions list`` use), a
    built-in store must exist already and is opened for reading: no folder, database or
    lock file is created, and a write raises. The hook gets ``read_only`` too
    (``harness-postgres`` then creates no schema or table and refuses writes).

    Raises:
        StoreResolutionError: No plugin and no built-in store understands the URL, or a
            plugin answered something that is not a store.
        SessionStoreError: The store exists but cannot be used (corrupt, newer schema), or
            with ``read_only`` it does not exist.
    """
    text = os.fspath(url) if url is not None else default_store_url()
    text = text.strip()
    if not text:
        raise StoreResolutionError(text, "the store URL is empty")
    scheme = url_scheme(text)
    if "://" not in text:
        text = store_url(text, scheme)
    if plugin_manager is not None:
        answer = plugin_manager.resolve_store(text, read_only=read_only)
        if answer is not None:
            if not isinstance(answer, SessionStore):
                raise StoreResolutionError(
                    text,
                    f"a resolve_store hook returned {type(answer).__name__}, which is not a SessionStore",
                )
            return answer
    store = _builtin(text, scheme, read_only=read_only)
    if store is not None:
        return store
    hint = ""
    if scheme in ("postgresql", "postgres"):
        hint = (
            "; install the harness-postgres distribution and open the store through a plugin manager "
            "that loaded it (harness.open_store(url) and the CLI do)"
        )
    known = ", ".join(f"{s}:" for s in _BUILTIN_SCHEMES)
    raise StoreResolutionError(
        text, f"no plugin's resolve_store hook answered and the built-in stores know {known}{hint}"
    )
