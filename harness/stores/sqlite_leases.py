"""Session leases in the SQLite store's ``leases`` table (schema 3; see :mod:`harness.session.lease`)."""

from __future__ import annotations

__all__ = ["drop_lease", "take_lease"]

import sqlite3

from harness.errors import SessionLeaseError
from harness.session.lease import LeaseHolder, can_take


def take_lease(db: sqlite3.Connection, url: str, session_id: str, holder: LeaseHolder) -> None:
    """Check and record ``holder`` (the caller holds the write transaction)."""
    row = db.execute(
        "SELECT token, host, pid, expires_at FROM leases WHERE session_id = ?", (session_id,)
    ).fetchone()
    current = None if row is None else LeaseHolder(str(row[0]), str(row[1]), int(row[2]), float(row[3]))
    if not can_take(current, holder):
        assert current is not None
        raise SessionLeaseError(url, session_id, current.describe())
    db.execute(
        "INSERT OR REPLACE INTO leases (session_id, token, host, pid, expires_at) VALUES (?, ?, ?, ?, ?)",
        (session_id, holder.token, holder.host, holder.pid, holder.expires_at),
    )


def drop_lease(db: sqlite3.Connection, session_id: str, token: str) -> None:
    """Remove the lease ``token`` holds (the caller holds the write transaction)."""
    db.execute("DELETE FROM leases WHERE session_id = ? AND token = ?", (session_id, token))
