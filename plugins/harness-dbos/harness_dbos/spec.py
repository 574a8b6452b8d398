"""The workflow's input (:class:`RunSpec`) and result (:class:`RunSummary`), as small JSON texts.

A run's input is everything a worker needs to build the run again, in any process: the
agent's import reference, the session store's URL, the session id, the prompt, the
agent's fingerprint (checked before anything is replayed), the time the run started
(the first value of ``now()``) and the working directory of a new session. The result is
a summary: the output text, the session and its revision, iterations and usage. Neither
holds the history.
"""

from __future__ import annotations

__all__ = ["RunSpec", "RunSummary"]

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, cast

import attrs

from harness.errors import WorkflowIncompatibleError

_VERSION = 1


def _fields(text: str, what: str) -> dict[str, Any]:
    try:
        data: object = json.loads(text)
    except ValueError as exc:
        raise WorkflowIncompatibleError(f"the {what} is not JSON: {exc}", changed=(what,)) from exc
    if not isinstance(data, dict):
        raise WorkflowIncompatibleError(f"the {what} is not a JSON object", changed=(what,))
    return cast(dict[str, Any], data)


@attrs.frozen
class RunSpec:
    """What a run is: the workflow's input.

    Attributes:
        agent: The agent's import reference (``"package.module:attribute"``).
        store_url: The session store's URL.
        session_id: The run's session (created by the run if the store has none such).
        prompt: The prompt (``None``: continue the session without a new prompt).
        fingerprint: :func:`~harness.durable.fingerprint.agent_fingerprint` of the agent
            when the run was started.
        started_at: When the run was started (UTC): ``now()`` before the first unit.
        working_directory: The working directory of a session the run creates.
    """

    agent: str
    store_url: str
    session_id: str
    prompt: str | None
    fingerprint: Mapping[str, str]
    started_at: datetime
    working_directory: str

    def to_json(self) -> str:
        """The spec as one compact JSON text."""
        return json.dumps(
            {
                "version": _VERSION,
                "agent": self.agent,
                "store_url": self.store_url,
                "session_id": self.session_id,
                "prompt": self.prompt,
                "fingerprint": dict(self.fingerprint),
                "started_at": self.started_at.isoformat(),
                "working_directory": self.working_directory,
            },
            separators=(",", ":"),
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        """Read :meth:`to_json`'s text.

        Raises:
            WorkflowIncompatibleError: Not a spec of this version (another harness-dbos
                started the run).
        """
        fields = _fields(text, "workflow input")
        if fields.get("version") != _VERSION:
            raise WorkflowIncompatibleError(
                f"the run was started by another harness-dbos (input version {fields.get('version')!r}, "
                f"this one reads {_VERSION})",
                changed=("workflow input",),
            )
        try:
            return cls(
                agent=str(fields["agent"]),
                store_url=str(fields["store_url"]),
                session_id=str(fields["session_id"]),
                prompt=None if fields["prompt"] is None else str(fields["prompt"]),
                fingerprint={str(k): str(v) for k, v in cast(dict[str, Any], fields["fingerprint"]).items()},
                started_at=datetime.fromisoformat(str(fields["started_at"])),
                working_directory=str(fields["working_directory"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise WorkflowIncompatibleError(
                f"the workflow input is not valid: {type(exc).__name__}: {exc}", changed=("workflow input",)
            ) from exc


@attrs.frozen
class RunSummary:
    """What a finished run returns (the workflow's result).

    Attributes:
        output: The final response's text.
        session_id: The session the run wrote.
        revision: The session's store revision after the run.
        iterations: Model requests the run made.
        usage: The run's usage (``session_total_usage`` shape).
        workflow_id: The DBOS workflow id of the run.
    """

    output: str | None
    session_id: str
    revision: int
    iterations: int
    usage: Mapping[str, Any]
    workflow_id: str

    def to_json(self) -> str:
        """The summary as one compact JSON text."""
        return json.dumps(attrs.asdict(self), separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> RunSummary:
        """Read :meth:`to_json`'s text.

        Raises:
            WorkflowIncompatibleError: Not a summary.
        """
        fields = _fields(text, "workflow result")
        try:
            return cls(
                output=fields["output"],
                session_id=str(fields["session_id"]),
                revision=int(fields["revision"]),
                iterations=int(fields["iterations"]),
                usage=cast(dict[str, Any], fields["usage"]),
                workflow_id=str(fields["workflow_id"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise WorkflowIncompatibleError(
                f"the workflow result is not a run summary: {exc}", changed=("workflow result",)
            ) from exc
