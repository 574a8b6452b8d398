"""A session store for runs that a durable engine may replay: commits already applied are skipped.

A durable engine (``harness-dbos``, ``harness-temporal``) replays a run's orchestration
from its start after a crash, answering the model and tool units it journaled from the
journal. The orchestration checkpoints the session at every step, so the replay makes
again every commit the crashed execution made. :class:`ReplaySafeStore` wraps the run's
store and recognises them:

* every commit of the run is marked in the head's metadata with the run's key and its
  number within the run (``metadata["harness.durable"] = {"run": key, "commit": n}``);
* while the stored head carries this run's mark with a number at or past the commit being
  made, the commit was applied by an earlier execution: nothing is written, and the
  revision it produced is returned (the orchestration is deterministic, so it is the
  same checkpoint);
* the first commit past the stored head is written as usual, and every later one too
  (no head read any more): the run is live again.

A head changed by anyone else meanwhile (no mark of this run) makes the commit fail with
:class:`~harness.errors.SessionConflictError`, as for any two writers on one session.

:meth:`ReplaySafeStore.started_before` tells whether a skipped commit had recorded a tool
call as ``started``: the call was running when the earlier execution stopped, so a tool
that is not idempotent must not run again (the model is told its outcome is unknown).

The run must also start from the session as it was when it began, not as the crashed
execution left it: see :mod:`harness.durable.snapshot`.
"""

from __future__ import annotations

__all__ = ["DURABLE_MARK", "ReplaySafeStore", "already_applied", "mark_checkpoint"]

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import attrs

from harness.errors import SessionConflictError, SessionNotFoundError
from harness.session.delegating import DelegatingStore
from harness.session.ids import check_session_id
from harness.session.records import Checkpoint, SessionHead
from harness.session.store import SessionStore

if TYPE_CHECKING:
    from harness.session import Session

DURABLE_MARK = "harness.durable"
"""The head metadata key of a durable run's commit mark: ``{"run": key, "commit": n}``."""


def mark_checkpoint(checkpoint: Checkpoint, run_key: str, number: int) -> Checkpoint:
    """``checkpoint`` with its head marked as commit ``number`` of run ``run_key``."""
    head = checkpoint.head
    fields = checkpoint.head_fields
    return attrs.evolve(
        checkpoint,
        head=attrs.evolve(head, metadata={**head.metadata, DURABLE_MARK: {"run": run_key, "commit": number}}),
        head_fields=None if fields is None else fields | {"metadata"},  # the mark is a change to write
    )


def already_applied(stored: SessionHead | None, checkpoint: Checkpoint, run_key: str, number: int) -> bool:
    """Whether commit ``number`` of run ``run_key`` is in the store already (``stored``: its head now).

    True when the stored head carries this run's mark at or past ``number``: an earlier
    execution of the run wrote it (the orchestration is deterministic, so it is the same
    checkpoint).
    """
    if stored is None:
        return False
    if stored.revision <= checkpoint.base_revision and checkpoint.base_revision:
        return False
    mark = _mark(stored)
    return mark is not None and mark[0] == run_key and mark[1] >= number


def _mark(head: SessionHead) -> tuple[str, int] | None:
    value = head.metadata.get(DURABLE_MARK)
    if not isinstance(value, Mapping):
        return None
    mark = cast(Mapping[str, Any], value)
    run, commit = mark.get("run"), mark.get("commit")
    if not isinstance(run, str) or not isinstance(commit, int):
        return None
    return run, commit


class ReplaySafeStore(DelegatingStore):
    """Wraps a run's store so a replayed run skips the commits an earlier execution applied.

    Args:
        inner: The store the session lives in.
        run_key: The run's stable identity across executions (the engine's workflow id).
    """

    def __init__(self, inner: SessionStore, run_key: str) -> None:
        super().__init__(inner)
        self.run_key = run_key
        self.commits = 0
        """Commits the run made so far in this execution (skipped ones included)."""
        self.skipped = 0
        """Commits recognised as applied by an earlier execution."""
        self._live = False
        self._started: set[str] = set()

    @property
    def live(self) -> bool:
        """Whether this execution has written past what earlier executions had written."""
        return self._live

    def started_before(self, tool_call_id: str) -> bool:
        """Whether an earlier execution of the run recorded ``tool_call_id`` as started."""
        return tool_call_id in self._started

    def commit(self, checkpoint: Checkpoint) -> int:
        """Write ``checkpoint`` marked with the run, or skip it if an earlier execution did.

        Raises:
            SessionConflictError: Someone else changed the session (no mark of this run).
            SessionStoreError: The store cannot be written.
        """
        self.commits += 1
        number = self.commits
        head = checkpoint.head
        marked = mark_checkpoint(checkpoint, self.run_key, number)
        if not self._live and self._applied(checkpoint, number):
            self.skipped += 1
            for entry in checkpoint.ledger:
                if entry.status == "started":
                    self._started.add(entry.tool_call_id)
            return head.revision
        revision = self.inner.commit(marked)
        self._live = True
        return revision

    def _applied(self, checkpoint: Checkpoint, number: int) -> bool:
        try:
            stored = self.inner.head(checkpoint.head.session_id)
        except SessionNotFoundError:
            return False
        return already_applied(stored, checkpoint, self.run_key, number)

    def session_from_snapshot(self, snapshot: str, *, source: str = "the run's journal") -> Session:
        """The session a :func:`~harness.durable.snapshot.snapshot_session` text holds, bound to this store.

        Raises:
            SessionStoreError: ``snapshot`` is not such a text (names ``source``).
        """
        from harness.durable.snapshot import session_from_snapshot

        return session_from_snapshot(self, snapshot, source=source)

    def new_session(self, **fields: Any) -> Session:
        """The session a run creates here: ``Session.create``, aware of replays.

        An id the store holds already is refused, as ``Session.create`` refuses it, unless
        the stored head carries this run's mark: an earlier execution of the run created
        it, and a replay makes its commits again.

        Raises:
            SessionIdError: The ``session_id`` given breaks the rule of :mod:`harness.session.ids`.
            SessionConflictError: Someone else holds a session with that id.
        """
        from harness.session import Session

        session_id = fields.get("session_id")
        if session_id is not None:
            check_session_id(session_id)
            try:
                stored = self.inner.head(session_id)
            except SessionNotFoundError:
                stored = None
            mark = None if stored is None else _mark(stored)
            if stored is not None and (mark is None or mark[0] != self.run_key):
                raise SessionConflictError(self.inner.url, session_id, 0, stored.revision)
        return Session(store=self, **fields)
