"""Session leases: one run writes a stored session at a time, refused before a model call is paid.

A run takes its session's lease in the store when it starts and drops it when it ends
(:class:`harness.run.lease.RunLease`); while it runs it renews the lease every
:data:`LEASE_SECONDS` / 3. A second run on the same stored session, from another
``Session.open`` object of this process or from another process or machine, gets
:class:`~harness.errors.SessionLeaseError` at its start, instead of a
:class:`~harness.errors.SessionConflictError` after its first model call.

A lease never blocks crash recovery. It is taken over (:func:`can_take`) when:

* its holder's process is gone, on this host (``pid`` checked with signal 0; a zombie
  counts as gone), so a run resumed right after a SIGKILL starts at once;
* it expired: its holder, on any host, stopped renewing it :data:`LEASE_SECONDS` ago
  (a machine that died, a pid reused by another program);
* it is the taker's own (the same ``token``: a renewal).

Stores that keep leases implement :class:`LeasingStore` (the SQLite, ``file:`` and
PostgreSQL stores do); a store without it runs unleased, protected by the revision check
alone. Expiry compares wall clocks of the hosts involved (keep them in sync).
"""

from __future__ import annotations

__all__ = ["LEASE_SECONDS", "LeaseHolder", "LeasingStore", "can_take", "new_holder", "pid_alive"]

import os
import socket
import time
import uuid
from typing import Protocol, runtime_checkable

import attrs

LEASE_SECONDS = 30.0
"""How long a lease lasts without renewal (a run renews it every third of this)."""


@attrs.frozen
class LeaseHolder:
    """Who holds a session's lease, and until when.

    Attributes:
        token: Unique to one run (a renewal carries the same token).
        host: The holder's host name.
        pid: The holder's process id.
        expires_at: Unix time after which anyone may take the lease.
    """

    token: str
    host: str
    pid: int
    expires_at: float

    def describe(self) -> str:
        """``pid <pid> on <host>``, for an error message."""
        return f"pid {self.pid} on {self.host}"


def new_holder(token: str | None = None, *, seconds: float = LEASE_SECONDS) -> LeaseHolder:
    """A holder for this process, valid ``seconds`` from now (``token``: renew that lease)."""
    return LeaseHolder(token or uuid.uuid4().hex, socket.gethostname(), os.getpid(), time.time() + seconds)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host (a zombie does not)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):
        return True  # no /proc (macOS): signal 0 answered


def can_take(current: LeaseHolder | None, taker: LeaseHolder, now: float | None = None) -> bool:
    """Whether ``taker`` may take a lease ``current`` holds (see the module docstring)."""
    if current is None or current.token == taker.token:
        return True
    if current.expires_at <= (time.time() if now is None else now):
        return True
    return current.host == taker.host and not pid_alive(current.pid)


@runtime_checkable
class LeasingStore(Protocol):
    """A store that keeps session leases (beside :class:`~harness.session.store.SessionStore`)."""

    def take_lease(self, session_id: str, holder: LeaseHolder) -> None:
        """Record ``holder`` as the session's lease holder, atomically with the check.

        The session need not exist yet (a run's first checkpoint creates it).

        Raises:
            SessionLeaseError: Another live holder has it (:func:`can_take` is false).
        """
        ...

    def drop_lease(self, session_id: str, token: str) -> None:
        """Remove the session's lease if ``token`` holds it (otherwise do nothing)."""
        ...
