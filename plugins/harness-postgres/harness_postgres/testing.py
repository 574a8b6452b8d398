"""Helpers for tests against a real PostgreSQL server: which server, and a throw-away schema per test.

The server is ``$HARNESS_TEST_POSTGRES_DSN``, default :data:`DEFAULT_TEST_DSN` (a local
server with trust authentication and a database ``test``). :func:`require_server` checks
it answers: under ``CI=true`` a missing server fails the test, elsewhere it skips with a
reason that says how to point the tests at another server. :func:`temporary_schema`
names a fresh schema (random, so tests run in parallel) and drops it afterwards.

``pytest`` is imported only by :func:`require_server`, so the rest works without it.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_TEST_DSN",
    "Admin",
    "TEST_DSN_ENV",
    "drop_schema",
    "require_server",
    "schema_url",
    "temporary_schema",
    "test_dsn",
    "unique_schema",
]

import os
import uuid
from collections.abc import Generator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg

from harness_postgres.dsn import check_schema_name, mask_password
from harness_postgres.statements import compose

TEST_DSN_ENV = "HARNESS_TEST_POSTGRES_DSN"
"""The environment variable naming the test server."""

DEFAULT_TEST_DSN = "postgresql://root@127.0.0.1:5432/test"
"""The server every developer and CI machine runs (trust authentication, database ``test``)."""


def test_dsn() -> str:
    """``$HARNESS_TEST_POSTGRES_DSN``, else :data:`DEFAULT_TEST_DSN`."""
    return os.environ.get(TEST_DSN_ENV, "").strip() or DEFAULT_TEST_DSN


test_dsn.__test__ = False  # type: ignore[attr-defined]  # not a test, whatever pytest thinks of the name


def _unreachable(dsn: str) -> str | None:
    try:
        with psycopg.connect(dsn, connect_timeout=5, autocommit=True) as conn:
            conn.execute(b"SELECT 1")
    except psycopg.Error as exc:
        return str(exc).strip() or type(exc).__name__
    return None


def require_server(dsn: str | None = None) -> str:
    """Return the test server's DSN once it answers; fail (``CI=true``) or skip the test when it does not."""
    import pytest

    target = dsn if dsn is not None else test_dsn()
    problem = _unreachable(target)
    if problem is None:
        return target
    message = (
        f"no PostgreSQL server at {mask_password(target)} ({problem}); start one, or point the tests at one "
        f"with {TEST_DSN_ENV}=postgresql://user:password@host:5432/dbname"
    )
    if os.environ.get("CI", "").strip().lower() == "true":
        pytest.fail(f"CI=true requires the PostgreSQL tests to run: {message}", pytrace=False)
    pytest.skip(message)
    return target  # not reached: skip raises


class Admin:
    """A plain autocommit connection for tests that look at or tamper with rows behind a store's back.

    Args:
        dsn: The server (a ``schema`` URL parameter is ignored).
    """

    def __init__(self, dsn: str) -> None:
        from harness_postgres.dsn import parse_target

        self.connection: psycopg.Connection[tuple[Any, ...]] = psycopg.connect(
            parse_target(dsn).conninfo, autocommit=True
        )

    def execute(self, query: str, params: Sequence[Any] = ()) -> psycopg.Cursor[tuple[Any, ...]]:
        """Run ``query`` (SQL text built by the test itself) with ``params``."""
        return self.connection.execute(query.encode(), params)

    def close(self) -> None:
        """Close the connection."""
        self.connection.close()


def unique_schema(prefix: str = "harness_test") -> str:
    """A schema name no other test uses: ``<prefix>_<12 hex digits>``."""
    return check_schema_name(f"{prefix}_{uuid.uuid4().hex[:12]}")


def schema_url(dsn: str, schema: str) -> str:
    """``dsn`` (a URL) with ``?schema=`` (or ``&schema=``) appended."""
    return f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"


def drop_schema(dsn: str, schema: str) -> None:
    """Drop ``schema`` and everything in it, if it exists (the ``schema`` parameter of the URL is ignored)."""
    from harness_postgres.dsn import parse_target

    with psycopg.connect(parse_target(dsn).conninfo, autocommit=True) as conn:
        conn.execute(b"SET lock_timeout = '30s'")
        conn.execute(compose("DROP SCHEMA IF EXISTS {s} CASCADE", check_schema_name(schema)))


@contextmanager
def temporary_schema(dsn: str, prefix: str = "harness_test") -> Generator[str, None, None]:
    """A fresh schema name (nothing is created: a store creates it on open), dropped on exit."""
    schema = unique_schema(prefix)
    try:
        yield schema
    finally:
        drop_schema(dsn, schema)
