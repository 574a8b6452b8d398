"""Starting a run from any process (:class:`RunStarter`) and a handle on a run (:class:`RunHandle`)."""

from __future__ import annotations

__all__ = ["DEFAULT_QUEUE", "RunHandle", "RunStarter", "ResultSource", "new_workflow_id"]

import os
import uuid
from datetime import UTC, datetime
from typing import Any, Final, Protocol

from harness.config import load_agent
from harness.run import agent_fingerprint
from harness_dbos.spec import RunSpec, RunSummary

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


class RunStarter:
    """Builds the workflow input of a run of one agent on one store.

    Args:
        agent: The agent's import reference (``"package.module:attribute"``); loaded
            once here, for its fingerprint.
        store_url: The session store runs write to.
    """

    def __init__(self, agent: str, store_url: str) -> None:
        self.agent = agent
        self.store_url = store_url
        self._fingerprint: dict[str, str] | None = None

    def fingerprint(self) -> dict[str, str]:
        """The agent's fingerprint (loads the agent the first time).

        Raises:
            AgentLoadError: The reference does not load.
        """
        if self._fingerprint is None:
            self._fingerprint = agent_fingerprint(load_agent(self.agent))
        return self._fingerprint

    def spec(self, prompt: str | None, session_id: str | None = None) -> RunSpec:
        """The input of a new run (``session_id`` ``None``: a new session)."""
        return RunSpec(
            agent=self.agent,
            store_url=self.store_url,
            session_id=session_id if session_id is not None else uuid.uuid4().hex,
            prompt=prompt,
            fingerprint=self.fingerprint(),
            started_at=datetime.now(UTC),
            working_directory=os.getcwd(),
        )
