"""The test helpers: a missing server fails under CI=true and skips elsewhere, saying how to point at one."""

from __future__ import annotations

import pytest
from harness_postgres.testing import (
    DEFAULT_TEST_DSN,
    TEST_DSN_ENV,
    Admin,
    require_server,
    schema_url,
    temporary_schema,
    test_dsn,
)

_NOWHERE = "postgresql://nobody:hunter2@127.0.0.1:1/none?connect_timeout=2"


def test_the_dsn_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TEST_DSN_ENV, raising=False)
    assert test_dsn() == DEFAULT_TEST_DSN == "postgresql://root@127.0.0.1:5432/test"
    monkeypatch.setenv(TEST_DSN_ENV, " postgresql://other@db/x ")
    assert test_dsn() == "postgresql://other@db/x"


def test_a_missing_server_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true requires the PostgreSQL tests") as caught:
        require_server(_NOWHERE)
    assert f"{TEST_DSN_ENV}=postgresql://" in str(caught.value)
    assert "hunter2" not in str(caught.value)


def test_a_missing_server_skips_elsewhere_saying_how_to_point_at_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=f"point the tests at one with {TEST_DSN_ENV}=") as caught:
        require_server(_NOWHERE)
    assert "nobody:***@127.0.0.1:1" in str(caught.value)


def test_a_temporary_schema_is_dropped_afterwards(pg_dsn: str) -> None:
    admin = Admin(pg_dsn)
    try:
        with temporary_schema(pg_dsn) as schema:
            assert schema_url(pg_dsn, schema) == f"{pg_dsn}?schema={schema}"
            admin.execute(f"CREATE SCHEMA {schema}")
            admin.execute(f"CREATE TABLE {schema}.t (x int)")
        assert admin.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is None
    finally:
        admin.close()
