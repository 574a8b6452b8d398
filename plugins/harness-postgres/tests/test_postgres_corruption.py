"""Corrupt rows, foreign or newer schemas: a typed error naming the store and the session, nothing written."""

from __future__ import annotations

import pytest
from harness_postgres import SCHEMA_VERSION, PostgresStore
from harness_postgres.testing import Admin, schema_url

from harness import CanonicalMessage, Session, SessionStoreError, ToolReturnPart
from harness.session import LedgerEntry


def _stored(store: PostgresStore) -> Session:
    session = Session.create(
        store=store, messages=[CanonicalMessage.user("hello"), CanonicalMessage.user("again")]
    )
    session.record_tool(LedgerEntry("c1", "grep", "started", session.created_at))
    session.checkpoint()
    return session


def _dump(admin: Admin, schema: str) -> list[object]:
    out: list[object] = []
    for table in ("schema_migrations", "sessions", "log", "view", "edits", "thoughts", "ledger"):
        rows = admin.execute(f"SELECT * FROM {schema}.{table} ORDER BY 1, 2").fetchall()
        out.append(
            (table, [tuple(str(v) for v in row) for row in rows if table != "schema_migrations"], len(rows))
        )
    return out


@pytest.mark.parametrize(
    ("table", "assignment", "match"),
    [
        ("log", 'body = \'{"kind": "request", "parts": [tru\'', "not valid"),
        ("log", 'body = \'{"kind": "nonsense"}\'', "not valid"),
        ("sessions", "usage = '\"a string\"'", "usage"),
        ("sessions", "metadata = '[1, 2]'", "JSON objects"),
        ("ledger", "status = 'exploded'", "unknown status"),
    ],
)
def test_a_corrupt_row_raises_naming_store_and_session_and_is_left_alone(
    pg_store: PostgresStore, pg_admin: Admin, table: str, assignment: str, match: str
) -> None:
    session = _stored(pg_store)
    where = "session_id = %s" + (" AND seq = 0" if table == "log" else "")
    pg_admin.execute(
        f"UPDATE {pg_store.schema}.{table} SET {assignment} WHERE {where}", (session.session_id,)
    )
    before = _dump(pg_admin, pg_store.schema)
    with pytest.raises(SessionStoreError, match=match) as caught:
        Session.open(pg_store, session.session_id)
    assert caught.value.store == pg_store.url
    assert caught.value.session_id == session.session_id
    assert pg_store.url in str(caught.value)
    assert session.session_id in str(caught.value)
    assert _dump(pg_admin, pg_store.schema) == before


def test_a_corrupt_logged_message_fails_the_transcript(pg_store: PostgresStore, pg_admin: Admin) -> None:
    session = _stored(pg_store)
    cleared = CanonicalMessage.request(
        ToolReturnPart(tool_call_id="c1", tool_name="grep", content="[cleared]")
    )
    session.messages = [cleared, session.messages[1]]
    session.note_overlays([cleared])
    session.checkpoint()
    pg_admin.execute(f"UPDATE {pg_store.schema}.log SET body = 'garbage' WHERE seq = 0")
    reopened = Session.open(pg_store, session.session_id)  # the view no longer shows message 0
    with pytest.raises(SessionStoreError, match="logged message") as caught:
        reopened.transcript()
    assert (caught.value.store, caught.value.session_id) == (pg_store.url, session.session_id)


@pytest.mark.parametrize(
    ("statement", "match"),
    [
        ("DELETE FROM {s}.view WHERE pos = 0", "gap at position 0"),
        ("DELETE FROM {s}.log WHERE seq = 1", "log message 1, which is missing"),
    ],
)
def test_a_broken_view_raises_naming_the_session(
    pg_store: PostgresStore, pg_admin: Admin, statement: str, match: str
) -> None:
    session = _stored(pg_store)
    pg_admin.execute(statement.format(s=pg_store.schema))
    with pytest.raises(SessionStoreError, match=match) as caught:
        pg_store.load(session.session_id)
    assert caught.value.session_id == session.session_id


def test_a_newer_schema_version_is_refused_without_writing(
    pg_dsn: str, pg_schema: str, pg_admin: Admin
) -> None:
    with PostgresStore(pg_dsn, schema=pg_schema) as store:
        _stored(store)
    newer = SCHEMA_VERSION + 1
    pg_admin.execute(
        f"INSERT INTO {pg_schema}.schema_migrations (version, description) VALUES (%s, 'from the future')",
        (newer,),
    )
    before = _dump(pg_admin, pg_schema)
    with pytest.raises(SessionStoreError, match=f"version {newer}, newer than") as caught:
        PostgresStore(schema_url(pg_dsn, pg_schema))
    assert caught.value.store == schema_url(pg_dsn, pg_schema)
    assert f"schema={pg_schema}" in str(caught.value)
    assert _dump(pg_admin, pg_schema) == before


def test_a_schema_that_holds_something_else_is_refused_and_untouched(
    pg_dsn: str, pg_schema: str, pg_admin: Admin
) -> None:
    pg_admin.execute(f"CREATE SCHEMA {pg_schema}")
    pg_admin.execute(f"CREATE TABLE {pg_schema}.customers (id int)")
    with pytest.raises(SessionStoreError, match="not a harness session store"):
        PostgresStore(pg_dsn, schema=pg_schema)
    tables = pg_admin.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (pg_schema,)
    ).fetchall()
    assert tables == [("customers",)]


def test_an_empty_existing_schema_is_adopted(pg_dsn: str, pg_schema: str, pg_admin: Admin) -> None:
    pg_admin.execute(f"CREATE SCHEMA {pg_schema}")  # what a DBA who grants no CREATE on the database does
    with PostgresStore(pg_dsn, schema=pg_schema) as store:
        assert _stored(store).revision == 1
