"""``harness sessions export`` and ``import``: lossless between stores, today's format for ``.json`` files."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from harness.cli import cli
from harness.core.messages import CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart
from harness.session import LedgerEntry, Session, SessionStore
from harness.stores.jsonfile import JsonFileStore
from harness.stores.sqlite import SqliteStore

EVENT: dict[str, Any] = {
    "strategy": "clear_tool_results",
    "reason": "over budget",
    "cleared_tool_call_ids": ["c1"],
    "removed_tool_call_ids": [],
    "messages_before": 4,
    "messages_after": 4,
}


@pytest.fixture(autouse=True)
def clean_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    for name in ("HARNESS_STORE", "HARNESS_SESSION_DIR"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def source(tmp_path: Path) -> Iterator[SqliteStore]:
    store = SqliteStore(tmp_path / "source.db")
    yield store
    store.close()


def full_session(store: SessionStore, session_id: str) -> Session:
    """A session with everything a store keeps: a compaction edit, thoughts, the ledger, usage."""
    session = Session.create(store=store, session_id=session_id, current_model="m", working_directory="/w")
    session.messages = [
        CanonicalMessage.user("read a.py — café ☕"),
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="c1", tool_name="read_file", args={"path": "a.py"})
        ),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="c1", tool_name="read_file", content="print('the big file')")
        ),
        CanonicalMessage.response(TextPart("a.py prints a line")),
    ]
    session.thoughts.append("the user wants a.py")
    started = datetime(2026, 11, 1, tzinfo=UTC)
    session.record_tool(LedgerEntry("c1", "read_file", "completed", started, started, '{"x": 1}'))
    session.checkpoint()
    placeholder = CanonicalMessage.request(
        ToolReturnPart(tool_call_id="c1", tool_name="read_file", content="[cleared]")
    )
    session.note_overlays([placeholder], [EVENT])
    session.messages = [
        *session.messages[:2],
        placeholder,
        session.messages[3],
        CanonicalMessage.user("more"),
    ]
    session.checkpoint()
    return session


def everything(store: SessionStore, session_id: str) -> tuple[object, ...]:
    return (store.load(session_id), store.read_log(session_id), store.edits(session_id))


def invoke(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=input)


def ok(*args: str) -> Result:
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    return result


def test_sqlite_to_a_folder_to_sqlite_loses_nothing(source: SqliteStore, tmp_path: Path) -> None:
    full_session(source, "a")
    source.fork("a", "b")
    full_session(source, "c")
    source.prune(keep_last=2, drop_log=True)  # "a" (oldest) loses its replaced log message: a gap
    assert [e.seq for e in source.read_log("a")] == [0, 1, 3, 4]
    folder = tmp_path / "exported"
    exported = json.loads(
        ok(
            "sessions", "export", "a", "b", "c", "--to", str(folder), "--store", str(source.path), "--json"
        ).stdout
    )
    assert [s["as"] for s in exported["sessions"]] == ["a", "b", "c"]
    assert exported["to"] == f"file://{folder}"
    back = tmp_path / "back.db"
    ok("sessions", "import", str(folder), "--store", str(back))
    with JsonFileStore(folder) as files, SqliteStore(back) as imported:
        for sid in ("a", "b", "c"):
            assert everything(files, sid) == everything(source, sid), sid
            assert everything(imported, sid) == everything(source, sid), sid
        assert imported.head("b").forked_from == "a"
        assert imported.head("a").log_pruned
    # Each session of the folder is a session file of today's format.
    (snapshot,) = folder.glob("*_c.json")
    assert Session.load(snapshot).messages == Session.open(source, "c").messages


def test_import_from_a_store_url_with_ids_and_as(source: SqliteStore, tmp_path: Path) -> None:
    full_session(source, "a")
    full_session(source, "b")
    target = tmp_path / "t.db"
    ok("sessions", "import", "--from", f"sqlite:///{source.path}", "a", "--store", str(target))
    ok("sessions", "import", "--from", str(source.path), "a", "--as", "a-copy", "--store", str(target))
    with SqliteStore(target) as store:
        assert {h.session_id for h in store.list_sessions()} == {"a", "a-copy"}
        assert store.read_log("a-copy") == source.read_log("a")
        assert store.head("a-copy").revision == source.head("a").revision
    whole = json.loads(
        ok(
            "sessions", "import", "--from", str(source.path), "--store", str(tmp_path / "w.db"), "--json"
        ).stdout
    )
    assert sorted(s["as"] for s in whole["sessions"]) == ["a", "b"]


def test_import_refuses_an_id_the_store_has_unless_told(source: SqliteStore, tmp_path: Path) -> None:
    full_session(source, "a")
    full_session(source, "b")
    target = tmp_path / "t.db"
    with SqliteStore(target) as store:
        mine = Session.create(store=store, session_id="b")
        mine.messages = [CanonicalMessage.user("mine")]
        mine.checkpoint()
    refused = invoke("sessions", "import", str(source.path), "--store", str(target))
    assert refused.exit_code == 2
    assert "SessionConflictError: session 'b'" in refused.stderr
    assert "nothing was imported (pass --as NEW for one session, or --replace)" in refused.stderr
    with SqliteStore(target) as store:
        assert [h.session_id for h in store.list_sessions()] == ["b"]  # not even "a"
        assert len(Session.open(store, "b").messages) == 1
    ok("sessions", "import", str(source.path), "--replace", "--store", str(target))
    with SqliteStore(target) as store:
        assert everything(store, "b") == everything(source, "b")
        assert everything(store, "a") == everything(source, "a")


def test_export_to_a_session_file_writes_todays_format(source: SqliteStore, tmp_path: Path) -> None:
    full_session(source, "a")
    full_session(source, "b")
    file = tmp_path / "out" / "a.json"
    ok("sessions", "export", "a", "--to", str(file), "--store", str(source.path))
    saved = Session.load(file)
    assert saved.session_id == "a"
    assert saved.messages == Session.open(source, "a").messages
    assert saved.thoughts == ["the user wants a.py"]
    assert set(json.loads(file.read_text())) == {
        "version", "session_id", "project_id", "created_at", "last_modified", "working_directory",
        "current_model", "total_tokens", "session_total_usage", "thoughts", "messages",
    }  # fmt: skip
    before = file.read_bytes()
    refused = invoke("sessions", "export", "b", "--to", str(file), "--store", str(source.path))
    assert refused.exit_code == 2
    assert f"refusing to overwrite {file}" in refused.stderr
    assert file.read_bytes() == before
    ok("sessions", "export", "b", "--to", str(file), "--replace", "--as", "b2", "--store", str(source.path))
    assert Session.load(file).session_id == "b2"
    several = invoke(
        "sessions", "export", "a", "b", "--to", str(tmp_path / "x.json"), "--store", str(source.path)
    )
    assert several.exit_code == 2
    assert "is one session file" in several.output


def test_export_to_a_store_refuses_an_existing_id_before_copying_anything(
    source: SqliteStore, tmp_path: Path
) -> None:
    full_session(source, "a")
    full_session(source, "b")
    target = tmp_path / "t.db"
    ok("sessions", "export", "b", "--to", str(target), "--store", str(source.path))
    refused = invoke("sessions", "export", "a", "b", "--to", str(target), "--store", str(source.path))
    assert refused.exit_code == 2
    assert "nothing was exported" in refused.stderr
    with SqliteStore(target) as store:
        assert [h.session_id for h in store.list_sessions()] == ["b"]
    missing = invoke("sessions", "export", "ghost", "--to", str(target), "--store", str(source.path))
    assert missing.exit_code == 2
    assert "session 'ghost'" in missing.stderr
    assert (
        invoke(
            "sessions", "export", "a", "b", "--as", "x", "--to", str(target), "--store", str(source.path)
        ).exit_code
        == 2
    )


def test_import_an_old_session_file_keeps_its_timestamps(tmp_path: Path) -> None:
    old = Session.new(
        session_id="old-1",
        current_model="gpt",
        messages=[CanonicalMessage.user("hi"), CanonicalMessage.response(TextPart("hello"))],
    )
    old.thoughts.append("greet")
    path = old.save(tmp_path / "anything.json")
    target = tmp_path / "t.db"
    report = json.loads(ok("sessions", "import", str(path), "--store", str(target), "--json").stdout)
    assert report["sessions"] == [
        {"session_id": "old-1", "as": "old-1", "messages": 2, "log_length": 2, "revision": 1}
    ]
    with SqliteStore(target) as store:
        session = Session.open(store, "old-1")
        assert session.messages == Session.load(path).messages
        assert session.transcript() == session.messages
        assert session.thoughts == ["greet"]
        assert session.last_modified == Session.load(path).last_modified
        assert session.current_model == "gpt"
    again = invoke("sessions", "import", str(path), "--store", str(target))
    assert again.exit_code == 2
    ok("sessions", "import", str(path), "--as", "old-2", "--store", str(target))
    with SqliteStore(target) as store:
        assert {h.session_id for h in store.list_sessions()} == {"old-1", "old-2"}


def test_import_a_folder_of_old_session_files(tmp_path: Path) -> None:
    folder = tmp_path / "xdg" / "harness" / "sessions"
    for sid in ("s1", "s2"):
        Session.create(folder, session_id=sid, messages=[CanonicalMessage.user(sid)]).save()
    ok("sessions", "import", str(folder))  # into the default store
    listed = json.loads(ok("sessions", "list", "--json").stdout)
    assert sorted(s["session_id"] for s in listed["sessions"]) == ["s1", "s2"]
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == sorted(
        p.name for p in folder.glob("*.json")
    ), "importing reads the folder and writes nothing into it"


def test_import_errors(tmp_path: Path) -> None:
    nowhere = tmp_path / "nowhere.db"
    result = invoke("sessions", "import", str(nowhere))
    assert result.exit_code == 2
    assert f"there is no store at {nowhere}" in result.output
    assert not nowhere.exists()
    folder = invoke("sessions", "import", str(tmp_path / "no-folder"))
    assert folder.exit_code == 2
    assert not (tmp_path / "no-folder").exists()
    assert invoke("sessions", "import").exit_code == 2
    broken = tmp_path / "broken.json"
    broken.write_text('{"version": 2, "messages": [')
    bad = invoke("sessions", "import", str(broken))
    assert bad.exit_code == 2
    assert "SessionLoadError" in bad.stderr
    assert broken.read_text() == '{"version": 2, "messages": ['


def test_export_to_postgresql_and_back(source: SqliteStore, tmp_path: Path) -> None:
    testing = pytest.importorskip("harness_postgres.testing")
    dsn = testing.require_server()
    full_session(source, "a")
    with testing.temporary_schema(dsn) as schema:
        url = testing.schema_url(dsn, schema)
        ok("sessions", "export", "a", "--to", url, "--store", str(source.path))
        listed = json.loads(ok("sessions", "list", "--store", url, "--json").stdout)
        assert [s["session_id"] for s in listed["sessions"]] == ["a"]
        ok("sessions", "import", "--from", url, "a", "--store", str(tmp_path / "back.db"))
        with SqliteStore(tmp_path / "back.db") as back:
            assert everything(back, "a") == everything(source, "a")
