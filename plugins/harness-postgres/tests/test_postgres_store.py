"""PostgresStore against the real server: round trip, fork, prune, search, delete, reconnecting."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from harness_postgres import INDEXED_TEXT_LIMIT, PostgresStore
from harness_postgres.testing import Admin

from harness import (
    CanonicalMessage,
    Session,
    SessionConflictError,
    SessionNotFoundError,
    SessionStoreError,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from harness.errors import SearchQueryError
from harness.session import LedgerEntry

_T = datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=UTC)


def _step(i: int) -> list[CanonicalMessage]:
    return [
        CanonicalMessage.response(
            ToolCallPart(tool_call_id=f"c{i}", tool_name="read_file", args={"path": f"file{i}.py"})
        ),
        CanonicalMessage.request(
            ToolReturnPart(
                tool_call_id=f"c{i}", tool_name="read_file", content=f"contents of file {i}: pelican{i}"
            )
        ),
    ]


def _count(admin: Admin, schema: str, table: str, session_id: str) -> int:
    row = admin.execute(
        f"SELECT count(*) FROM {schema}.{table} WHERE session_id = %s", (session_id,)
    ).fetchone()
    assert row is not None
    return int(str(row[0]))


def test_a_session_round_trips_through_a_second_connection(pg_dsn: str, pg_schema: str) -> None:
    store = PostgresStore(pg_dsn, schema=pg_schema)
    session = Session.create(
        store=store, messages=[CanonicalMessage.user("read the files")], current_model="m"
    )
    assert session.checkpoint() == 1
    for i in range(3):
        session.messages = [*session.messages, *_step(i)]
        session.thoughts.append(f"thought {i}")
        session.record_tool(LedgerEntry(f"c{i}", "read_file", "completed", _T, _T + timedelta(seconds=1)))
        assert session.checkpoint() == i + 2
    cleared = session.messages[2].replace(
        parts=(ToolReturnPart(tool_call_id="c0", tool_name="read_file", content="[cleared]"),)
    )
    session.messages = [*session.messages[:2], cleared, *session.messages[3:]]
    session.note_overlays([cleared], [{"strategy": "clear_tool_results"}])
    assert session.checkpoint() == 5
    store.close()

    other = PostgresStore(pg_dsn, schema=pg_schema)
    try:
        reopened = Session.open(other, session.session_id)
        assert reopened.messages == session.messages
        assert reopened.revision == 5
        assert reopened.thoughts == ["thought 0", "thought 1", "thought 2"]
        assert list(reopened.ledger) == ["c0", "c1", "c2"]
        assert reopened.current_model == "m"
        transcript = reopened.transcript()
        assert len(transcript) == 7
        assert transcript[2].parts[0] == ToolReturnPart(
            tool_call_id="c0", tool_name="read_file", content="contents of file 0: pelican0"
        )
        assert reopened.messages[2].parts[0] == ToolReturnPart(
            tool_call_id="c0", tool_name="read_file", content="[cleared]"
        )
        (edit,) = other.edits(session.session_id)
        assert (edit.revision, edit.view_start, edit.replaced) == (5, 2, (2,))
        assert edit.events == ({"strategy": "clear_tool_results"},)
        assert other.head(session.session_id) == reopened.head_record()
        assert [e.seq for e in other.read_log(session.session_id, 2, 5)] == [2, 3, 4]
        reopened.messages = [*reopened.messages, CanonicalMessage.user("and then?")]
        assert reopened.checkpoint() == 6
    finally:
        other.close()


def test_rows_live_in_the_chosen_schema_and_versions_are_recorded(
    pg_store: PostgresStore, pg_admin: Admin, pg_schema: str, pg_dsn: str
) -> None:
    tables = {
        str(r[0])
        for r in pg_admin.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (pg_schema,)
        ).fetchall()
    }
    assert tables == {"schema_migrations", "sessions", "log", "view", "edits", "thoughts", "ledger", "leases"}
    versions = pg_admin.execute(f"SELECT version, description FROM {pg_schema}.schema_migrations").fetchall()
    assert [v[0] for v in versions] == [1, 2]
    PostgresStore(pg_dsn, schema=pg_schema).close()  # a current schema is opened without a write
    assert pg_admin.execute(f"SELECT count(*) FROM {pg_schema}.schema_migrations").fetchone() == (2,)
    indexes = {
        str(r[0])
        for r in pg_admin.execute("SELECT indexdef FROM pg_indexes WHERE schemaname = %s", (pg_schema,))
    }
    assert any("USING gin (tsv)" in d for d in indexes)


def test_fork_copies_rows_on_the_server_and_both_go_their_own_way(
    pg_store: PostgresStore, pg_admin: Admin
) -> None:
    parent = Session.create(
        store=pg_store, messages=[CanonicalMessage.user("start"), *_step(1)], thoughts=["t"]
    )
    parent.record_tool(LedgerEntry("c1", "read_file", "completed", _T, _T))
    parent.checkpoint()
    child_head = pg_store.fork(parent.session_id, "child")
    assert (child_head.forked_from, child_head.forked_at, child_head.revision) == (parent.session_id, 3, 1)
    assert pg_store.search("pelican1", session_id="child")[0].seq == 2  # the tsvectors were copied too
    child = Session.open(pg_store, "child")
    assert (child.messages, child.thoughts, child.ledger) == (parent.messages, parent.thoughts, parent.ledger)
    child.messages = [*child.messages, CanonicalMessage.user("child only")]
    child.checkpoint()
    assert _count(pg_admin, pg_store.schema, "log", "child") == 4
    assert _count(pg_admin, pg_store.schema, "log", parent.session_id) == 3
    with pytest.raises(SessionConflictError):
        pg_store.fork(parent.session_id, "child")
    with pytest.raises(SessionNotFoundError):
        pg_store.fork("missing", "other")


def test_delete_cascades_to_every_table(pg_store: PostgresStore, pg_admin: Admin) -> None:
    session = Session.create(store=pg_store, messages=[CanonicalMessage.user("x"), *_step(0)], thoughts=["t"])
    session.record_tool(LedgerEntry("c0", "read_file", "completed", _T, _T))
    cleared = session.messages[2].replace(
        parts=(ToolReturnPart(tool_call_id="c0", tool_name="read_file", content="[cleared]"),)
    )
    session.checkpoint()
    session.messages = [*session.messages[:2], cleared]
    session.note_overlays([cleared])
    session.checkpoint()
    assert pg_store.delete(session.session_id) is True
    for table in ("sessions", "log", "view", "edits", "thoughts", "ledger"):
        assert _count(pg_admin, pg_store.schema, table, session.session_id) == 0, table
    assert pg_store.delete(session.session_id) is False


def _aged(store: PostgresStore, admin: Admin, names: list[str]) -> list[Session]:
    """Sessions modified one hour apart, oldest first."""
    sessions: list[Session] = []
    for age, name in enumerate(reversed(names)):
        session = Session.create(
            store=store, session_id=name, messages=[CanonicalMessage.user(name), *_step(age)]
        )
        session.checkpoint()
        admin.execute(
            f"UPDATE {store.schema}.sessions SET last_modified = %s WHERE session_id = %s",
            (_T - timedelta(hours=age), name),
        )
        sessions.append(session)
    return sessions[::-1]


def test_prune_keeps_the_newest_and_the_recent(pg_store: PostgresStore, pg_admin: Admin) -> None:
    _aged(pg_store, pg_admin, ["old", "middle", "new"])
    dry = pg_store.prune(keep_last=1, dry_run=True)
    assert (dry.deleted, dry.dry_run) == (("middle", "old"), True)
    assert len(pg_store.list_sessions()) == 3
    assert pg_store.prune(newer_than=_T - timedelta(minutes=90)).deleted == ("old",)
    assert [h.session_id for h in pg_store.list_sessions()] == ["new", "middle"]
    assert pg_store.prune(keep_last=1).deleted == ("middle",)
    assert pg_store.prune() == pg_store.prune(keep_last=5)


def test_prune_drop_log_keeps_what_the_view_shows(pg_store: PostgresStore, pg_admin: Admin) -> None:
    old, _ = _aged(pg_store, pg_admin, ["old", "new"])
    summary = CanonicalMessage.user("summary of the start")
    old.messages = [summary, old.messages[-1]]
    old.note_overlays([summary])
    old.checkpoint()
    pg_admin.execute(
        f"UPDATE {pg_store.schema}.sessions SET last_modified = %s WHERE session_id = 'old'",
        (_T - timedelta(days=1),),
    )
    dry = pg_store.prune(keep_last=1, drop_log=True, dry_run=True)
    assert (dry.trimmed, dry.log_messages_dropped, dry.dry_run) == (("old",), 2, True)
    assert [e.seq for e in pg_store.read_log("old")] == [0, 1, 2]
    result = pg_store.prune(keep_last=1, drop_log=True)
    assert (result.deleted, result.trimmed, result.log_messages_dropped) == ((), ("old",), 2)
    assert [e.seq for e in pg_store.read_log("old")] == [2]
    assert pg_store.head("old").log_pruned is True
    reopened = Session.open(pg_store, "old")
    assert reopened.messages == old.messages
    reopened.messages = [*reopened.messages, CanonicalMessage.user("more")]
    reopened.checkpoint()
    assert pg_store.head("old").log_pruned is True  # a later write keeps the mark
    assert [e.seq for e in pg_store.read_log("new")] == [0, 1, 2]


def test_search_ranks_and_follows_the_core_grammar(pg_store: PostgresStore) -> None:
    first = Session.create(
        store=pg_store,
        messages=[
            CanonicalMessage.user("the albatross flies over the albatross colony"),
            CanonicalMessage.response(TextPart("an albatross, once")),
            CanonicalMessage.response(TextPart("a grey heron stands")),
        ],
    )
    second = Session.create(store=pg_store, messages=[CanonicalMessage.user("albatross and heron together")])
    first.checkpoint()
    second.checkpoint()
    hits = pg_store.search("albatross")
    assert next((h.session_id, h.seq) for h in hits) == (first.session_id, 0)  # two occurrences rank first
    assert {(h.session_id, h.seq) for h in hits} == {
        (first.session_id, 0),
        (first.session_id, 1),
        (second.session_id, 0),
    }
    assert hits[0].score >= hits[-1].score
    assert "albatross" in hits[0].snippet
    assert [h.seq for h in pg_store.search("albatross heron")] == [0]
    assert [
        (h.session_id, h.seq) for h in pg_store.search("albatross -heron", session_id=first.session_id)
    ] == [
        (first.session_id, 0),
        (first.session_id, 1),
    ]
    assert [h.seq for h in pg_store.search('"grey heron"')] == [2]
    assert [h.seq for h in pg_store.search('"heron grey"')] == []
    assert {h.seq for h in pg_store.search("albat*", session_id=first.session_id)} == {0, 1}
    assert [h.seq for h in pg_store.search("HER* grey")] == [2]
    assert pg_store.search("...") == pg_store.search("") == pg_store.search("  ") == []
    assert pg_store.search("it's & | ! ( :*") == []  # tsquery syntax is never an error
    assert len(pg_store.search("albatross", limit=1)) == 1
    with pytest.raises(SearchQueryError, match="got 0"):
        pg_store.search("albatross", limit=0)


def test_odd_and_huge_texts_are_stored_whole_and_indexed(pg_store: PostgresStore) -> None:
    huge = "start " + "word " * (INDEXED_TEXT_LIMIT // 2) + " needle"
    odd = "nul \x00 lone \udcff emoji \U0001f99c capybara"
    session = Session.create(
        store=pg_store, messages=[CanonicalMessage.user(huge), CanonicalMessage.user(odd)]
    )
    session.checkpoint()
    assert Session.open(pg_store, session.session_id).transcript() == session.messages
    assert [h.seq for h in pg_store.search("start")] == [0]
    assert pg_store.search("needle") == []  # past the indexed prefix
    assert [h.seq for h in pg_store.search("capybara")] == [1]


def test_nul_surrogates_and_the_escape_character_round_trip_in_raw_text(
    pg_store: PostgresStore, pg_admin: Admin
) -> None:
    odd = "nul \x00 lone \udcff private \ue000 and \ue0000 escape-like"
    session = Session.create(
        store=pg_store,
        messages=[CanonicalMessage.user("x")],
        working_directory=f"/srv/{odd}",
        original_query=odd,
        thoughts=[odd, "plain"],
        metadata={odd: [odd, float("1.5")]},
    )
    session.record_tool(LedgerEntry("c1", f"tool {odd}", "failed", _T, _T, error=odd))
    session.checkpoint()
    reopened = Session.open(pg_store, session.session_id)
    assert (reopened.working_directory, reopened.original_query) == (f"/srv/{odd}", odd)
    assert (reopened.thoughts, reopened.metadata) == ([odd, "plain"], {odd: [odd, 1.5]})
    assert reopened.ledger == session.ledger
    stored = pg_admin.execute(f"SELECT text FROM {pg_store.schema}.thoughts ORDER BY idx").fetchall()
    assert stored[1] == ("plain",)  # ordinary text is stored as it is


def test_a_connection_closed_by_the_server_is_reopened(pg_dsn: str, pg_schema: str, pg_admin: Admin) -> None:
    name = f"harness-test-{uuid.uuid4().hex[:8]}"
    store = PostgresStore(pg_dsn, schema=pg_schema, application_name=name)
    try:
        session = Session.create(store=store, messages=[CanonicalMessage.user("before")])
        session.checkpoint()

        def kill() -> int:
            rows = pg_admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", (name,)
            ).fetchall()
            return len(rows)

        assert kill() == 1
        assert store.head(session.session_id).revision == 1
        assert kill() == 1
        session.messages = [*session.messages, CanonicalMessage.user("after")]
        assert session.checkpoint() == 2
        assert kill() == 1
        assert len(store.load(session.session_id).view) == 2
    finally:
        store.close()


def test_an_unreachable_server_is_a_store_error_naming_it() -> None:
    with pytest.raises(SessionStoreError, match="cannot connect") as caught:
        PostgresStore("postgresql://nobody:hunter2@127.0.0.1:1/nothing", connect_timeout=2)
    assert caught.value.store == "postgresql://nobody:***@127.0.0.1:1/nothing"
    assert "hunter2" not in str(caught.value)


def test_a_closed_store_refuses_calls(pg_dsn: str, pg_schema: str) -> None:
    store = PostgresStore(pg_dsn, schema=pg_schema)
    store.close()
    with pytest.raises(SessionStoreError, match="closed"):
        store.list_sessions()
    store.close()  # twice is fine


def test_a_dropped_schema_is_reported_not_recreated(pg_dsn: str, pg_schema: str, pg_admin: Admin) -> None:
    with PostgresStore(pg_dsn, schema=pg_schema) as store:
        pg_admin.execute(f"DROP SCHEMA {pg_schema} CASCADE")
        with pytest.raises(SessionStoreError, match="tables are missing"):
            store.head("anything")
    assert pg_admin.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (pg_schema,)).fetchone() is None


def test_durability_normal_turns_synchronous_commit_off_for_the_store_only(
    pg_dsn: str, pg_schema: str
) -> None:
    fast = PostgresStore(pg_dsn, schema=pg_schema, durability="normal")
    full = PostgresStore(pg_dsn, schema=pg_schema)
    try:
        assert fast._link.connection().execute(b"SHOW synchronous_commit").fetchone() == ("off",)
        assert full._link.connection().execute(b"SHOW synchronous_commit").fetchone() == ("on",)
        session = Session.create(store=fast, messages=[CanonicalMessage.user("quick")])
        session.checkpoint()
        assert Session.open(full, session.session_id).messages == session.messages  # visible at once
    finally:
        fast.close()
        full.close()
    with pytest.raises(ValueError, match="durability"):
        PostgresStore(pg_dsn, schema=pg_schema, durability="sometimes")  # type: ignore[arg-type]
