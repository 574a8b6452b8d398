"""What a session store keeps, as plain records every backend reads and writes.

A store holds, per session:

* a **head** (:class:`SessionHead`): the contract's keys, a ``revision`` and the lengths
  of the log and the view;
* an append-only **log** (:class:`LogEntry`): every message exactly as it was first
  written, numbered from 0 (``seq``), each stored once;
* the **view** (:class:`ViewEntry`): what the model sees next, one entry per position,
  either a reference to a log message or an *overlay* (a message a capability wrote:
  a placeholder, a summary), never a copy of the log;
* **edits** (:class:`EditRecord`): each rewrite of the view with the compaction events
  that caused it and the log messages it took out of the view;
* **thoughts**, and the **tool-effect ledger** (:class:`LedgerEntry`).

Everything is written through one :class:`Checkpoint`, which says what changed since
``base_revision``: stores apply it in one transaction, or not at all.

Message bodies are JSON text in the wire format of :mod:`harness.wire` (one message
object each), so a store never needs to know the message classes.
"""

from __future__ import annotations

__all__ = [
    "LEDGER_STATUSES",
    "Checkpoint",
    "EditRecord",
    "LedgerEntry",
    "LedgerStatus",
    "LogEntry",
    "PruneResult",
    "SearchHit",
    "SessionHead",
    "StoredSession",
    "ViewEntry",
]

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal, TypeAlias

import attrs

LedgerStatus: TypeAlias = Literal[
    "started", "completed", "failed", "cancelled", "unknown", "unknown_after_crash"
]

LEDGER_STATUSES: frozenset[str] = frozenset(
    {"started", "completed", "failed", "cancelled", "unknown", "unknown_after_crash"}
)
"""Every :attr:`LedgerEntry.status`."""


@attrs.frozen
class SessionHead:
    """A session's head record: the contract's keys plus what a store needs to check writes.

    Attributes:
        session_id: The session's id.
        project_id: See :func:`harness.session.project_id_for`.
        created_at: When the session was created (UTC).
        last_modified: When it was last written (UTC).
        working_directory: The working directory it belongs to.
        current_model: The model last used.
        total_tokens: Token count of the view.
        usage: ``session_total_usage`` as the session file writes it.
        revision: Incremented by every write; ``0`` is "not created yet".
        log_length: Messages in the log (the next ``seq``).
        view_length: Messages in the view.
        original_query: The task's first prompt.
        forked_from: The session this one was forked from.
        forked_at: The parent's log length at the fork.
        log_pruned: Log messages the view no longer needs were dropped by ``prune``.
        metadata: Extension data (JSON object) a plugin keeps with the session.
    """

    session_id: str
    project_id: str
    created_at: datetime
    last_modified: datetime
    working_directory: str = ""
    current_model: str | None = None
    total_tokens: int = 0
    usage: Mapping[str, Any] = attrs.field(factory=dict[str, Any])
    revision: int = 0
    log_length: int = 0
    view_length: int = 0
    original_query: str | None = None
    forked_from: str | None = None
    forked_at: int | None = None
    log_pruned: bool = False
    metadata: Mapping[str, Any] = attrs.field(factory=dict[str, Any])


@attrs.frozen
class LogEntry:
    """One message of the append-only log.

    Attributes:
        seq: Its position in the log, from 0.
        body: The message as wire-format JSON text.
        text: Its searchable text (prompts, answers, tool arguments and results).
    """

    seq: int
    body: str
    text: str = ""


@attrs.frozen
class ViewEntry:
    """One position of the view: a log message, or an overlay a capability wrote.

    Attributes:
        seq: The log message shown here unchanged, or ``None`` for an overlay.
        body: The overlay's wire-format JSON text (``None`` when ``seq`` is set).
        source: For an overlay, the log message it was made from, when one can be named.
    """

    seq: int | None
    body: str | None = None
    source: int | None = None

    def __attrs_post_init__(self) -> None:
        if (self.seq is None) == (self.body is None):
            raise ValueError("a view entry is either a log reference (seq) or an overlay (body)")


@attrs.frozen
class EditRecord:
    r"""One rewrite of the view: the edits that made it, over the untouched log.

    Attributes:
        index: Its number among the session's edits, from 0.
        revision: The revision that wrote it.
        created_at: When it was written.
        view_start: The first view position it rewrote.
        replaced: Log messages that were in the view before and are not any more
            (cleared, summarized, deduplicated, dropped, or superseded by a merge).
        overlays: ``(position, source)`` of each overlay it wrote (``source`` may be ``None``).
        events: The ``CompactionEvent``\\ s that caused it, as JSON objects (empty for
            a rewrite by the run itself, such as merging a prompt into a pending request).
    """

    index: int
    revision: int
    created_at: datetime
    view_start: int
    replaced: tuple[int, ...] = ()
    overlays: tuple[tuple[int, int | None], ...] = ()
    events: tuple[Mapping[str, Any], ...] = ()


@attrs.frozen
class LedgerEntry:
    """One tool call in the tool-effect ledger.

    Attributes:
        tool_call_id: The call's id.
        tool_name: The tool.
        status: ``started``; ``completed`` or ``failed`` (it ran, and this is its answer);
            ``cancelled`` (it never ran, or the tool itself aborted); ``unknown`` (the run
            stopped while the tool was running and it did not finish in time: it may or may
            not have taken effect); ``unknown_after_crash`` (found ``started`` after the
            process stopped).
        started_at: When it started.
        ended_at: When it finished (``None`` while started).
        result: The answer the model gets (a tool-return or retry-prompt part as
            wire-format JSON text) once finished, so a resumed run reuses it; ``None``
            again from the checkpoint that logs the answer (the log holds it then, and a
            tool result is never stored twice).
        error: The error text of a failed call, or why the outcome is unknown.
    """

    tool_call_id: str
    tool_name: str
    status: LedgerStatus
    started_at: datetime
    ended_at: datetime | None = None
    result: str | None = None
    error: str | None = None


@attrs.frozen
class Checkpoint:
    """Everything that changed since ``base_revision``, written in one transaction.

    Attributes:
        head: The new head (its ``revision`` is ``base_revision + 1``).
        base_revision: The revision the change is based on; ``0`` creates the session.
            A store whose session is at any other revision raises
            :class:`~harness.errors.SessionConflictError` and writes nothing.
        appended: New log messages; their ``seq`` continue the log.
        view_start: Positions from here on are replaced by ``view_tail`` (the old view
            length for a pure append).
        view_tail: The view's new entries from ``view_start``.
        thoughts: New thoughts, appended.
        ledger: Ledger entries written or updated (by ``tool_call_id``).
        edits: Edit records to add: the one of this checkpoint's view rewrite, or, when
            a session is copied between stores, all of them.
        head_fields: The :class:`SessionHead` fields that differ from the stored head
            (``revision`` always among them), so a store may write only those columns;
            ``None``: unknown, write the whole head (a new session, an import). A
            wrapper that changes the head adds the fields it changed.

    Rules every store checks: ``head.revision`` is ``base_revision + 1``, except when
    creating (``base_revision == 0``), where it may be any revision ``>= 1`` (an import
    keeps the source's); ``appended`` seqs increase and start at or after the stored
    log length (an import of a pruned log may have gaps).
    """

    head: SessionHead
    base_revision: int
    appended: tuple[LogEntry, ...] = ()
    view_start: int = 0
    view_tail: tuple[ViewEntry, ...] = ()
    thoughts: tuple[str, ...] = ()
    ledger: tuple[LedgerEntry, ...] = ()
    edits: tuple[EditRecord, ...] = ()
    head_fields: frozenset[str] | None = None


@attrs.frozen
class StoredSession:
    """What :meth:`SessionStore.load <harness.session.store.SessionStore.load>` returns.

    Attributes:
        head: The head record.
        view: The view, one ``(entry, body)`` per position: ``body`` is the message's
            JSON text, from the log for a reference and the overlay itself otherwise.
        thoughts: Every thought, in order.
        ledger: The tool-effect ledger, in the order calls started.
    """

    head: SessionHead
    view: tuple[tuple[ViewEntry, str], ...]
    thoughts: tuple[str, ...] = ()
    ledger: tuple[LedgerEntry, ...] = ()


@attrs.frozen
class SearchHit:
    """One log message that matches a search.

    Attributes:
        session_id: Its session.
        seq: Its position in that session's log.
        snippet: A short piece of its text around the match.
        score: Higher is better (backend-specific; only the order is meaningful).
    """

    session_id: str
    seq: int
    snippet: str
    score: float = 0.0


@attrs.frozen
class PruneResult:
    """What :meth:`SessionStore.prune <harness.session.store.SessionStore.prune>` did (or would do).

    Attributes:
        deleted: Sessions removed.
        trimmed: Sessions whose raw log lost the messages their view no longer shows.
        log_messages_dropped: Log messages removed from trimmed sessions.
        dry_run: Nothing was changed.
    """

    deleted: tuple[str, ...] = ()
    trimmed: tuple[str, ...] = ()
    log_messages_dropped: int = 0
    dry_run: bool = False
