"""Records to and from flat database rows, for SQL stores (SQLite here, PostgreSQL in a plugin).

Every function that reads a row checks it and raises
:class:`~harness.errors.SessionStoreError` naming the store and the session when a
value is not what the schema promises (bad JSON, a wrong type, an unknown status), so a
corrupt row is reported, never half-read.
"""

from __future__ import annotations

__all__ = [
    "HEAD_COLUMNS",
    "check_checkpoint",
    "edit_from_row",
    "edit_to_row",
    "head_from_row",
    "head_to_row",
    "ledger_from_row",
    "ledger_to_row",
    "prune_plan",
    "snippet",
]

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, cast

from harness.errors import SessionStoreError
from harness.session.records import (
    LEDGER_STATUSES,
    Checkpoint,
    EditRecord,
    LedgerEntry,
    LedgerStatus,
    SessionHead,
)

HEAD_COLUMNS: tuple[str, ...] = (
    "session_id",
    "project_id",
    "created_at",
    "last_modified",
    "working_directory",
    "current_model",
    "total_tokens",
    "usage",
    "revision",
    "log_length",
    "view_length",
    "original_query",
    "forked_from",
    "forked_at",
    "log_pruned",
    "metadata",
)
"""The head's fields in the order of :func:`head_to_row` (a SQL store's ``sessions`` columns)."""


def _json(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (a non-UTF-8 path): escape it, losslessly
        text = json.dumps(value, ensure_ascii=True, separators=(",", ":"), default=str)
    return text


def _stamp(value: datetime) -> str:
    return value.astimezone(UTC).isoformat()


def _parse_stamp(store: str, session_id: str, what: str, value: Any) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        raise SessionStoreError(
            store, f"{what} is not a timestamp: {value!r}", session_id=session_id
        ) from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _parse_json(store: str, session_id: str, what: str, value: Any) -> Any:
    if not isinstance(value, str):
        return value  # PostgreSQL's JSONB arrives decoded
    try:
        return json.loads(value)
    except ValueError as exc:
        raise SessionStoreError(store, f"{what} is not valid JSON: {exc}", session_id=session_id) from exc


def check_checkpoint(checkpoint: Checkpoint, log_length: int) -> None:
    """Refuse a checkpoint that breaks the rules of :class:`~harness.session.records.Checkpoint`.

    Args:
        checkpoint: The checkpoint to write.
        log_length: The stored log length (0 for a new session).

    Raises:
        ValueError: The head revision or the appended seqs are wrong (a bug in the writer).
    """
    head = checkpoint.head
    if checkpoint.base_revision == 0:
        if head.revision < 1:
            raise ValueError(f"a new session's revision must be >= 1, got {head.revision}")
    elif head.revision != checkpoint.base_revision + 1:
        raise ValueError(f"checkpoint head revision {head.revision} must be base_revision + 1")
    expected = log_length
    for entry in checkpoint.appended:
        if entry.seq < expected:
            raise ValueError(f"log entry seq {entry.seq} does not continue the log (next is {expected})")
        expected = entry.seq + 1
    if checkpoint.appended and head.log_length < expected:
        raise ValueError(f"head.log_length {head.log_length} is below the appended seqs ({expected})")


def head_to_row(head: SessionHead) -> tuple[Any, ...]:
    """The head as the sixteen values of the ``sessions`` table, in schema order."""
    return (
        head.session_id,
        head.project_id,
        _stamp(head.created_at),
        _stamp(head.last_modified),
        head.working_directory,
        head.current_model,
        head.total_tokens,
        _json(dict(head.usage)),
        head.revision,
        head.log_length,
        head.view_length,
        head.original_query,
        head.forked_from,
        head.forked_at,
        1 if head.log_pruned else 0,
        _json(dict(head.metadata)),
    )


def head_from_row(store: str, row: Sequence[Any]) -> SessionHead:
    """A head from the sixteen values of :func:`head_to_row`.

    Raises:
        SessionStoreError: A value has the wrong type or is not valid JSON.
    """
    sid = str(row[0])
    usage = _parse_json(store, sid, "the usage column", row[7])
    metadata = _parse_json(store, sid, "the metadata column", row[15])
    if not isinstance(usage, dict) or not isinstance(metadata, dict):
        raise SessionStoreError(store, "usage and metadata must be JSON objects", session_id=sid)
    for index in (6, 8, 9, 10):
        if not isinstance(row[index], int) or isinstance(row[index], bool):
            raise SessionStoreError(
                store, f"head column {index} must be an integer, got {row[index]!r}", session_id=sid
            )
    return SessionHead(
        session_id=sid,
        project_id=str(row[1]),
        created_at=_parse_stamp(store, sid, "created_at", row[2]),
        last_modified=_parse_stamp(store, sid, "last_modified", row[3]),
        working_directory=str(row[4]),
        current_model=row[5],
        total_tokens=int(row[6]),
        usage=cast(dict[str, Any], usage),
        revision=int(row[8]),
        log_length=int(row[9]),
        view_length=int(row[10]),
        original_query=row[11],
        forked_from=row[12],
        forked_at=row[13],
        log_pruned=bool(row[14]),
        metadata=cast(dict[str, Any], metadata),
    )


def ledger_to_row(entry: LedgerEntry) -> tuple[Any, ...]:
    """``(tool_call_id, tool_name, status, started_at, ended_at, result, error)``."""
    return (
        entry.tool_call_id,
        entry.tool_name,
        entry.status,
        _stamp(entry.started_at),
        _stamp(entry.ended_at) if entry.ended_at is not None else None,
        entry.result,
        entry.error,
    )


def ledger_from_row(store: str, session_id: str, row: Sequence[Any]) -> LedgerEntry:
    """A ledger entry from the values of :func:`ledger_to_row`."""
    status = str(row[2])
    if status not in LEDGER_STATUSES:
        raise SessionStoreError(
            store, f"ledger entry {row[0]!r} has unknown status {status!r}", session_id=session_id
        )
    return LedgerEntry(
        tool_call_id=str(row[0]),
        tool_name=str(row[1]),
        status=cast(LedgerStatus, status),
        started_at=_parse_stamp(store, session_id, "a ledger start", row[3]),
        ended_at=_parse_stamp(store, session_id, "a ledger end", row[4]) if row[4] is not None else None,
        result=row[5],
        error=row[6],
    )


def edit_to_row(edit: EditRecord) -> tuple[Any, ...]:
    """``(idx, revision, created_at, view_start, replaced, overlays, events)`` with JSON text."""
    return (
        edit.index,
        edit.revision,
        _stamp(edit.created_at),
        edit.view_start,
        _json(list(edit.replaced)),
        _json([list(o) for o in edit.overlays]),
        _json([dict(e) for e in edit.events]),
    )


def edit_from_row(store: str, session_id: str, row: Sequence[Any]) -> EditRecord:
    """An edit record from the values of :func:`edit_to_row`."""
    replaced = _parse_json(store, session_id, "an edit's replaced list", row[4])
    overlays = _parse_json(store, session_id, "an edit's overlays", row[5])
    events = _parse_json(store, session_id, "an edit's events", row[6])
    if not (isinstance(replaced, list) and isinstance(overlays, list) and isinstance(events, list)):
        raise SessionStoreError(store, f"edit {row[0]} is malformed", session_id=session_id)
    replaced_list = cast(list[Any], replaced)
    overlay_list = cast(list[Any], overlays)
    event_list = cast(list[Any], events)
    return EditRecord(
        index=int(row[0]),
        revision=int(row[1]),
        created_at=_parse_stamp(store, session_id, "an edit's time", row[2]),
        view_start=int(row[3]),
        replaced=tuple(int(r) for r in replaced_list),
        overlays=tuple((int(o[0]), None if o[1] is None else int(o[1])) for o in overlay_list),
        events=tuple(cast(dict[str, Any], e) for e in event_list),
    )


def prune_plan(
    heads: Sequence[SessionHead], *, keep_last: int | None, newer_than: datetime | None
) -> list[str]:
    """The sessions ``prune`` acts on: all but the ``keep_last`` newest and those newer than a date.

    With neither limit nothing is pruned. ``heads`` must be newest first.
    """
    if keep_last is None and newer_than is None:
        return []
    if keep_last is not None and keep_last < 0:
        raise ValueError(f"keep_last must be >= 0, got {keep_last}")
    ordered = sorted(heads, key=lambda h: h.last_modified, reverse=True)
    kept: set[str] = set()
    if keep_last is not None:
        kept.update(h.session_id for h in ordered[:keep_last])
    if newer_than is not None:
        limit = newer_than if newer_than.tzinfo is not None else newer_than.replace(tzinfo=UTC)
        kept.update(h.session_id for h in ordered if h.last_modified > limit)
    return [h.session_id for h in ordered if h.session_id not in kept]


def snippet(text: str, query: str, width: int = 160) -> str:
    """About ``width`` characters of ``text`` around the first word of ``query`` found in it."""
    flat = " ".join(text.split())
    lowered = flat.lower()
    at = -1
    for word in query.lower().split():
        at = lowered.find(word.strip('"*'))
        if at >= 0:
            break
    if at < 0:
        return flat[:width]
    start = max(0, at - width // 3)
    piece = flat[start : start + width]
    return ("…" if start else "") + piece + ("…" if start + width < len(flat) else "")
