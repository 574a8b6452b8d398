"""Compacting a stored session for ``harness compact --session``: the stack over its view, then the save.

Saving follows what a run does after its capabilities edited the history
(:meth:`harness.run.persist.SessionWriter.edited`): the messages the stack wrote become
overlays recorded with its compaction events, the log keeps every message they replace,
and the checkpoint is refused with :class:`~harness.errors.SessionConflictError` when
another writer changed the session since it was opened.
"""

from __future__ import annotations

__all__ = ["compact_stored_session", "save_compacted"]

from collections.abc import Sequence

from harness.capabilities.context import RequestContext
from harness.core.messages import CanonicalMessage
from harness.run.compaction import CompactionResult, compact_sync
from harness.run.persist import event_json
from harness.session import Session
from harness.tokens import TokenCounter


def compact_stored_session(
    session: Session,
    capabilities: Sequence[object],
    *,
    model: str | None = None,
    window: int | None = None,
    force: bool = True,
) -> CompactionResult:
    """Compact a stored session's view with a stack (nothing is saved: see :func:`save_compacted`).

    The stack runs with a context holding ``session``, so a recall capability in it
    gives the placeholders references into the session's log.

    Args:
        session: The session, opened from its store (:meth:`Session.open`).
        capabilities: The stack.
        model: The model name that picks the tokenizer.
        window: The context window for the fractions (default: the view's own size).
        force: Make every capability act now (``False``: each trigger decides).
    """
    counter = TokenCounter(model)
    size = window or max(counter.count_messages(session.messages), 1)
    context = RequestContext(
        messages=[], token_counter=counter, model_name=model, context_window=size, session=session
    )
    return compact_sync(session.messages, capabilities, context=context, force=force)


def save_compacted(session: Session, result: CompactionResult) -> int:
    """Make ``result`` the session's view and checkpoint it; return the new revision.

    As a run persists a compaction: the messages the stack wrote are overlays recorded
    with its events, the log keeps every message they replace.

    Raises:
        SessionConflictError: Another writer changed the session since it was opened;
            nothing was written.
    """
    known = {id(message) for message in session.messages}
    written: list[CanonicalMessage] = [m for m in result.messages if id(m) not in known]
    session.note_overlays(written, [event_json(event) for event in result.events])
    session.messages = list(result.messages)
    session.total_tokens = result.tokens_after
    return session.checkpoint()
