"""Copying sessions between stores, losslessly: ``harness sessions export`` and ``import``.

:func:`copy_session` reads everything a store keeps of one session (the head with its
revision, the whole log with the gaps a prune left, the view's references and overlays
with their sources, thoughts, the ledger and every edit record) and writes it to another
store in **one** commit: a :class:`~harness.session.records.Checkpoint` with
``base_revision=0`` that keeps the source's revision (the checkpoint rules allow an
import to). So a session exported from SQLite to a ``file:`` folder and imported into
PostgreSQL reads back exactly as it was written, byte for byte in every message body.

The source is read in several calls; a write landing between them is detected (the head
changed) and the read is retried, so a copy is always of one revision.
"""

from __future__ import annotations

__all__ = ["copy_all", "copy_session"]

import attrs

from harness.errors import SessionConflictError, SessionStoreError
from harness.session.records import Checkpoint, LogEntry, SessionHead
from harness.session.store import SessionStore

_ATTEMPTS = 5


def _snapshot(source: SessionStore, session_id: str) -> Checkpoint:
    """Everything ``source`` holds of one session, as the checkpoint that recreates it."""
    for _ in range(_ATTEMPTS):
        stored = source.load(session_id)
        log = source.read_log(session_id)
        edits = source.edits(session_id)
        if source.head(session_id) != stored.head:
            continue  # written meanwhile: read again
        logged = {entry.seq for entry in log}
        for position, (entry, _) in enumerate(stored.view):
            if entry.seq is not None and entry.seq not in logged:
                raise SessionStoreError(
                    source.url,
                    f"view position {position} refers to log message {entry.seq}, which the log lacks; "
                    "refusing to copy a broken session",
                    session_id=session_id,
                )
        return Checkpoint(
            head=stored.head,
            base_revision=0,
            appended=tuple(LogEntry(entry.seq, entry.body) for entry in log),
            view_start=0,
            view_tail=tuple(entry for entry, _ in stored.view),
            thoughts=stored.thoughts,
            ledger=stored.ledger,
            edits=tuple(edits),
        )
    raise SessionStoreError(
        source.url,
        f"the session kept changing while it was read ({_ATTEMPTS} attempts)",
        session_id=session_id,
    )


def copy_session(
    source: SessionStore, target: SessionStore, session_id: str, *, new_session_id: str | None = None
) -> SessionHead:
    """Copy one session from ``source`` to ``target``, everything kept (see the module docstring).

    Args:
        source: The store to read.
        target: The store to write (it may be of another kind).
        session_id: The session to copy.
        new_session_id: The id in ``target`` (default: the same id). Nothing else changes:
            revision, timestamps, ``forked_from`` are the source's.

    Returns:
        The head written to ``target``.

    Raises:
        SessionNotFoundError: ``source`` has no such session.
        SessionConflictError: ``target`` has a session with that id already (nothing written).
        SessionStoreError: A store is unusable, or the source session is broken.
    """
    checkpoint = _snapshot(source, session_id)
    if new_session_id is not None:
        checkpoint = attrs.evolve(checkpoint, head=attrs.evolve(checkpoint.head, session_id=new_session_id))
    target.commit(checkpoint)
    return checkpoint.head


def copy_all(source: SessionStore, target: SessionStore, *, skip_existing: bool = False) -> list[SessionHead]:
    """Copy every session of ``source`` to ``target`` (oldest first); return the heads written.

    Args:
        source: The store to read.
        target: The store to write.
        skip_existing: Leave out sessions whose id ``target`` already has. Otherwise such
            a session raises :class:`~harness.errors.SessionConflictError` before anything
            is copied.

    Raises:
        SessionConflictError: A session exists in ``target`` and ``skip_existing`` is false.
        SessionStoreError: A store is unusable, or a source session is broken.
    """
    heads = list(reversed(source.list_sessions()))
    existing = {h.session_id for h in target.list_sessions()}
    taken = [h.session_id for h in heads if h.session_id in existing]
    if taken and not skip_existing:
        raise SessionConflictError(target.url, taken[0], 0, target.head(taken[0]).revision)
    return [copy_session(source, target, h.session_id) for h in heads if h.session_id not in existing]
