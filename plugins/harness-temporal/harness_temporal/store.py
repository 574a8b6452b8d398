"""The run's session store inside the workflow: every operation is a local activity on the worker.

Workflow code never touches a store: a store that waits on another writer's lock (SQLite's
busy timeout, PostgreSQL's ``lock_timeout``) would stall the workflow task past Temporal's
deadlock detector, and a write made by workflow code is not in the history, so a replay
would make it again. :class:`ActivityStore` is the
:class:`~harness.session.AsyncSessionStore` the run's session uses there instead:

* each checkpoint is a ``harness.store`` local activity (:data:`~harness_temporal.units.ACTIVITY_STORE`)
  whose input is the checkpoint as JSON (what the step added) and whose result, the new
  revision, Temporal records: a replay gets it back without touching the store;
* the checkpoint's head is marked with the run and the commit's number
  (:func:`harness.durable.mark_checkpoint`), so an activity executed again after its
  worker died before Temporal recorded it finds its own write and returns it
  (:func:`harness.durable.already_applied`) instead of failing on the new revision;
* reads a capability makes during the run (``load``, ``head``, ``read_log``, ``edits``,
  ``search``) are local activities too; listing, forking, deleting and pruning are not
  part of a run and are refused.
"""

from __future__ import annotations

__all__ = ["ActivityStore"]

from datetime import datetime, timedelta
from typing import Any, cast

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from harness.durable import (
    checkpoint_to_json,
    edits_from_json,
    head_from_json,
    hits_from_json,
    log_from_json,
    mark_checkpoint,
    stored_from_json,
)
from harness.errors import SessionStoreError
from harness.session import (
    Checkpoint,
    EditRecord,
    LogEntry,
    PruneResult,
    SearchHit,
    SessionHead,
    StoredSession,
)
from harness_temporal.errors import TemporalRunError
from harness_temporal.failures import rebuild
from harness_temporal.units import ACTIVITY_STORE, RunSpec


class ActivityStore:
    """The store of one run, inside its workflow (see the module).

    Args:
        spec: The run's input (its store reference, the activity options).
        run_key: The run's workflow id.

    Attributes:
        commits: Checkpoints the run made in this execution (replayed ones included).
        skipped: Checkpoints a re-executed activity found already written.
    """

    def __init__(self, spec: RunSpec, run_key: str) -> None:
        self.spec = spec
        self.run_key = run_key
        self.commits = 0
        self.skipped = 0

    @property
    def url(self) -> str:
        """The run's store reference (``@name`` or its URL without credentials)."""
        return str(self.spec.store)

    def __repr__(self) -> str:
        return f"ActivityStore({self.url!r})"

    async def _op(self, op: str, **fields: Any) -> Any:
        data: dict[str, Any] = {"store": self.spec.store.to_json(), "op": op, "run": self.run_key, **fields}
        try:
            result: dict[str, Any] = await workflow.execute_local_activity(
                ACTIVITY_STORE,
                data,
                result_type=dict,
                start_to_close_timeout=timedelta(seconds=self.spec.options.store_timeout),
                retry_policy=RetryPolicy(
                    maximum_attempts=3, non_retryable_error_types=["SessionConflictError"]
                ),
                summary=f"store {op}",
            )
        except ActivityError as exc:
            cause = exc.cause
            if isinstance(cause, ApplicationError):
                raise rebuild(cause, what=f"store {op}", run_id=self.run_key) from exc
            raise TemporalRunError(
                f"store {op} failed: {cause or exc}", kind=type(cause or exc).__name__, run_id=self.run_key
            ) from exc
        return result["value"]

    async def commit(self, checkpoint: Checkpoint) -> int:
        """Write ``checkpoint`` through a local activity; return the new revision."""
        self.commits += 1
        marked = mark_checkpoint(checkpoint, self.run_key, self.commits)
        value = cast(
            dict[str, Any],
            await self._op("commit", checkpoint=checkpoint_to_json(marked), commit=self.commits),
        )
        if value.get("skipped"):
            self.skipped += 1
        return int(value["revision"])

    async def load(self, session_id: str) -> StoredSession:
        """Read a session through a local activity."""
        return stored_from_json(await self._op("load", session=session_id), self.url)

    async def head(self, session_id: str) -> SessionHead:
        """Read a session's head through a local activity."""
        return head_from_json(await self._op("head", session=session_id), self.url)

    async def read_log(self, session_id: str, start: int = 0, stop: int | None = None) -> list[LogEntry]:
        """Read the raw log through a local activity."""
        return log_from_json(await self._op("read_log", session=session_id, start=start, stop=stop))

    async def edits(self, session_id: str) -> list[EditRecord]:
        """Read the edit records through a local activity."""
        return edits_from_json(await self._op("edits", session=session_id), session_id, self.url)

    async def search(self, query: str, *, session_id: str | None = None, limit: int = 20) -> list[SearchHit]:
        """Search the raw logs through a local activity."""
        return hits_from_json(await self._op("search", query=query, session=session_id, limit=limit))

    def _refused(self, what: str) -> SessionStoreError:
        return SessionStoreError(
            self.url, f"{what} is not part of a run; it is not offered inside a Temporal workflow"
        )

    async def list_sessions(self) -> list[SessionHead]:
        """Refused: not part of a run."""
        raise self._refused("listing sessions")

    async def fork(self, session_id: str, new_session_id: str) -> SessionHead:
        """Refused: not part of a run."""
        raise self._refused("forking a session")

    async def delete(self, session_id: str) -> bool:
        """Refused: not part of a run."""
        raise self._refused("deleting a session")

    async def prune(
        self,
        *,
        keep_last: int | None = None,
        newer_than: datetime | None = None,
        drop_log: bool = False,
        dry_run: bool = False,
    ) -> PruneResult:
        """Refused: not part of a run."""
        raise self._refused("pruning sessions")

    async def aclose(self) -> None:
        """Nothing to release: the workers own the stores."""
