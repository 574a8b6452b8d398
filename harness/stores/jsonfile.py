"""``JsonFileStore``: sessions as today's JSON files in a folder, each with its raw log beside it.

The folder (``file:///dir``) holds, per session, the files :mod:`harness.stores.filelog` describes: the
snapshot ``<project_id>_<session_id>.json`` (today's session file, exactly the contract's keys, the export
and import format: ``Session.load`` and ``list_sessions`` read it), the raw log ``<stem>.log.jsonl`` and the
journal ``<stem>.meta.jsonl`` (thoughts, ledger, edits), both append-only, and the sidecar ``<stem>.state``.

**A commit**, under an exclusive ``fcntl.flock`` of ``<dir>/.harness-store.lock`` (so
revision checks hold across processes): read the sidecar and compare revisions, cut the
log and the journal back to their committed lengths (what a crashed commit left), append
the new lines (and a changed metadata's file: :mod:`harness.stores.filemeta`), replace the sidecar
atomically (**the commit point**), then replace the snapshot. A crash before that leaves
the previous revision, with lines past the committed lengths that nothing reads; a crash
after it leaves the new revision with a snapshot one revision behind, rewritten by the
next commit. Readers take a shared lock. ``durability="full"`` also fsyncs the files and
the folder (a power cut); the default survives a killed process.

**Costs.** The log and the journal get only what the step added (O(delta)); the sidecar
(the view's entries) and the snapshot (the view's messages) are rewritten whole, so a
step costs O(view): use SQLite for long sessions. Search is a plain scan of the logs. A handle
keeps the last :data:`CACHED_SESSIONS` sessions it read or wrote whole in memory, no more.

**Plain session files** (written by ``Session.save``, no sidecar) are sessions too: they
load at revision 1 with a log equal to their messages. The first commit to one writes
its log and sidecar and keeps the original file as ``<name>.bak``.
"""

from __future__ import annotations

__all__ = ["CACHED_SESSIONS", "LOCK_NAME", "JsonFileStore"]

import contextlib
import glob
import os
import re
import uuid
import warnings
from collections import OrderedDict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, cast

import attrs

from harness.errors import HarnessWarning, SessionConflictError, SessionNotFoundError, SessionStoreError
from harness.session.files import backup_path
from harness.session.lease import LeaseHolder
from harness.session.query import check_limit, parse_query, text_words
from harness.session.records import (
    Checkpoint,
    EditRecord,
    LogEntry,
    PruneResult,
    SearchHit,
    SessionHead,
    StoredSession,
    ViewEntry,
)
from harness.session.text import searchable_text
from harness.stores.filelog import (
    NONCE_PREFIX,
    FileState,
    Journal,
    decode_state,
    encode_state,
    journal_lines,
    log_line,
    parse_journal,
    parse_log,
    read_plain,
    snapshot_bytes,
    state_nonce,
)
from harness.stores.filemeta import METADATA_INFIX, drop_metadata, read_metadata, write_metadata
from harness.stores.folder import LOCK_NAME, StoreFolder
from harness.stores.leasefile import drop_lease as _drop_lease
from harness.stores.leasefile import take_lease as _take_lease
from harness.stores.rows import check_checkpoint, prune_plan, snippet

_STATE = ".state"
_NAME_PROBLEM = re.compile(r"[/\\\x00]|^\.|^$")

Durability = Literal["normal", "full"]

CACHED_SESSIONS = 4
"""Sessions a handle keeps read whole (least recently used dropped first)."""


@attrs.define
class _Loaded:
    """A session read whole: its committed state, view bodies, journal (cached per revision)."""

    state: FileState
    bodies: list[str]
    journal: Journal
    plain: list[LogEntry] | None = None  # a plain file's messages (its log), not yet written
    files: tuple[Any, ...] = ()  # (inode, size, mtime) of the log and the journal when cached


class JsonFileStore:
    """Sessions as JSON files in one folder (see the module docstring).

    Args:
        path: The folder (created with mode 0700 if missing).
        durability: ``"normal"`` survives a killed process; ``"full"`` fsyncs every commit.
        read_only: Read an existing folder only (what read-only commands do): nothing is
            created in it, not even the lock file, and a write raises.

    Raises:
        SessionStoreError: ``path`` exists and is not a folder, or cannot be created; with
            ``read_only``, also when it does not exist.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, durability: Durability = "normal", read_only: bool = False
    ) -> None:
        self.path = Path(path)
        self._url = f"file://{self.path.absolute()}"
        self._folder = StoreFolder(self.path, self._url, durable=durability == "full", read_only=read_only)
        self._cache: OrderedDict[str, _Loaded] = OrderedDict()
        self._stems: dict[str, str] = {}
        self.problems: list[tuple[Path, str]] = []
        """Files :meth:`list_sessions` skipped last time (not session files), with the reason."""

    def _locked(self, *, exclusive: bool) -> contextlib.AbstractContextManager[None]:
        return self._folder.locked(exclusive=exclusive)

    def _file(self, name: str) -> Path:
        return self.path / name

    # ---------------------------------------------------------------- finding sessions

    def _check_names(self, head: SessionHead) -> None:
        for what, value in (("session id", head.session_id), ("project id", head.project_id)):
            if _NAME_PROBLEM.search(value) or len(value) > 120:
                raise SessionStoreError(
                    self._url,
                    f"the {what} {value!r} cannot be part of a file name",
                    session_id=head.session_id,
                )

    def _find(self, session_id: str) -> tuple[str, bool] | None:
        """``(stem, has_sidecar)`` of a session, or ``None``."""
        if _NAME_PROBLEM.search(session_id):
            return None
        stem = self._stems.get(session_id)
        if stem is not None and self._file(stem + _STATE).exists():
            return stem, True
        pattern = "*_" + glob.escape(session_id)
        for candidate in sorted(self.path.glob(pattern + _STATE)):
            name = candidate.name[: -len(_STATE)]
            if self._state(name, session_id=session_id, metadata=False).head.session_id == session_id:
                self._stems[session_id] = name
                return name, True
        for candidate in sorted(self.path.glob(pattern + ".json")):
            name = candidate.name[: -len(".json")]
            if not self._file(name + _STATE).exists() and self._plain_id(candidate) == session_id:
                return name, False
        return None

    def _plain_id(self, file: Path) -> str | None:
        from harness.wire import decode_json

        try:
            doc = decode_json(file.read_bytes())
        except (OSError, ValueError, RecursionError):
            return file.name[:-5].rpartition("_")[2] or None  # unreadable: it still claims its id
        value = cast(dict[str, Any], doc).get("session_id") if isinstance(doc, dict) else None
        return value if isinstance(value, str) else None

    def _state(self, stem: str, *, session_id: str, metadata: bool = True) -> FileState:
        raw = self._folder.read(stem + _STATE, session_id=session_id)
        state = decode_state(raw, store=self._url, session_id=session_id, file=stem + _STATE)
        return read_metadata(self._folder, state, session_id=session_id) if metadata else state

    def _plain(self, stem: str, session_id: str) -> _Loaded:
        """A plain session file as a session at revision 1 whose log is its messages."""
        head, bodies, thoughts = read_plain(
            self._file(stem + ".json"), store=self._url, session_id=session_id
        )
        state = FileState(
            head, stem, f"{stem}.log.jsonl", view=tuple(ViewEntry(i) for i in range(len(bodies)))
        )
        journal = Journal(thoughts=thoughts)
        return _Loaded(state, bodies, journal, plain=[LogEntry(i, b) for i, b in enumerate(bodies)])

    def _log(self, state: FileState, session_id: str) -> list[LogEntry]:
        data = self._folder.read(state.log_file, state.log_bytes, session_id=session_id)
        return parse_log(data, store=self._url, session_id=session_id, file=state.log_file)

    def _journal(self, state: FileState, session_id: str) -> Journal:
        name = state.stem + ".meta.jsonl"
        data = self._folder.read(name, state.meta_bytes, session_id=session_id)
        return parse_journal(data, store=self._url, session_id=session_id, file=name)

    def _loaded(self, session_id: str) -> _Loaded:
        """The session read whole (from the cache when it is still the committed revision)."""
        found = self._find(session_id)
        if found is None:
            raise SessionNotFoundError(self._url, session_id)
        stem, has_state = found
        if not has_state:
            return self._plain(stem, session_id)
        cached = self._cache.get(session_id)
        if cached is not None and cached.state.stem == stem and cached.state.nonce:
            try:
                with open(self._file(stem + _STATE), "rb") as handle:
                    prefix = handle.read(NONCE_PREFIX)
            except OSError:
                prefix = b""
            if state_nonce(prefix) == cached.state.nonce and cached.files == self._stat(cached.state):
                self._cache.move_to_end(session_id)
                return cached  # the commit this handle wrote or read last, files untouched since
        state = self._state(stem, session_id=session_id)
        bodies_by_seq = {e.seq: e.body for e in self._log(state, session_id)}
        bodies: list[str] = []
        for position, entry in enumerate(state.view):
            if entry.seq is None:
                bodies.append(entry.body or "")
            elif entry.seq in bodies_by_seq:
                bodies.append(bodies_by_seq[entry.seq])
            else:
                raise SessionStoreError(
                    self._url,
                    f"view position {position} refers to log message {entry.seq}, which is missing",
                    session_id=session_id,
                )
        loaded = _Loaded(state, bodies, self._journal(state, session_id), files=self._stat(state))
        self._remember(session_id, loaded)
        return loaded

    def _remember(self, session_id: str, loaded: _Loaded) -> None:
        """Cache a session read or written whole, dropping the least recently used past the bound."""
        self._cache[session_id] = loaded
        self._cache.move_to_end(session_id)
        while len(self._cache) > CACHED_SESSIONS:
            self._cache.popitem(last=False)

    def _stat(self, state: FileState) -> tuple[Any, ...]:
        """What tells a cached read from files changed behind this handle's back (crash leftovers too)."""
        return self._folder.stat((state.log_file, state.stem + ".meta.jsonl"))

    # ---------------------------------------------------------------- protocol: reads

    @property
    def cached_session_ids(self) -> tuple[str, ...]:
        """The sessions this handle holds in memory, least recently used first (:data:`CACHED_SESSIONS`)."""
        return tuple(self._cache)

    @property
    def url(self) -> str:
        """``file://<absolute folder>``."""
        return self._url

    def __repr__(self) -> str:
        return f"JsonFileStore({self._url!r})"

    def load(self, session_id: str) -> StoredSession:
        """Read a session's head, view, thoughts and ledger."""
        with self._locked(exclusive=False):
            loaded = self._loaded(session_id)
        view = tuple(zip(loaded.state.view, loaded.bodies, strict=True))
        journal = loaded.journal
        return StoredSession(loaded.state.head, view, tuple(journal.thoughts), tuple(journal.ledger.values()))

    def head(self, session_id: str) -> SessionHead:
        """Read a session's head."""
        with self._locked(exclusive=False):
            found = self._find(session_id)
            if found is None:
                raise SessionNotFoundError(self._url, session_id)
            if not found[1]:
                return self._plain(found[0], session_id).state.head
            return self._state(found[0], session_id=session_id).head

    def read_log(self, session_id: str, start: int = 0, stop: int | None = None) -> list[LogEntry]:
        """The raw log from ``start`` to ``stop`` (exclusive)."""
        with self._locked(exclusive=False):
            found = self._find(session_id)
            if found is None:
                raise SessionNotFoundError(self._url, session_id)
            if found[1]:
                entries = self._log(self._state(found[0], session_id=session_id), session_id)
            else:
                entries = self._plain(found[0], session_id).plain or []
        return [e for e in entries if e.seq >= start and (stop is None or e.seq < stop)]

    def edits(self, session_id: str) -> list[EditRecord]:
        """Every edit recorded over the session's log, oldest first."""
        with self._locked(exclusive=False):
            return list(self._loaded(session_id).journal.edits)

    def list_sessions(self) -> list[SessionHead]:
        """Every session's head, most recently modified first (skipped plain files: :attr:`problems`)."""
        heads: list[SessionHead] = []
        problems: list[tuple[Path, str]] = []
        with self._locked(exclusive=False):
            for file in sorted(self.path.glob("*" + _STATE)):
                stem = file.name[: -len(_STATE)]
                state = self._state(stem, session_id=stem)
                self._stems[state.head.session_id] = stem
                heads.append(state.head)
            for file in sorted(self.path.glob("*.json")):
                stem = file.name[: -len(".json")]
                if self._file(stem + _STATE).exists():
                    continue
                try:
                    heads.append(self._plain(stem, stem).state.head)
                except SessionStoreError as exc:
                    problems.append((file, exc.reason))
        self.problems = problems
        return sorted(heads, key=lambda h: h.last_modified, reverse=True)

    def search(self, query: str, *, session_id: str | None = None, limit: int = 20) -> list[SearchHit]:
        """Every log message matching ``query`` (the grammar of :mod:`harness.session.query`); a plain scan.

        Scored by how often the query's words occur in the message.
        """
        check_limit(self._url, limit)
        parsed = parse_query(query)
        if parsed.empty:
            return []
        wanted = parsed.positive_words()
        counted = set(wanted)
        ids = [session_id] if session_id is not None else [h.session_id for h in self.list_sessions()]
        hits: list[SearchHit] = []
        with self._locked(exclusive=False):
            for sid in ids:
                try:
                    entries = self.read_log(sid)
                except SessionNotFoundError:
                    continue
                for entry in entries:
                    text = _text(entry.body)
                    words = text_words(text)
                    if parsed.matches(words):
                        score = sum(1 for w in words if w in counted)
                        hits.append(SearchHit(sid, entry.seq, snippet(text, " ".join(wanted)), float(score)))
        hits.sort(key=lambda h: (-h.score, h.session_id, h.seq))
        return hits[:limit]

    # ---------------------------------------------------------------- protocol: writes

    def commit(self, checkpoint: Checkpoint) -> int:
        """Write ``checkpoint`` (see the module docstring for the order and the commit point)."""
        head = checkpoint.head
        sid = head.session_id
        with self._locked(exclusive=True):
            self._check_names(head)
            found = self._find(sid)
            if checkpoint.base_revision == 0:
                if found is not None:
                    actual = self._current_revision(found, sid)
                    raise SessionConflictError(self._url, sid, 0, actual)
                stem = f"{head.project_id}_{sid}"
                for taken in (stem + _STATE, stem + ".json"):
                    if self._file(taken).exists():
                        raise SessionStoreError(
                            self._url,
                            f"its files would be named like another session's ({taken}); "
                            "use ids without '_' or another project id",
                            session_id=sid,
                        )
                loaded = _Loaded(FileState(head, stem, f"{stem}.log.jsonl"), [], Journal(), plain=[])
                loaded.state = attrs.evolve(loaded.state, head=attrs.evolve(head, revision=0, log_length=0))
            else:
                if found is None:
                    raise SessionConflictError(self._url, sid, checkpoint.base_revision, None)
                loaded = self._loaded(sid)
                if loaded.state.head.revision != checkpoint.base_revision:
                    raise SessionConflictError(
                        self._url, sid, checkpoint.base_revision, loaded.state.head.revision
                    )
            self._apply(checkpoint, loaded)
        return head.revision

    def _current_revision(self, found: tuple[str, bool], session_id: str) -> int | None:
        try:
            if found[1]:
                return self._state(found[0], session_id=session_id, metadata=False).head.revision
            return self._plain(found[0], session_id).state.head.revision
        except SessionStoreError:
            raise SessionStoreError(
                self._url,
                "a session file with this id exists but cannot be read; refusing to replace it",
                session_id=session_id,
            ) from None

    def _apply(self, checkpoint: Checkpoint, loaded: _Loaded) -> None:
        state = loaded.state
        sid = checkpoint.head.session_id
        check_checkpoint(checkpoint, state.head.log_length)
        start = checkpoint.view_start
        if not 0 <= start <= len(state.view):
            raise ValueError(f"view_start {start} is beyond the view's {len(state.view)} entries")
        known = {e.seq: e.body for e in checkpoint.appended}
        shown: dict[int, str] | None = None  # built only when the tail refers to older messages
        bodies = loaded.bodies[:start]
        for entry in checkpoint.view_tail:
            if entry.seq is None:
                bodies.append(entry.body or "")
                continue
            if entry.seq not in known and shown is None:
                shown = {
                    e.seq: b for e, b in zip(state.view, loaded.bodies, strict=True) if e.seq is not None
                }
                shown.update((e.seq, e.body) for e in loaded.plain or ())
                known.update(shown)
            if entry.seq not in known:
                known.update((e.seq, e.body) for e in self._log(state, sid))
            if entry.seq not in known:
                raise ValueError(f"the view refers to log message {entry.seq}, which is not in the log")
            bodies.append(known[entry.seq])
        plain = loaded.plain is not None and state.head.revision > 0  # a plain file adopted now
        log_data = b"".join(log_line(e.seq, e.body) for e in [*(loaded.plain or []), *checkpoint.appended])
        meta_data = journal_lines(
            [*(loaded.journal.thoughts if plain else []), *checkpoint.thoughts],
            checkpoint.ledger,
            checkpoint.edits,
        )
        if plain:
            snapshot = self._file(state.stem + ".json")
            with contextlib.suppress(OSError):
                backup = backup_path(snapshot)
                backup.unlink(missing_ok=True)
                os.link(snapshot, backup)
        try:
            log_bytes = self._folder.append(state.log_file, state.log_bytes, log_data)
            meta_bytes = self._folder.append(state.stem + ".meta.jsonl", state.meta_bytes, meta_data)
            metadata_file = write_metadata(self._folder, state, checkpoint)
            new_state = attrs.evolve(
                state,
                head=checkpoint.head,
                log_bytes=log_bytes,
                meta_bytes=meta_bytes,
                view=(*state.view[:start], *checkpoint.view_tail),
                nonce=uuid.uuid4().hex,
                metadata_file=metadata_file,
            )
            self._folder.replace(state.stem + _STATE, encode_state(new_state))
        except OSError as exc:
            raise SessionStoreError(self._url, f"cannot write: {exc}", session_id=sid) from exc
        drop_metadata(self._folder, state.metadata_file, keep=metadata_file)
        self._stems[sid] = state.stem
        journal = Journal(
            thoughts=[*loaded.journal.thoughts, *checkpoint.thoughts],
            ledger={**loaded.journal.ledger},
            edits=[*loaded.journal.edits, *checkpoint.edits],
        )
        for entry in checkpoint.ledger:
            journal.ledger[entry.tool_call_id] = entry
        self._remember(sid, _Loaded(new_state, bodies, journal, files=self._stat(new_state)))
        try:
            self._folder.replace(
                state.stem + ".json", snapshot_bytes(checkpoint.head, journal.thoughts, bodies)
            )
        except OSError as exc:  # committed: the snapshot (an export) is rewritten by the next commit
            warnings.warn(
                f"session {sid!r} in {self._url}: committed, but its snapshot could not be written: {exc}",
                HarnessWarning,
                stacklevel=3,
            )

    def fork(self, session_id: str, new_session_id: str) -> SessionHead:
        """Copy a session under a new id, log, view, thoughts, ledger and edits included."""
        with self._locked(exclusive=True):
            loaded = self._loaded(session_id)
            if self._find(new_session_id) is not None:
                raise SessionConflictError(self._url, new_session_id, 0, None)
            head = loaded.state.head
            now = datetime.now(UTC)
            forked = attrs.evolve(
                head,
                session_id=new_session_id,
                created_at=now,
                last_modified=now,
                revision=1,
                forked_from=session_id,
                forked_at=head.log_length,
            )
            log = loaded.plain if loaded.plain is not None else self._log(loaded.state, session_id)
            journal = loaded.journal
            self.commit(
                Checkpoint(
                    head=forked,
                    base_revision=0,
                    appended=tuple(log),
                    view_tail=loaded.state.view,
                    thoughts=tuple(journal.thoughts),
                    ledger=tuple(journal.ledger.values()),
                    edits=tuple(journal.edits),
                )
            )
        return forked

    def _remove(self, stem: str, session_id: str, log_files: list[str]) -> None:
        """Delete a session's files: the snapshot, the sidecar (now the session is gone), the rest."""
        self._folder.remove([stem + ".json", stem + _STATE, *log_files, stem + ".meta.jsonl"])
        self._cache.pop(session_id, None)
        self._stems.pop(session_id, None)

    def delete(self, session_id: str) -> bool:
        """Delete a session with its log; ``False`` when there was none."""
        with self._locked(exclusive=True):
            found = self._find(session_id)
            if found is None:
                return False
            stem = found[0]
            logs = [p.name for p in self.path.glob(glob.escape(stem) + ".log*.jsonl")]
            logs += [p.name for p in self.path.glob(glob.escape(stem) + METADATA_INFIX + "*")]
            self._remove(stem, session_id, logs)
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
        with self._locked(exclusive=not dry_run):
            old = prune_plan(self.list_sessions(), keep_last=keep_last, newer_than=newer_than)
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
            dropped = sum(self._trim(sid) for sid in old)
        return PruneResult(trimmed=tuple(old), log_messages_dropped=dropped)

    def _trim(self, session_id: str) -> int:
        """Keep only the log messages the view shows: a new log file, switched to by the sidecar."""
        loaded = self._loaded(session_id)
        if loaded.plain is not None:
            return 0  # a plain file's log is its view
        state = loaded.state
        keep = {e.seq for e in state.view if e.seq is not None}
        entries = self._log(state, session_id)
        kept = [e for e in entries if e.seq in keep]
        name = f"{state.stem}.log.{uuid.uuid4().hex[:8]}.jsonl"
        data = b"".join(log_line(e.seq, e.body) for e in kept)
        try:
            self._folder.replace(name, data)
            new_state = attrs.evolve(
                state,
                head=attrs.evolve(state.head, log_pruned=True),
                log_file=name,
                log_bytes=len(data),
                nonce=uuid.uuid4().hex,
            )
            self._folder.replace(state.stem + _STATE, encode_state(new_state))
            with contextlib.suppress(FileNotFoundError):
                self._file(state.log_file).unlink()
        except OSError as exc:
            raise SessionStoreError(self._url, f"cannot trim the log: {exc}", session_id=session_id) from exc
        trimmed = _Loaded(new_state, loaded.bodies, loaded.journal, files=self._stat(new_state))
        self._remember(session_id, trimmed)
        return len(entries) - len(kept)

    def take_lease(self, session_id: str, holder: LeaseHolder) -> None:
        """Take the session's run lease (``.<session_id>.lease``; see :mod:`harness.stores.leasefile`)."""
        if _NAME_PROBLEM.search(session_id):
            raise SessionStoreError(
                self._url, "the session id cannot be part of a file name", session_id=session_id
            )
        with self._locked(exclusive=True):
            _take_lease(self._folder, self._url, session_id, holder)

    def drop_lease(self, session_id: str, token: str) -> None:
        """Drop the session's run lease if ``token`` holds it."""
        if not _NAME_PROBLEM.search(session_id):
            with self._locked(exclusive=True):
                _drop_lease(self._folder, session_id, token)

    def close(self) -> None:
        """Release the lock file; the store is unusable afterwards."""
        self._folder.close()

    def __enter__(self) -> JsonFileStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _text(body: str) -> str:
    from harness.wire import decode_json

    try:
        data = decode_json(body)
    except (ValueError, RecursionError):
        return ""
    return searchable_text(data) if isinstance(data, dict) else ""  # pyright: ignore[reportUnknownArgumentType]
