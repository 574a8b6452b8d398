"""copy_session / copy_all: lossless copies between SQLite, file and PostgreSQL stores."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from harness.core.messages import CanonicalMessage, TextPart, ToolReturnPart, UserPromptPart
from harness.errors import SessionConflictError, SessionNotFoundError, SessionStoreError
from harness.session import (
    LedgerEntry,
    Session,
    SessionStore,
    copy_all,
    copy_session,
    find_session,
    list_sessions,
)
from harness.stores.jsonfile import JsonFileStore
from harness.stores.sqlite import SqliteStore
from harness.testing import assert_store_consistent
from harness.testing.store_conformance import sample_messages

_STAMP = datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=UTC)


def everything(store: SessionStore, session_id: str) -> tuple[Any, ...]:
    """What a store holds of a session, in full."""
    return (
        store.head(session_id),
        store.load(session_id),
        store.read_log(session_id),
        store.edits(session_id),
    )


def all_sessions(store: SessionStore) -> dict[str, tuple[Any, ...]]:
    return {h.session_id: everything(store, h.session_id) for h in store.list_sessions()}


def populate(store: SessionStore, *, surrogates: bool = True) -> list[str]:
    """Sessions with every feature: overlays with and without sources, edits, ledger, a fork, a pruned log.

    With ``surrogates``, text fields hold lone surrogates (a non-UTF-8 folder name).
    """
    old = Session.create(store=store, project_id="0123456789abcdef", messages=sample_messages("old"))
    old.checkpoint()
    shorter = CanonicalMessage.request(UserPromptPart("gist"))
    old.messages = [shorter, *old.messages[6:]]
    old.note_overlays([shorter])
    old.checkpoint()
    main = Session.create(
        store=store,
        project_id="feedfacecafebeef",
        working_directory="/work/caf\udce9" if surrogates else "/work/cafe",
        messages=sample_messages("main"),
        thoughts=["a thought", "one more \udcff" if surrogates else "one more"],
        original_query="find the zebra",
        metadata={"plugin": {"k": [1, 2.5, None, True]}},
        current_model="model-x",
        total_tokens=321,
    )
    main.record_tool(LedgerEntry("call_a", "grep", "completed", _STAMP, _STAMP, result='{"r":1}'))
    main.record_tool(LedgerEntry("call_b", "read", "unknown_after_crash", _STAMP, error="process stopped"))
    main.checkpoint()
    cleared = main.messages[2].replace(
        parts=(ToolReturnPart(tool_call_id="call_a", tool_name="grep", content="[cleared]"),)
    )
    main.messages[2] = cleared
    main.note_overlays([cleared], [{"strategy": "clear_tool_results", "tokens_saved": 40}])
    main.checkpoint()
    summary = CanonicalMessage.request(UserPromptPart("summary of the start"))
    main.messages = [summary, *main.messages[4:]]
    main.note_overlays([summary], [{"strategy": "summarizing", "reason": "over budget"}])
    main.checkpoint()
    main.messages.append(CanonicalMessage.request(UserPromptPart("and then?")))
    main.checkpoint()
    fork = main.fork("main-fork")
    fork.messages.append(CanonicalMessage.response(TextPart("in the fork")))
    fork.checkpoint()
    store.prune(keep_last=2, drop_log=True)  # `old` is the oldest: its log keeps only what the view shows
    assert store.head(old.session_id).log_pruned
    return [main.session_id, fork.session_id, old.session_id]


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SqliteStore]:
    with SqliteStore(tmp_path / "source.db") as store:
        yield store


def test_sqlite_to_file_to_sqlite_is_lossless(sqlite_store: SqliteStore, tmp_path: Path) -> None:
    ids = populate(sqlite_store)
    original = all_sessions(sqlite_store)
    assert set(original) == set(ids)
    with JsonFileStore(tmp_path / "export") as folder, SqliteStore(tmp_path / "back.db") as back:
        assert {h.session_id for h in copy_all(sqlite_store, folder)} == set(ids)
        assert all_sessions(folder) == original
        assert {h.session_id for h in copy_all(folder, back)} == set(ids)
        assert all_sessions(back) == original
        for sid in ids:
            assert_store_consistent(back, sid, history=False)
    with JsonFileStore(tmp_path / "export") as reopened:  # what was written, not a cache
        assert all_sessions(reopened) == original


def test_the_export_is_a_folder_of_todays_session_files(sqlite_store: SqliteStore, tmp_path: Path) -> None:
    ids = populate(sqlite_store)
    with JsonFileStore(tmp_path / "export") as folder:
        copy_all(sqlite_store, folder)
    listing = list_sessions(tmp_path / "export")
    assert listing.problems == ()
    assert {info.session_id for info in listing.sessions} == set(ids)
    for sid in ids:
        path = find_session(sid, tmp_path / "export")
        assert path is not None
        loaded = Session.load(path)
        assert loaded.messages == Session.open(sqlite_store, sid).messages
        assert loaded.thoughts == Session.open(sqlite_store, sid).thoughts


def test_an_imported_session_keeps_its_revision_and_goes_on(
    sqlite_store: SqliteStore, tmp_path: Path
) -> None:
    ids = populate(sqlite_store)
    pruned = ids[2]
    with JsonFileStore(tmp_path / "export") as folder:
        head = copy_session(sqlite_store, folder, pruned)
        assert head == sqlite_store.head(pruned)
        session = Session.open(folder, pruned)
        assert session.revision == head.revision
        session.messages.append(CanonicalMessage.request(UserPromptPart("after the import")))
        assert session.checkpoint() == head.revision + 1
        seqs = [e.seq for e in folder.read_log(pruned)]
        assert seqs == [*(e.seq for e in sqlite_store.read_log(pruned)), head.log_length]


def test_copy_under_a_new_id_changes_only_the_id(sqlite_store: SqliteStore, tmp_path: Path) -> None:
    sid = populate(sqlite_store)[0]
    before = everything(sqlite_store, sid)
    with SqliteStore(tmp_path / "target.db") as target:
        head = copy_session(sqlite_store, target, sid, new_session_id="renamed")
        assert head.session_id == "renamed"
        copied = everything(target, "renamed")
    assert copied[0] == before[0].__class__(**{**_fields(before[0]), "session_id": "renamed"})
    assert copied[1].view == before[1].view
    assert copied[2:] == before[2:]
    assert everything(sqlite_store, sid) == before


def _fields(head: Any) -> dict[str, Any]:
    import attrs

    return attrs.asdict(head, recurse=False)


def test_a_copy_never_overwrites(sqlite_store: SqliteStore, tmp_path: Path) -> None:
    ids = populate(sqlite_store)
    with JsonFileStore(tmp_path / "export") as folder:
        copy_session(sqlite_store, folder, ids[0])
        Session.open(folder, ids[0]).fork("only-in-target")
        before = all_sessions(folder)
        with pytest.raises(SessionConflictError) as caught:
            copy_session(sqlite_store, folder, ids[0])
        assert caught.value.expected == 0
        assert all_sessions(folder) == before
        with pytest.raises(SessionConflictError):
            copy_all(sqlite_store, folder)
        assert all_sessions(folder) == before  # refused before copying anything
        copied = copy_all(sqlite_store, folder, skip_existing=True)
        assert {h.session_id for h in copied} == set(ids) - {ids[0]}
        assert all_sessions(folder)[ids[0]] == before[ids[0]]
        assert "only-in-target" in all_sessions(folder)


def test_copying_a_missing_or_broken_session_writes_nothing(
    sqlite_store: SqliteStore, tmp_path: Path
) -> None:
    sid = populate(sqlite_store)[0]
    with SqliteStore(tmp_path / "target.db") as target:
        with pytest.raises(SessionNotFoundError):
            copy_session(sqlite_store, target, "nope")
        referenced = next(e.seq for e, _ in sqlite_store.load(sid).view if e.seq is not None)
        with sqlite3.connect(sqlite_store.path or "") as raw:
            raw.execute("DELETE FROM log WHERE session_id = ? AND seq = ?", (sid, referenced))
        with pytest.raises(SessionStoreError) as caught:
            copy_session(sqlite_store, target, sid)
        assert caught.value.session_id == sid
        assert target.list_sessions() == []


def test_postgres_round_trip_is_lossless(sqlite_store: SqliteStore, tmp_path: Path) -> None:
    testing = pytest.importorskip("harness_postgres.testing")
    from harness import open_store

    dsn = testing.require_server()
    schema = testing.unique_schema("harness_transfer")
    ids = populate(sqlite_store, surrogates=False)  # the kit's own test covers lone surrogates
    original = all_sessions(sqlite_store)
    try:
        postgres = open_store(testing.schema_url(dsn, schema))
        try:
            copy_all(sqlite_store, postgres)
            assert all_sessions(postgres) == original
            with JsonFileStore(tmp_path / "export") as folder, SqliteStore(tmp_path / "back.db") as back:
                copy_all(postgres, folder)
                copy_all(folder, back)
                assert all_sessions(folder) == original
                assert all_sessions(back) == original
            assert {h.session_id for h in postgres.list_sessions()} == set(ids)
        finally:
            postgres.close()
    finally:
        testing.drop_schema(dsn, schema)
