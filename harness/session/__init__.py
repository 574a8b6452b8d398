"""Sessions: a conversation's history and accounting, in a store that loses nothing.

This package is the session model and its protocol: the :class:`Session` object
(:mod:`harness.session.session`), the :class:`SessionStore` protocol
(:mod:`harness.session.store`), the records every store keeps
(:mod:`harness.session.records`) and the O(delta) checkpoint builder
(:mod:`harness.session.tracking`). The backends are in :mod:`harness.stores`:
``sqlite:///sessions.db`` (:class:`~harness.stores.sqlite.SqliteStore`, the embedded
default), ``file:///dir`` (:class:`~harness.stores.jsonfile.JsonFileStore`, JSON files with
a JSON Lines log beside each), and ``postgresql://...`` from the ``harness-postgres``
distribution; :func:`harness.stores.open_store` opens one by URL. A stored session holds:

* an append-only **log** of every message exactly as it was first written
  (:meth:`Session.transcript`), each stored once;
* the **view** the model sees next (:attr:`Session.messages`): the log with the
  capabilities' edits applied as overlays, each recorded with its compaction events;
* a **revision**: a write based on a stale one raises
  :class:`~harness.errors.SessionConflictError` and writes nothing;
* usage, thoughts and the tool-effect **ledger** beside the messages.

A run checkpoints a stored session after every step (:meth:`Session.checkpoint`), at a
cost that grows with what the step added, not with the history; running the session
again resumes where it stopped (:mod:`harness.durable.resume`).

A session can also be a single JSON file (:meth:`Session.save` / :meth:`Session.load`),
holding exactly the contract's keys: ``version``, ``session_id``, ``project_id``,
``created_at``, ``last_modified``, ``working_directory``, ``current_model``,
``total_tokens``, ``session_total_usage``, ``thoughts`` and ``messages``. Saving writes a
temporary file, fsyncs it, keeps the previous version as ``<name>.bak`` and renames the
new file over the target: a crash leaves the old or the new file, never a torn one. A
failed load raises :class:`SessionLoadError` naming the file, never touches it, and a
later :meth:`Session.save` refuses to overwrite it unless ``force=True``.
"""

from __future__ import annotations

__all__ = [
    "LEDGER_STATUSES",
    "AsyncSessionStore",
    "ThreadedStore",
    "async_store",
    "finish_shielded",
    "is_async_store",
    "SESSION_DIR_ENV",
    "SESSION_KEYS",
    "SESSION_VERSION",
    "Checkpoint",
    "EditRecord",
    "LedgerEntry",
    "LedgerStatus",
    "LogEntry",
    "PruneResult",
    "SearchHit",
    "SearchQuery",
    "SearchTerm",
    "Session",
    "SessionHead",
    "SessionInfo",
    "SessionListing",
    "SessionProblem",
    "SessionStore",
    "StoreResolver",
    "StoredSession",
    "ViewEntry",
    "atomic_write_bytes",
    "copy_all",
    "copy_session",
    "default_session_dir",
    "find_session",
    "list_sessions",
    "parse_query",
    "project_id_for",
    "usage_from_mapping",
    "usage_to_mapping",
]

from harness.session.asyncstore import (
    AsyncSessionStore,
    ThreadedStore,
    async_store,
    finish_shielded,
    is_async_store,
)
from harness.session.fileformat import (
    SESSION_KEYS,
    SESSION_VERSION,
    SessionInfo,
    SessionListing,
    SessionProblem,
    find_session,
    list_sessions,
    usage_from_mapping,
    usage_to_mapping,
)
from harness.session.files import atomic_write_bytes
from harness.session.paths import SESSION_DIR_ENV, default_session_dir, project_id_for
from harness.session.query import SearchQuery, SearchTerm, parse_query
from harness.session.records import (
    LEDGER_STATUSES,
    Checkpoint,
    EditRecord,
    LedgerEntry,
    LedgerStatus,
    LogEntry,
    PruneResult,
    SearchHit,
    SessionHead,
    StoredSession,
    ViewEntry,
)
from harness.session.session import Session
from harness.session.store import SessionStore, StoreResolver
from harness.session.transfer import copy_all, copy_session
