"""One store's PostgreSQL connection: opened lazily, reopened when the server closed it, errors typed.

:meth:`Link.run` runs one store operation (a function of the connection) under the
store's lock and turns every driver error into :class:`~harness.errors.SessionStoreError`
naming the store and the session. When the server closed the connection between two
calls (a restart, an idle timeout, ``pg_terminate_backend``), the operation is retried
once on a new connection, but only if its ``COMMIT`` was not sent yet: a write whose
commit may or may not have landed is never repeated; it is reported as such.
"""

from __future__ import annotations

__all__ = ["Attempt", "Link"]

import math
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.pq import TransactionStatus

from harness.core import MaskedURL
from harness.errors import SessionStoreError

T = TypeVar("T")

Connection = psycopg.Connection[Any]


class Attempt:
    """What one try of an operation got to: once :attr:`committing` is set, it is never retried."""

    def __init__(self) -> None:
        self.committing = False


class Link:
    """The connection of one store, and the way every operation runs on it.

    Args:
        conninfo: What psycopg connects with.
        url: The store's URL (passwords masked), for messages.
        connect_timeout: Seconds to wait for the server when connecting.
        lock_timeout: Seconds a write waits for another writer's lock on the same session.
        application_name: Shown in ``pg_stat_activity`` unless the connection string sets one.
        synchronous_commit: ``None`` keeps the server's setting; otherwise the value to set
            for this connection (``"off"`` for ``durability="normal"``).
        read_only: Every transaction of the connection is read-only (the server refuses
            DDL and writes: ``default_transaction_read_only``).
    """

    def __init__(
        self,
        conninfo: str,
        url: str,
        *,
        connect_timeout: float,
        lock_timeout: float,
        application_name: str,
        synchronous_commit: str | None = None,
        read_only: bool = False,
    ) -> None:
        given = conninfo_to_dict(conninfo)
        extra: dict[str, Any] = {}
        if "connect_timeout" not in given:
            extra["connect_timeout"] = max(1, math.ceil(connect_timeout))
        if "application_name" not in given:
            extra["application_name"] = application_name
        self._conninfo = make_conninfo(conninfo, **extra)
        self._secret = MaskedURL(conninfo)
        self.url = url
        self.lock_timeout = lock_timeout
        self.synchronous_commit = synchronous_commit
        self.read_only = read_only
        self.lock = threading.RLock()
        self._conn: Connection | None = None
        self.closed = False

    def connection(self) -> Connection:
        """The open connection, connecting first when there is none (or the old one died)."""
        conn = self._conn
        if conn is not None and not conn.closed:
            return conn
        self._conn = None
        try:
            conn = psycopg.connect(self._conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise SessionStoreError(self.url, f"cannot connect to PostgreSQL: {self._reason(exc)}") from exc
        try:
            conn.execute(
                b"SELECT set_config('TimeZone', 'UTC', false), set_config('lock_timeout', %s, false), "
                b"CASE WHEN %s::text IS NULL THEN NULL ELSE set_config('synchronous_commit', %s, false) END, "
                b"set_config('default_transaction_read_only', %s, false)",
                (
                    f"{max(1, round(self.lock_timeout * 1000))}ms",
                    self.synchronous_commit,
                    self.synchronous_commit,
                    "on" if self.read_only else "off",
                ),
            )
        except psycopg.Error as exc:
            conn.close()
            raise SessionStoreError(self.url, f"cannot set up the connection: {self._reason(exc)}") from exc
        self._conn = conn
        return conn

    def run(
        self, what: str, operation: Callable[[Connection, Attempt], T], session_id: str | None = None
    ) -> T:
        """Run ``operation(connection, attempt)``; see the module docstring for retries and errors.

        Args:
            what: What the operation does, for messages ("write", "read", ...).
            operation: The work; it opens and commits its own transaction and sets
                ``attempt.committing`` before it sends ``COMMIT``.
            session_id: The session concerned, for messages.

        Raises:
            SessionStoreError: The store is closed, unreachable, or refused the operation;
                any transaction it began was rolled back.
        """
        with self.lock:
            if self.closed:
                raise SessionStoreError(self.url, "the store is closed", session_id=session_id)
            retried = False
            while True:
                conn = self.connection()
                attempt = Attempt()
                try:
                    return operation(conn, attempt)
                except psycopg.Error as exc:
                    self._rollback(conn)
                    lost = conn.closed
                    if lost:
                        self._conn = None
                    if lost and not retried and not attempt.committing:
                        retried = True
                        continue
                    raise self._error(what, exc, attempt, lost, session_id) from exc
                except UnicodeEncodeError as exc:
                    self._rollback(conn)
                    raise SessionStoreError(
                        self.url,
                        f"cannot {what}: a text value is not valid Unicode (a lone surrogate?): {exc}",
                        session_id=session_id,
                    ) from exc
                except BaseException:
                    self._rollback(conn)
                    raise

    def _error(
        self, what: str, exc: psycopg.Error, attempt: Attempt, lost: bool, session_id: str | None
    ) -> SessionStoreError:
        if lost and attempt.committing:
            reason = (
                "the connection was lost while committing, so whether the write landed is unknown; "
                f"reload the session before writing again ({self._reason(exc)})"
            )
        elif lost:
            reason = f"the connection was lost twice in a row: {self._reason(exc)}"
        elif isinstance(exc, pg_errors.LockNotAvailable):
            reason = f"timed out after {self.lock_timeout:g} s waiting for another writer of the same session"
        elif isinstance(exc, pg_errors.UndefinedTable | pg_errors.InvalidSchemaName):
            reason = f"the store's tables are missing (was the schema dropped?): {self._reason(exc)}"
        elif isinstance(exc, psycopg.DataError) and "NUL" in str(exc):
            reason = f"PostgreSQL text cannot hold a NUL character: {self._reason(exc)}"
        else:
            reason = self._reason(exc)
        return SessionStoreError(self.url, f"cannot {what}: {reason}", session_id=session_id)

    def _rollback(self, conn: Connection) -> None:
        """Leave ``conn`` idle, or close it when it cannot be (it is reopened on next use)."""
        if conn.closed:
            return
        status = conn.info.transaction_status
        if status == TransactionStatus.IDLE:
            return
        if status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
            try:
                conn.execute(b"ROLLBACK")
                return
            except psycopg.Error:
                pass
        conn.close()  # a query still running, or a failed rollback: start afresh next time

    def _reason(self, exc: BaseException) -> str:
        """``Type: message`` of a driver error, every secret of the connection string masked."""
        text = self._secret.redact(str(exc).strip())
        return f"{type(exc).__name__}: {text}" if text else type(exc).__name__

    def close(self) -> None:
        """Close the connection; every later :meth:`run` raises."""
        with self.lock:
            self.closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None
