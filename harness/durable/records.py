"""The store's records as JSON, for an engine that ships them between processes.

A Temporal workflow never touches the store itself: each checkpoint goes to a worker as an
activity's input, and each read comes back as its output. These are the JSON forms of
those records, in the rows' encoding every SQL store shares (:mod:`harness.stores.rows`):
a checkpoint, a stored session, a head, log entries, edit records and search hits.
Everything is plain JSON (lists, strings, numbers), never pickle.
"""

from __future__ import annotations

__all__ = [
    "checkpoint_from_json",
    "checkpoint_to_json",
    "edits_from_json",
    "edits_to_json",
    "head_from_json",
    "head_to_json",
    "hits_from_json",
    "hits_to_json",
    "log_from_json",
    "log_to_json",
    "stored_from_json",
    "stored_to_json",
]

from collections.abc import Sequence
from typing import Any, cast

from harness.errors import SessionStoreError
from harness.session import (
    Checkpoint,
    EditRecord,
    LogEntry,
    SearchHit,
    SessionHead,
    StoredSession,
    ViewEntry,
)
from harness.stores.rows import (
    edit_from_row,
    edit_to_row,
    head_from_row,
    head_to_row,
    ledger_from_row,
    ledger_to_row,
)

_WHERE = "a record shipped by the durable engine"


def head_to_json(head: SessionHead) -> list[Any]:
    """A head as a JSON list (its row)."""
    return list(head_to_row(head))


def head_from_json(data: object, store: str = _WHERE) -> SessionHead:
    """A head written by :func:`head_to_json`."""
    return head_from_row(store, cast(Sequence[Any], data))


def _view_entry(entry: ViewEntry) -> list[Any]:
    return [entry.seq, entry.body, entry.source]


def checkpoint_to_json(checkpoint: Checkpoint) -> dict[str, Any]:
    """A checkpoint as a JSON object (what a commit activity receives)."""
    return {
        "head": head_to_json(checkpoint.head),
        "base": checkpoint.base_revision,
        "appended": log_to_json(checkpoint.appended),
        "view_start": checkpoint.view_start,
        "view_tail": [_view_entry(e) for e in checkpoint.view_tail],
        "thoughts": list(checkpoint.thoughts),
        "ledger": [list(ledger_to_row(e)) for e in checkpoint.ledger],
        "edits": [list(edit_to_row(e)) for e in checkpoint.edits],
    }


def checkpoint_from_json(data: object, store: str = _WHERE) -> Checkpoint:
    """A checkpoint written by :func:`checkpoint_to_json`.

    Raises:
        SessionStoreError: ``data`` is not such an object.
    """
    try:
        fields = cast(dict[str, Any], data)
        head = head_from_json(fields["head"], store)
        sid = head.session_id
        return Checkpoint(
            head=head,
            base_revision=int(fields["base"]),
            appended=tuple(
                LogEntry(int(seq), str(body), str(text)) for seq, body, text in fields["appended"]
            ),
            view_start=int(fields["view_start"]),
            view_tail=tuple(ViewEntry(seq, body, source) for seq, body, source in fields["view_tail"]),
            thoughts=tuple(str(t) for t in fields["thoughts"]),
            ledger=tuple(ledger_from_row(store, sid, row) for row in fields["ledger"]),
            edits=tuple(edit_from_row(store, sid, row) for row in fields["edits"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise SessionStoreError(
            store, f"a shipped checkpoint is not valid: {type(exc).__name__}: {exc}"
        ) from exc


def stored_to_json(stored: StoredSession) -> dict[str, Any]:
    """A stored session (what ``load`` returns) as a JSON object."""
    return {
        "head": head_to_json(stored.head),
        "view": [[*_view_entry(entry), body] for entry, body in stored.view],
        "thoughts": list(stored.thoughts),
        "ledger": [list(ledger_to_row(e)) for e in stored.ledger],
    }


def stored_from_json(data: object, store: str = _WHERE) -> StoredSession:
    """A stored session written by :func:`stored_to_json`."""
    try:
        fields = cast(dict[str, Any], data)
        head = head_from_json(fields["head"], store)
        view = tuple((ViewEntry(seq, body, source), str(text)) for seq, body, source, text in fields["view"])
        ledger = tuple(ledger_from_row(store, head.session_id, row) for row in fields["ledger"])
        return StoredSession(head=head, view=view, thoughts=tuple(fields["thoughts"]), ledger=ledger)
    except (KeyError, TypeError, ValueError) as exc:
        raise SessionStoreError(
            store, f"a shipped session is not valid: {type(exc).__name__}: {exc}"
        ) from exc


def log_to_json(entries: Sequence[LogEntry]) -> list[list[Any]]:
    """Log entries as JSON lists."""
    return [[e.seq, e.body, e.text] for e in entries]


def log_from_json(data: object) -> list[LogEntry]:
    """Log entries written by :func:`log_to_json`."""
    return [LogEntry(int(seq), str(body), str(text)) for seq, body, text in cast(list[Any], data)]


def edits_to_json(edits: Sequence[EditRecord]) -> list[list[Any]]:
    """Edit records as JSON lists."""
    return [list(edit_to_row(e)) for e in edits]


def edits_from_json(data: object, session_id: str, store: str = _WHERE) -> list[EditRecord]:
    """Edit records written by :func:`edits_to_json`."""
    return [edit_from_row(store, session_id, row) for row in cast(list[Any], data)]


def hits_to_json(hits: Sequence[SearchHit]) -> list[list[Any]]:
    """Search hits as JSON lists."""
    return [[h.session_id, h.seq, h.snippet, h.score] for h in hits]


def hits_from_json(data: object) -> list[SearchHit]:
    """Search hits written by :func:`hits_to_json`."""
    return [SearchHit(str(s), int(q), str(t), float(v)) for s, q, t, v in cast(list[Any], data)]
