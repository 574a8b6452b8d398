"""A checkpoint writes only the head columns that changed: a large metadata is not rewritten every step."""

from __future__ import annotations

import json
import re
import secrets
import sqlite3
from pathlib import Path

import pytest

from harness.core.messages import CanonicalMessage, TextPart, UserPromptPart
from harness.errors import SessionStoreError
from harness.session import Session
from harness.stores.jsonfile import JsonFileStore
from harness.stores.sqlite import SqliteStore
from harness.testing.store_kit import new_session

METADATA_CHARS = 256 * 1024
STEPS = 10


def steps(session: Session, count: int) -> None:
    """``count`` checkpoints, each adding a prompt and an answer (what a run's step writes)."""
    for index in range(count):
        session.messages.append(CanonicalMessage.request(UserPromptPart(content=f"step {index}")))
        session.messages.append(CanonicalMessage.response(TextPart(content=f"answer {index}")))
        session.checkpoint()


def wal_bytes_per_step(path: Path, metadata: dict[str, object]) -> float:
    """Bytes one step's checkpoint adds to the SQLite WAL (a fresh store, ``metadata`` unchanged)."""
    store = SqliteStore(path)
    session = new_session(store, [], session_id="big", metadata=metadata)
    steps(session, 1)
    wal = Path(f"{path}-wal")
    before = wal.stat().st_size
    steps(session, STEPS)
    grown = wal.stat().st_size - before
    store.close()
    return grown / STEPS


def test_a_step_does_not_rewrite_a_large_unchanged_metadata_on_sqlite(tmp_path: Path) -> None:
    """A step writes as many WAL bytes with a 256 kB metadata as with none; a changed one is written."""
    blob = secrets.token_hex(METADATA_CHARS // 2)  # incompressible: what a pasted log costs
    small = wal_bytes_per_step(tmp_path / "small.db", {})
    large = wal_bytes_per_step(tmp_path / "large.db", {"pasted": blob})
    assert large <= small + 4200, f"{large:.0f} bytes per checkpoint, {small:.0f} without the metadata"
    path = tmp_path / "large.db"
    reopened = Session.open(SqliteStore(path), "big")
    assert reopened.metadata == {"pasted": blob}
    assert len(reopened.messages) == 2 * (STEPS + 1)
    reopened.metadata["pasted"] = "short now"
    steps(reopened, 1)
    assert Session.open(SqliteStore(path), "big").metadata == {"pasted": "short now"}
    assert SqliteStore(path).head("big").revision == STEPS + 2


def test_a_version_1_file_keeps_its_metadata_when_migrated(tmp_path: Path) -> None:
    """Opening a version-1 database moves each session's metadata to its own row, losing nothing."""
    path = tmp_path / "old.db"
    store = SqliteStore(path)
    steps(new_session(store, [], session_id="old", metadata={"plugin": {"k": [1, "two"]}}), 1)
    store.close()
    with sqlite3.connect(path) as db:  # make it the version-1 layout again
        db.execute(
            "UPDATE sessions SET metadata = (SELECT metadata FROM session_metadata m "
            "WHERE m.session_id = sessions.session_id)"
        )
        db.execute("DROP TABLE session_metadata")
        db.execute("DROP TABLE leases")
        db.execute("PRAGMA user_version = 1")
    migrated = SqliteStore(path)
    assert migrated.head("old").metadata == {"plugin": {"k": [1, "two"]}}
    assert [h.metadata for h in migrated.list_sessions()] == [{"plugin": {"k": [1, "two"]}}]
    migrated.fork("old", "copy")
    assert migrated.head("copy").metadata == {"plugin": {"k": [1, "two"]}}
    assert migrated.delete("old")
    assert migrated.delete("copy")
    migrated.close()


def folder_files(folder: Path) -> dict[str, tuple[int, int, int]]:
    """``name -> (inode, size, mtime)`` of every file in a ``file:`` store's folder."""
    out: dict[str, tuple[int, int, int]] = {}
    for path in folder.iterdir():
        info = path.stat()
        out[path.name] = (info.st_ino, info.st_size, info.st_mtime_ns)
    return out


def written_bytes(before: dict[str, tuple[int, int, int]], after: dict[str, tuple[int, int, int]]) -> int:
    """Bytes written between two listings: a new or replaced file whole, an appended one by its growth."""
    total = 0
    for name, (inode, size, mtime) in after.items():
        old = before.get(name)
        if old is None or old[0] != inode:
            total += size  # created, or replaced by a rename
        elif (old[1], old[2]) != (size, mtime):
            total += max(size - old[1], 0) or size  # appended to (or rewritten in place: count it whole)
    return total


def file_bytes_per_step(folder: Path, metadata: dict[str, object]) -> float:
    """Bytes one step's checkpoint writes to a ``file:`` store's folder (``metadata`` unchanged)."""
    store = JsonFileStore(folder)
    session = new_session(store, [], session_id="big", metadata=metadata)
    steps(session, 1)
    total = 0
    for _ in range(STEPS):
        before = folder_files(folder)
        steps(session, 1)
        total += written_bytes(before, folder_files(folder))
    store.close()
    return total / STEPS


def test_a_step_does_not_rewrite_a_large_unchanged_metadata_in_a_file_store(tmp_path: Path) -> None:
    """A ``file:`` step writes as many bytes with a 256 kB metadata as with none; a changed one is written."""
    blob = secrets.token_hex(METADATA_CHARS // 2)
    small = file_bytes_per_step(tmp_path / "small", {})
    large = file_bytes_per_step(tmp_path / "large", {"pasted": blob})
    assert large <= small + 200, f"{large:.0f} bytes per checkpoint, {small:.0f} without the metadata"
    folder = tmp_path / "large"
    reopened = Session.open(JsonFileStore(folder), "big")
    assert reopened.metadata == {"pasted": blob}
    assert len(reopened.messages) == 2 * (STEPS + 1)
    reopened.metadata["pasted"] = "short now"
    steps(reopened, 1)
    assert Session.open(JsonFileStore(folder), "big").metadata == {"pasted": "short now"}
    assert JsonFileStore(folder).head("big").revision == STEPS + 2
    (replaced,) = folder.glob("*.metadata.*")  # the old file is gone with the commit that replaced it
    assert json.loads(replaced.read_bytes()) == {"pasted": "short now"}
    reopened.metadata.clear()
    steps(reopened, 1)
    assert list(folder.glob("*.metadata.*")) == []  # an empty metadata has no file
    assert JsonFileStore(folder).head("big").metadata == {}


def test_a_format_1_sidecar_with_its_metadata_inline_still_loads_and_moves_it_out(tmp_path: Path) -> None:
    """A session written by the old layout (metadata in the sidecar's head) loads; a commit moves it out."""
    folder = tmp_path / "files"
    metadata: dict[str, object] = {"plugin": {"k": [1, "two"]}, "note": "é"}
    store = JsonFileStore(folder)
    steps(new_session(store, [], session_id="old", metadata=metadata), 1)
    store.close()
    (sidecar,) = folder.glob("*.state")
    (meta_file,) = folder.glob("*.metadata.*")
    doc = json.loads(sidecar.read_bytes())
    assert doc["format"] == 2
    assert "metadata" not in doc["head"]
    old = {k: v for k, v in doc.items() if k != "metadata_file"}  # the old layout, as it wrote it
    old["format"] = 1
    old["head"] = {**doc["head"], "metadata": metadata}
    sidecar.write_text(json.dumps(old, separators=(",", ":")))
    meta_file.unlink()
    reopened = JsonFileStore(folder)
    assert reopened.head("old").metadata == metadata
    assert [h.metadata for h in reopened.list_sessions()] == [metadata]
    session = Session.open(reopened, "old")
    assert session.metadata == metadata
    steps(session, 1)  # the metadata did not change: the commit still writes it to its own file
    (moved,) = folder.glob("*.metadata.*")
    assert json.loads(moved.read_bytes()) == metadata
    assert json.loads(sidecar.read_bytes())["format"] == 2
    steps(session, 1)  # now it is not written again
    assert list(folder.glob("*.metadata.*")) == [moved]
    fresh = JsonFileStore(folder)
    assert Session.open(fresh, "old").metadata == metadata
    assert fresh.head("old").revision == 3
    fresh.fork("old", "copy")
    assert fresh.head("copy").metadata == metadata
    assert fresh.delete("old")
    assert fresh.delete("copy")
    assert sorted(p.name for p in folder.iterdir()) == [".harness-store.lock"]


def test_a_metadata_file_left_by_a_killed_commit_is_ignored_a_missing_one_named(tmp_path: Path) -> None:
    """A metadata file no sidecar names (a killed commit's) is never read; a named one must exist."""
    folder = tmp_path / "files"
    store = JsonFileStore(folder)
    session = new_session(store, [], session_id="s", metadata={"v": 1})
    steps(session, 1)
    (committed,) = folder.glob("*.metadata.*")
    stray = committed.with_name(committed.name.rpartition(".")[0] + ".0123456789ab")
    stray.write_text('{"v": 2}')  # written by a commit killed before its sidecar replaced the old one
    assert JsonFileStore(folder).head("s").metadata == {"v": 1}
    steps(Session.open(JsonFileStore(folder), "s"), 1)
    assert JsonFileStore(folder).head("s").metadata == {"v": 1}
    committed.unlink()
    with pytest.raises(SessionStoreError, match=re.escape(f"{committed.name} is missing")):
        JsonFileStore(folder).head("s")
    assert JsonFileStore(folder).delete("s")
    assert sorted(p.name for p in folder.iterdir()) == [".harness-store.lock"]  # the stray file too
