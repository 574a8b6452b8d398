"""Starting a run from any process (:func:`run_starter`) and a handle on a run (:class:`RunHandle`)."""

from __future__ import annotations

__all__ = ["DEFAULT_QUEUE", "ResultSource", "RunHandle", "new_workflow_id", "run_starter"]

import uuid
from typing import Any, Final, Protocol

from harness.config import load_agent
from harness.durable import RunStarter, RunSummary, StoreReference

DEFAULT_QUEUE: Final = "harness"
"""The DBOS queue runs are enqueued on unless another is named."""


def new_workflow_id() -> str:
    """A fresh workflow id (``harness-`` + 32 hexadecimal characters)."""
    return f"harness-{uuid.uuid4().hex}"


class ResultSource(Protocol):
    """A DBOS async workflow handle (``WorkflowHandleAsync`` or the client's)."""

    def get_workflow_id(self) -> str:
        """The workflow id."""
        ...

    async def get_result(self, *, polling_interval_sec: float = ...) -> Any:
        """The workflow's result; raises what the workflow raised."""
        ...


class RunHandle:
    """A run started or enqueued on DBOS: wait for its :class:`RunSummary` with :meth:`result`.

    Attributes:
        workflow_id: The DBOS workflow id (the run's key).
        session_id: The run's session (``None`` for a handle retrieved by workflow id).
    """

    def __init__(self, source: ResultSource, session_id: str | None, polling_interval: float) -> None:
        self._source = source
        self.workflow_id = source.get_workflow_id()
        self.session_id = session_id
        self._polling = polling_interval

    async def result(self) -> RunSummary:
        """Wait for the run to finish and return its summary.

        Raises:
            WorkflowIncompatibleError: A worker refused the run (its agent changed).
            Exception: Whatever else ended the run (DBOS records and re-raises it).
        """
        text = await self._source.get_result(polling_interval_sec=self._polling)
        if not isinstance(text, str):
            raise TypeError(
                f"workflow {self.workflow_id!r} returned a {type(text).__name__}, not a run summary"
            )
        return RunSummary.from_json(text)


def run_starter(agent: str, store: str | StoreReference, *, strip_credentials: bool = False) -> RunStarter:
    """The :class:`~harness.durable.RunStarter` of runs of ``agent`` on ``store``, built with ``load_agent``.

    Raises:
        StoreCredentialsError: ``store`` carries a credential (see :func:`harness.durable.store_reference`).
    """
    return RunStarter(agent, store, load=load_agent, strip_credentials=strip_credentials)
