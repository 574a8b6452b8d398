"""In process, a tool reads one history, whatever the store: ``ctx.session.messages`` is the run's."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import Agent, CanonicalMessage, RunContext, Session, TextPart, ToolCallPart
from harness.models.function import FunctionInfo, FunctionModel
from harness.stores import SqliteStore


@pytest.mark.parametrize("kind", ["memory", "file", "store"])
async def test_a_tool_sees_the_runs_history_through_its_session(kind: str, tmp_path: Path) -> None:
    seen: list[tuple[int, int, bool]] = []

    def look(ctx: RunContext) -> str:
        """Look at the history."""
        seen.append((len(ctx.messages), len(ctx.session.messages), ctx.session.messages is ctx.messages))
        return "looked"

    def model(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        if len(messages) == 1:
            return CanonicalMessage.response(ToolCallPart(tool_call_id="c1", tool_name="look", args={}))
        return CanonicalMessage.response(TextPart("done"))

    store = SqliteStore(tmp_path / "s.db")
    if kind == "store":
        session = Session.create(store=store)
    elif kind == "file":
        session = Session.create(tmp_path)
    else:
        session = Session()
    await Agent(FunctionModel(model), tools=[look]).run("go", session)
    assert seen == [(2, 2, True)]  # the prompt and the response calling the tool, the same list
    store.close()
