"""``resolve_store``: with the plugin installed, harness.open_store opens postgresql:// and postgres://."""

from __future__ import annotations

import pytest
from harness_postgres import PostgresStore, resolver

import harness
from harness import CanonicalMessage, Session, SessionStoreError
from harness.errors import StoreResolutionError
from harness.hooks import PluginManager


def test_open_store_answers_both_schemes(pg_dsn: str, pg_schema: str) -> None:
    for scheme in ("postgresql", "postgres"):
        url = f"{scheme}://{pg_dsn.partition('://')[2]}?schema={pg_schema}"
        store = harness.open_store(url)
        try:
            assert isinstance(store, PostgresStore)
            assert store.schema == pg_schema
            assert store.url.startswith("postgresql://")
            assert store.url.endswith(f"schema={pg_schema}")
            session = Session.create(store=store, messages=[CanonicalMessage.user(scheme)])
            session.checkpoint()
            assert Session.open(store, session.session_id).messages == session.messages
        finally:
            store.close()


def test_the_entry_point_registers_the_module_as_a_plugin() -> None:
    manager = PluginManager()
    manager.load_entrypoint_plugins(allow=["postgres"])
    assert manager.available_capabilities() == {}
    assert [i.name for i in manager.list_plugins() if i.name == "postgres"] == ["postgres"]
    assert manager.resolve_store("sqlite:///x.db") is None


def test_other_schemes_are_left_to_other_stores() -> None:
    for url in ("sqlite:///x.db", "file:///tmp/x", "mysql://h/db", "postgresql-ish://h", "/plain/path"):
        assert resolver.resolve_store(url, read_only=False) is None


def test_store_errors_pass_through_open_store_unwrapped() -> None:
    with pytest.raises(SessionStoreError, match="cannot connect") as caught:
        harness.open_store("postgresql://who:hunter2@127.0.0.1:1/db?connect_timeout=2")
    assert caught.value.store == "postgresql://who:***@127.0.0.1:1/db?connect_timeout=2"
    assert "hunter2" not in str(caught.value)
    with pytest.raises(StoreResolutionError, match="schema must be"):
        harness.open_store("postgresql://127.0.0.1:1/db?schema=Not-Valid")


def test_the_password_never_shows(pg_dsn: str, pg_schema: str) -> None:
    secret = pg_dsn.replace("://root@", "://root:hunter2@") + f"?schema={pg_schema}"  # trust auth ignores it
    store = harness.open_store(secret)
    try:
        assert "hunter2" not in store.url
        assert "hunter2" not in repr(store)
        assert ":***@" in store.url
        with pytest.raises(SessionStoreError) as caught:
            store.load("missing")
        assert "hunter2" not in str(caught.value)
    finally:
        store.close()
