"""Connection strings: the schema option, the URL a store shows, passwords masked (no server needed)."""

from __future__ import annotations

import pytest
from harness_postgres.dsn import DEFAULT_SCHEMA, check_schema_name, mask_password, parse_target

from harness.errors import StoreResolutionError


@pytest.mark.parametrize(
    ("dsn", "conninfo", "schema", "url"),
    [
        (
            "postgresql://root@127.0.0.1:5432/test",
            "postgresql://root@127.0.0.1:5432/test",
            DEFAULT_SCHEMA,
            "postgresql://root@127.0.0.1:5432/test",
        ),
        (
            "postgres://app:s3cret@db.example/agents?sslmode=require&schema=team_a",
            "postgres://app:s3cret@db.example/agents?sslmode=require",
            "team_a",
            "postgresql://app:***@db.example/agents?schema=team_a&sslmode=require",
        ),
        (
            "postgresql:///test?host=/var/run/postgresql&password=s3cret",
            "postgresql:///test?host=/var/run/postgresql&password=s3cret",
            DEFAULT_SCHEMA,
            "postgresql:///test?host=/var/run/postgresql&password=***",
        ),
        (
            "host=db.example port=6543 dbname=agents user=app password='s3 cret'",
            "host=db.example port=6543 dbname=agents user=app password='s3 cret'",
            DEFAULT_SCHEMA,
            "postgresql://app:***@db.example:6543/agents",
        ),
        (
            "postgresql://[::1]:5432/db?options=-c%20x%3Dy",
            "postgresql://[::1]:5432/db?options=-c%20x%3Dy",
            DEFAULT_SCHEMA,
            "postgresql://[::1]:5432/db?options=-c%20x%3Dy",
        ),
    ],
)
def test_targets(dsn: str, conninfo: str, schema: str, url: str) -> None:
    target = parse_target(dsn)
    assert (target.conninfo, target.schema, target.url) == (conninfo, schema, url)
    assert "s3cret" not in target.url
    assert "s3 cret" not in target.url


def test_the_schema_argument_and_the_url_must_agree() -> None:
    assert parse_target("postgresql://h/db", "other").schema == "other"
    assert parse_target("postgresql://h/db?schema=other", "other").url == "postgresql://h/db?schema=other"
    with pytest.raises(StoreResolutionError, match="names schema 'one' but schema='two'"):
        parse_target("postgresql://h/db?schema=one", "two")
    with pytest.raises(StoreResolutionError, match="more than once"):
        parse_target("postgresql://h/db?schema=a&schema=b")


@pytest.mark.parametrize("bad", ["", "Upper", "1abc", "pg_catalog", "a-b", "a" * 64, 'x"; DROP TABLE y; --'])
def test_bad_schema_names_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="schema must be"):
        check_schema_name(bad)
    with pytest.raises(ValueError, match="schema must be"):
        parse_target("postgresql://h/db", bad)
    with pytest.raises(StoreResolutionError, match="schema must be"):
        parse_target(f"postgresql://u:pw@h/db?schema={bad}")


def test_a_string_that_is_no_connection_string_is_refused_masked() -> None:
    with pytest.raises(StoreResolutionError, match="not a PostgreSQL connection string") as caught:
        parse_target("nonsense words password=hunter2")
    assert "hunter2" not in str(caught.value)


@pytest.mark.parametrize(
    ("raw", "masked"),
    [
        ("postgresql://u:pw@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u@h/db?password=pw&x=1", "postgresql://u@h/db?password=***&x=1"),
        ("host=h password=pw user=u", "host=h password=*** user=u"),
        ("host=h password = 'p w' user=u", "host=h password = *** user=u"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
    ],
)
def test_mask_password(raw: str, masked: str) -> None:
    assert mask_password(raw) == masked
