"""``SqliteStore``: the embedded session store, on the standard library's ``sqlite3``.

One database file holds many sessions (WAL mode, so readers never block the writer and
a reader never sees half a checkpoint). The schema is versioned with ``PRAGMA
user_version``; an older file is migrated in one transaction when it is opened, and a
file of a newer version is refused with :class:`~harness.errors.SessionStoreError`
before anything is written.

Durability: every checkpoint is one transaction, and updates only the head columns that
changed; the metadata has its own row, written only when it changed
(:mod:`harness.stores.sqlite_heads`). ``synchronous=NORMAL`` (the default
here) survives a killed process at any moment, which is what a crashing agent needs; a
power cut may lose the last transactions. Pass ``durability="full"`` to fsync every
commit as well (about a millisecond more per step on an SSD).

Writes take the database's write lock first (``BEGIN IMMEDIATE``) and then compare the
session's revision, so two processes on one session can never both write the same
revision: the second gets :class:`~harness.errors.SessionConflictError`.

Search uses an FTS5 index of each log message's text (contentless: it stores only the
index, not a second copy of the text).

Storage: a message body of 512 bytes or more is stored zlib-compressed (a BLOB that
starts with a NUL byte and ``z``) when that saves a tenth of it, so a long session takes about
the raw transcript's size on disk, FTS index and view included. Tables whose rows can
be large (``log``, ``edits``, ``thoughts``) keep rowids: a ``WITHOUT ROWID`` row over
about a quarter of a page spills to overflow pages it fills only in part.
"""

from __future__ import annotations

__all__ = ["SCHEMA_VERSION", "SqliteStore"]

import os
import sqlite3
import threading
import zlib
from collections.abc import Generator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import attrs

from harness.errors import SessionConflictError, SessionStoreError
from harness.session.lease import LeaseHolder
from harness.session.query import check_limit, parse_query
from harness.session.records import (
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
from harness.stores.rows import (
    check_checkpoint,
    edit_from_row,
    edit_to_row,
    head_from_row,
    ledger_from_row,
    ledger_to_row,
    prune_plan,
    snippet,
)
from harness.stores.sqlite_fts import fts_query
from harness.stores.sqlite_heads import HEAD_SELECT, read_head, write_head
from harness.stores.sqlite_leases import drop_lease as _drop_lease
from harness.stores.sqlite_leases import take_lease as _take_lease
from harness.stores.sqlite_schema import MIGRATIONS as _MIGRATIONS
from harness.stores.sqlite_schema import SCHEMA_VERSION
from harness.stores.sqlite_values import bind as _bind
from harness.stores.sqlite_values import bind_row as _bind_row
from harness.stores.sqlite_values import is_text as _is_text
from harness.stores.sqlite_values import pack_body as _pack
from harness.stores.sqlite_values import text_of_body as _text_of_body
from harness.stores.sqlite_values import unbind as _unbind
from harness.stores.sqlite_values import unbind_row as _unbind_row
from harness.stores.sqlite_values import unpack_body as _unpack

Durability = Literal["normal", "full"]


def _now() -> datetime:
    return datetime.now(UTC)


class SqliteStore:
    """Sessions in one SQLite database file.

    Args:
        path: The database file (created with mode 0600 if missing, its folder 0700), or
            ``":memory:"`` for a private in-memory store (tests).
        durability: ``"normal"`` survives a killed process; ``"full"`` also a power cut.
        busy_timeout: Seconds to wait for another process's write to finish.
        read_only: Open an existing database for reading only (what read-only commands
            do): nothing is created or written, and a write raises
            :class:`~harness.errors.SessionStoreError`. A store of an older release is
            migrated first, as any command would; SQLite may create the database's
            ``-wal`` / ``-shm`` files beside it to read it.

    Raises:
        SessionStoreError: The file is not a SQLite database, is corrupt, or has a newer
            schema than this release reads. Nothing is written to it then. With
            ``read_only``, also: the file does not exist, or holds no session store yet.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability: Durability = "normal",
        busy_timeout: float = 30.0,
        read_only: bool = False,
    ) -> None:
        self.path = Path(path) if os.fspath(path) != ":memory:" else None
        self._url = f"sqlite:///{self.path.absolute()}" if self.path is not None else "sqlite:///:memory:"
        self._lock = threading.RLock()
        self._closed = False
        self.read_only = read_only and self.path is not None
        """Whether the store was opened for reading only (writes raise)."""
        if self.path is not None and not self.path.exists():
            if self.read_only:
                raise SessionStoreError(self._url, "the database file does not exist; nothing was created")
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                fd = os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600)
            except OSError as exc:
                where = exc.filename if exc.filename is not None else self.path
                raise SessionStoreError(self._url, f"cannot create {where}: {exc.strerror or exc}") from exc
            os.close(fd)
        target = str(self.path) if self.path is not None else ":memory:"
        if self.read_only and self.path is not None:
            target = f"{self.path.absolute().as_uri()}?mode=ro"
        try:
            self._db = sqlite3.connect(
                target,
                timeout=busy_timeout,
                isolation_level=None,
                check_same_thread=False,
                uri=self.read_only,
            )
        except sqlite3.Error as exc:
            raise SessionStoreError(self._url, f"cannot open the database: {exc}") from exc
        self._db.create_function("harness_text", 1, _text_of_body, deterministic=True)
        try:
            self._prepare(durability, busy_timeout)
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise SessionStoreError(self._url, f"not a usable SQLite session database: {exc}") from exc
        except SessionStoreError:
            self._db.close()
            raise

    # ---------------------------------------------------------------- setup

    def _prepare(self, durability: Durability, busy_timeout: float) -> None:
        db = self._db
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise SessionStoreError(
                self._url,
                f"the database has schema version {version}, newer than this release reads "
                f"({SCHEMA_VERSION}); upgrade harness to use it",
            )
        if version == 0:
            tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if tables:
                raise SessionStoreError(
                    self._url,
                    "the file is a SQLite database but not a harness session store; refusing to change it",
                )
        db.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        if self.read_only:
            if version == 0:
                raise SessionStoreError(
                    self._url, "the file holds no session store yet (nothing was ever written)"
                )
            if version < SCHEMA_VERSION and self.path is not None:
                # An older release's store: migrated once, as any command would, then read.
                SqliteStore(self.path, busy_timeout=busy_timeout).close()
        elif self.path is not None:
            mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise SessionStoreError(self._url, f"cannot switch the database to WAL mode (got {mode!r})")
        db.execute(f"PRAGMA synchronous = {'FULL' if durability == 'full' else 'NORMAL'}")
        db.execute("PRAGMA foreign_keys = ON")
        if version < SCHEMA_VERSION and not self.read_only:
            self._migrate(version)
        problem = db.execute("PRAGMA quick_check(1)").fetchone()[0] if self.path is not None else "ok"
        if problem != "ok":
            raise SessionStoreError(self._url, f"the database is corrupt: {problem}")

    def _migrate(self, version: int) -> None:
        with self._write():
            current = int(
                self._db.execute("PRAGMA user_version").fetchone()[0]
            )  # another process may have won
            for target in range(current + 1, SCHEMA_VERSION + 1):
                for statement in _MIGRATIONS[target].split(";"):
                    if statement.strip():
                        self._db.execute(statement)
                self._db.execute(f"PRAGMA user_version = {target}")

    @contextmanager
    def _write(self) -> Generator[sqlite3.Connection]:
        """One write transaction, holding the database's write lock from the start."""
        with self._lock:
            self._check_open()
            if self.read_only:
                raise SessionStoreError(self._url, "the store was opened read-only")
            db = self._db
            try:
                db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise SessionStoreError(self._url, f"cannot start a write: {exc}") from exc
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            try:
                db.execute("COMMIT")
            except sqlite3.Error as exc:
                db.execute("ROLLBACK")
                raise SessionStoreError(self._url, f"cannot commit: {exc}") from exc

    @contextmanager
    def _read(self, session_id: str | None = None) -> Generator[sqlite3.Connection]:
        """One consistent read (a snapshot of the WAL)."""
        with self._lock:
            self._check_open()
            db = self._db
            db.execute("BEGIN")
            try:
                yield db
            except (sqlite3.DatabaseError, zlib.error) as exc:
                raise SessionStoreError(self._url, f"cannot read: {exc}", session_id=session_id) from exc
            finally:
                db.execute("COMMIT")

    def _check_open(self) -> None:
        if self._closed:
            raise SessionStoreError(self._url, "the store is closed")

    # ---------------------------------------------------------------- protocol

    @property
    def url(self) -> str:
        """``sqlite:///<absolute path>`` (or ``sqlite:///:memory:``)."""
        return self._url

    def __repr__(self) -> str:
        return f"SqliteStore({self._url!r})"

    def commit(self, checkpoint: Checkpoint) -> int:
        """Write ``checkpoint`` in one transaction (see :class:`~harness.session.store.SessionStore`)."""
        head = checkpoint.head
        sid = head.session_id
        if not _is_text(sid):
            raise SessionStoreError(self._url, "the session id is not valid Unicode text", session_id=sid)
        try:
            with self._write() as db:
                row = db.execute(
                    "SELECT revision, log_length FROM sessions WHERE session_id = ?", (sid,)
                ).fetchone()
                actual = None if row is None else int(row[0])
                if checkpoint.base_revision == 0:
                    if row is not None:
                        raise SessionConflictError(self._url, sid, 0, actual)
                elif actual != checkpoint.base_revision:
                    raise SessionConflictError(self._url, sid, checkpoint.base_revision, actual)
                log_length = 0 if row is None else int(row[1])
                self._apply(db, checkpoint, log_length)
        except sqlite3.DatabaseError as exc:
            raise SessionStoreError(self._url, f"cannot write: {exc}", session_id=sid) from exc
        return head.revision

    def _apply(self, db: sqlite3.Connection, checkpoint: Checkpoint, log_length: int) -> None:
        head = checkpoint.head
        sid = head.session_id
        check_checkpoint(checkpoint, log_length)
        write_head(db, head, checkpoint.head_fields if checkpoint.base_revision else None)
        for entry in checkpoint.appended:
            cursor = db.execute(
                "INSERT INTO log (session_id, seq, body) VALUES (?, ?, ?)",
                (sid, entry.seq, _pack(entry.body)),
            )
            text = _text_of_body(entry.body)  # what a delete recomputes, so never entry.text
            if text:
                db.execute("INSERT INTO log_text (rowid, text) VALUES (?, ?)", (cursor.lastrowid, text))
        db.execute("DELETE FROM view WHERE session_id = ? AND pos >= ?", (sid, checkpoint.view_start))
        db.executemany(
            "INSERT INTO view (session_id, pos, seq, body, source) VALUES (?, ?, ?, ?, ?)",
            [
                (sid, checkpoint.view_start + i, e.seq, _pack(e.body), e.source)
                for i, e in enumerate(checkpoint.view_tail)
            ],
        )
        if checkpoint.thoughts:
            start = db.execute("SELECT count(*) FROM thoughts WHERE session_id = ?", (sid,)).fetchone()[0]
            db.executemany(
                "INSERT INTO thoughts (session_id, idx, text) VALUES (?, ?, ?)",
                [(sid, start + i, _bind(t)) for i, t in enumerate(checkpoint.thoughts)],
            )
        for entry in checkpoint.ledger:
            self._upsert_ledger(db, sid, entry)
        db.executemany(
            "INSERT INTO edits (session_id, idx, revision, created_at, view_start, replaced, overlays, "
            "events) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(sid, *edit_to_row(edit)) for edit in checkpoint.edits],
        )

    @staticmethod
    def _upsert_ledger(db: sqlite3.Connection, sid: str, entry: LedgerEntry) -> None:
        row = _bind_row(ledger_to_row(entry))
        updated = db.execute(
            "UPDATE ledger SET tool_name = ?, status = ?, started_at = ?, ended_at = ?, result = ?, "
            "error = ? WHERE session_id = ? AND tool_call_id = ?",
            (*row[1:], sid, entry.tool_call_id),
        )
        if updated.rowcount == 0:
            order = db.execute("SELECT count(*) FROM ledger WHERE session_id = ?", (sid,)).fetchone()[0]
            db.execute(
                "INSERT INTO ledger (session_id, tool_call_id, ord, tool_name, status, started_at, ended_at, "
                "result, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (sid, row[0], order, *row[1:]),
            )

    def _head_row(self, db: sqlite3.Connection, session_id: str) -> SessionHead:
        return read_head(db, self._url, session_id)

    def head(self, session_id: str) -> SessionHead:
        """Read a session's head."""
        with self._read(session_id) as db:
            return self._head_row(db, session_id)

    def load(self, session_id: str) -> StoredSession:
        """Read a session's head, view, thoughts and ledger in one snapshot."""
        with self._read(session_id) as db:
            head = self._head_row(db, session_id)
            rows = db.execute(
                "SELECT v.pos, v.seq, v.body, v.source, l.body FROM view v "
                "LEFT JOIN log l ON l.session_id = v.session_id AND l.seq = v.seq "
                "WHERE v.session_id = ? ORDER BY v.pos",
                (session_id,),
            ).fetchall()
            view: list[tuple[ViewEntry, str]] = []
            for pos, seq, stored_body, source, stored_log in rows:
                body, logged = _unpack(stored_body), _unpack(stored_log)
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
                    view.append((ViewEntry(seq, None, None), logged))
                elif body is not None:
                    view.append((ViewEntry(None, body, source), body))
                else:
                    raise SessionStoreError(self._url, f"view position {pos} is empty", session_id=session_id)
            thoughts = tuple(
                _unbind(r[0])
                for r in db.execute(
                    "SELECT text FROM thoughts WHERE session_id = ? ORDER BY idx", (session_id,)
                )
            )
            ledger = tuple(
                ledger_from_row(self._url, session_id, _unbind_row(r))
                for r in db.execute(
                    "SELECT tool_call_id, tool_name, status, started_at, ended_at, result, error FROM ledger "
                    "WHERE session_id = ? ORDER BY ord",
                    (session_id,),
                )
            )
        return StoredSession(head, tuple(view), thoughts, ledger)

    def read_log(self, session_id: str, start: int = 0, stop: int | None = None) -> list[LogEntry]:
        """The raw log from ``start`` to ``stop`` (exclusive)."""
        with self._read(session_id) as db:
            self._head_row(db, session_id)
            end = stop if stop is not None else 2**62
            return [
                LogEntry(seq, _unpack(body))
                for seq, body in db.execute(
                    "SELECT seq, body FROM log WHERE session_id = ? AND seq >= ? AND seq < ? ORDER BY seq",
                    (session_id, start, end),
                )
            ]

    def edits(self, session_id: str) -> list[EditRecord]:
        """Every edit recorded over the session's log, oldest first."""
        with self._read(session_id) as db:
            self._head_row(db, session_id)
            return [
                edit_from_row(self._url, session_id, row)
                for row in db.execute(
                    "SELECT idx, revision, created_at, view_start, replaced, overlays, events FROM edits "
                    "WHERE session_id = ? ORDER BY idx",
                    (session_id,),
                )
            ]

    def list_sessions(self) -> list[SessionHead]:
        """Every session's head, most recently modified first."""
        with self._read() as db:
            rows = db.execute(f"{HEAD_SELECT} ORDER BY s.last_modified DESC").fetchall()
        return [head_from_row(self._url, _unbind_row(row)) for row in rows]

    def fork(self, session_id: str, new_session_id: str) -> SessionHead:
        """Copy a session under a new id, log, view, thoughts, ledger and edits included."""
        if not _is_text(new_session_id):
            raise SessionStoreError(
                self._url, "the new session id is not valid Unicode text", session_id=session_id
            )
        with self._write() as db:
            head = self._head_row(db, session_id)
            if db.execute("SELECT 1 FROM sessions WHERE session_id = ?", (new_session_id,)).fetchone():
                raise SessionConflictError(self._url, new_session_id, 0, None)
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
            write_head(db, forked, None)
            rows = db.execute(
                "SELECT seq, body FROM log WHERE session_id = ? ORDER BY seq", (session_id,)
            ).fetchall()
            for seq, body in rows:
                cursor = db.execute(
                    "INSERT INTO log (session_id, seq, body) VALUES (?, ?, ?)", (new_session_id, seq, body)
                )
                text = _text_of_body(body)
                if text:
                    db.execute("INSERT INTO log_text (rowid, text) VALUES (?, ?)", (cursor.lastrowid, text))
            for table, columns in (
                ("view", "pos, seq, body, source"),
                ("edits", "idx, revision, created_at, view_start, replaced, overlays, events"),
                ("thoughts", "idx, text"),
                ("ledger", "tool_call_id, ord, tool_name, status, started_at, ended_at, result, error"),
            ):
                db.execute(
                    f"INSERT INTO {table} (session_id, {columns}) "
                    f"SELECT ?, {columns} FROM {table} WHERE session_id = ?",
                    (new_session_id, session_id),
                )
        return forked

    def _drop_log_rows(self, db: sqlite3.Connection, session_id: str, condition: str = "") -> int:
        where = "session_id = ?" + condition
        db.execute(
            "INSERT INTO log_text (log_text, rowid, text) "
            f"SELECT 'delete', id, harness_text(body) FROM log WHERE {where} AND harness_text(body) != ''",
            (session_id,),
        )
        return db.execute(f"DELETE FROM log WHERE {where}", (session_id,)).rowcount

    def delete(self, session_id: str) -> bool:
        """Delete a session with its log; ``False`` when there was none."""
        if not _is_text(session_id):
            return False
        with self._write() as db:
            if db.execute("SELECT 1 FROM sessions WHERE session_id = ?", (session_id,)).fetchone() is None:
                return False
            self._drop_log_rows(db, session_id)
            for table in ("view", "edits", "thoughts", "ledger", "session_metadata", "sessions"):
                db.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))
        return True

    def prune(
        self,
        *,
        keep_last: int | None = None,
        newer_than: datetime | None = None,
        drop_log: bool = False,
        dry_run: bool = False,
    ) -> PruneResult:
        """Delete (or with ``drop_log``, trim the log of) every session outside the kept set."""
        heads = self.list_sessions()
        old = prune_plan(heads, keep_last=keep_last, newer_than=newer_than)
        if dry_run or not old:
            return PruneResult(
                deleted=() if drop_log else tuple(old),
                trimmed=tuple(old) if drop_log else (),
                dry_run=dry_run,
            )
        if not drop_log:
            for sid in old:
                self.delete(sid)
            return PruneResult(deleted=tuple(old))
        dropped = 0
        with self._write() as db:
            for sid in old:
                dropped += self._trim(db, sid)
                db.execute("UPDATE sessions SET log_pruned = 1 WHERE session_id = ?", (sid,))
        return PruneResult(trimmed=tuple(old), log_messages_dropped=dropped)

    def _trim(self, db: sqlite3.Connection, session_id: str) -> int:
        keep = {
            r[0]
            for r in db.execute(
                "SELECT seq FROM view WHERE session_id = ? AND seq IS NOT NULL", (session_id,)
            )
        }
        rows = db.execute("SELECT id, seq, body FROM log WHERE session_id = ?", (session_id,)).fetchall()
        doomed = [(rowid, body) for rowid, seq, body in rows if seq not in keep]
        for rowid, body in doomed:
            text = _text_of_body(body)
            if text:
                db.execute(
                    "INSERT INTO log_text (log_text, rowid, text) VALUES ('delete', ?, ?)", (rowid, text)
                )
        db.executemany("DELETE FROM log WHERE id = ?", [(rowid,) for rowid, _ in doomed])
        return len(doomed)

    def search(self, query: str, *, session_id: str | None = None, limit: int = 20) -> list[SearchHit]:
        """Full-text search of the raw logs, by the grammar of :mod:`harness.session.query` (FTS5, bm25)."""
        check_limit(self._url, limit)
        parsed = parse_query(query)
        if parsed.empty or (session_id is not None and not _is_text(session_id)):
            return []
        sql = (
            "SELECT l.session_id, l.seq, l.body, bm25(log_text) AS rank FROM log_text "
            "JOIN log l ON l.id = log_text.rowid WHERE log_text MATCH ?"
        )
        params: list[Any] = [fts_query(parsed)]
        if session_id is not None:
            sql += " AND l.session_id = ?"
            params.append(session_id)
        sql += " ORDER BY rank, l.session_id, l.seq LIMIT ?"
        params.append(limit)
        with self._read(session_id) as db:
            rows = db.execute(sql, params).fetchall()
        words = " ".join(parsed.positive_words())
        return [
            SearchHit(sid, seq, snippet(_text_of_body(body), words), -float(rank))
            for sid, seq, body, rank in rows
        ]

    def take_lease(self, session_id: str, holder: LeaseHolder) -> None:
        """Take the session's run lease (see :class:`~harness.session.lease.LeasingStore`)."""
        with self._write() as db:
            _take_lease(db, self._url, session_id, holder)

    def drop_lease(self, session_id: str, token: str) -> None:
        """Drop the session's run lease if ``token`` holds it."""
        with self._write() as db:
            _drop_lease(db, session_id, token)

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._db.close()

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
