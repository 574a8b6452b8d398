"""The run context a tool gets when a durable engine runs it in another process.

Under Temporal, a tool call is an activity on a worker: the run's history, usage and
per-run state stay with the workflow. :func:`remote_context` builds the
:class:`~harness.tools.context.RunContext` such a tool receives:

* what crosses the boundary reads as usual: ``model`` (the worker's agent's), ``tool_call_id``,
  ``tool_name``, ``retry``, and ``session.session_id`` and ``session.store`` (the worker's
  own connection to the run's store, so a tool can read the session's stored log);
* everything else raises :class:`~harness.errors.EngineBoundaryError` naming the engine and
  the field, instead of reading as empty: ``ctx.messages``, ``ctx.usage``, ``ctx.state``,
  ``ctx.prompt``, ``ctx.run``, and the session's ``messages``, ``metadata``, ``usage``,
  ``thoughts``, ``ledger`` and the other head fields.
"""

from __future__ import annotations

__all__ = ["RUN_LOCAL_FIELDS", "SESSION_LOCAL_FIELDS", "remote_context"]

from typing import Any, Final

import attrs

from harness.core.model import Model
from harness.errors import EngineBoundaryError
from harness.session import AsyncSessionStore, Session, SessionStore
from harness.tools.context import RunContext

RUN_LOCAL_FIELDS: Final = frozenset({"messages", "usage", "state", "prompt", "run"})
"""``RunContext`` fields that stay with the orchestration."""

SESSION_LOCAL_FIELDS: Final = frozenset(
    {
        "messages",
        "metadata",
        "usage",
        "thoughts",
        "ledger",
        "total_tokens",
        "original_query",
        "current_model",
        "created_at",
        "last_modified",
        "working_directory",
        "forked_from",
        "project_id",
    }
)
"""``Session`` fields that stay with the orchestration."""


@attrs.define(eq=False, repr=False)
class _RemoteSession(Session):
    engine: str = attrs.field(default="a durable engine", kw_only=True)

    def __getattribute__(self, name: str) -> Any:
        if name in SESSION_LOCAL_FIELDS:
            raise EngineBoundaryError(object.__getattribute__(self, "engine"), f"RunContext.session.{name}")
        return object.__getattribute__(self, name)

    def __repr__(self) -> str:
        return f"Session(session_id={self.session_id!r}, engine={self.engine!r})"


@attrs.define(eq=False, repr=False)
class _RemoteRunContext(RunContext):
    engine: str = attrs.field(default="a durable engine", kw_only=True)

    def __getattribute__(self, name: str) -> Any:
        if name in RUN_LOCAL_FIELDS:
            raise EngineBoundaryError(object.__getattribute__(self, "engine"), f"RunContext.{name}")
        return object.__getattribute__(self, name)

    def __repr__(self) -> str:
        call = f"tool_name={self.tool_name!r}, tool_call_id={self.tool_call_id!r}"
        return f"RunContext({call}, engine={self.engine!r})"

    def for_tool(self, tool_call_id: str, tool_name: str, retry: int) -> RunContext:
        return remote_context(
            engine=self.engine,
            model=self.model,
            session_id=self.session.session_id,
            store=self.session.store,
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            retry=retry,
        )


def remote_context(
    *,
    engine: str,
    model: Model,
    session_id: str,
    store: SessionStore | AsyncSessionStore | None,
    tool_call_id: str,
    tool_name: str,
    retry: int,
) -> RunContext:
    """The context of a tool call an engine runs outside the run's process (see the module).

    Args:
        engine: The engine's name, for the errors (``"harness-temporal"``).
        model: The worker's agent's model.
        session_id: The run's session.
        store: The worker's store of the run's session (``None``: not reachable).
        tool_call_id: The call's id.
        tool_name: The tool.
        retry: How many consecutive retries the tool already used.
    """
    session = _RemoteSession(session_id=session_id, store=store, engine=engine)
    return _RemoteRunContext(
        model=model,
        session=session,
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        retry=retry,
        engine=engine,
    )
