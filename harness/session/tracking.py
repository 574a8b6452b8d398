"""What a session's store holds, as this process last wrote or read it, and the next checkpoint.

:class:`StoreTracker` remembers the persisted view (the message objects themselves and,
for each position, the log message it shows) so that :meth:`StoreTracker.checkpoint`
can say what changed without reading the store:

* **append** (the common step): the persisted view is a prefix of the new one, which a
  single identity comparison of two lists proves, so the checkpoint costs what the step
  added, never the history's length;
* **rewrite** (a compaction, a merge): from the first position that differs, each message
  is matched by identity with the persisted one, becomes an *overlay* when a capability
  wrote it (see :meth:`StoreTracker.note_overlays`), and is otherwise new raw history,
  appended to the log. The log messages that left the view are recorded in an
  :class:`~harness.session.records.EditRecord` with the compaction events.
"""

from __future__ import annotations

__all__ = ["StoreTracker", "decode_bodies", "decode_part", "encode_message", "encode_part", "message_ids"]

from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import attrs

from harness.core.messages import CanonicalMessage, Part, ToolCallPart, ToolReturnPart
from harness.errors import SessionStoreError, WireFormatError
from harness.session.records import (
    Checkpoint,
    EditRecord,
    LedgerEntry,
    LogEntry,
    SessionHead,
    StoredSession,
    ViewEntry,
)
from harness.session.text import searchable_text

_Record = TypeVar("_Record", SessionHead, LedgerEntry)

_HEAD_FIELDS: tuple[str, ...] = tuple(f.name for f in attrs.fields(SessionHead))


def encode_message(message: CanonicalMessage) -> tuple[str, str]:
    """One message's wire-format JSON text and its searchable text."""
    from harness.wire import encode_json, messages_to_jsonable

    data = messages_to_jsonable([message])[0]
    return encode_json(data, ascii_only=False).decode("utf-8"), searchable_text(data)


def decode_bodies(
    store_url: str, session_id: str, bodies: Sequence[str], *, what: str = "stored message"
) -> list[CanonicalMessage]:
    """Stored message bodies (wire-format JSON texts) as messages, parsed in one pass.

    ``what`` names the bodies in the error (``"logged message"`` for the raw log).

    Raises:
        SessionStoreError: A body is not a valid wire-format message (names the store and session).
    """
    from harness.wire import load_messages

    if not bodies:
        return []
    try:
        return load_messages("[" + ",".join(bodies) + "]")
    except (WireFormatError, ValueError) as exc:
        raise SessionStoreError(store_url, f"a {what} is not valid: {exc}", session_id=session_id) from exc


def encode_part(part: Part) -> str:
    """One part's wire-format JSON text (a ledger entry's result)."""
    from harness.wire import encode_json, messages_to_jsonable

    data = messages_to_jsonable([CanonicalMessage.request(part)])[0]
    return encode_json(data["parts"][0], ascii_only=False).decode("utf-8")


def decode_part(text: str) -> Part:
    """The part :func:`encode_part` wrote.

    Raises:
        WireFormatError: ``text`` is not a wire-format request part.
    """
    from harness.wire import decode_json, messages_from_jsonable

    return messages_from_jsonable([{"kind": "request", "parts": [decode_json(text)]}])[0].parts[0]


def message_ids(message: CanonicalMessage) -> frozenset[str]:
    """The tool-call ids a message's calls and returns carry (to name an overlay's source)."""
    ids: set[str] = set()
    for part in message.parts:
        if isinstance(part, ToolCallPart | ToolReturnPart):
            ids.add(part.tool_call_id)
        else:
            call_id = getattr(part, "tool_call_id", None)
            if isinstance(call_id, str):
                ids.add(call_id)
    return frozenset(ids)


class StoreTracker:
    """The persisted state of one session in its store, and the builder of its checkpoints."""

    def __init__(self) -> None:
        self.revision = 0
        self.head: SessionHead | None = None
        """The head as the store holds it (``None``: not read or written yet)."""
        self.log_pruned = False
        self.log_length = 0
        self.view: list[CanonicalMessage] = []
        self.origins: list[int | None] = []
        self.sources: list[int | None] = []
        self.thoughts = 0
        self.edit_count = 0
        self._overlays: dict[int, CanonicalMessage] = {}
        self._events: list[Mapping[str, Any]] = []
        self._ledger: dict[str, LedgerEntry] = {}
        self._positions: dict[int, int] | None = None
        self._log_only: list[CanonicalMessage] = []
        self._cleared: dict[str, LedgerEntry] = {}

    # ---------------------------------------------------------------- what changed

    def note_overlays(
        self, messages: Iterable[CanonicalMessage], events: Iterable[Mapping[str, Any]] = ()
    ) -> None:
        """Mark messages a capability wrote (placeholders, summaries): overlays, not raw history."""
        for message in messages:
            self._overlays[id(message)] = message
        self._events.extend(events)

    def note_log_only(self, messages: Iterable[CanonicalMessage]) -> None:
        """Queue raw messages for the log that the view shows only in edited form (a merged prompt)."""
        self._log_only.extend(messages)

    def note_ledger(self, entry: LedgerEntry) -> None:
        """Queue a ledger entry (the latest per call wins) for the next checkpoint."""
        self._ledger[entry.tool_call_id] = entry

    @property
    def dirty(self) -> bool:
        """Ledger entries or compaction events are waiting for a checkpoint."""
        return bool(self._ledger or self._events or self._log_only)

    # ---------------------------------------------------------------- load

    def adopt(self, stored: StoredSession, *, edits: int = 0) -> list[CanonicalMessage]:
        """Take a freshly loaded session as the persisted state; return its view's messages.

        ``edits`` is how many edit records the store holds (the next one's index).
        """
        from harness.wire import load_messages

        head = stored.head
        bodies = [body for _, body in stored.view]
        messages = load_messages("[" + ",".join(bodies) + "]") if bodies else []
        self.revision = head.revision
        self.head = head
        self.log_pruned = head.log_pruned
        self.log_length = head.log_length
        self.view = list(messages)
        self.origins = [entry.seq for entry, _ in stored.view]
        self.sources = [entry.source for entry, _ in stored.view]
        self.thoughts = len(stored.thoughts)
        self.edit_count = edits
        self._positions = None
        self._overlays.clear()
        self._events.clear()
        self._ledger.clear()
        self._log_only.clear()
        return messages

    # ---------------------------------------------------------------- checkpoint

    def checkpoint(
        self,
        head: SessionHead,
        view: Sequence[CanonicalMessage],
        thoughts: Sequence[str],
        ledger: Mapping[str, LedgerEntry] | None = None,
        *,
        now: datetime | None = None,
    ) -> tuple[Checkpoint, list[CanonicalMessage], list[int | None], list[int | None]]:
        """The checkpoint that brings the store from :attr:`revision` to ``view``.

        ``head`` carries the new head values; its revision and lengths are set here.
        Returns the checkpoint and the view's messages, origins and sources from
        ``checkpoint.view_start`` on, to adopt once it is committed (:meth:`committed`):
        an append copies only what it added, never the whole view.

        ``ledger`` is the session's ledger: a finished call whose answer this checkpoint
        logs loses its ``result`` (the log holds the answer now, and the ledger kept it
        only so that a resumed run could reuse it), so no tool result is stored twice.

        ``now`` is the time an edit record is stamped with (default: the wall clock); a run
        passes its effects' clock, so a durable replay writes the same record.
        """
        persisted = self.view
        n = len(persisted)
        appended: list[LogEntry] = []
        answered: list[str] = []
        next_seq = self.log_length

        def log(message: CanonicalMessage, encoded: tuple[str, str] | None = None) -> int:
            nonlocal next_seq
            body, text = encoded if encoded is not None else encode_message(message)
            appended.append(LogEntry(next_seq, body, text))
            if message.kind == "request":
                answered.extend(_answered_ids(message))
            next_seq += 1
            return next_seq - 1

        for message in self._log_only:
            log(message)
        tail: list[ViewEntry] = []
        origins: list[int | None]
        sources: list[int | None]
        edit: EditRecord | None = None
        if len(view) >= n and view[:n] == persisted:
            start = n
            origins = []
            sources = []
            for message in view[n:]:
                if id(message) in self._overlays:
                    body, _ = encode_message(message)
                    tail.append(ViewEntry(None, body, None))
                    origins.append(None)
                    sources.append(None)
                else:
                    seq = log(message)
                    tail.append(ViewEntry(seq))
                    origins.append(seq)
                    sources.append(None)
        else:
            start = 0
            limit = min(n, len(view))
            overlaid = self._overlays
            while start < limit and view[start] is persisted[start]:
                start += 1
            known: dict[int, tuple[int | None, int | None]] = {
                id(persisted[j]): (self.origins[j], self.sources[j]) for j in range(start, n)
            }
            # An overlay's source: the replaced log message of the same kind that carries one
            # of its call ids (a cleared result's source is the result, not the call).
            by_call: dict[tuple[str, str], int] = {}
            for j in range(start, n):
                seq_j = self.origins[j]
                if seq_j is not None:
                    for call_id in message_ids(persisted[j]):
                        by_call.setdefault((persisted[j].kind, call_id), seq_j)
            origins = []
            sources = []
            overlays: list[tuple[int, int | None]] = []
            kept: set[int] = set()
            # Pass 1, by identity: a persisted message keeps its log entry (the first time it shows).
            decided: dict[int, tuple[int | None, int | None]] = {}
            for position in range(start, len(view)):
                found = known.get(id(view[position]))
                if found is not None and (found[0] is None or found[0] not in kept):
                    decided[position] = found
                    if found[0] is not None:
                        kept.add(found[0])
            # Pass 2, by value: an equal copy of a persisted message is that message, not new history.
            encoded: dict[int, tuple[str, str]] = {}
            by_body: dict[str, list[tuple[int | None, int | None]]] | None = None
            for position in range(start, len(view)):
                message = view[position]
                if position in decided or id(message) in overlaid:
                    continue
                if by_body is None:
                    by_body = {}
                    for j in range(start, n):
                        by_body.setdefault(encode_message(persisted[j])[0], []).append(
                            (self.origins[j], self.sources[j])
                        )
                encoded[position] = encode_message(message)
                candidates = by_body.get(encoded[position][0], [])
                match = next((c for c in candidates if c[0] is None or c[0] not in kept), None)
                if match is not None:
                    candidates.remove(match)
                    decided[position] = match
                    if match[0] is not None:
                        kept.add(match[0])
            # Pass 3, in view order: references, overlays, and new raw history for the log.
            for position in range(start, len(view)):
                message = view[position]
                found = decided.get(position)
                if found is not None:
                    seq, source = found
                    if seq is not None:
                        tail.append(ViewEntry(seq))
                    else:
                        body, _ = encode_message(message)
                        tail.append(ViewEntry(None, body, source))
                        overlays.append((position, source))
                    origins.append(seq)
                    sources.append(source)
                elif id(message) in overlaid:
                    body, _ = encode_message(message)
                    keys = [(message.kind, c) for c in sorted(message_ids(message))]
                    source = next((by_call[k] for k in keys if k in by_call), None)
                    tail.append(ViewEntry(None, body, source))
                    overlays.append((position, source))
                    origins.append(None)
                    sources.append(source)
                else:
                    seq = log(message, encoded.get(position))
                    tail.append(ViewEntry(seq))
                    origins.append(seq)
                    sources.append(None)
            replaced = tuple(sorted({s for s in self.origins[start:] if s is not None} - kept))
            edit = EditRecord(
                index=self.edit_count,
                revision=self.revision + 1,
                created_at=now if now is not None else datetime.now(UTC),
                view_start=start,
                replaced=replaced,
                overlays=tuple(overlays),
                events=tuple(self._events),
            )
        new_head = _with(
            head,
            revision=self.revision + 1,
            log_length=next_seq,
            view_length=len(view),
        )
        stored = self.head if self.revision else None
        changed = (
            None
            if stored is None
            else frozenset(name for name in _HEAD_FIELDS if getattr(new_head, name) != getattr(stored, name))
        )
        checkpoint = Checkpoint(
            head=new_head,
            head_fields=changed,
            base_revision=self.revision,
            appended=tuple(appended),
            view_start=start,
            view_tail=tuple(tail),
            thoughts=tuple(thoughts[self.thoughts :]),
            ledger=tuple(self._ledger_writes(answered, ledger or {}).values()),
            edits=() if edit is None else (edit,),
        )
        return checkpoint, list(view[start:]), origins, sources

    def _ledger_writes(
        self, answered: Sequence[str], ledger: Mapping[str, LedgerEntry]
    ) -> dict[str, LedgerEntry]:
        """The queued ledger entries, with the results of the calls answered in the log dropped."""
        writes = dict(self._ledger)
        self._cleared = {}
        for call_id in answered:
            entry = writes.get(call_id) or ledger.get(call_id)
            if entry is not None and entry.result is not None and entry.status != "started":
                writes[call_id] = _with(entry, result=None)
                self._cleared[call_id] = entry
        return writes

    def committed(
        self,
        checkpoint: Checkpoint,
        view: list[CanonicalMessage],
        origins: list[int | None],
        sources: list[int | None],
    ) -> None:
        """The store took ``checkpoint``: it is now the persisted state.

        ``view``, ``origins`` and ``sources`` are what :meth:`checkpoint` returned: the
        entries from ``checkpoint.view_start`` on, spliced in place (an append costs what
        it added).
        """
        start = checkpoint.view_start
        positions = self._positions
        if positions is not None and start == len(self.view):
            for index, message in enumerate(view, start):
                positions[id(message)] = index
        else:
            self._positions = None
        self.revision = checkpoint.head.revision
        self.head = checkpoint.head
        self.log_length = checkpoint.head.log_length
        for kept, tail in ((self.view, view), (self.origins, origins), (self.sources, sources)):
            del kept[start:]
            kept.extend(tail)  # pyright: ignore[reportArgumentType]
        self.thoughts += len(checkpoint.thoughts)
        self.edit_count += len(checkpoint.edits)
        self._overlays.clear()
        self._events.clear()
        self._log_only.clear()
        for entry in checkpoint.ledger:
            queued = self._ledger.get(entry.tool_call_id)
            if queued is not None and (queued is entry or self._cleared.get(entry.tool_call_id) is queued):
                del self._ledger[entry.tool_call_id]
        self._cleared = {}

    def origin_of(self, message: CanonicalMessage) -> int | None:
        """The log message a persisted view message shows (or its overlay's source)."""
        if self._positions is None:
            self._positions = {id(m): i for i, m in enumerate(self.view)}
        index = self._positions.get(id(message))
        if index is None or self.view[index] is not message:
            return None
        origin = self.origins[index]
        return origin if origin is not None else self.sources[index]


def _answered_ids(message: CanonicalMessage) -> Iterator[str]:
    """The calls a request's tool returns and retry prompts answer."""
    for part in message.parts:
        if not isinstance(part, ToolCallPart):
            call_id = getattr(part, "tool_call_id", None)
            if isinstance(call_id, str):
                yield call_id


def _with(record: _Record, **changes: Any) -> _Record:
    import attrs

    return attrs.evolve(record, **changes)
