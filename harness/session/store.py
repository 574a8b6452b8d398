"""The :class:`SessionStore` protocol: what every session store implements.

The backends live in :mod:`harness.stores` (SQLite, the ``file:`` folder, and
:func:`~harness.stores.open_store` for a URL); ``postgresql://`` comes from the
``harness-postgres`` distribution through the ``resolve_store`` hook.

A store is a small synchronous API over records (:mod:`harness.session.records`):
:meth:`~SessionStore.commit` writes a :class:`~harness.session.records.Checkpoint` in one
transaction and checks its revision; everything else reads, forks or deletes. The
:class:`~harness.session.Session` object does the bookkeeping (what was appended, what a
capability rewrote), so a backend only stores rows. ``harness.testing.store_conformance``
is the suite a third-party store runs against its own factory.
"""

from __future__ import annotations

__all__ = ["SessionStore", "StoreResolver"]

from datetime import datetime
from typing import Protocol, runtime_checkable

from harness.session.records import (
    Checkpoint,
    EditRecord,
    LogEntry,
    PruneResult,
    SearchHit,
    SessionHead,
    StoredSession,
)


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

    def resolve_store(self, url: str, *, read_only: bool = False) -> object | None:
        """The store for ``url`` (read-only with ``read_only``); ``None``: no plugin knows the scheme."""
        ...
