"""Store URLs: the default store, and the local path a ``sqlite:`` or ``file:`` URL names."""

from __future__ import annotations

__all__ = ["STORE_ENV", "default_store_url", "store_path", "store_url"]

import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

from harness.errors import StoreResolutionError

STORE_ENV = "HARNESS_STORE"
"""Environment variable naming the default store URL (wins over the XDG default)."""


def _xdg_data_home() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "harness"


def default_store_url() -> str:
    """``$HARNESS_STORE``, else ``sqlite:///$XDG_DATA_HOME/harness/sessions.db``."""
    configured = os.environ.get(STORE_ENV, "").strip()
    if configured:
        return configured
    return store_url(_xdg_data_home() / "sessions.db")


def store_path(url: str) -> Path:
    """The file or folder a ``sqlite:`` or ``file:`` URL names.

    SQLite URLs follow SQLAlchemy's convention: ``sqlite:///sessions.db`` is relative to
    the working directory and ``sqlite:////var/lib/app/sessions.db`` (four slashes) is
    absolute. ``file:///dir`` is absolute and ``file:dir`` relative. Percent escapes are
    decoded.

    Raises:
        StoreResolutionError: The URL names a host, or no path.
    """
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise StoreResolutionError(url, f"a {parts.scheme}: URL names a local path, not a host")
    raw = unquote(parts.path)
    if parts.scheme == "sqlite" and "://" in url:
        raw = raw[1:]  # sqlite:///x.db -> x.db ; sqlite:////abs.db -> /abs.db
    if not raw:
        raise StoreResolutionError(url, "the URL names no path")
    return Path(raw)


def store_url(path: str | os.PathLike[str], scheme: str = "sqlite") -> str:
    """The URL of a local SQLite file (``scheme="sqlite"``) or store folder (``"file"``)."""
    absolute = Path(path).absolute()
    return f"sqlite:///{absolute}" if scheme == "sqlite" else f"file://{absolute}"
