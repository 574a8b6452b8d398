"""A store that passes every call to another one: the base of stores that wrap a store.

Subclass :class:`DelegatingStore` and override what the wrapper changes (for example
:meth:`commit`); every other :class:`~harness.session.store.SessionStore` method goes to
:attr:`DelegatingStore.inner` unchanged.
"""

from __future__ import annotations

__all__ = ["DelegatingStore"]

from datetime import datetime

from harness.session.lease import LeaseHolder, LeasingStore
from harness.session.records import (
    Checkpoint,
    EditRecord,
    LogEntry,
    PruneResult,
    SearchHit,
    SessionHead,
    StoredSession,
)
from harness.session.store import SessionStore


class DelegatingStore:
    """A :class:`~harness.session.store.SessionStore` that calls ``inner`` for everything.

    Args:
        inner: The store every call goes to.
    """

    def __init__(self, inner: SessionStore) -> None:
        self.inner = inner

    @property
    def url(self) -> str:
        """The inner store's URL."""
        return self.inner.url

    def commit(self, checkpoint: Checkpoint) -> int:
        """:meth:`SessionStore.commit` of the inner store."""
        return self.inner.commit(checkpoint)

    def load(self, session_id: str) -> StoredSession:
        """:meth:`SessionStore.load` of the inner store."""
        return self.inner.load(session_id)

    def head(self, session_id: str) -> SessionHead:
        """:meth:`SessionStore.head` of the inner store."""
        return self.inner.head(session_id)

    def read_log(self, session_id: str, start: int = 0, stop: int | None = None) -> list[LogEntry]:
        """:meth:`SessionStore.read_log` of the inner store."""
        return self.inner.read_log(session_id, start, stop)

    def edits(self, session_id: str) -> list[EditRecord]:
        """:meth:`SessionStore.edits` of the inner store."""
        return self.inner.edits(session_id)

    def list_sessions(self) -> list[SessionHead]:
        """:meth:`SessionStore.list_sessions` of the inner store."""
        return self.inner.list_sessions()

    def fork(self, session_id: str, new_session_id: str) -> SessionHead:
        """:meth:`SessionStore.fork` of the inner store."""
        return self.inner.fork(session_id, new_session_id)

    def delete(self, session_id: str) -> bool:
        """:meth:`SessionStore.delete` of the inner store."""
        return self.inner.delete(session_id)

    def prune(
        self,
        *,
        keep_last: int | None = None,
        newer_than: datetime | None = None,
        drop_log: bool = False,
        dry_run: bool = False,
    ) -> PruneResult:
        """:meth:`SessionStore.prune` of the inner store."""
        return self.inner.prune(
            keep_last=keep_last, newer_than=newer_than, drop_log=drop_log, dry_run=dry_run
        )

    def search(self, query: str, *, session_id: str | None = None, limit: int = 20) -> list[SearchHit]:
        """:meth:`SessionStore.search` of the inner store."""
        return self.inner.search(query, session_id=session_id, limit=limit)

    def take_lease(self, session_id: str, holder: LeaseHolder) -> None:
        """The inner store's ``take_lease``; nothing when it keeps no leases."""
        if isinstance(self.inner, LeasingStore):
            self.inner.take_lease(session_id, holder)

    def drop_lease(self, session_id: str, token: str) -> None:
        """The inner store's ``drop_lease``; nothing when it keeps no leases."""
        if isinstance(self.inner, LeasingStore):
            self.inner.drop_lease(session_id, token)

    def close(self) -> None:
        """Close the inner store."""
        self.inner.close()
