"""The run's edges: a failing hook never stands between its messages and its session; times are the run's."""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from harness import (
    Agent,
    CanonicalMessage,
    InProcessEffects,
    Session,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from harness.errors import MaxIterationsExceeded
from harness.hooks import PluginManager, hookimpl
from harness.models.function import FunctionInfo, FunctionModel
from harness.models.test import TestModel
from harness.run import RunStream
from harness.stores import SqliteStore
from harness.tokens import TokenCounter


class CountsUntilTheEnd:
    """A ``count_tokens`` plugin that breaks once the run has made its requests."""

    def __init__(self) -> None:
        self.broken = False

    @hookimpl
    def count_tokens(self, text: str, model_name: str | None) -> int | None:
        if self.broken:
            raise RuntimeError("the tokenizer service is down")
        return None


class BreaksCountingOnTheLastNode:
    def __init__(self, counter: CountsUntilTheEnd) -> None:
        self.counter = counter

    @hookimpl
    def after_node(self, node: object) -> None:
        if type(node).__name__ == "EndNode":
            self.counter.broken = True


def agent_with_broken_counting() -> Agent:
    counts = CountsUntilTheEnd()
    manager = PluginManager()
    manager.register(counts)
    manager.register(BreaksCountingOnTheLastNode(counts))
    return Agent(TestModel(final_text="done"), plugin_manager=manager)


@pytest.mark.parametrize("kind", ["memory", "file", "store"])
async def test_a_count_tokens_hook_failing_at_the_hand_over_loses_nothing(kind: str, tmp_path: Path) -> None:
    agent = agent_with_broken_counting()
    store = SqliteStore(tmp_path / "s.db") if kind == "store" else None
    if kind == "store":
        session = Session.create(store=store)
    elif kind == "file":
        session = Session.create(tmp_path)
    else:
        session = Session()
    result = await agent.run("hello", session)
    assert result.output == "done"
    assert [m.kind for m in session.messages] == ["request", "response"]
    expected = TokenCounter(agent.model.model_name).count_messages(session.messages)
    assert session.total_tokens == expected  # the built-in counter counted instead
    if kind == "file":
        assert session.path is not None
        assert [m.kind for m in Session.load(session.path).messages] == ["request", "response"]
    if store is not None:
        stored = Session.open(store, session.session_id)
        assert stored.total_tokens == expected
        store.close()


async def test_a_failing_count_after_a_failed_run_becomes_a_note_and_the_history_is_saved(
    tmp_path: Path,
) -> None:
    counts = CountsUntilTheEnd()

    class BreakOnSecondRequest:
        @hookimpl
        def after_node(self, node: object) -> None:
            counts.broken = True

    def loop(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        return CanonicalMessage.response(
            ToolCallPart(tool_call_id=f"c{len(messages)}", tool_name="noop", args={})
        )

    def noop() -> str:
        """Do nothing."""
        return "ok"

    manager = PluginManager()
    manager.register(counts)
    manager.register(BreakOnSecondRequest())
    agent = Agent(FunctionModel(loop), tools=[noop], plugin_manager=manager, max_iterations=2)
    session = Session.create(tmp_path)
    with pytest.raises(MaxIterationsExceeded) as caught:
        await agent.run("go", session)
    assert session.path is not None
    saved = Session.load(session.path)
    assert saved.messages[0].kind == "request"
    assert len(saved.messages) >= 3
    notes = "\n".join(getattr(caught.value, "__notes__", []))
    assert "counting the history at the end of the run failed" in notes
    assert "the tokenizer service is down" in notes
    assert session.total_tokens > 0


class FixedClock(InProcessEffects):
    """In-process effects whose clock is a counter of seconds from a fixed start."""

    def __init__(self) -> None:
        self.ticks = itertools.count()
        self.start = datetime(2030, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        return self.start + timedelta(seconds=next(self.ticks))


async def test_every_time_a_stored_run_records_comes_from_its_effects(tmp_path: Path) -> None:
    def echo(text: str) -> str:
        """Echo.

        Args:
            text: The text.
        """
        return text

    def model(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        if len(messages) == 1:
            return CanonicalMessage.response(
                ToolCallPart(tool_call_id="c1", tool_name="echo", args={"text": "hi"})
            )
        return CanonicalMessage.response(TextPart("done"))

    store = SqliteStore(tmp_path / "s.db")
    session = Session.create(store=store)
    effects = FixedClock()
    await Agent(FunctionModel(model), tools=[echo]).run("go", session, effects=effects)
    limit = effects.start + timedelta(days=1)
    stored = Session.open(store, session.session_id)
    assert effects.start <= stored.last_modified < limit
    entry = stored.ledger.get("c1") or next(iter(store.load(session.session_id).ledger), None)
    if entry is not None:
        assert effects.start <= entry.started_at < limit
    prompts = [p for m in stored.messages for p in m.parts if isinstance(p, UserPromptPart | ToolReturnPart)]
    assert prompts
    for part in prompts:  # what the run itself wrote (a response's timestamp is the model's)
        assert part.timestamp is not None
        assert effects.start <= part.timestamp < limit
    assert session.clock is not effects.now  # the session's own clock is back after the run
    store.close()


async def test_leaving_a_stream_before_its_run_started_aborts_it_at_once(tmp_path: Path) -> None:
    requests: list[int] = []

    def slow(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        requests.append(len(messages))
        return CanonicalMessage.response(
            ToolCallPart(tool_call_id=f"c{len(messages)}", tool_name="wait", args={})
        )

    async def wait() -> str:
        """Wait a little."""
        await asyncio.sleep(0.5)
        return "waited"

    TokenCounter().load()  # a warm process: no first await for loading the tokenizer
    agent = Agent(FunctionModel(slow), tools=[wait], max_iterations=4)
    session = Session()
    stream = agent.run_stream("go", session)
    assert isinstance(stream, RunStream)
    started = asyncio.get_running_loop().time()
    async with stream:
        pass  # left before the run's task ever ran
    elapsed = asyncio.get_running_loop().time() - started
    assert requests == []
    assert elapsed < 0.4
