"""What fails while a run recovers (``on_tool`` observers, the save) is noted on the error the run raises."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

from harness.core import CanonicalMessage, ToolCallPart
from harness.errors import RequestTimeout, UserAbort
from harness.hooks import hookimpl
from harness.models.function import FunctionModel
from harness.run import Agent
from harness.session import Session
from harness.tools import RunContext, ToolEvent


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    @hookimpl
    def on_tool(self, ctx: RunContext, event: ToolEvent) -> None:
        self.events.append((event.kind, event.record.tool_call_id))


class FailsOnCancel:
    @hookimpl
    def on_tool(self, ctx: RunContext, event: ToolEvent) -> None:
        if event.kind == "cancelled":
            raise OSError(f"audit log unreachable for {event.record.tool_call_id}")


def _two_calls() -> FunctionModel:
    return FunctionModel.from_responses(
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="c1", tool_name="wait"),
            ToolCallPart(tool_call_id="c2", tool_name="wait"),
        ),
        "done",
    )


def _agent(wait: Any, **options: Any) -> tuple[Agent, Recorder]:
    agent = Agent(_two_calls(), tools=[wait], **options)
    recorder = Recorder()
    agent.plugin_manager.register(recorder, name="recorder")
    agent.plugin_manager.register(FailsOnCancel(), name="audit")
    return agent, recorder


def _notes(error: BaseException) -> list[str]:
    return [note for note in getattr(error, "__notes__", []) if "on_tool hook failed" in note]


async def test_an_observer_failing_during_abort_recovery_is_noted_on_the_user_abort() -> None:
    holder: dict[str, Agent] = {}

    async def wait() -> str:
        """Wait until aborted."""
        holder["agent"].abort()
        await asyncio.sleep(10)
        return "never"

    agent, recorder = _agent(wait)
    holder["agent"] = agent
    with pytest.raises(UserAbort) as caught:
        await agent.run("go")
    notes = _notes(caught.value)
    assert len(notes) == 2, caught.value.__notes__
    for call_id, note in zip(("c1", "c2"), notes, strict=True):
        assert f"the 'cancelled' event of tool call {call_id!r} while the run recovered" in note
        assert "'audit'" in note
        assert f"OSError: audit log unreachable for {call_id}" in note
    # the observers before the failing one got every event, the recovery's included
    assert [e for e in recorder.events if e[0] == "cancelled"] == [("cancelled", "c1"), ("cancelled", "c2")]


async def test_an_observer_failing_during_timeout_recovery_is_noted_on_the_request_timeout() -> None:
    async def wait() -> str:
        """Wait past the timeout."""
        await asyncio.sleep(10)
        return "never"

    agent, _ = _agent(wait, request_timeout=0.2)
    with pytest.raises(RequestTimeout) as caught:
        await agent.run("go")
    notes = _notes(caught.value)  # on the error raised, not on the cancellation it is chained to
    assert len(notes) == 2
    assert "the 'cancelled' event of tool call 'c1'" in notes[0]


async def test_a_failed_save_after_a_timeout_is_noted_on_the_request_timeout(tmp_path: Path) -> None:
    session = Session.create(tmp_path / "sessions")
    assert session.path is not None
    folder = session.path.parent

    async def wait() -> str:
        """Make the session's folder unusable, then wait past the timeout."""
        shutil.rmtree(folder, ignore_errors=True)
        folder.write_text("not a folder")
        await asyncio.sleep(10)
        return "never"

    agent = Agent(_two_calls(), tools=[wait], request_timeout=0.2)
    with pytest.raises(RequestTimeout) as caught:
        await agent.run("go", session=session)
    notes = caught.value.__notes__
    assert any("saving the session after the failure also failed" in note for note in notes)


async def test_an_observer_failing_on_a_tool_that_aborts_is_noted_on_the_user_abort() -> None:
    def stop() -> str:
        """Stop the run, as a tool asking the user and told no would."""
        raise UserAbort("the user said no")

    model = FunctionModel.from_responses(
        CanonicalMessage.response(ToolCallPart(tool_call_id="c1", tool_name="stop")), "done"
    )
    agent = Agent(model, tools=[stop])
    agent.plugin_manager.register(FailsOnCancel(), name="audit")
    with pytest.raises(UserAbort, match="the user said no") as caught:
        await agent.run("go")
    (note,) = [n for n in caught.value.__notes__ if "on_tool hook failed" in n]
    assert "tool call 'c1' while the run was stopping" in note
    assert "OSError: audit log unreachable for c1" in note
