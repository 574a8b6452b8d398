"""The session a durable run starts from, kept in the engine's journal as one JSON text.

A durable engine replays a run from its start after a crash, so the run must start from
the session as it was when the run began, not as the crashed execution left it:
:func:`snapshot_session` reads that state as one JSON text, which the engine journals once
per run (a DBOS step, a Temporal activity), and :func:`session_from_snapshot` turns it back
into the :class:`~harness.session.Session` the run starts with, bound to the run's store.
"""

from __future__ import annotations

__all__ = ["SNAPSHOT_VERSION", "session_from_snapshot", "snapshot_session"]

import json
from typing import Any, cast

from harness.errors import SessionNotFoundError, SessionStoreError
from harness.session import AsyncSessionStore, Session, SessionStore, StoredSession, ViewEntry
from harness.stores.rows import head_from_row, head_to_row, ledger_from_row, ledger_to_row

SNAPSHOT_VERSION = 1
"""The version of the snapshot text :func:`snapshot_session` writes."""


def snapshot_session(store: SessionStore, session_id: str) -> str | None:
    """The session as it is now, as one JSON text (``None``: the store has no such session).

    Raises:
        SessionStoreError: The store cannot be read.
    """
    try:
        stored = store.load(session_id)
    except SessionNotFoundError:
        return None
    data = {
        "version": SNAPSHOT_VERSION,
        "head": list(head_to_row(stored.head)),
        "view": [[entry.seq, entry.body, entry.source, body] for entry, body in stored.view],
        "thoughts": list(stored.thoughts),
        "ledger": [list(ledger_to_row(entry)) for entry in stored.ledger],
        "edits": len(store.edits(session_id)),
    }
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def session_from_snapshot(
    store: SessionStore | AsyncSessionStore, snapshot: str, *, source: str = "the run's journal"
) -> Session:
    """The session a :func:`snapshot_session` text holds, bound to ``store``.

    Args:
        store: The store the run's checkpoints go to (a
            :class:`~harness.durable.replay_safe.ReplaySafeStore`).
        snapshot: The journaled text.
        source: Where the text came from, for the error.

    Raises:
        SessionStoreError: ``snapshot`` is not such a text (names ``source``).
    """
    try:
        data: object = json.loads(snapshot)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        fields = cast(dict[str, Any], data)
        if fields.get("version") != SNAPSHOT_VERSION:
            raise ValueError(f"not a version {SNAPSHOT_VERSION} session snapshot")
        head = head_from_row(store.url, fields["head"])
        view = tuple(
            (ViewEntry(seq=seq, body=body, source=src), text) for seq, body, src, text in fields["view"]
        )
        ledger = tuple(ledger_from_row(store.url, head.session_id, row) for row in fields["ledger"])
        stored = StoredSession(head=head, view=view, thoughts=tuple(fields["thoughts"]), ledger=ledger)
        edits = int(fields["edits"])
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise SessionStoreError(store.url, f"the session snapshot in {source} is not valid: {exc}") from exc
    return Session.from_stored(store, stored, edits=edits)
