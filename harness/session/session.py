"""The :class:`Session`: a conversation's history and accounting, stored or in a file."""

from __future__ import annotations

__all__ = ["Session"]

import asyncio
import os
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import attrs

from harness.core.messages import CanonicalMessage, Usage, history_repr
from harness.errors import SessionLoadError, SessionSaveError, SessionStoreError, WireFormatError
from harness.session.asyncstore import AsyncSessionStore, async_store, finish_shielded, is_async_store
from harness.session.fileformat import (
    SESSION_VERSION,
    load_error,
    session_bytes,
    session_fields_from_bytes,
    usage_from_mapping,
    usage_to_mapping,
)
from harness.session.files import atomic_write_bytes
from harness.session.ids import acheck_id_free, check_id_free, check_session_id
from harness.session.paths import default_session_dir, project_id_for
from harness.session.records import Checkpoint, LedgerEntry, SessionHead, StoredSession
from harness.session.store import SessionStore
from harness.session.tracking import StoreTracker, decode_bodies

if TYPE_CHECKING:
    from harness.tokens import TokenCounter


def _now() -> datetime:
    return datetime.now(UTC)


_Pending: TypeAlias = "tuple[Checkpoint, list[CanonicalMessage], list[int | None], list[int | None]]"


def _optional_path(value: str | os.PathLike[str] | None) -> Path | None:
    """Accept ``str`` and any ``os.PathLike`` wherever a path is documented."""
    return None if value is None else Path(value)


# Files whose last load failed: never overwritten without ``force=True``.
_QUARANTINED: set[str] = set()


def _key(path: Path) -> str:
    return str(path.resolve())


@attrs.define(eq=False)
class Session:
    """A conversation: its history, thoughts, usage and where it is saved.

    Attributes:
        session_id: uuid4 hex.
        project_id: See :func:`project_id_for` (computed on first use unless given).
        created_at: When the session was created (UTC).
        last_modified: When it was last saved (UTC).
        working_directory: The working directory it belongs to.
        current_model: Name of the model last used.
        total_tokens: Token count of ``messages``, updated after every change by the loop.
        usage: Usage of every run so far (``session_total_usage`` in the file).
        thoughts: Model thoughts captured by the loop, plus legacy ``{"thought"}`` entries.
        messages: The stored history. A run works on its own copy and hands the result
            back when it ends (see :meth:`record_run`).
        original_query: The first prompt of the task, kept across runs (not persisted).
        path: The session file (``str`` or any ``os.PathLike``, kept as a ``Path``);
            ``None`` for an in-memory session.
        store: The :class:`SessionStore` the session lives in (``None``: a file or
            in-memory session). A run checkpoints a stored session after every step.
        ledger: The tool-effect ledger: each tool call's :class:`LedgerEntry` by id.
        forked_from: The session this one was forked from.
        metadata: Extension data a plugin keeps with the session (a JSON object).
        clock: Where checkpoints read the time (``last_modified``, edit records); a run sets
            it to its effects' clock, so a durable engine's replay records the same times.
    """

    session_id: str = attrs.field(factory=lambda: uuid.uuid4().hex)
    _project_id: str | None = attrs.field(default=None, alias="project_id")
    created_at: datetime = attrs.field(factory=_now)
    last_modified: datetime = attrs.field(factory=_now)
    working_directory: str = attrs.field(factory=os.getcwd)
    current_model: str | None = None
    total_tokens: int = 0
    usage: Usage = attrs.field(factory=Usage)
    thoughts: list[str] = attrs.field(factory=list[str])
    messages: list[CanonicalMessage] = attrs.field(factory=list[CanonicalMessage], repr=history_repr)
    original_query: str | None = None
    path: Path | None = attrs.field(default=None, converter=_optional_path)
    store: SessionStore | AsyncSessionStore | None = attrs.field(default=None, repr=False, kw_only=True)
    ledger: dict[str, LedgerEntry] = attrs.field(factory=dict[str, LedgerEntry], repr=False, kw_only=True)
    forked_from: str | None = attrs.field(default=None, kw_only=True)
    metadata: dict[str, Any] = attrs.field(factory=dict[str, Any], repr=False, kw_only=True)
    clock: Callable[[], datetime] = attrs.field(default=_now, repr=False, kw_only=True, eq=False)
    _tracker: StoreTracker = attrs.field(factory=StoreTracker, init=False, repr=False)
    _written: SessionHead | None = attrs.field(default=None, init=False, repr=False)
    _write_lock: asyncio.Lock | None = attrs.field(default=None, init=False, repr=False)

    @property
    def project_id(self) -> str:
        """See :func:`project_id_for`; computed from ``working_directory`` when first read.

        Computing it may run ``git rev-parse``, so a throw-away session (``Agent.run(prompt)``
        without one) never pays for it.
        """
        if self._project_id is None:
            self._project_id = project_id_for(self.working_directory)
        return self._project_id

    @project_id.setter
    def project_id(self, value: str) -> None:
        self._project_id = value

    @classmethod
    def new(cls, **fields: Any) -> Session:
        """Create an in-memory session (no file until :meth:`save` is given a path)."""
        return cls(**fields)

    @classmethod
    def create(
        cls,
        directory: str | os.PathLike[str] | None = None,
        *,
        store: SessionStore | AsyncSessionStore | None = None,
        **fields: Any,
    ) -> Session:
        """Create a session in ``store``, or saved under ``directory`` as a JSON file.

        A ``session_id`` given must follow the CLI's rule (:mod:`harness.session.ids`) and is
        looked up in a synchronous ``store`` (:meth:`acreate` awaits it): a taken id fails
        here, not in the run's first :meth:`checkpoint`, which writes the session. Without
        ``store`` the file is ``<project_id>_<session_id>.json`` under ``directory`` (default
        :func:`default_session_dir`); nothing is written yet.

        Raises:
            SessionIdError, SessionConflictError: The id breaks the rule, or is taken.
        """
        given = check_session_id(fields["session_id"]) if "session_id" in fields else None
        session = cls(**fields)
        if store is not None:
            if given is not None and not is_async_store(store):
                check_id_free(cast(SessionStore, store), given)
            session.store = store
            return session
        folder = Path(directory) if directory is not None else default_session_dir()
        session.path = folder / f"{session.project_id}_{session.session_id}.json"
        return session

    @classmethod
    async def acreate(cls, *, store: SessionStore | AsyncSessionStore, **fields: Any) -> Session:
        """:meth:`create` in ``store``, awaited: a given id is looked up off the event loop."""
        given = check_session_id(fields["session_id"]) if "session_id" in fields else None
        if given is not None:
            await acheck_id_free(store, given)
        return cls(**fields, store=store)

    # ----------------------------------------------------------------- stores

    @classmethod
    def open(cls, store: SessionStore, session_id: str) -> Session:
        """Load a session from ``store``: its view, thoughts, usage, ledger and revision.

        Raises:
            SessionNotFoundError: The store has no such session.
            SessionStoreError: The store or the session's rows are corrupt (nothing is
                changed).
        """
        if is_async_store(store):
            raise SessionStoreError(
                store.url, "this store is asynchronous; await Session.aopen(store, session_id) instead"
            )
        stored = store.load(session_id)
        return cls.from_stored(store, stored, edits=len(store.edits(session_id)))

    @classmethod
    async def aopen(cls, store: SessionStore | AsyncSessionStore, session_id: str) -> Session:
        """:meth:`open`, awaited: the reads run off the event loop's thread (see :func:`async_store`).

        Raises:
            SessionNotFoundError: The store has no such session.
            SessionStoreError: The store or the session's rows are corrupt.
        """
        reader = async_store(store)
        stored = await reader.load(session_id)
        edits = await reader.edits(session_id)
        return cls.from_stored(store, stored, edits=len(edits))

    @classmethod
    def from_stored(
        cls, store: SessionStore | AsyncSessionStore, stored: StoredSession, *, edits: int
    ) -> Session:
        """The session ``stored`` holds (what :meth:`SessionStore.load` returned), bound to ``store``.

        :meth:`open` is ``store.load`` then this. A durable engine uses it to start a
        replayed run from the session as it was when the run began (a snapshot kept in
        its journal), not as the run's earlier execution left it.

        Args:
            store: The store later checkpoints go to.
            stored: The session's head, view, thoughts and ledger.
            edits: How many edit records the store holds for it.

        Raises:
            SessionStoreError: A stored message is not valid.
        """
        head = stored.head
        session_id = head.session_id
        session = cls(
            session_id=head.session_id,
            project_id=head.project_id,
            created_at=head.created_at,
            last_modified=head.last_modified,
            working_directory=head.working_directory,
            current_model=head.current_model,
            total_tokens=head.total_tokens,
            usage=usage_from_mapping(head.usage),
            thoughts=list(stored.thoughts),
            original_query=head.original_query,
            store=store,
            ledger={entry.tool_call_id: entry for entry in stored.ledger},
            forked_from=head.forked_from,
            metadata=dict(head.metadata),
        )
        try:
            session.messages = session._tracker.adopt(stored, edits=edits)
        except (WireFormatError, ValueError) as exc:
            raise SessionStoreError(
                store.url, f"a stored message is not valid: {exc}", session_id=session_id
            ) from exc
        return session

    @property
    def revision(self) -> int:
        """The store revision this session was last read or written at (``0``: not written)."""
        return self._tracker.revision

    def head_record(self) -> SessionHead:
        """The session's head values as a store keeps them (revision and lengths as persisted)."""
        return SessionHead(
            session_id=self.session_id,
            project_id=self.project_id,
            created_at=self.created_at,
            last_modified=self.last_modified,
            working_directory=self.working_directory,
            current_model=self.current_model,
            total_tokens=self.total_tokens,
            usage=usage_to_mapping(self.usage),
            revision=self._tracker.revision,
            log_length=self._tracker.log_length,
            view_length=len(self._tracker.view),
            original_query=self.original_query,
            forked_from=self.forked_from,
            log_pruned=self._tracker.log_pruned,
            metadata=dict(self.metadata),
        )

    def note_overlays(
        self, messages: Iterable[CanonicalMessage], events: Iterable[Mapping[str, Any]] = ()
    ) -> None:
        """Mark messages a capability wrote, so the next checkpoint stores them as overlays.

        A placeholder, a cleared tool result or a summary is not history: it goes into the
        view over the log, never into the log. ``events`` are the compaction events (as
        JSON objects) that made them; they are recorded with the edit.
        """
        self._tracker.note_overlays(messages, events)

    def append_to_log(self, messages: Iterable[CanonicalMessage]) -> None:
        """Queue raw messages for the log that the view shows only in edited form.

        The run uses it when a new prompt is merged into a pending request: the prompt's
        own request goes into the log as written, the merged request into the view.
        """
        self._tracker.note_log_only(messages)

    def log_seq_of(self, message: CanonicalMessage) -> int | None:
        """The position in the log of a message of the persisted view (an overlay: its source).

        ``None`` for a message not written yet, or an overlay with no single source.
        """
        return self._tracker.origin_of(message)

    def record_tool(self, entry: LedgerEntry) -> None:
        """Put a tool call's ledger entry in :attr:`ledger`, to be written at the next checkpoint."""
        self.ledger[entry.tool_call_id] = entry
        self._tracker.note_ledger(entry)

    def checkpoint(self) -> int:
        """Write what changed since the last checkpoint to :attr:`store`; return the new revision.

        Costs what changed: new log messages, new view entries, new thoughts and ledger
        entries; a compaction also writes its overlays and an edit record. Nothing is
        written when nothing changed. A run awaits :meth:`acheckpoint` instead, which never
        blocks the event loop; this is for synchronous code (the CLI, scripts).

        Raises:
            SessionConflictError: Another writer changed the session since it was read
                (nothing was written; reload with :meth:`open`).
            SessionStoreError: There is no store, it cannot be written, or it is an
                asynchronous store (await :meth:`acheckpoint` then).
        """
        pending = self._pending_checkpoint()
        if isinstance(pending, int):
            return pending
        store = self.store
        if is_async_store(store):
            raise SessionStoreError(
                self._store_url(),
                "this session's store is asynchronous; await session.acheckpoint() instead",
                session_id=self.session_id,
            )
        revision = cast(SessionStore, store).commit(pending[0])
        self._checkpoint_committed(pending, revision)
        return self._tracker.revision

    async def acheckpoint(self) -> int:
        """:meth:`checkpoint`, awaited: the store's I/O never runs on the event loop's thread.

        Checkpoints of one session are written one at a time, in the order they were
        asked for. A cancellation (an abort, a timeout) that arrives while a checkpoint is
        being written waits for the write to finish and is raised after it, so the session
        always knows what its store holds.

        Raises:
            SessionConflictError: Another writer changed the session since it was read.
            SessionStoreError: There is no store, or it cannot be written.
        """
        if self._write_lock is None:
            self._write_lock = asyncio.Lock()
        async with self._write_lock:
            pending = self._pending_checkpoint()
            if isinstance(pending, int):
                return pending
            store = async_store(cast("SessionStore | AsyncSessionStore", self.store))
            await finish_shielded(
                store.commit(pending[0]), lambda revision: self._checkpoint_committed(pending, revision)
            )
            return self._tracker.revision

    def _store_url(self) -> str:
        return self.store.url if self.store is not None else "-"

    def _pending_checkpoint(self) -> int | _Pending:
        """The checkpoint to write, or the current revision when nothing changed."""
        store = self.store
        if store is None:
            raise SessionStoreError(
                "-", "this session has no store; give it one or use save()", session_id=self.session_id
            )
        tracker = self._tracker
        view = self.messages
        if (
            tracker.revision
            and not tracker.dirty
            and len(view) == len(tracker.view)
            and view == tracker.view
            and len(self.thoughts) == tracker.thoughts
            and self._head_unchanged()
        ):
            return tracker.revision
        self.last_modified = self.clock()
        return tracker.checkpoint(
            self.head_record(), view, self.thoughts, self.ledger, now=self.last_modified
        )

    def _checkpoint_committed(self, pending: _Pending, revision: int) -> None:
        """The store took ``pending``: make it the persisted state."""
        del revision  # the checkpoint's own head revision is what the store now holds
        checkpoint, adopted, origins, sources = pending
        self._tracker.committed(checkpoint, adopted, origins, sources)
        for entry in checkpoint.ledger:  # answers now in the log leave the ledger (stored once)
            if entry.result is None and self.ledger.get(entry.tool_call_id, entry).result is not None:
                self.ledger[entry.tool_call_id] = entry
        self._written = checkpoint.head

    def _head_unchanged(self) -> bool:
        written = self._written
        if written is None:
            return False
        return (
            written.total_tokens == self.total_tokens
            and written.current_model == self.current_model
            and written.usage == usage_to_mapping(self.usage)
            and written.original_query == self.original_query
            and written.metadata == self.metadata
        )

    def transcript(self) -> list[CanonicalMessage]:
        """The full raw log: every message as it was first written, with no edit applied.

        Raises:
            SessionStoreError: The session has no store (or an asynchronous one: await
                :meth:`atranscript`), or a stored message is invalid.
        """
        store = self._log_store()
        if is_async_store(store):
            raise SessionStoreError(
                store.url,
                "this session's store is asynchronous; await session.atranscript() instead",
                session_id=self.session_id,
            )
        bodies = [e.body for e in cast(SessionStore, store).read_log(self.session_id)]
        return decode_bodies(store.url, self.session_id, bodies, what="logged message")

    async def atranscript(self) -> list[CanonicalMessage]:
        """:meth:`transcript`, awaited (the read runs off the event loop's thread).

        Raises:
            SessionStoreError: The session has no store, or a stored message is invalid.
        """
        store = self._log_store()
        entries = await async_store(store).read_log(self.session_id)
        return decode_bodies(store.url, self.session_id, [e.body for e in entries], what="logged message")

    def _log_store(self) -> SessionStore | AsyncSessionStore:
        store = self.store
        if store is None:
            raise SessionStoreError(
                "-", "this session has no store, so it keeps no log", session_id=self.session_id
            )
        return store

    def fork(self, session_id: str | None = None) -> Session:
        """Copy this stored session under a new id (default: a new uuid4) and open the copy.

        The session must be checkpointed first; what is not yet written is not copied.
        """
        store = self._fork_store()
        if is_async_store(store):
            raise SessionStoreError(
                store.url, "this session's store is asynchronous; await session.afork() instead"
            )
        new_id = check_session_id(session_id) if session_id is not None else uuid.uuid4().hex
        cast(SessionStore, store).fork(self.session_id, new_id)
        return Session.open(cast(SessionStore, store), new_id)

    async def afork(self, session_id: str | None = None) -> Session:
        """:meth:`fork`, awaited (the copy runs off the event loop's thread)."""
        store = self._fork_store()
        new_id = check_session_id(session_id) if session_id is not None else uuid.uuid4().hex
        await async_store(store).fork(self.session_id, new_id)
        return await Session.aopen(store, new_id)

    def _fork_store(self) -> SessionStore | AsyncSessionStore:
        if self.store is None:
            raise SessionStoreError("-", "only a stored session can be forked", session_id=self.session_id)
        return self.store

    def record_run(
        self,
        *,
        messages: list[CanonicalMessage],
        usage: Usage,
        thoughts: Sequence[str],
        model_name: str | None,
        total_tokens: int,
        original_query: str | None,
    ) -> None:
        """Take the result of a run, finished or failed: the run's one write to the session.

        Args:
            messages: The run's history, which becomes the session's.
            usage: The run's usage, added to the session's total.
            thoughts: Thoughts the run captured, appended in order.
            model_name: The model the run used.
            total_tokens: Token count of ``messages``.
            original_query: The task's first prompt.
        """
        self.messages = messages
        self.usage = self.usage + usage
        self.thoughts.extend(thoughts)
        self.current_model = model_name
        self.total_tokens = total_tokens
        self.original_query = original_query

    def update_token_count(self, counter: TokenCounter) -> int:
        """Recount ``total_tokens`` with ``counter`` (cached, so cheap after a small change)."""
        self.total_tokens = counter.count_messages(self.messages)
        return self.total_tokens

    # ----------------------------------------------------------------- serialisation

    def to_dict(self) -> dict[str, Any]:
        """The file's JSON document (exactly the contract's keys)."""
        from harness.wire import messages_to_jsonable

        usage = usage_to_mapping(self.usage)
        return {
            "version": SESSION_VERSION,
            "session_id": self.session_id,
            "project_id": self.project_id,
            "created_at": self.created_at.isoformat(),
            "last_modified": self.last_modified.isoformat(),
            "working_directory": self.working_directory,
            "current_model": self.current_model,
            "total_tokens": self.total_tokens,
            "session_total_usage": usage,
            "thoughts": list(self.thoughts),
            "messages": messages_to_jsonable(self.messages),
        }

    def save(self, path: str | os.PathLike[str] | None = None, *, force: bool = False) -> Path:
        r"""Write the session atomically (see the module docstring) and return the path.

        A new session file is created with mode 0600 whatever the umask (conversations are
        private data); an existing one keeps its mode. A symlink is written through (its
        target is replaced, the link stays), and a target that is not a regular file
        (FIFO, device, directory, dangling link) is refused. The previous version is kept
        as the rolling ``<name>.bak`` (see :mod:`harness.session.files`).

        Any text is stored losslessly: a lone surrogate (a non-UTF-8 file name from
        ``os.listdir`` or ``os.fsdecode``) is written as a ``\u`` escape and the file stays
        valid UTF-8. A non-finite float (``NaN``, ``Infinity``) is written as ``null``, as
        :func:`~harness.wire.dump_messages` writes it (see :mod:`harness.wire.jsontext`).

        Args:
            path: Target file (default: :attr:`path`, or a new file in
                :func:`default_session_dir`). The session remembers it.
            force: Overwrite a file whose last load failed (it is kept as
                ``<name>.corrupt``, not as the backup).

        Raises:
            SessionSaveError: The target failed to load earlier and ``force`` is false,
                the file cannot be written, or a value cannot be written as JSON (an
                arbitrary object in a tool result; the reason names the message, part
                and field). Nothing is written then.
        """
        if path is not None:
            self.path = Path(path)
        elif self.path is None:
            self.path = default_session_dir() / f"{self.project_id}_{self.session_id}.json"
        target = self.path
        quarantined = _key(target) in _QUARANTINED
        if quarantined and not force:
            raise SessionSaveError(
                f"refusing to overwrite {target}: it failed to load earlier and may hold data worth "
                "recovering; save elsewhere or pass force=True"
            )
        self.last_modified = _now()
        try:
            data = self.to_bytes()
        except SessionSaveError as exc:
            raise SessionSaveError(f"cannot save session to {target}: {exc}") from exc.__cause__
        try:
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            if quarantined and target.exists():
                os.replace(target, target.with_name(target.name + ".corrupt"))
            atomic_write_bytes(
                target, data, backup="none" if quarantined else "rolling", new_file_mode="private"
            )
        except OSError as exc:
            raise SessionSaveError(f"cannot save session to {target}: {exc}") from exc
        _QUARANTINED.discard(_key(target))
        return target

    def to_bytes(self) -> bytes:
        r"""The session file's bytes, as :meth:`save` writes them (``harness compact`` too).

        UTF-8 JSON of :meth:`to_dict`, indented by one space. Lone surrogates are written as
        ``\u`` escapes (the bytes stay valid UTF-8) and non-finite floats as ``null``,
        the rules of :mod:`harness.wire.jsontext`.

        Raises:
            SessionSaveError: A value cannot be written as JSON (an arbitrary object in a
                tool result); the reason names the message, part and field.
        """
        return session_bytes(self.to_dict(), self.messages)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Session:
        """Load a session file.

        Raises:
            SessionLoadError: The file is missing, unreadable, truncated, not JSON, has
                a wrong or unknown ``version``, a key of the wrong type, or messages the
                wire format rejects. The file is left untouched.
        """
        file = Path(path)
        try:
            raw = file.read_bytes()
        except FileNotFoundError:
            raise load_error(file, "file not found") from None
        except OSError as exc:
            raise load_error(file, f"cannot read: {exc}") from exc
        try:
            session = cls(**session_fields_from_bytes(file, raw))
        except SessionLoadError:
            _QUARANTINED.add(_key(file))
            raise
        _QUARANTINED.discard(_key(file))
        return session
