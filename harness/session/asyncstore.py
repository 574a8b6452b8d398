"""The async store seam: what a run awaits, so a store never blocks the event loop.

Two protocols, as httpx pairs ``Client`` with ``AsyncClient``:

* :class:`~harness.session.store.SessionStore`, synchronous, serves the CLI and scripts;
* :class:`AsyncSessionStore`, the same operations as coroutines, is what a run awaits at
  every checkpoint (:meth:`Session.acheckpoint <harness.session.Session.acheckpoint>`).

:func:`async_store` gives the async side of any store: an :class:`AsyncSessionStore`
itself; a store's native async counterpart when it offers one (an ``async_store()``
method, for a driver with an async API); otherwise a :class:`ThreadedStore`, which runs
the synchronous store on a small thread pool of its own (one thread by default, so calls
keep their order), never on the event loop's thread. While another process holds
SQLite's write lock, or PostgreSQL's ``lock_timeout`` runs, or the network is slow, the
waiting happens on that thread: other agents' runs, stream consumers and heartbeats go on.

:func:`finish_shielded` awaits a write to its end even when the awaiting task is cancelled
meanwhile (an abort, a timeout): a commit that may have landed is never abandoned half
way, so the session's record of what it wrote stays true.
"""

from __future__ import annotations

__all__ = ["AsyncSessionStore", "ThreadedStore", "async_store", "finish_shielded", "is_async_store"]

import asyncio
import contextlib
import functools
import inspect
import weakref
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any, Protocol, TypeVar, cast, runtime_checkable

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

_T = TypeVar("_T")


@runtime_checkable
class AsyncSessionStore(Protocol):
    """A session store whose operations are coroutines (see :class:`~harness.session.store.SessionStore`).

    The semantics are the synchronous protocol's, operation for operation: an append-only
    log, atomic checkpoints, and :class:`~harness.errors.SessionConflictError` for a
    checkpoint whose ``base_revision`` is stale.
    """

    @property
    def url(self) -> str:
        """The URL the store was opened with (credentials masked)."""
        ...

    async def commit(self, checkpoint: Checkpoint) -> int:
        """Write ``checkpoint`` in one transaction and return the new revision."""
        ...

    async def load(self, session_id: str) -> StoredSession:
        """Read a session's head, view, thoughts and ledger."""
        ...

    async def head(self, session_id: str) -> SessionHead:
        """Read only a session's head."""
        ...

    async def read_log(self, session_id: str, start: int = 0, stop: int | None = None) -> list[LogEntry]:
        """The raw log from ``start`` to ``stop`` (exclusive), in order."""
        ...

    async def edits(self, session_id: str) -> list[EditRecord]:
        """Every edit recorded over the session's log, oldest first."""
        ...

    async def list_sessions(self) -> list[SessionHead]:
        """Every session's head, most recently modified first."""
        ...

    async def fork(self, session_id: str, new_session_id: str) -> SessionHead:
        """Copy a session under a new id."""
        ...

    async def delete(self, session_id: str) -> bool:
        """Delete a session with its log."""
        ...

    async def prune(
        self,
        *,
        keep_last: int | None = None,
        newer_than: datetime | None = None,
        drop_log: bool = False,
        dry_run: bool = False,
    ) -> PruneResult:
        """Prune old sessions (see :meth:`SessionStore.prune <harness.session.store.SessionStore.prune>`)."""
        ...

    async def search(self, query: str, *, session_id: str | None = None, limit: int = 20) -> list[SearchHit]:
        """Search the raw logs for ``query``; best matches first."""
        ...

    async def aclose(self) -> None:
        """Release connections and files; the store is unusable afterwards."""
        ...


def is_async_store(store: object) -> bool:
    """Whether ``store``'s operations are coroutines (an :class:`AsyncSessionStore`)."""
    return inspect.iscoroutinefunction(getattr(store, "commit", None))


class ThreadedStore:
    """An :class:`AsyncSessionStore` over a synchronous store, run on threads of its own.

    Args:
        store: The synchronous store. It must be safe to call from another thread (the
            built-in stores and harness-postgres are); calls never run on two threads at
            once unless ``max_threads`` is raised.
        max_threads: Threads the store's calls may use at once (default 1: one call at a
            time, in the order they were made).

    Attributes:
        sync: The wrapped synchronous store.
    """

    def __init__(self, store: SessionStore, *, max_threads: int = 1) -> None:
        if max_threads < 1:
            raise ValueError(f"max_threads must be at least 1, got {max_threads}")
        self.sync = store
        self._executor = ThreadPoolExecutor(max_workers=max_threads, thread_name_prefix="harness-store")

    @property
    def url(self) -> str:
        """The wrapped store's URL."""
        return self.sync.url

    def __repr__(self) -> str:
        return f"ThreadedStore({self.sync!r})"

    async def _call(self, function: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(function, *args, **kwargs))

    async def call(self, function: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """Run ``function`` (a method of :attr:`sync`, such as ``take_lease``) on the store's thread."""
        return await self._call(function, *args, **kwargs)

    async def commit(self, checkpoint: Checkpoint) -> int:
        """:meth:`SessionStore.commit` on the store's thread."""
        return await self._call(self.sync.commit, checkpoint)

    async def load(self, session_id: str) -> StoredSession:
        """:meth:`SessionStore.load` on the store's thread."""
        return await self._call(self.sync.load, session_id)

    async def head(self, session_id: str) -> SessionHead:
        """:meth:`SessionStore.head` on the store's thread."""
        return await self._call(self.sync.head, session_id)

    async def read_log(self, session_id: str, start: int = 0, stop: int | None = None) -> list[LogEntry]:
        """:meth:`SessionStore.read_log` on the store's thread."""
        return await self._call(self.sync.read_log, session_id, start, stop)

    async def edits(self, session_id: str) -> list[EditRecord]:
        """:meth:`SessionStore.edits` on the store's thread."""
        return await self._call(self.sync.edits, session_id)

    async def list_sessions(self) -> list[SessionHead]:
        """:meth:`SessionStore.list_sessions` on the store's thread."""
        return await self._call(self.sync.list_sessions)

    async def fork(self, session_id: str, new_session_id: str) -> SessionHead:
        """:meth:`SessionStore.fork` on the store's thread."""
        return await self._call(self.sync.fork, session_id, new_session_id)

    async def delete(self, session_id: str) -> bool:
        """:meth:`SessionStore.delete` on the store's thread."""
        return await self._call(self.sync.delete, session_id)

    async def prune(
        self,
        *,
        keep_last: int | None = None,
        newer_than: datetime | None = None,
        drop_log: bool = False,
        dry_run: bool = False,
    ) -> PruneResult:
        """:meth:`SessionStore.prune` on the store's thread."""
        return await self._call(
            self.sync.prune, keep_last=keep_last, newer_than=newer_than, drop_log=drop_log, dry_run=dry_run
        )

    async def search(self, query: str, *, session_id: str | None = None, limit: int = 20) -> list[SearchHit]:
        """:meth:`SessionStore.search` on the store's thread."""
        return await self._call(self.sync.search, query, session_id=session_id, limit=limit)

    async def aclose(self) -> None:
        """Close the wrapped store on its thread, then stop the thread."""
        try:
            await self._call(self.sync.close)
        finally:
            self._executor.shutdown(wait=False)

    def close(self) -> None:
        """Close the wrapped store and stop the thread (from synchronous code)."""
        self._executor.shutdown(wait=True)
        self.sync.close()


_ADAPTERS: weakref.WeakKeyDictionary[object, AsyncSessionStore] = weakref.WeakKeyDictionary()


def async_store(store: SessionStore | AsyncSessionStore) -> AsyncSessionStore:
    """The async side of ``store`` (see the module); the same object for the same store.

    Raises:
        TypeError: ``store`` is neither kind of store.
    """
    if is_async_store(store):
        return cast(AsyncSessionStore, store)
    try:
        cached = _ADAPTERS.get(store)
    except TypeError:  # not weak-referenceable: no cache
        cached = None
    if cached is not None:
        return cached
    native = getattr(store, "async_store", None)
    if callable(native):
        adapter = cast(AsyncSessionStore, native())
    elif isinstance(store, SessionStore):
        adapter = ThreadedStore(store)
    else:
        raise TypeError(f"{type(store).__name__} is not a session store")
    with contextlib.suppress(TypeError):  # not weak-referenceable: no cache
        _ADAPTERS[store] = adapter
    return adapter


async def finish_shielded(write: Awaitable[_T], then: Callable[[_T], None] | None = None) -> _T:
    """Await ``write`` to its end, even if the awaiting task is cancelled meanwhile.

    A cancellation that arrives while the write runs is held back until the write has
    finished: ``then(result)`` runs first (the caller records what was written), and the
    cancellation is raised after it. So a write that may have landed is never abandoned
    half way, and the caller's record of the store stays true.

    Args:
        write: The write (a store call).
        then: Called with the write's result before a held-back cancellation is raised.

    Raises:
        asyncio.CancelledError: The caller was cancelled while the write ran (raised after it).
        BaseException: What the write raised.
    """
    task = asyncio.ensure_future(write)
    interrupted: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError as exc:
            if task.done() and task.cancelled():
                raise
            interrupted = exc
    result = task.result()
    if then is not None:
        then(result)
    if interrupted is not None:
        raise interrupted
    return result
