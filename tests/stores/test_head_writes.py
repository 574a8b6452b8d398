"""A checkpoint writes only the head columns that changed: a large metadata is not rewritten every step."""

from __future__ import annotations

import secrets
import sqlite3
from pathlib import Path

from harness.core.messages import CanonicalMessage, TextPart, UserPromptPart
from harness.session import Session
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
