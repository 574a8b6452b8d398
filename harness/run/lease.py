"""A run holds its stored session's lease from its start to its end (see :mod:`harness.session.lease`).

:class:`RunLease` takes the lease before the run's first model call, renews it every third
of :data:`~harness.session.lease.LEASE_SECONDS` while the run works, and drops it when the
run ends, however it ends. Taking, renewing and dropping run on the store's thread
(:class:`~harness.session.ThreadedStore`), never on the event loop's, in order with the
run's checkpoints. A session without a store, or in a store without leases, runs unleased,
and so does a durable run (its engine owns the run's I/O and replays it).
"""

from __future__ import annotations

__all__ = ["RunLease"]

import asyncio
import contextlib
import logging
import weakref
from typing import Any, cast

from harness.errors import SessionStoreError
from harness.session import Session, ThreadedStore, async_store
from harness.session.lease import LEASE_SECONDS, LeaseHolder, LeasingStore, new_holder

_log = logging.getLogger("harness.run")

_LEASED: weakref.WeakSet[Session] = weakref.WeakSet()
"""Session objects whose run holds their lease (an overlapping run of the same object is the
orchestrator's error to report, not a lease conflict)."""


class RunLease:
    """``async with RunLease(session):`` around a run (a no-op for an unleased session).

    Raises:
        SessionLeaseError: On entry, when another live run holds the session's lease.
    """

    def __init__(self, session: Session, *, seconds: float = LEASE_SECONDS) -> None:
        self.session = session
        self.seconds = seconds
        self.holder: LeaseHolder | None = None
        self._adapter: ThreadedStore | None = None
        self._renewal: asyncio.Task[None] | None = None

    async def __aenter__(self) -> RunLease:
        store: Any = self.session.store
        if store is None or self.session in _LEASED:
            return self
        adapter = async_store(store)
        if not isinstance(adapter, ThreadedStore) or not isinstance(adapter.sync, LeasingStore):
            return self
        self._adapter = adapter
        holder = new_holder(seconds=self.seconds)
        await adapter.call(cast(LeasingStore, adapter.sync).take_lease, self.session.session_id, holder)
        self.holder = holder
        _LEASED.add(self.session)
        self._renewal = asyncio.create_task(self._renew(), name=f"lease {self.session.session_id}")
        return self

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self.seconds / 3)
            assert self._adapter is not None
            assert self.holder is not None
            renewed = new_holder(self.holder.token, seconds=self.seconds)
            try:
                await self._adapter.call(self._sync.take_lease, self.session.session_id, renewed)
            except SessionStoreError as exc:  # lost (expired and taken): the revision check still guards
                _log.warning("session %s: cannot renew its lease: %s", self.session.session_id, exc)
                return
            self.holder = renewed

    @property
    def _sync(self) -> LeasingStore:
        assert self._adapter is not None
        return cast(LeasingStore, self._adapter.sync)

    async def __aexit__(self, *exc_info: object) -> None:
        renewal, self._renewal = self._renewal, None
        if renewal is not None:
            renewal.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewal
        holder, self.holder = self.holder, None
        if holder is None or self._adapter is None:
            return
        _LEASED.discard(self.session)
        drop = self._adapter.call(self._sync.drop_lease, self.session.session_id, holder.token)
        try:
            await asyncio.shield(drop)  # a cancelled run still drops its lease
        except SessionStoreError as exc:  # the store went away: the lease expires by itself
            _log.warning("session %s: cannot drop its lease: %s", self.session.session_id, exc)
