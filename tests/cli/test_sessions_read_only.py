"""Read-only `harness sessions` commands open the store read-only: nothing created, a missing store fails."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from harness import Agent
from harness.cli import cli
from harness.errors import SessionStoreError
from harness.models.test import TestModel
from harness.session import Session
from harness.stores import open_store
from harness.stores.jsonfile import LOCK_NAME
from harness.stores.sqlite import SCHEMA_VERSION

READ_ONLY = [
    ["list"],
    ["show", "one"],
    ["show", "one", "--transcript"],
    ["search", "hello"],
    ["export", "one", "--to", "{out}/copy.json"],
]


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def seeded(url: str) -> None:
    store = open_store(url)
    try:
        Agent(TestModel(final_text="hello back")).run_sync(
            "hello", session=Session.create(store=store, session_id="one")
        )
    finally:
        store.close()


@pytest.mark.parametrize("command", READ_ONLY, ids=lambda c: " ".join(c[:2]))
@pytest.mark.parametrize("scheme", ["sqlite", "file"])
def test_a_missing_store_is_one_error_and_nothing_is_created(
    tmp_path: Path, command: list[str], scheme: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    target = work / "no" / "such" / ("x.db" if scheme == "sqlite" else "dir")
    url = f"sqlite:///{target}" if scheme == "sqlite" else f"file://{target}"
    args = [a.replace("{out}", str(tmp_path)) for a in command]
    result = invoke("sessions", "--store", url, *args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert "does not exist; nothing was created" in lines[0]
    assert "Traceback" not in result.output
    assert tree(work) == []  # no folder, no database, no lock file


@pytest.mark.parametrize("command", READ_ONLY, ids=lambda c: " ".join(c[:2]))
def test_reading_a_folder_store_writes_nothing_into_it(tmp_path: Path, command: list[str]) -> None:
    folder = tmp_path / "sessions"
    seeded(f"file://{folder}")
    (folder / LOCK_NAME).unlink()  # a folder no writer holds: as copied, or of session files only
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    args = [a.replace("{out}", str(tmp_path)) for a in command]
    result = invoke("sessions", "--store", f"file://{folder}", *args)
    assert result.exit_code == 0, result.output
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before


def test_listing_a_folder_of_plain_session_files_writes_no_lock(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    Session.new(messages=[]).save(folder / "p_old.json")
    result = invoke("sessions", "--store", f"file://{folder}", "list")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in folder.iterdir()) == ["p_old.json"]


@pytest.mark.parametrize("command", READ_ONLY, ids=lambda c: " ".join(c[:2]))
def test_reading_a_sqlite_store_changes_no_file_but_sqlites_own(tmp_path: Path, command: list[str]) -> None:
    db = tmp_path / "store" / "s.db"
    seeded(f"sqlite:///{db}")
    content = db.read_bytes()
    args = [a.replace("{out}", str(tmp_path)) for a in command]
    result = invoke("sessions", "--store", f"sqlite:///{db}", *args)
    assert result.exit_code == 0, result.output
    assert db.read_bytes() == content
    assert set(os.listdir(db.parent)) <= {"s.db", "s.db-wal", "s.db-shm"}  # SQLite's own, to read a WAL db


def test_an_empty_store_flag_is_refused(tmp_path: Path) -> None:
    result = invoke("sessions", "--store", "", "list")
    assert result.exit_code == 2
    assert "the store URL is empty" in result.output
    assert "Traceback" not in result.output


def test_a_read_only_store_refuses_writes(tmp_path: Path) -> None:
    for url in (f"sqlite:///{tmp_path / 's.db'}", f"file://{tmp_path / 'dir'}"):
        seeded(url)
        store = open_store(url, read_only=True)
        try:
            session = Session.open(store, "one")
            assert [m.kind for m in session.messages] == ["request", "response"]
            session.messages = [*session.messages, session.messages[0]]
            with pytest.raises(SessionStoreError, match="opened read-only"):
                session.checkpoint()
            with pytest.raises(SessionStoreError, match="opened read-only"):
                store.delete("one")
        finally:
            store.close()


def test_the_default_store_not_created_yet_lists_nothing_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("HARNESS_STORE", raising=False)
    monkeypatch.delenv("HARNESS_SESSION_DIR", raising=False)
    result = invoke("sessions")
    assert result.exit_code == 0, result.output
    assert "no sessions in sqlite:///" in result.output
    assert not (tmp_path / "xdg").exists()


@pytest.mark.parametrize(
    "command",
    [["fork", "one", "--as", "two"], ["rm", "one", "--yes"], ["prune", "--keep", "1"]],
    ids=lambda c: c[0],
)
@pytest.mark.parametrize("form", ["sqlite", "file", "path"])
def test_commands_on_existing_sessions_do_not_create_a_missing_store(
    tmp_path: Path, command: list[str], form: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    target = work / "no" / "such" / "x.db"
    url = {"sqlite": f"sqlite:///{target}", "file": f"file://{target}", "path": str(target)}[form]
    result = invoke("sessions", "--store", url, *command)
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert "nothing was created" in result.output
    assert tree(work) == []


def test_a_store_of_an_older_schema_is_migrated_then_read(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    seeded(f"sqlite:///{db}")
    with sqlite3.connect(db) as raw:  # the version-2 layout: no leases table yet
        raw.execute("DROP TABLE leases")
        raw.execute("PRAGMA user_version = 2")
    result = invoke("sessions", "--store", f"sqlite:///{db}", "show", "one")
    assert result.exit_code == 0, result.output
    assert "user: hello" in result.output
    with sqlite3.connect(db) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_an_empty_database_file_is_no_store_to_read(tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    db.touch()
    result = invoke("sessions", "--store", f"sqlite:///{db}", "list")
    assert result.exit_code == 2
    assert "holds no session store yet" in result.output
    assert db.read_bytes() == b""
