"""Abort, cancellation and KeyboardInterrupt at every await point of a scripted run.

The scripted run has an async model, an async capability, async observers and three
parallel async tools, each yielding to the event loop several times. The run is first
executed to completion while counting event-loop steps; then one test per step cancels
the run exactly there and checks that nothing completed was lost and that the saved
history is valid.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from harness.capabilities import Capability, RequestContext
from harness.core import (
    CanonicalMessage,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    harness_mark,
)
from harness.errors import UserAbort
from harness.history import check_invariants
from harness.hooks import hookimpl
from harness.models.function import FunctionInfo, FunctionModel
from harness.run import ABORTED_TOOL_CONTENT, INTERRUPTED_MARKER, INTERRUPTED_UNKNOWN_CONTENT, Agent
from harness.session import Session
from harness.tokens import TokenCounter
from harness.tools import RunContext, RunState, ToolCallStatus


class Scenario:
    """One scripted run: two tool rounds with three parallel calls, then an answer."""

    def __init__(self) -> None:
        self.returned: dict[str, str] = {}
        self.turn = 0
        self.run_state = RunState()  # the run's state, as the observer last saw it

    async def model_fn(self, messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        await asyncio.sleep(0)
        self.turn += 1
        await asyncio.sleep(0)
        if self.turn <= 2:
            t = self.turn
            return CanonicalMessage.response(
                TextPart(f"round {t}"),
                *(
                    ToolCallPart(
                        tool_call_id=f"r{t}_{i}", tool_name="work", args={"key": f"r{t}_{i}", "spins": i + 1}
                    )
                    for i in range(3)
                ),
            )
        return CanonicalMessage.response(TextPart("final answer"))

    async def work(self, key: str, spins: int) -> str:
        """Spin a few times, then return."""
        for _ in range(spins):
            await asyncio.sleep(0)
        self.returned[key] = f"done {key}"
        return f"done {key}"


class SlowCapability(Capability):
    name = "slow_capability"

    @hookimpl
    async def before_model_request(self, ctx: RequestContext) -> None:
        await asyncio.sleep(0)


class AsyncObserver:
    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario

    @hookimpl
    async def after_node(self, ctx: RunContext, node: Any) -> None:
        self.scenario.run_state = ctx.run
        await asyncio.sleep(0)

    @hookimpl
    async def on_tool(self, ctx: RunContext, event: Any) -> None:
        self.scenario.run_state = ctx.run
        await asyncio.sleep(0)


def make_agent(scenario: Scenario, **kwargs: Any) -> Agent:
    agent = Agent(
        FunctionModel(scenario.model_fn),
        tools=[scenario.work],
        capabilities=[SlowCapability()],
        **kwargs,
    )
    agent.plugin_manager.register(AsyncObserver(scenario), name="observer")
    return agent


async def drive(task: asyncio.Task[Any], steps: int | None) -> int:
    """Let ``task`` run ``steps`` event-loop steps (all when ``None``); return steps taken."""
    taken = 0
    while not task.done() and (steps is None or taken < steps):
        await asyncio.sleep(0)
        taken += 1
    return taken


def _count_steps() -> int:
    async def main() -> int:
        scenario = Scenario()
        task = asyncio.create_task(make_agent(scenario).run("go", session=Session()))
        taken = await drive(task, None)
        assert (await task).output == "final answer"
        return taken

    return asyncio.run(main())


TokenCounter().load()  # a cold first run reads the tokenizer on a thread: count the steps of a warm one
TOTAL_STEPS = _count_steps()


def check_saved_after_interrupt(session: Session, scenario: Scenario) -> None:
    messages = session.messages
    assert check_invariants(messages, persisted=True) == []
    registry = scenario.run_state.tool_registry
    assert registry.unfinished() == []
    assert registry.check_against(messages) == []
    returns = {p.tool_call_id: p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)}
    # every tool that returned has its real result stored
    for key, value in scenario.returned.items():
        assert returns[key].content == value
    # every cancelled call is answered as it happened: "aborted" when it never began,
    # "outcome unknown" when the tool had begun (it may have taken effect)
    for record in registry:
        if record.status is ToolCallStatus.CANCELLED:
            answer = returns[record.tool_call_id]
            if record.attempts == 0:
                assert (answer.content, harness_mark(answer)) == (ABORTED_TOOL_CONTENT, {"aborted": True})
            else:
                assert answer.content == INTERRUPTED_UNKNOWN_CONTENT
                assert harness_mark(answer) == {"outcome_unknown": True}
        else:
            assert record.status is ToolCallStatus.COMPLETED
    prompts = [p.text for m in messages for p in m.parts if isinstance(p, UserPromptPart)]
    if messages:
        assert prompts == ["go"]
        last = messages[-1]
        assert last.kind == "response"
        assert last.parts[-1] == TextPart(INTERRUPTED_MARKER, metadata={"harness": {"interrupted": True}})
    assert session.path is not None
    if session.path.exists():
        assert Session.load(session.path).messages == messages


def test_scenario_has_many_await_points() -> None:
    assert TOTAL_STEPS > 30


@pytest.mark.parametrize("step", range(TOTAL_STEPS))
async def test_cancel_at_every_await_point(step: int, tmp_path: Path) -> None:
    scenario = Scenario()
    session = Session.create(tmp_path)
    agent = make_agent(scenario)
    task = asyncio.create_task(agent.run("go", session=session))
    await drive(task, step)
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    check_saved_after_interrupt(session, scenario)
    # the conversation can continue from the saved file
    if session.messages:
        assert session.path is not None
        resumed = Session.load(session.path)
        follow_up = Agent(FunctionModel.from_responses("resumed"))
        result = await follow_up.run("continue", session=resumed)
        assert result.output == "resumed"
        assert check_invariants(resumed.messages, persisted=True) == []


@pytest.mark.parametrize("step", range(1, TOTAL_STEPS, 7))
async def test_agent_abort_at_await_points_raises_user_abort(step: int, tmp_path: Path) -> None:
    scenario = Scenario()
    session = Session.create(tmp_path)
    agent = make_agent(scenario)
    task = asyncio.create_task(agent.run("go", session=session))
    await drive(task, step)
    agent.abort()
    with pytest.raises(UserAbort) as info:
        await task
    assert info.value.session is session
    check_saved_after_interrupt(session, scenario)
    assert not task.cancelled()


async def test_user_abort_raised_by_tool(tmp_path: Path) -> None:
    def stop(ctx: RunContext) -> str:
        """Aborts."""
        raise UserAbort("user pressed escape")

    async def fine() -> str:
        """Completes."""
        return "fine result"

    session = Session.create(tmp_path)
    model = FunctionModel.from_responses(
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="a", tool_name="fine"), ToolCallPart(tool_call_id="b", tool_name="stop")
        )
    )
    with pytest.raises(UserAbort, match="escape") as info:
        await Agent(model, tools=[fine, stop]).run("go", session=session)
    returns = {
        p.tool_call_id: p.content for m in session.messages for p in m.parts if isinstance(p, ToolReturnPart)
    }
    assert returns["a"] == "fine result"
    assert returns["b"] == f"{ABORTED_TOOL_CONTENT}: user pressed escape"
    assert info.value.state.tool_registry.get("b").status is ToolCallStatus.CANCELLED
    assert session.messages[-1].parts[-1].content == INTERRUPTED_MARKER  # type: ignore[union-attr]
    assert check_invariants(session.messages, persisted=True) == []
    assert session.path is not None
    assert Session.load(session.path).messages == session.messages


async def test_abort_called_from_inside_a_tool() -> None:
    agent_box: list[Agent] = []

    async def panic() -> str:
        """Asks the agent to abort."""
        agent_box[0].abort()
        await asyncio.sleep(0)
        return "never stored"

    agent = Agent(
        FunctionModel.from_responses(
            CanonicalMessage.response(ToolCallPart(tool_call_id="p", tool_name="panic"))
        ),
        tools=[panic],
    )
    agent_box.append(agent)
    session = Session()
    with pytest.raises(UserAbort):
        await agent.run("go", session=session)
    returns = [p for m in session.messages for p in m.parts if isinstance(p, ToolReturnPart)]
    # the tool ran (it asked for the abort): whether it took effect is unknown, never "aborted"
    assert [p.content for p in returns] == [INTERRUPTED_UNKNOWN_CONTENT]
    assert check_invariants(session.messages) == []


def test_keyboard_interrupt_in_sync_tool_saves_and_reraises(tmp_path: Path) -> None:
    def interrupted() -> str:
        """Simulates Ctrl-C inside a blocking tool."""
        raise KeyboardInterrupt

    session = Session.create(tmp_path)
    model = FunctionModel.from_responses(
        CanonicalMessage.response(ToolCallPart(tool_call_id="k", tool_name="interrupted"))
    )
    agent = Agent(model, tools=[interrupted])
    with pytest.raises(KeyboardInterrupt):
        agent.run_sync("go", session=session)
    assert check_invariants(session.messages, persisted=True) == []
    assert session.messages[-1].parts[-1].content == INTERRUPTED_MARKER  # type: ignore[union-attr]
    assert session.path is not None
    assert Session.load(session.path).messages == session.messages


async def test_interrupted_marker_merges_into_trailing_response() -> None:
    """Cancelled while observers see the final answer: no two responses in a row."""

    class BlockOnEnd:
        @hookimpl
        async def after_node(self, ctx: Any, node: Any) -> None:
            from harness.core import EndNode

            if isinstance(node, EndNode):
                await asyncio.sleep(10)

    agent = Agent(FunctionModel.from_responses("the answer"))
    agent.plugin_manager.register(BlockOnEnd(), name="block")
    session = Session()
    task = asyncio.create_task(agent.run("go", session=session))
    for _ in range(50):
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [m.kind for m in session.messages] == ["request", "response"]
    assert [p.content for p in session.messages[-1].parts] == ["the answer", INTERRUPTED_MARKER]  # type: ignore[union-attr]
    assert check_invariants(session.messages) == []


async def test_await_points_cover_every_phase_of_the_run(tmp_path: Path) -> None:
    """The parametrized steps above hit each phase: before tools, mid-batch, after the answer."""
    phases: set[str] = set()
    for step in range(1, TOTAL_STEPS):
        scenario = Scenario()
        session = Session()
        task = asyncio.create_task(make_agent(scenario).run("go", session=session))
        await drive(task, step)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        statuses = [r.status for r in scenario.run_state.tool_registry]
        if not statuses:
            phases.add("before tools")
        if ToolCallStatus.COMPLETED in statuses and ToolCallStatus.CANCELLED in statuses:
            phases.add("mid batch")
        if any(
            isinstance(p, TextPart) and p.content == "final answer" for m in session.messages for p in m.parts
        ):
            phases.add("after answer")
    assert phases == {"before tools", "mid batch", "after answer"}
