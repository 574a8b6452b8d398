"""``PostgresStore``: sessions in PostgreSQL, shared by every process and machine that reaches the server.

The same records and semantics as :class:`harness.stores.sqlite.SqliteStore`, on psycopg 3:

* **One transaction per checkpoint.** A write first locks the session's head row
  (``SELECT ... FOR UPDATE``) and compares its revision with the checkpoint's base, so
  of two writers based on the same revision, on any machines, exactly one commits and the
  other gets :class:`~harness.errors.SessionConflictError` with nothing written. Creating
  a session is an ``INSERT ... ON CONFLICT DO NOTHING``: of two creators of one id, one
  wins. The rest of the checkpoint (the head's changed columns, appended log rows, the view's new tail,
  thoughts, ledger, edits) and the ``COMMIT`` go to the server in one pipeline, so a step
  costs two round trips whatever the history's length.
* **Reads that see every commit sent.** Every write of a session holds the session's
  advisory lock exclusively for its transaction; ``head``, ``load``, ``read_log`` and
  ``edits`` take it shared first, in one read-only transaction (one round trip). So a read
  waits for a commit in flight, even one whose process was killed after sending
  ``COMMIT``, and its statements all see one state: never half a checkpoint.
* **Search** ranks ``log.tsv @@ query`` (a GIN-indexed ``tsvector``) with ``ts_rank``.
* **Errors** are :class:`~harness.errors.SessionStoreError` naming the store (its URL,
  password masked) and the session; a connection the server closed is reopened
  (:mod:`harness_postgres.connection`).
"""

from __future__ import annotations

__all__ = ["INDEXED_TEXT_LIMIT", "Durability", "PostgresStore"]

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal, cast

import attrs

from harness.errors import SessionConflictError, SessionLeaseError, SessionNotFoundError, SessionStoreError
from harness.session import (
    Checkpoint,
    EditRecord,
    LedgerEntry,
    LogEntry,
    PruneResult,
    SearchHit,
    SessionHead,
    StoredSession,
    ViewEntry,
)
from harness.session.lease import LeaseHolder, can_take
from harness.session.query import check_limit, index_text, parse_query
from harness.session.text import searchable_text
from harness.stores.rows import (
    check_checkpoint,
    edit_from_row,
    edit_to_row,
    head_from_row,
    head_to_row,
    ledger_from_row,
    ledger_to_row,
    prune_plan,
    snippet,
)
from harness_postgres.connection import Attempt, Connection, Link
from harness_postgres.dsn import parse_target
from harness_postgres.migrations import check_schema, ensure_schema
from harness_postgres.search import tsquery
from harness_postgres.statements import HEAD_COLUMNS, Statements
from harness_postgres.text import ascii_json, escape, unescape

INDEXED_TEXT_LIMIT = 128 * 1024
"""Bytes of a message's searchable text that go into its ``tsvector`` (PostgreSQL caps one at 1 MB)."""

Durability = Literal["full", "normal"]

_NO_END = 2**62
_BEGIN_READ = b"BEGIN ISOLATION LEVEL READ COMMITTED, READ ONLY"


def _now() -> datetime:
    return datetime.now(UTC)


_HEAD_TEXT = (1, 4, 5, 11)  # project_id, working_directory, current_model, original_query
_HEAD_JSON = (7, 15)  # usage, metadata
_LEDGER_TEXT = (1, 5, 6)  # tool_name, result, error
_EDIT_JSON = (4, 5, 6)  # replaced, overlays, events


def _head_values(head: SessionHead) -> list[Any]:
    values = list(head_to_row(head))
    for index in _HEAD_TEXT:
        values[index] = escape(values[index])
    for index in _HEAD_JSON:
        values[index] = ascii_json(values[index])
    values[14] = bool(head.log_pruned)  # a boolean column
    return values


def _ledger_values(entry: LedgerEntry) -> list[Any]:
    values = list(ledger_to_row(entry))
    for index in _LEDGER_TEXT:
        values[index] = escape(values[index])
    return values


def _edit_values(edit: EditRecord) -> list[Any]:
    values = list(edit_to_row(edit))
    for index in _EDIT_JSON:
        values[index] = ascii_json(values[index])
    return values


def _unescaped(row: Sequence[Any], indices: Sequence[int]) -> list[Any]:
    values = list(row)
    for index in indices:
        values[index] = unescape(values[index])
    return values


def _index_text(text: str) -> str:
    """What goes into the ``tsvector``: its words (``index_text``), at most ``INDEXED_TEXT_LIMIT`` bytes."""
    data = index_text(text).encode("utf-8", "replace")
    if len(data) > INDEXED_TEXT_LIMIT:
        data = data[:INDEXED_TEXT_LIMIT]
    return data.decode("utf-8", "ignore")


def _text_of_body(body: str) -> str:
    try:
        data: object = json.loads(body)
    except ValueError:
        return ""
    return searchable_text(cast(dict[str, Any], data)) if isinstance(data, dict) else ""


class PostgresStore:
    """Sessions in a PostgreSQL schema (default ``harness``), created or migrated on first open.

    Args:
        dsn: A libpq connection string: ``postgresql://user:password@host:5432/db`` (also
            ``postgres://``; ``?schema=name`` picks the schema) or ``"host=... dbname=..."``.
        schema: The PostgreSQL schema holding the tables; ``None``: the URL's ``schema``
            parameter, else ``"harness"``. Lower-case letters, digits and ``_``.
        connect_timeout: Seconds to wait for the server when connecting.
        lock_timeout: Seconds a write waits for another writer of the same session to
            finish (a live writer holds the lock for a millisecond or so).
        application_name: Shown in ``pg_stat_activity`` unless the DSN sets one.
        durability: ``"full"`` (default) keeps the server's ``synchronous_commit`` (``on``
            unless the DBA changed it): a commit returns once it is on the server's disk.
            ``"normal"`` turns it off for this store's connection: a commit returns before
            the WAL is flushed, which survives any crash of the client (a killed agent) and
            a clean server restart, but a server crash or power cut may lose the last few
            hundred milliseconds of checkpoints. Revision checks are exact either way.
        read_only: Open an existing store for reading only (what ``harness sessions list``
            and the other read-only commands use): no schema, table or migration is created,
            the connection's transactions are read-only, and every write raises
            :class:`~harness.errors.SessionStoreError`.

    Raises:
        StoreResolutionError: ``dsn`` is not a PostgreSQL connection string, or its
            ``schema`` parameter is invalid or contradicts ``schema``.
        ValueError: ``schema`` is not a valid name.
        SessionStoreError: The server cannot be reached, or the schema is of a newer
            version or holds something else (nothing is written then). With
            ``read_only``, also: the schema holds no store yet, or an older one.
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        connect_timeout: float = 10.0,
        lock_timeout: float = 30.0,
        application_name: str = "harness",
        durability: Durability = "full",
        read_only: bool = False,
    ) -> None:
        if durability not in ("full", "normal"):
            raise ValueError(f"durability must be 'full' or 'normal', got {durability!r}")
        target = parse_target(dsn, schema)
        self.schema = target.schema
        self._url = target.url
        self._sql = Statements(target.schema)
        self._link = Link(
            target.conninfo,
            target.url,
            connect_timeout=connect_timeout,
            lock_timeout=lock_timeout,
            application_name=application_name,
            synchronous_commit="off" if durability == "normal" else None,
            read_only=read_only,
        )
        self.read_only = read_only
        """Whether the store was opened for reading only (writes raise)."""
        prepare = check_schema if read_only else ensure_schema
        try:
            self._link.run("prepare the schema", lambda conn, _: prepare(conn, self.schema, self._url))
        except BaseException:
            self._link.close()
            raise

    # ---------------------------------------------------------------- protocol

    @property
    def url(self) -> str:
        """``postgresql://user@host:port/db`` with passwords masked (``?schema=`` when not the default)."""
        return self._url

    def __repr__(self) -> str:
        return f"PostgresStore({self._url!r})"

    def _writable(self, session_id: str | None = None) -> None:
        if self.read_only:
            raise SessionStoreError(self._url, "the store was opened read-only", session_id=session_id)

    def commit(self, checkpoint: Checkpoint) -> int:
        """Write ``checkpoint`` in one transaction (see :class:`~harness.session.store.SessionStore`)."""
        sid = checkpoint.head.session_id
        self._writable(sid)

        def write(conn: Connection, attempt: Attempt) -> int:
            if checkpoint.base_revision == 0:
                self._create_head(conn, checkpoint)
                log_length = 0
            else:
                with conn.pipeline():
                    conn.execute(b"BEGIN")
                    conn.execute(self._sql.lock_session, (sid,))
                    row = conn.execute(self._sql.lock_head, (sid,)).fetchone()
                actual = None if row is None else int(row[0])
                if actual != checkpoint.base_revision:
                    raise SessionConflictError(self._url, sid, checkpoint.base_revision, actual)
                log_length = int(row[1]) if row is not None else 0
            check_checkpoint(checkpoint, log_length)
            attempt.committing = True
            with conn.pipeline():
                if checkpoint.base_revision != 0:
                    self._update_head(conn, checkpoint)
                self._write_rows(conn, checkpoint)
                conn.execute(b"COMMIT")
            return checkpoint.head.revision

        return self._link.run("write", write, sid)

    def _update_head(self, conn: Connection, checkpoint: Checkpoint) -> None:
        """Queue the head's update: only the columns that changed, when the checkpoint names them."""
        sid = checkpoint.head.session_id
        values = _head_values(checkpoint.head)
        changed = checkpoint.head_fields
        if changed is None:
            conn.execute(self._sql.update_head, (*values[1:], sid))
            return
        picked = [i for i, c in enumerate(HEAD_COLUMNS) if i and (c in changed or c == "revision")]
        statement = self._sql.update_head_columns(tuple(HEAD_COLUMNS[i] for i in picked))
        conn.execute(statement, (*(values[i] for i in picked), sid))

    def _create_head(self, conn: Connection, checkpoint: Checkpoint) -> None:
        sid = checkpoint.head.session_id
        with conn.pipeline():
            conn.execute(b"BEGIN")
            conn.execute(self._sql.lock_session, (sid,))
            created = conn.execute(self._sql.insert_head, _head_values(checkpoint.head)).fetchone()
        if created is None:  # the id is taken (perhaps by a creator that committed a moment ago)
            found = conn.execute(self._sql.revision_of, (sid,)).fetchone()
            raise SessionConflictError(self._url, sid, 0, None if found is None else int(found[0]))

    def _write_rows(self, conn: Connection, checkpoint: Checkpoint) -> None:
        """Queue everything but the head (the caller runs this inside a pipeline)."""
        sql = self._sql
        sid = checkpoint.head.session_id
        if checkpoint.appended:
            conn.execute(
                sql.append_log,
                (
                    sid,
                    [e.seq for e in checkpoint.appended],
                    [e.body for e in checkpoint.appended],
                    [_index_text(e.text or _text_of_body(e.body)) for e in checkpoint.appended],
                ),
            )
        conn.execute(sql.cut_view, (sid, checkpoint.view_start))
        if checkpoint.view_tail:
            tail = checkpoint.view_tail
            conn.execute(
                sql.extend_view,
                (
                    sid,
                    checkpoint.view_start,
                    [e.seq for e in tail],
                    [e.body for e in tail],
                    [e.source for e in tail],
                ),
            )
        if checkpoint.thoughts:
            conn.execute(sql.append_thoughts, (sid, [escape(t) for t in checkpoint.thoughts], sid))
        for entry in checkpoint.ledger:
            conn.execute(sql.upsert_ledger, (sid, *_ledger_values(entry)))
        for edit in checkpoint.edits:
            conn.execute(sql.insert_edit, (sid, *_edit_values(edit)))

    def _head(self, session_id: str, row: Sequence[Any] | None) -> SessionHead:
        if row is None:
            raise SessionNotFoundError(self._url, session_id)
        return head_from_row(self._url, _unescaped(row, _HEAD_TEXT))

    def head(self, session_id: str) -> SessionHead:
        """Read a session's head."""

        def read(conn: Connection, _: Attempt) -> SessionHead:
            with conn.pipeline():
                conn.execute(_BEGIN_READ)
                conn.execute(self._sql.share_session, (session_id,))
                row = conn.execute(self._sql.select_head, (session_id,))
                conn.execute(b"COMMIT")
            return self._head(session_id, row.fetchone())

        return self._link.run("read", read, session_id)

    def load(self, session_id: str) -> StoredSession:
        """Read a session's head, view, thoughts and ledger in one snapshot (one round trip)."""
        sql = self._sql

        def read(conn: Connection, _: Attempt) -> StoredSession:
            with conn.pipeline():
                conn.execute(_BEGIN_READ)
                conn.execute(self._sql.share_session, (session_id,))
                heads = conn.execute(sql.select_head, (session_id,))
                views = conn.execute(sql.load_view, (session_id,))
                thoughts = conn.execute(sql.load_thoughts, (session_id,))
                ledger = conn.execute(sql.load_ledger, (session_id,))
                conn.execute(b"COMMIT")
            head = self._head(session_id, heads.fetchone())
            view = self._view(session_id, views.fetchall())
            return StoredSession(
                head,
                view,
                tuple(unescape(str(r[0])) for r in thoughts.fetchall()),
                tuple(
                    ledger_from_row(self._url, session_id, _unescaped(r, _LEDGER_TEXT))
                    for r in ledger.fetchall()
                ),
            )

        return self._link.run("read", read, session_id)

    def _view(self, session_id: str, rows: list[tuple[Any, ...]]) -> tuple[tuple[ViewEntry, str], ...]:
        view: list[tuple[ViewEntry, str]] = []
        for pos, seq, body, source, logged in rows:
            if pos != len(view):
                raise SessionStoreError(
                    self._url, f"the view has a gap at position {len(view)}", session_id=session_id
                )
            if seq is not None:
                if logged is None:
                    raise SessionStoreError(
                        self._url,
                        f"view position {pos} refers to log message {seq}, which is missing",
                        session_id=session_id,
                    )
                view.append((ViewEntry(int(seq), None, None), str(logged)))
            elif body is not None:
                view.append((ViewEntry(None, str(body), None if source is None else int(source)), str(body)))
            else:
                raise SessionStoreError(self._url, f"view position {pos} is empty", session_id=session_id)
        return tuple(view)

    def _snapshot(self, session_id: str, query: bytes, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Check the session exists and run ``query``, both in one snapshot."""

        def read(conn: Connection, _: Attempt) -> list[tuple[Any, ...]]:
            with conn.pipeline():
                conn.execute(_BEGIN_READ)
                conn.execute(self._sql.share_session, (session_id,))
                found = conn.execute(self._sql.exists, (session_id,))
                rows = conn.execute(query, params)
                conn.execute(b"COMMIT")
            if found.fetchone() is None:
                raise SessionNotFoundError(self._url, session_id)
            return rows.fetchall()

        return self._link.run("read", read, session_id)

    def read_log(self, session_id: str, start: int = 0, stop: int | None = None) -> list[LogEntry]:
        """The raw log from ``start`` to ``stop`` (exclusive)."""
        end = stop if stop is not None else _NO_END
        rows = self._snapshot(session_id, self._sql.read_log, (session_id, start, end))
        return [LogEntry(int(seq), str(body)) for seq, body in rows]

    def edits(self, session_id: str) -> list[EditRecord]:
        """Every edit recorded over the session's log, oldest first."""
        rows = self._snapshot(session_id, self._sql.load_edits, (session_id,))
        return [edit_from_row(self._url, session_id, row) for row in rows]

    def list_sessions(self) -> list[SessionHead]:
        """Every session's head, most recently modified first."""
        rows = self._link.run("list sessions", lambda conn, _: conn.execute(self._sql.list_heads).fetchall())
        return [head_from_row(self._url, _unescaped(row, _HEAD_TEXT)) for row in rows]

    def fork(self, session_id: str, new_session_id: str) -> SessionHead:
        """Copy a session under a new id on the server (``INSERT ... SELECT``), all its rows included."""
        sql = self._sql
        self._writable(new_session_id)

        def copy(conn: Connection, attempt: Attempt) -> SessionHead:
            with conn.pipeline():
                conn.execute(b"BEGIN")
                row = conn.execute(sql.select_head_for_share, (session_id,)).fetchone()
            head = self._head(session_id, row)
            now = _now()
            forked = attrs.evolve(
                head,
                session_id=new_session_id,
                created_at=now,
                last_modified=now,
                revision=1,
                forked_from=session_id,
                forked_at=head.log_length,
            )
            if conn.execute(sql.insert_head, _head_values(forked)).fetchone() is None:
                found = conn.execute(sql.revision_of, (new_session_id,)).fetchone()
                raise SessionConflictError(
                    self._url, new_session_id, 0, None if found is None else int(found[0])
                )
            attempt.committing = True
            with conn.pipeline():
                for statement in (
                    sql.fork_log,
                    sql.fork_view,
                    sql.fork_edits,
                    sql.fork_thoughts,
                    sql.fork_ledger,
                ):
                    conn.execute(statement, (new_session_id, session_id))
                conn.execute(b"COMMIT")
            return forked

        return self._link.run("fork", copy, session_id)

    def delete(self, session_id: str) -> bool:
        """Delete a session with its log (one statement; the rows cascade); ``False`` when there was none."""
        self._writable(session_id)

        def drop(conn: Connection, attempt: Attempt) -> bool:
            attempt.committing = True
            with conn.pipeline():
                conn.execute(b"BEGIN")
                conn.execute(self._sql.lock_session, (session_id,))
                gone = conn.execute(self._sql.delete, (session_id,))
                conn.execute(b"COMMIT")
            return gone.fetchone() is not None

        return self._link.run("delete", drop, session_id)

    def prune(
        self,
        *,
        keep_last: int | None = None,
        newer_than: datetime | None = None,
        drop_log: bool = False,
        dry_run: bool = False,
    ) -> PruneResult:
        """Delete (or with ``drop_log``, trim the log of) every session outside the kept set.

        The plan is made from the heads as listed; a session written after that (a new
        revision) is left alone, since it is no longer old. ``dry_run`` with ``drop_log``
        also counts the log messages that would be dropped.
        """
        if not dry_run:
            self._writable()
        heads = self.list_sessions()
        old = prune_plan(heads, keep_last=keep_last, newer_than=newer_than)
        revisions = {h.session_id: h.revision for h in heads}
        if not old:
            return PruneResult(dry_run=dry_run)
        if dry_run:
            if not drop_log:
                return PruneResult(deleted=tuple(old), dry_run=True)
            counted = self._link.run(
                "count prunable log messages",
                lambda conn, _: sum(
                    int((conn.execute(self._sql.count_unreferenced, (sid,)).fetchone() or (0,))[0])
                    for sid in old
                ),
            )
            return PruneResult(trimmed=tuple(old), log_messages_dropped=counted, dry_run=True)
        if not drop_log:

            def delete_unchanged(conn: Connection, attempt: Attempt) -> set[str]:
                attempt.committing = True
                with conn.pipeline():
                    conn.execute(b"BEGIN")
                    conn.execute(self._sql.lock_sessions, (old,))
                    gone = conn.execute(self._sql.delete_unchanged, (old, [revisions[s] for s in old]))
                    conn.execute(b"COMMIT")
                return {str(r[0]) for r in gone.fetchall()}

            gone = self._link.run("prune", delete_unchanged)
            return PruneResult(deleted=tuple(s for s in old if s in gone))

        def trim(conn: Connection, attempt: Attempt) -> tuple[list[str], int]:
            trimmed: list[str] = []
            dropped = 0
            conn.execute(b"BEGIN")
            conn.execute(self._sql.lock_sessions, (old,))
            for sid in old:
                row = conn.execute(self._sql.lock_head, (sid,)).fetchone()
                if row is None or int(row[0]) != revisions[sid]:
                    continue  # deleted or written since the listing
                dropped += conn.execute(self._sql.drop_unreferenced, (sid,)).rowcount
                conn.execute(self._sql.mark_pruned, (sid,))
                trimmed.append(sid)
            attempt.committing = True
            conn.execute(b"COMMIT")
            return trimmed, dropped

        trimmed, dropped = self._link.run("prune", trim)
        return PruneResult(trimmed=tuple(trimmed), log_messages_dropped=dropped)

    def search(self, query: str, *, session_id: str | None = None, limit: int = 20) -> list[SearchHit]:
        """Full-text search of the raw logs, best ``ts_rank`` first.

        The grammar of :mod:`harness.session.query` (the same hits as every store), as a
        ``tsquery`` over the GIN-indexed ``tsvector``; no stemming (``simple``).
        """
        check_limit(self._url, limit)
        parsed = parse_query(query)
        if parsed.empty:
            return []
        text = tsquery(parsed)
        if session_id is None:
            statement, params = self._sql.search_all, (text, limit)
        else:
            statement, params = self._sql.search_session, (text, session_id, limit)
        rows = self._link.run(
            "search", lambda conn, _: conn.execute(statement, params).fetchall(), session_id
        )
        words = " ".join(parsed.positive_words())
        return [
            SearchHit(str(sid), int(seq), snippet(_text_of_body(str(body)), words), float(rank))
            for sid, seq, body, rank in rows
        ]

    def take_lease(self, session_id: str, holder: LeaseHolder) -> None:
        """Take the session's run lease, under the session's advisory lock (see ``LeasingStore``)."""
        self._writable(session_id)

        def take(conn: Connection, attempt: Attempt) -> None:
            with conn.pipeline():
                conn.execute(b"BEGIN")
                conn.execute(self._sql.lock_session, (session_id,))
                row = conn.execute(self._sql.select_lease, (session_id,)).fetchone()
            current = (
                None
                if row is None
                else LeaseHolder(str(row[0]), unescape(str(row[1])), int(row[2]), float(row[3]))
            )
            if not can_take(current, holder):
                assert current is not None
                raise SessionLeaseError(self._url, session_id, current.describe())
            attempt.committing = True
            with conn.pipeline():
                values = (session_id, holder.token, escape(holder.host), holder.pid, holder.expires_at)
                conn.execute(self._sql.upsert_lease, values)
                conn.execute(b"COMMIT")

        self._link.run("take the lease", take, session_id)

    def drop_lease(self, session_id: str, token: str) -> None:
        """Drop the session's run lease if ``token`` holds it."""
        self._writable(session_id)

        def drop(conn: Connection, attempt: Attempt) -> None:
            attempt.committing = True
            conn.execute(self._sql.delete_lease, (session_id, token))

        self._link.run("drop the lease", drop, session_id)

    def close(self) -> None:
        """Close the connection; the store is unusable afterwards."""
        self._link.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
