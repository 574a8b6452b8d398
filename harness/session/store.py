"""The :class:`SessionStore` protocol, and :func:`open_store` for a store URL.

Built-in schemes:

* ``sqlite:///path/sessions.db`` (``sqlite:///:memory:`` for a private in-memory store):
  :class:`~harness.session.sqlite.SqliteStore`, the embedded default;
* ``file:///dir``: :class:`~harness.session.jsonfile.JsonFileStore`, today's JSON session
  files plus an append-only JSON Lines log beside each.

``postgresql://user@host/db`` comes from the ``harness-postgres`` distribution, which
answers the ``resolve_store`` hook. Any plugin can add a scheme the same way.

A store is a small synchronous API over records (:mod:`harness.session.records`):
:meth:`~SessionStore.commit` writes a :class:`~harness.session.records.Checkpoint` in one
transaction and checks its revision; everything else reads, forks or deletes. The
:class:`~harness.session.Session` object does the bookkeeping (what was appended, what a
capability rewrote), so a backend only stores rows. ``harness.testing.store_conformance``
is the suite a third-party store runs against its own factory.
"""

from __future__ import annotations

__all__ = [
    "STORE_ENV",
    "SessionStore",
    "StoreResolver",
    "default_store_url",
    "open_store",
    "store_path",
    "store_url",
]

import os
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Protocol, runtime_checkable
from urllib.parse import unquote, urlsplit

from harness.errors import StoreResolutionError
from harness.session.records import (
    Checkpoint,
    EditRecord,
    LogEntry,
    PruneResult,
    SearchHit,
    SessionHead,
    StoredSession,
)

STORE_ENV = "HARNESS_STORE"
"""Environment variable naming the default store URL (wins over the XDG default)."""


@runtime_checkable
class SessionStore(Protocol):
    """Where sessions live. Every method is synchronous and safe to call from one thread.

    Implementations must keep the log append-only, apply a checkpoint atomically, and
    refuse a checkpoint whose ``base_revision`` is not the stored revision with
    :class:`~harness.errors.SessionConflictError`, writing nothing, even when two
    processes or machines write at the same moment.
    """

    @property
    def url(self) -> str:
        """The URL the store was opened with (passwords masked)."""
        ...

    def commit(self, checkpoint: Checkpoint) -> int:
        """Write ``checkpoint`` in one transaction and return the new revision.

        Raises:
            SessionConflictError: The session is not at ``checkpoint.base_revision``
                (``0``: it already exists). Nothing was written.
            SessionStoreError: The store cannot be written (nothing was written).
        """
        ...

    def load(self, session_id: str) -> StoredSession:
        """Read a session's head, view, thoughts and ledger.

        Raises:
            SessionNotFoundError: No such session.
            SessionStoreError: The store or the session's rows are corrupt.
        """
        ...

    def head(self, session_id: str) -> SessionHead:
        """Read only a session's head (cheap).

        Raises:
            SessionNotFoundError: No such session.
        """
        ...

    def read_log(self, session_id: str, start: int = 0, stop: int | None = None) -> list[LogEntry]:
        """The raw log from ``start`` to ``stop`` (exclusive; ``None``: the end), in order.

        Messages dropped by ``prune(drop_log=True)`` are missing from the result.
        """
        ...

    def edits(self, session_id: str) -> list[EditRecord]:
        """Every edit recorded over the session's log, oldest first."""
        ...

    def list_sessions(self) -> list[SessionHead]:
        """Every session's head, most recently modified first."""
        ...

    def fork(self, session_id: str, new_session_id: str) -> SessionHead:
        """Copy a session under a new id (``forked_from`` / ``forked_at`` set, revision 1).

        Raises:
            SessionNotFoundError: No such session.
            SessionConflictError: ``new_session_id`` exists already.
        """
        ...

    def delete(self, session_id: str) -> bool:
        """Delete a session with its log; ``False`` when there was none."""
        ...

    def prune(
        self,
        *,
        keep_last: int | None = None,
        newer_than: datetime | None = None,
        drop_log: bool = False,
        dry_run: bool = False,
    ) -> PruneResult:
        """Keep the ``keep_last`` most recent sessions and those modified after ``newer_than``.

        The others are deleted, or with ``drop_log`` kept with their view while their log
        loses every message the view does not reference. With neither limit, nothing is
        pruned.
        """
        ...

    def search(self, query: str, *, session_id: str | None = None, limit: int = 20) -> list[SearchHit]:
        """Search the raw logs (one session, or all) for ``query``; best matches first."""
        ...

    def close(self) -> None:
        """Release connections and files; the store is unusable afterwards."""
        ...


class StoreResolver(Protocol):
    """Anything that answers the ``resolve_store`` hook (a :class:`~harness.hooks.manager.PluginManager`)."""

    def resolve_store(self, url: str) -> object | None:
        """The store for ``url``, or ``None`` when no plugin knows the scheme."""
        ...


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


def _builtin(url: str, scheme: str) -> SessionStore | None:
    if scheme == "sqlite":
        from harness.session.sqlite import SqliteStore

        if url.rstrip("/").endswith(":memory:"):
            return SqliteStore(":memory:")
        return SqliteStore(store_path(url))
    if scheme == "file":
        from harness.session.jsonfile import JsonFileStore

        return JsonFileStore(store_path(url))
    return None


_BUILTIN_SCHEMES: Sequence[str] = ("sqlite", "file")


def open_store(
    url: str | os.PathLike[str] | None = None, *, plugin_manager: StoreResolver | None = None
) -> SessionStore:
    """Open the store a URL names (default :func:`default_store_url`).

    ``plugin_manager``'s ``resolve_store`` hook is asked first (so a plugin can add a
    scheme or replace a built-in one), then the built-in ``sqlite:`` and ``file:``
    schemes answer. A bare path is taken as a SQLite file, or as a ``file:`` folder when
    it is an existing directory.

    Raises:
        StoreResolutionError: No plugin and no built-in store understands the URL, or a
            plugin answered something that is not a store.
        SessionStoreError: The store exists but cannot be used (corrupt, newer schema).
    """
    text = os.fspath(url) if url is not None else default_store_url()
    text = text.strip()
    if not text:
        raise StoreResolutionError(text, "the store URL is empty")
    scheme = urlsplit(text).scheme.lower() if "://" in text else ""
    if not scheme:
        scheme = "file" if Path(text).is_dir() else "sqlite"
        text = store_url(text, scheme)
    if plugin_manager is not None:
        answer = plugin_manager.resolve_store(text)
        if answer is not None:
            if not isinstance(answer, SessionStore):
                raise StoreResolutionError(
                    text,
                    f"a resolve_store hook returned {type(answer).__name__}, which is not a SessionStore",
                )
            return answer
    store = _builtin(text, scheme)
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
