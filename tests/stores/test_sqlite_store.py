"""SqliteStore on its own: WAL, the schema version, refusing corrupt, foreign and newer files, URLs."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
from pathlib import Path

import pytest

from harness.core.messages import CanonicalMessage, TextPart
from harness.errors import SessionConflictError, SessionStoreError, StoreResolutionError
from harness.session import LedgerEntry, Session
from harness.stores import open_store, store_path, store_url
from harness.stores.jsonfile import JsonFileStore
from harness.stores.sqlite import SCHEMA_VERSION, SqliteStore
from harness.testing.store_kit import STAMP, new_session, sample_messages


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "data" / "sessions.db"


def make_one(path: Path) -> str:
    """A store at ``path`` holding one session (closed afterwards, so the WAL is folded in)."""
    with SqliteStore(path) as store:
        session = new_session(store, sample_messages())
        session.record_tool(LedgerEntry("call_a", "grep", "completed", STAMP, STAMP, result="{}"))
        session.checkpoint()
        return session.session_id


def raw(path: Path) -> contextlib.closing[sqlite3.Connection]:
    """A plain autocommit connection, to tamper with the file behind the store's back."""
    return contextlib.closing(sqlite3.connect(path, isolation_level=None))


def read_everything(store: SqliteStore, session_id: str) -> None:
    store.load(session_id)
    store.read_log(session_id)
    store.edits(session_id)


def open_and_read_everything(path: Path) -> None:
    """Open and read every session (a cut may pass the quick check at open: reading must fail typed)."""
    with SqliteStore(path) as store:
        for head in store.list_sessions():
            read_everything(store, head.session_id)


def files_of(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.parent.glob(path.name + "*"))}


def test_wal_mode_and_schema_version(db: Path) -> None:
    make_one(db)
    with raw(db) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 3
        tables = {r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"sessions", "log", "view", "edits", "thoughts", "ledger", "log_text"} <= tables


def test_durability_full_fsyncs_every_commit(db: Path) -> None:
    with SqliteStore(db, durability="full") as store:
        assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # pyright: ignore[reportPrivateUsage]
    with SqliteStore(db) as store:
        assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 1  # pyright: ignore[reportPrivateUsage]


def test_new_files_are_private(db: Path) -> None:
    make_one(db)
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    assert stat.S_IMODE(db.parent.stat().st_mode) == 0o700


def test_a_newer_schema_is_refused_without_writing(db: Path) -> None:
    make_one(db)
    with raw(db) as connection:
        connection.execute("PRAGMA user_version = 7")
    before = files_of(db)
    with pytest.raises(SessionStoreError) as caught:
        SqliteStore(db)
    assert "schema version 7" in str(caught.value)
    assert "newer" in caught.value.reason
    assert caught.value.store == store_url(db)
    assert files_of(db) == before


@pytest.mark.parametrize(
    "content", [b"this is not a database" * 50, b"\x00" * 4096, b"SQLite format 3\x00garbage"]
)
def test_garbage_is_refused_and_never_overwritten(db: Path, content: bytes) -> None:
    db.parent.mkdir()
    db.write_bytes(content)
    with pytest.raises(SessionStoreError) as caught:
        SqliteStore(db)
    assert caught.value.store == store_url(db)
    assert str(db) in str(caught.value)
    assert db.read_bytes() == content


def test_a_truncated_database_is_refused_and_never_overwritten(db: Path) -> None:
    with SqliteStore(db) as store:
        for i in range(40):  # enough pages that the cut loses some
            new_session(store, sample_messages(str(i)) * 3).checkpoint()
    data = db.read_bytes()
    assert len(data) > 8 * 4096
    db.write_bytes(data[: len(data) // 2])
    before = files_of(db)
    with pytest.raises(SessionStoreError) as caught:
        open_and_read_everything(db)
    assert caught.value.store == store_url(db)
    assert files_of(db)[db.name] == before[db.name]


def test_a_foreign_database_is_refused_unchanged(db: Path) -> None:
    db.parent.mkdir()
    with raw(db) as connection:
        connection.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
        connection.execute("INSERT INTO invoices (total) VALUES (12.5)")
    before = files_of(db)
    with pytest.raises(SessionStoreError) as caught:
        SqliteStore(db)
    assert "not a harness session store" in caught.value.reason
    assert files_of(db) == before
    with raw(db) as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == 0
        assert connection.execute("SELECT total FROM invoices").fetchall() == [(12.5,)]


@pytest.mark.parametrize(
    ("table", "column", "value"),
    [
        ("sessions", "usage", "{not json"),
        ("session_metadata", "metadata", "[1, 2]"),
        ("sessions", "created_at", "yesterday"),
        ("sessions", "revision", "'three'"),
        ("ledger", "status", "exploded"),
        ("edits", "replaced", "{oops"),
    ],
)
def test_a_bad_row_names_the_store_and_the_session(db: Path, table: str, column: str, value: str) -> None:
    sid = make_one(db)
    with SqliteStore(db) as store:
        session = Session.open(store, sid)
        session.messages[2] = session.messages[2].replace(parts=(TextPart("x"),), kind="response")
        session.note_overlays([session.messages[2]])
        session.checkpoint()  # an edit row exists now
    literal = value if value.startswith("'") else "'" + value.replace("'", "''") + "'"
    with raw(db) as connection:
        connection.execute(f"UPDATE {table} SET {column} = {literal} WHERE session_id = ?", (sid,))
    before = files_of(db)
    with SqliteStore(db) as store:
        with pytest.raises(SessionStoreError) as caught:
            read_everything(store, sid)
        assert (caught.value.store, caught.value.session_id) == (store.url, sid)
        assert sid in str(caught.value)
    assert files_of(db)[db.name] == before[db.name]


def test_a_logged_message_with_bad_json_fails_to_open_typed(db: Path) -> None:
    sid = make_one(db)
    with raw(db) as connection:
        connection.execute(
            'UPDATE log SET body = \'{"kind": "request", "parts": [\' WHERE session_id = ?', (sid,)
        )
    with SqliteStore(db) as store:
        with pytest.raises(SessionStoreError) as caught:
            Session.open(store, sid)
        assert (caught.value.store, caught.value.session_id) == (store.url, sid)
        with pytest.raises(SessionStoreError):
            Session.open(store, sid).transcript()


def test_an_empty_file_is_migrated_from_version_0(db: Path) -> None:
    db.parent.mkdir()
    db.touch(mode=0o600)  # a v0 file: what the first open of a new path creates
    with SqliteStore(db) as store:
        session = new_session(store, sample_messages())
        assert session.checkpoint() == 1
    with raw(db) as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_an_empty_sqlite_database_is_migrated(db: Path) -> None:
    db.parent.mkdir()
    with raw(db) as connection:
        connection.execute("PRAGMA user_version = 0")
        connection.execute("VACUUM")  # a real, empty SQLite file (a header, no tables)
    assert db.stat().st_size > 0
    with SqliteStore(db) as store:
        new_session(store, sample_messages()).checkpoint()
        assert len(store.list_sessions()) == 1


def test_two_handles_migrating_at_once_agree(db: Path) -> None:
    first = SqliteStore(db)
    second = SqliteStore(db)  # the file is at version 1 already: nothing to do
    try:
        new_session(first, sample_messages()).checkpoint()
        assert len(second.list_sessions()) == 1
    finally:
        first.close()
        second.close()


def test_a_busy_database_fails_typed_and_writes_nothing(db: Path) -> None:
    sid = make_one(db)
    blocker = sqlite3.connect(db, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        with SqliteStore(db, busy_timeout=0.05) as store:
            session = Session.open(store, sid)
            session.messages.append(CanonicalMessage.response(TextPart("more")))
            with pytest.raises(SessionStoreError) as caught:
                session.checkpoint()
            assert not isinstance(caught.value, SessionConflictError)
            assert "cannot start a write" in caught.value.reason
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    with SqliteStore(db) as store:
        assert store.head(sid).revision == 1


def test_the_search_index_stays_intact_through_deletes_and_prunes(db: Path) -> None:
    with SqliteStore(db) as store:
        sessions = [new_session(store, sample_messages(str(i))) for i in range(4)]
        for session in sessions:
            session.checkpoint()
        store.delete(sessions[0].session_id)
        store.fork(sessions[1].session_id, "copy")
        store.prune(keep_last=2, drop_log=True)
        store._db.execute("INSERT INTO log_text (log_text) VALUES ('integrity-check')")  # pyright: ignore[reportPrivateUsage]
        assert {h.session_id for h in store.search("zebra")} == {s.session_id for s in sessions[1:]} | {
            "copy"
        }


# --------------------------------------------------------------------- URLs


def test_sqlite_url_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert store_path("sqlite:///relative.db") == Path("relative.db")
    assert store_path("sqlite:////abs/dir/s.db") == Path("/abs/dir/s.db")
    assert store_path("sqlite://localhost//abs/s.db") == Path("/abs/s.db")
    assert store_path("sqlite:////tmp/with%20space.db") == Path("/tmp/with space.db")
    with pytest.raises(StoreResolutionError, match="host"):
        store_path("sqlite://db.example.com/s.db")
    with pytest.raises(StoreResolutionError, match="no path"):
        store_path("sqlite://")
    relative = open_store("sqlite:///relative.db")
    try:
        assert isinstance(relative, SqliteStore)
        assert relative.url == store_url(tmp_path / "relative.db")
        assert (tmp_path / "relative.db").exists()
        again = open_store(relative.url)  # a store's url opens the same file
        new_session(relative, sample_messages()).checkpoint()
        assert len(again.list_sessions()) == 1
        again.close()
    finally:
        relative.close()
    spaced = open_store(store_url(tmp_path / "a b" / "s.db"))
    assert (tmp_path / "a b" / "s.db").exists()
    spaced.close()


def test_memory_and_bare_paths(tmp_path: Path) -> None:
    memory = open_store("sqlite:///:memory:")
    assert memory.url == "sqlite:///:memory:"
    new_session(memory, sample_messages()).checkpoint()
    assert len(memory.list_sessions()) == 1
    assert open_store("sqlite:///:memory:").list_sessions() == []  # private to each handle
    memory.close()
    bare = open_store(str(tmp_path / "bare.db"))
    assert isinstance(bare, SqliteStore)
    bare.close()
    folder = open_store(str(tmp_path))  # an existing folder: a file store
    assert isinstance(folder, JsonFileStore)
    folder.close()


def test_opening_does_not_touch_an_unrelated_umask(db: Path) -> None:
    old = os.umask(0)
    try:
        make_one(db)
    finally:
        os.umask(old)
    assert stat.S_IMODE(db.stat().st_mode) == 0o600


@pytest.mark.parametrize("scheme", ["sqlite", "file"])
def test_a_write_after_prune_drop_log_keeps_the_log_pruned_flag(tmp_path: Path, scheme: str) -> None:
    from harness.core.messages import CanonicalMessage, TextPart
    from harness.session import Session
    from harness.stores import open_store

    url = f"sqlite:///{tmp_path}/flag.db" if scheme == "sqlite" else f"file://{tmp_path}/flag"
    store = open_store(url)
    try:
        old = Session.create(store=store, session_id="old")
        old.messages.append(CanonicalMessage.user("first"))
        old.checkpoint()
        old.messages[0] = CanonicalMessage.user("edited")
        old.note_overlays([old.messages[0]])
        old.checkpoint()
        newer = Session.create(store=store, session_id="newer")
        newer.messages.append(CanonicalMessage.user("x"))
        newer.checkpoint()
        assert store.prune(keep_last=1, drop_log=True).trimmed == ("old",)
        assert store.head("old").log_pruned
        reopened = Session.open(store, "old")
        reopened.messages.append(CanonicalMessage.response(TextPart("later")))
        reopened.checkpoint()
        assert store.head("old").log_pruned
    finally:
        store.close()
