"""The pydantic-removal contract's Verification Checklist: one named test per line."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings

from harness.core import (
    CanonicalMessage,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    Usage,
    UserPromptPart,
    latest_assistant_text,
)
from harness.errors import ToolRetry
from harness.history import check_invariants
from harness.hooks import hookimpl
from harness.models.function import FunctionModel
from harness.run import INTERRUPTED_MARKER, INTERRUPTED_UNKNOWN_CONTENT, Agent
from harness.session import Session
from harness.testing.strategies import histories
from harness.tools import RunState, ToolCallStatus
from harness.wire import dump_messages, load_messages


def _ids(messages: list[CanonicalMessage]) -> list[tuple[int, str, str]]:
    out: list[tuple[int, str, str]] = []
    for index, message in enumerate(messages):
        for part in message.parts:
            call_id = getattr(part, "tool_call_id", None)
            if call_id:
                out.append((index, part.part_kind, call_id))
    return out


# 1. History survives round-trip serialization with identical parts and tool_call_id values.
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=histories(max_messages=16))
def test_history_survives_round_trip_with_identical_parts_and_ids(
    tmp_path: Path, messages: list[CanonicalMessage]
) -> None:
    again = load_messages(dump_messages(messages))
    assert again == messages
    assert [m.parts for m in again] == [m.parts for m in messages]
    assert _ids(again) == _ids(messages)
    session = Session.create(tmp_path)
    session.messages = list(messages)
    assert Session.load(session.save()).messages == messages


# 2. Session load preserves thoughts, messages, and session_total_usage.
async def test_session_load_preserves_thoughts_messages_and_usage(tmp_path: Path) -> None:
    model = FunctionModel.from_responses(
        CanonicalMessage.response(
            ThoughtPart("I should list"),
            ToolCallPart(tool_call_id="c1", tool_name="ls"),
            usage=Usage(100, 10, cached_tokens=40),
        ),
        CanonicalMessage.response(TextPart("two files"), usage=Usage(150, 5, cached_tokens=100)),
    )

    def ls() -> list[str]:
        """List files."""
        return ["a", "b"]

    session = Session.create(tmp_path)
    session.thoughts.append("legacy thought")
    await Agent(model, tools=[ls]).run("what files?", session=session)
    assert session.path is not None
    loaded = Session.load(session.path)
    assert loaded.thoughts == ["legacy thought", "I should list"]
    assert loaded.messages == session.messages
    assert loaded.usage == session.usage == Usage(250, 15, cached_tokens=140)
    document = json.loads(session.path.read_text())
    assert document["session_total_usage"]["cached_tokens"] == 140
    # legacy {"thought": ...} entries in messages are moved to thoughts on load
    document["messages"].insert(0, {"thought": "from an old file"})
    legacy = tmp_path / "legacy.json"
    legacy.write_text(json.dumps(document))
    assert Session.load(legacy).thoughts == ["legacy thought", "I should list", "from an old file"]
    assert Session.load(legacy).messages == session.messages


# 3. Tool registry records complete/fail/cancel updates in sync with tool return parts.
async def test_tool_registry_in_sync_with_tool_return_parts() -> None:
    events: list[tuple[str, str, int]] = []
    session = Session()

    class Probe:
        run = RunState()

        @hookimpl
        def on_tool(self, ctx: Any, event: Any) -> None:
            Probe.run = ctx.run
            answered = {
                p.tool_call_id
                for m in ctx.messages
                for p in m.parts
                if isinstance(p, ToolReturnPart | RetryPromptPart) and p.tool_call_id
            }
            events.append((event.kind, event.record.tool_call_id, int(event.record.tool_call_id in answered)))

    def good() -> str:
        """Works."""
        return "ok"

    def retry() -> str:
        """Asks for a retry."""
        raise ToolRetry("again")

    async def slow() -> str:
        """Never finishes."""
        await asyncio.sleep(10)
        return "late"

    model = FunctionModel.from_responses(
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="g", tool_name="good"),
            ToolCallPart(tool_call_id="r", tool_name="retry"),
        ),
        CanonicalMessage.response(ToolCallPart(tool_call_id="s", tool_name="slow")),
    )
    agent = Agent(model, tools=[good, retry, slow])
    agent.plugin_manager.register(Probe(), name="probe")
    task = asyncio.create_task(agent.run("go", session=session))
    for _ in range(1000):
        await asyncio.sleep(0.002)
        if [r.tool_call_id for r in Probe.run.tool_registry.records(ToolCallStatus.RUNNING)] == ["s"]:
            break
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    registry = Probe.run.tool_registry
    assert {r.tool_call_id: r.status for r in registry} == {
        "g": ToolCallStatus.COMPLETED,
        "r": ToolCallStatus.FAILED,
        "s": ToolCallStatus.CANCELLED,
    }
    assert registry.check_against(session.messages) == []
    kinds = [(kind, call_id) for kind, call_id, _ in events]
    for call_id, final in (("g", "completed"), ("r", "failed"), ("s", "cancelled")):
        assert ("registered", call_id) in kinds
        assert ("started", call_id) in kinds
        assert (final, call_id) in kinds
    # while the run is live, no call is reported started or registered after being answered
    assert all(answered == 0 for kind, _, answered in events if kind in ("registered", "started"))
    answers = {p.tool_call_id: p for m in session.messages for p in m.parts if isinstance(p, ToolReturnPart)}
    assert answers["s"].content == INTERRUPTED_UNKNOWN_CONTENT  # cancelled part way: may have taken effect
    assert answers["g"].content == "ok"


# 4. Request loop still prunes and sanitizes history before a run.
async def test_request_loop_prunes_and_sanitizes_before_run() -> None:
    big = "word " * 30_000  # ~30k tokens per tool result
    history = [
        CanonicalMessage.request(
            SystemPromptPart("stored system prompt"), UserPromptPart("first"), run_id="old"
        ),
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="a", tool_name="read"),
            ToolCallPart(tool_call_id="b", tool_name="read"),
            run_id="old",
        ),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="a", tool_name="read", content=big),
            ToolReturnPart(tool_call_id="b", tool_name="read", content=big),
        ),
        CanonicalMessage.response(
            TextPart("read both"), ToolCallPart(tool_call_id="dangling", tool_name="read")
        ),
        CanonicalMessage.user("second"),
        CanonicalMessage.response(ToolCallPart(tool_call_id="c", tool_name="read")),
        CanonicalMessage.request(ToolReturnPart(tool_call_id="c", tool_name="read", content=big)),
        CanonicalMessage.response(TextPart("ok")),
    ]
    assert check_invariants(history, persisted=True) != []
    model = FunctionModel.from_responses("done")
    session = Session(messages=history)
    await Agent(model, system_prompt="fresh").run("third", session=session)
    sent = model.requests[0]
    stored = session.messages
    assert check_invariants(stored, persisted=True) == []
    contents = {p.tool_call_id: p.content for m in stored for p in m.parts if isinstance(p, ToolReturnPart)}
    assert contents["a"] == contents["b"] == "[Old tool result content cleared]"  # pruned
    assert contents["c"] == big  # newest output protected
    assert "dangling" in contents  # the dangling call was answered, not silently dropped
    assert all(m.run_id is None for m in stored)
    assert [p.content for m in sent for p in m.parts if isinstance(p, SystemPromptPart)] == ["fresh"]
    assert [p.text for m in stored for p in m.parts if isinstance(p, UserPromptPart)] == [
        "first",
        "second",
        "third",
    ]


# 5. Abort path appends an [INTERRUPTED] response and cleans dangling tool calls.
async def test_abort_appends_interrupted_and_cleans_dangling_calls(tmp_path: Path) -> None:
    started = asyncio.Event()

    async def hang() -> str:
        """Hangs until cancelled."""
        started.set()
        await asyncio.sleep(10)
        return "never"

    def quick() -> str:
        """Returns at once."""
        return "quick result"

    model = FunctionModel.from_responses(
        CanonicalMessage.response(
            TextPart("working on it"),
            ToolCallPart(tool_call_id="q", tool_name="quick"),
            ToolCallPart(tool_call_id="h", tool_name="hang"),
        )
    )

    class Probe:
        run = RunState()

        @hookimpl
        def on_tool(self, ctx: Any, event: Any) -> None:
            Probe.run = ctx.run

    session = Session.create(tmp_path)
    agent = Agent(model, tools=[quick, hang])
    agent.plugin_manager.register(Probe(), name="probe")
    task = asyncio.create_task(agent.run("go", session=session))
    await started.wait()
    for _ in range(20):
        await asyncio.sleep(0.005)
        if "q" in {r.tool_call_id for r in Probe.run.tool_registry.records(ToolCallStatus.COMPLETED)}:
            break
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    else:
        raise AssertionError("the cancellation must be re-raised")
    messages = session.messages
    assert check_invariants(messages, persisted=True) == []
    assert messages[-1].kind == "response"
    assert messages[-1].parts[-1] == TextPart(INTERRUPTED_MARKER, metadata={"harness": {"interrupted": True}})
    returns = {p.tool_call_id: p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)}
    assert returns == {"q": "quick result", "h": INTERRUPTED_UNKNOWN_CONTENT}
    assert [p.text for m in messages for p in m.parts if isinstance(p, UserPromptPart)] == ["go"]
    assert session.path is not None
    assert Session.load(session.path).messages == messages
    # the next prompt is accepted: no dangling calls, no two responses in a row
    await Agent(FunctionModel.from_responses("resumed")).run("next", session=session)
    assert check_invariants(session.messages, persisted=True) == []


# 6. UI can still extract the latest assistant response without depending on ModelResponse.
async def test_ui_extracts_latest_assistant_response(tmp_path: Path) -> None:
    model = FunctionModel.from_responses(
        CanonicalMessage.response(
            ThoughtPart("hmm"), TextPart("Let me check."), ToolCallPart(tool_call_id="c", tool_name="ls")
        ),
        CanonicalMessage.response(ThoughtPart("done thinking"), TextPart("Two files: "), TextPart("a, b")),
    )

    def ls() -> str:
        """List."""
        return "a b"

    session = Session.create(tmp_path)
    result = await Agent(model, tools=[ls]).run("files?", session=session)
    assert result.output == "Two files: a, b"
    assert latest_assistant_text(session.messages) == "Two files: a, b"
    assert session.path is not None
    # a UI that only has the saved file (plain JSON) gets the same answer
    reloaded = Session.load(session.path)
    assert latest_assistant_text(reloaded.messages) == "Two files: a, b"
    raw = json.loads(session.path.read_text())["messages"]
    last_response = next(m for m in reversed(raw) if m["kind"] == "response")
    assert (
        "".join(p["content"] for p in last_response["parts"] if p["part_kind"] == "text") == "Two files: a, b"
    )
