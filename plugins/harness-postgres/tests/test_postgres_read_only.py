"""A read-only open (``harness sessions list``...) of a PostgreSQL store creates nothing, writes nothing."""

from __future__ import annotations

import asyncio
import time

import pytest
from click.testing import CliRunner, Result
from harness_postgres import PostgresStore
from harness_postgres.testing import Admin

import harness
from harness import Agent, Session
from harness.cli import cli
from harness.errors import SessionConflictError, SessionStoreError
from harness.models.test import TestModel
from harness.session import ThreadedStore
from harness.session.lease import LeaseHolder

READ_ONLY = [["list"], ["show", "one"], ["search", "hello"]]


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def catalog(admin: Admin, schema: str) -> tuple[int, int]:
    """``(schemas named schema, relations in it)``: what a read-only open must leave as it was."""
    row = admin.execute(
        "SELECT count(DISTINCT n.oid), count(c.oid) FROM pg_namespace n "
        "LEFT JOIN pg_class c ON c.relnamespace = n.oid WHERE n.nspname = %s",
        (schema,),
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def seeded(url: str) -> None:
    store = harness.open_store(url)
    try:
        Agent(TestModel(final_text="hello back")).run_sync(
            "hello", session=Session.create(store=store, session_id="one")
        )
    finally:
        store.close()


@pytest.mark.parametrize("empty_schema", [False, True], ids=["no-schema", "empty-schema"])
def test_a_read_only_open_of_no_store_is_one_error_and_creates_nothing(
    pg_url: str, pg_schema: str, pg_admin: Admin, empty_schema: bool
) -> None:
    if empty_schema:
        pg_admin.execute(f"CREATE SCHEMA {pg_schema}")
    before = catalog(pg_admin, pg_schema)
    with pytest.raises(SessionStoreError, match="no harness store here") as caught:
        harness.open_store(pg_url, read_only=True)
    message = str(caught.value)
    assert "nothing was created" in message
    assert "\n" not in message
    assert catalog(pg_admin, pg_schema) == before == ((1, 0) if empty_schema else (0, 0))


@pytest.mark.parametrize("command", READ_ONLY, ids=lambda c: " ".join(c))
@pytest.mark.parametrize("empty_schema", [False, True], ids=["no-schema", "empty-schema"])
def test_read_only_commands_on_no_store_exit_2_and_create_nothing(
    pg_url: str, pg_schema: str, pg_admin: Admin, command: list[str], empty_schema: bool
) -> None:
    if empty_schema:
        pg_admin.execute(f"CREATE SCHEMA {pg_schema}")
    result = invoke("sessions", "--store", pg_url, *command)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert "no harness store here" in lines[0]
    assert "nothing was created" in lines[0]
    assert "Traceback" not in result.output
    assert catalog(pg_admin, pg_schema) == ((1, 0) if empty_schema else (0, 0))


@pytest.mark.parametrize("command", READ_ONLY, ids=lambda c: " ".join(c))
def test_read_only_commands_read_a_store_and_change_no_row(
    pg_url: str, pg_schema: str, pg_admin: Admin, command: list[str]
) -> None:
    seeded(pg_url)
    before = pg_admin.execute(f"SELECT revision, last_modified FROM {pg_schema}.sessions").fetchall()
    result = invoke("sessions", "--store", pg_url, *command)
    assert result.exit_code == 0, result.output
    assert "one" in result.output or "hello" in result.output
    assert pg_admin.execute(f"SELECT revision, last_modified FROM {pg_schema}.sessions").fetchall() == before


def test_a_read_only_store_refuses_every_write(pg_url: str, pg_schema: str, pg_admin: Admin) -> None:
    seeded(pg_url)
    before = catalog(pg_admin, pg_schema)
    heads = f"SELECT session_id, revision, last_modified FROM {pg_schema}.sessions"
    rows = pg_admin.execute(heads).fetchall()
    store = harness.open_store(pg_url, read_only=True)
    try:
        assert isinstance(store, PostgresStore)
        assert store.read_only
        session = Session.open(store, "one")
        assert [m.kind for m in session.messages] == ["request", "response"]
        session.messages = [*session.messages, session.messages[0]]
        writes = [
            session.checkpoint,
            lambda: store.delete("one"),
            lambda: store.fork("one", "two"),
            lambda: store.prune(keep_last=0),
            lambda: store.take_lease("one", LeaseHolder("t", "h", 1, time.time() + 60)),
            lambda: store.drop_lease("one", "t"),
        ]
        for write in writes:
            with pytest.raises(SessionStoreError, match="opened read-only"):
                write()
        assert store.prune(keep_last=0, dry_run=True).deleted == ("one",)
        assert [h.session_id for h in store.list_sessions()] == ["one"]
    finally:
        store.close()
    assert catalog(pg_admin, pg_schema) == before
    assert pg_admin.execute(heads).fetchall() == rows


def test_the_server_refuses_writes_on_a_read_only_connection(pg_url: str, pg_schema: str) -> None:
    seeded(pg_url)
    store = PostgresStore(pg_url, read_only=True)
    try:
        conn = store._link.connection()  # pyright: ignore[reportPrivateUsage]  # the server's own guard
        row = conn.execute(b"SHOW default_transaction_read_only").fetchone()
        assert row == ("on",)
    finally:
        store.close()


def test_an_older_store_is_not_migrated_by_a_read_only_open(
    pg_url: str, pg_schema: str, pg_admin: Admin
) -> None:
    seeded(pg_url)
    pg_admin.execute(f"DELETE FROM {pg_schema}.schema_migrations WHERE version > 1")
    with pytest.raises(SessionStoreError, match="older than this release reads"):
        harness.open_store(pg_url, read_only=True)
    assert pg_admin.execute(f"SELECT version FROM {pg_schema}.schema_migrations").fetchall() == [(1,)]


def test_acreate_refuses_a_taken_id_in_postgres(pg_url: str, pg_admin: Admin, pg_schema: str) -> None:
    async def main() -> None:
        store = ThreadedStore(PostgresStore(pg_url))
        try:
            session = await Session.acreate(store=store, session_id="notes")
            await Agent(TestModel(final_text="one")).run("hi", session=session)
            with pytest.raises(SessionConflictError, match="already exists") as caught:
                await Session.acreate(store=store, session_id="notes")
            assert caught.value.actual == session.revision
        finally:
            store.close()

    asyncio.run(main())
    rows = pg_admin.execute(f"SELECT session_id, revision FROM {pg_schema}.sessions").fetchall()
    assert [r[0] for r in rows] == ["notes"]
