"""No password of a PostgreSQL URL shows in the store's URL, its repr, its errors or its logs."""

from __future__ import annotations

import logging

import pytest
from harness_postgres import PostgresStore, mask_password
from harness_postgres.dsn import parse_target

from harness.errors import SessionStoreError, StoreResolutionError

SECRET, SSL_SECRET = "TopSecret-a1", "SslSecret-b2"


def _url(dsn: str, schema: str) -> str:
    base = dsn.replace("://root@", f"://root:{SECRET}@", 1)
    return f"{base}?schema={schema}&sslpassword={SSL_SECRET}"


def _clean(*texts: str) -> None:
    for text in texts:
        assert SECRET not in text
        assert SSL_SECRET not in text


def test_every_secret_keyword_is_masked_in_url_and_repr(pg_dsn: str, pg_schema: str) -> None:
    store = PostgresStore(_url(pg_dsn, pg_schema))
    try:
        _clean(store.url, repr(store))
        assert "sslpassword=***" in store.url.lower()
    finally:
        store.close()


@pytest.mark.parametrize(
    "dsn",
    [
        f"host=127.0.0.1 port=1 password={SECRET} sslpassword={SSL_SECRET} connect_timeout=1",
        f"postgresql://u:{SECRET}@127.0.0.1:1/db?sslpassword={SSL_SECRET}&connect_timeout=1",
    ],
)
def test_an_unreachable_server_names_the_store_masked(dsn: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(SessionStoreError) as caught:
        PostgresStore(dsn, connect_timeout=1)
    logs = "\n".join(r.getMessage() for r in caplog.records)
    _clean(str(caught.value), repr(caught.value), caught.value.store, logs)


@pytest.mark.parametrize(
    "dsn",
    [
        f"host=db password '{SECRET}",  # psycopg's error quotes the token after "password"
        f"host=db password='{SECRET}",  # unterminated quote
        f"host=db sslpassword {SSL_SECRET} user=u",
    ],
)
def test_a_connection_string_that_does_not_parse_is_refused_masked(dsn: str) -> None:
    with pytest.raises(StoreResolutionError, match="not a PostgreSQL connection string") as caught:
        parse_target(dsn)
    _clean(str(caught.value), caught.value.url)
    assert "not shown: it may hold a password" in caught.value.url


def test_mask_password_masks_sslpassword_too() -> None:
    assert (
        mask_password(f"postgresql://u@h/db?sslpassword={SSL_SECRET}")
        == "postgresql://u@h/db?sslpassword=***"
    )
    assert mask_password(f"host=h SSLPASSWORD={SSL_SECRET}") == "host=h SSLPASSWORD=***"
