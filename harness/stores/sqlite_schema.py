"""The SQLite session store's schema, by version, and the scripts that migrate to each.

:class:`~harness.stores.sqlite.SqliteStore` records the version in ``PRAGMA
user_version`` and runs ``MIGRATIONS[v]`` for every version ``v`` above the file's, in one
transaction. Tables whose rows can be large (``log``, ``edits``, ``thoughts``) keep rowids:
a ``WITHOUT ROWID`` row over about a quarter of a page spills to overflow pages it fills
only in part.
"""

from __future__ import annotations

__all__ = ["MIGRATIONS", "SCHEMA_VERSION"]

SCHEMA_VERSION = 3
"""The schema this release writes; files of an older version are migrated when opened."""

SCHEMA_V1 = """
CREATE TABLE sessions (
    session_id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    last_modified TEXT NOT NULL,
    working_directory TEXT NOT NULL,
    current_model TEXT,
    total_tokens INTEGER NOT NULL,
    usage TEXT NOT NULL,
    revision INTEGER NOT NULL,
    log_length INTEGER NOT NULL,
    view_length INTEGER NOT NULL,
    original_query TEXT,
    forked_from TEXT,
    forked_at INTEGER,
    log_pruned INTEGER NOT NULL DEFAULT 0,
    metadata TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX sessions_by_last_modified ON sessions (last_modified DESC);
CREATE TABLE log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    body TEXT NOT NULL,
    UNIQUE (session_id, seq)
);
CREATE TABLE view (
    session_id TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    pos INTEGER NOT NULL,
    seq INTEGER,
    body TEXT,
    source INTEGER,
    PRIMARY KEY (session_id, pos)
) WITHOUT ROWID;
CREATE TABLE edits (
    session_id TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    revision INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    view_start INTEGER NOT NULL,
    replaced TEXT NOT NULL,
    overlays TEXT NOT NULL,
    events TEXT NOT NULL,
    PRIMARY KEY (session_id, idx)
);
CREATE TABLE thoughts (
    session_id TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (session_id, idx)
);
CREATE TABLE ledger (
    session_id TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    tool_call_id TEXT NOT NULL,
    ord INTEGER NOT NULL,
    tool_name TEXT NOT NULL,
    status TEXT NOT NULL,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    result TEXT,
    error TEXT,
    PRIMARY KEY (session_id, tool_call_id)
) WITHOUT ROWID;
CREATE VIRTUAL TABLE log_text USING fts5 (text, content='', tokenize='unicode61');
"""

SCHEMA_V2 = """
CREATE TABLE session_metadata (
    session_id TEXT PRIMARY KEY REFERENCES sessions (session_id) ON DELETE CASCADE,
    metadata TEXT NOT NULL
);
INSERT INTO session_metadata (session_id, metadata) SELECT session_id, metadata FROM sessions;
UPDATE sessions SET metadata = '{}';
"""
"""Version 2: the metadata in its own row, so a checkpoint's new revision does not rewrite it."""

SCHEMA_V3 = """
CREATE TABLE leases (
    session_id TEXT PRIMARY KEY,
    token TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    expires_at REAL NOT NULL
)
"""
"""Version 3: the run leases (:mod:`harness.stores.sqlite_leases`)."""

MIGRATIONS: dict[int, str] = {1: SCHEMA_V1, 2: SCHEMA_V2, 3: SCHEMA_V3}
"""Version -> the script that brings the previous version to it (0 is an empty file)."""
