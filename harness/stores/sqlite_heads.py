"""The SQLite store's head rows: ``sessions`` holds the small columns, ``session_metadata`` the metadata.

SQLite rewrites a whole row, overflow pages included, when any of its columns changes, so a
large ``metadata`` (continuity's anchors, a plugin's state) in the ``sessions`` row would be
rewritten by every checkpoint's new revision. It lives in its own row instead (schema
version 2), written only when a checkpoint says it changed
(:attr:`~harness.session.records.Checkpoint.head_fields`); ``sessions.metadata`` stays
``'{}'`` (files of version 1 are migrated). A checkpoint also updates only the head columns
that changed.
"""

from __future__ import annotations

__all__ = ["HEAD_SELECT", "read_head", "write_head"]

import sqlite3
from collections.abc import Collection

from harness.errors import SessionNotFoundError
from harness.session.records import SessionHead
from harness.stores.rows import HEAD_COLUMNS, head_from_row, head_to_row
from harness.stores.sqlite_values import bind_row, is_text, unbind_row

_META = HEAD_COLUMNS.index("metadata")

HEAD_SELECT = (
    "SELECT "
    + ", ".join(f"s.{c}" if c != "metadata" else "coalesce(m.metadata, s.metadata)" for c in HEAD_COLUMNS)
    + " FROM sessions s LEFT JOIN session_metadata m ON m.session_id = s.session_id"
)
"""Every head column in :data:`~harness.stores.rows.HEAD_COLUMNS` order (add a ``WHERE`` / ``ORDER BY``)."""

_SMALL = [c for c in HEAD_COLUMNS if c != "metadata"]
_INSERT = (
    f"INSERT INTO sessions ({', '.join(_SMALL)}) VALUES ({', '.join('?' for _ in _SMALL)}) "
    "ON CONFLICT (session_id) DO UPDATE SET "
    + ", ".join(
        f"{c} = {c} OR excluded.{c}" if c == "log_pruned" else f"{c} = excluded.{c}" for c in _SMALL[1:]
    )
)
_SET = {c: f"{c} = {c} OR ?" if c == "log_pruned" else f"{c} = ?" for c in _SMALL}
_UPSERT_META = (
    "INSERT INTO session_metadata (session_id, metadata) VALUES (?, ?) "
    "ON CONFLICT (session_id) DO UPDATE SET metadata = excluded.metadata"
)


def write_head(db: sqlite3.Connection, head: SessionHead, changed: Collection[str] | None) -> None:
    """Insert or update ``head``: only the ``changed`` fields (``revision`` always), or all with ``None``."""
    values = bind_row(head_to_row(head))
    if changed is None:
        db.execute(_INSERT, [v for i, v in enumerate(values) if i != _META])
    else:
        columns = [c for c in _SMALL[1:] if c in changed or c == "revision"]
        assignments = ", ".join(_SET[c] for c in columns)
        db.execute(
            f"UPDATE sessions SET {assignments} WHERE session_id = ?",
            [*(values[HEAD_COLUMNS.index(c)] for c in columns), head.session_id],
        )
    if changed is None or "metadata" in changed:
        db.execute(_UPSERT_META, (head.session_id, values[_META]))


def read_head(db: sqlite3.Connection, url: str, session_id: str) -> SessionHead:
    """The head of ``session_id``.

    Raises:
        SessionNotFoundError: No such session.
        SessionStoreError: A column is malformed.
    """
    if not is_text(session_id):
        raise SessionNotFoundError(url, session_id)
    row = db.execute(f"{HEAD_SELECT} WHERE s.session_id = ?", (session_id,)).fetchone()
    if row is None:
        raise SessionNotFoundError(url, session_id)
    return head_from_row(url, unbind_row(row))
