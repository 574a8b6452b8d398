"""Fixtures of the harness-postgres tests: the real server, and a fresh schema per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from harness_postgres import PostgresStore
from harness_postgres.testing import Admin, require_server, schema_url, temporary_schema


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    """The test server's DSN; fails under CI=true and skips elsewhere when no server answers."""
    return require_server()


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:
    """A schema of this test's own (random name), dropped after the test."""
    with temporary_schema(pg_dsn) as schema:
        yield schema


@pytest.fixture
def pg_url(pg_dsn: str, pg_schema: str) -> str:
    """The URL of this test's store: the server with ``?schema=`` this test's schema."""
    return schema_url(pg_dsn, pg_schema)


@pytest.fixture
def pg_store(pg_dsn: str, pg_schema: str) -> Iterator[PostgresStore]:
    """A store in this test's schema, closed after the test."""
    store = PostgresStore(pg_dsn, schema=pg_schema)
    yield store
    store.close()


@pytest.fixture
def pg_admin(pg_dsn: str) -> Iterator[Admin]:
    """A plain autocommit connection, to look at or tamper with rows behind the store's back."""
    admin = Admin(pg_dsn)
    yield admin
    admin.close()
