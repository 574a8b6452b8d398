"""harness.testing.durable: JournalEffects and the engine-neutral replay check."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path

import pytest
from harness_clear_tool_results import ClearToolResults
from harness_limit_warner import LimitWarner
from harness_sliding_window import SlidingWindow

from harness.capabilities import RequestContext
from harness.core import CanonicalMessage, ModelSettings, ToolDefinition, UserPromptPart
from harness.hooks import hookimpl
from harness.run import Agent
from harness.session import Session
from harness.testing.durable import (
    JournalEffects,
    Scenario,
    ScenarioModel,
    assert_replay_identical,
    scenario_agent,
    scenario_capabilities,
)
from harness.testing.durable_model import scenario_tools

PROMPT = "Do the scenario."


def _agent(tmp_path: Path, capabilities: Sequence[object], *, steps: int = 6) -> Agent:
    scenario = Scenario(record_dir=str(tmp_path), steps=steps, output_bytes=400, compaction=False)
    return Agent(
        ScenarioModel(scenario),
        tools=scenario_tools(scenario),
        capabilities=list(capabilities),
        instructions=lambda ctx: f"scenario-run={ctx.session.session_id}",
    )


class _Counting(ScenarioModel):
    calls = 0

    async def request(
        self, messages: Sequence[CanonicalMessage], tools: Sequence[ToolDefinition], settings: ModelSettings
    ) -> CanonicalMessage:
        type(self).calls += 1
        return await super().request(messages, tools, settings)


async def test_a_journal_replays_without_calling_the_model_or_the_tools(tmp_path: Path) -> None:
    scenario = Scenario(record_dir=str(tmp_path), steps=3, compaction=False)

    def agent() -> Agent:
        return Agent(_Counting(scenario), tools=scenario_tools(scenario))

    first = JournalEffects()
    done = await agent().run(PROMPT, Session(session_id="s"), effects=first)
    assert _Counting.calls == 4
    assert first.units == 7
    assert [e.kind for e in first.entries].count("model_request") == 4
    assert first.size == sum(len(e.data) for e in first.entries) > 0
    replay = JournalEffects(first.entries)
    again = await agent().run(PROMPT, Session(session_id="s"), effects=replay)
    assert _Counting.calls == 4  # every unit came from the journal
    assert all(r.replayed for r in replay.requests)
    assert [r.body for r in replay.requests] == [r.body for r in first.requests]
    assert again.all_messages == done.all_messages  # the clock and the ids replayed too
    # a run that asks for something else than the journal holds is reported
    without_ids = [e for e in first.entries if e.kind != "new_id"]
    with pytest.raises(AssertionError, match=r"position 1: the run asked for new_id\(\), the journal has"):
        await agent().run(PROMPT, Session(session_id="s"), effects=JournalEffects(without_ids))


@pytest.mark.parametrize(
    "capabilities",
    [
        pytest.param(lambda: [SlidingWindow(max_messages=6, keep_messages=4)], id="sliding_window"),
        pytest.param(lambda: [ClearToolResults(max_messages=4, keep_pairs=1)], id="clear_tool_results"),
        pytest.param(lambda: [LimitWarner(max_iterations=8)], id="limit_warner_iterations"),
    ],
)
async def test_built_in_capabilities_replay_identically(tmp_path: Path, capabilities) -> None:
    units = await assert_replay_identical(lambda: _agent(tmp_path, capabilities()), PROMPT)
    assert units == 13  # 7 requests and 6 tool calls, each a crash point, each replayed twice


async def test_tiered_compaction_and_limit_warner_replay_identically_on_a_new_worker(tmp_path: Path) -> None:
    scenario = Scenario(record_dir=str(tmp_path), steps=12)
    units = await assert_replay_identical(lambda: scenario_agent(scenario), PROMPT, replay_with=("fresh",))
    assert units > 2 * 12 + 1  # the summarizer's calls are units too


async def test_tiered_compaction_and_limit_warner_replay_identically_on_the_same_worker(
    tmp_path: Path,
) -> None:
    scenario = Scenario(record_dir=str(tmp_path), steps=12)
    await assert_replay_identical(
        lambda: scenario_agent(scenario), PROMPT, replay_with=("same",), crash_after=(7,)
    )


async def test_the_stored_session_of_a_replayed_run_equals_the_uninterrupted_one(tmp_path: Path) -> None:
    scenario = Scenario(record_dir=str(tmp_path / "records"), steps=6)
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    units = await assert_replay_identical(
        lambda: scenario_agent(scenario), PROMPT, store_url=url, crash_after=(2, 5, 9), replay_with=("fresh",)
    )
    assert units >= 13


class _CountsOnSelf:
    """A bad capability: its counter lives in process memory, not in the history."""

    name = "counts_on_self"

    def __init__(self) -> None:
        self.requests = 0

    @hookimpl
    def before_model_request(self, ctx: RequestContext) -> None:
        self.requests += 1
        ctx.add_request_scoped(UserPromptPart(f"this is request {self.requests}"), source=self.name)


async def test_a_capability_keeping_a_counter_on_self_fails_the_check(tmp_path: Path) -> None:
    with pytest.raises(AssertionError) as failure:
        await assert_replay_identical(lambda: _agent(tmp_path, [_CountsOnSelf()]), PROMPT, crash_after=(5,))
    message = str(failure.value)
    assert "crash at unit 5 (with the same agent)" in message
    assert "model-request unit 1 (request, source 'agent', replayed from the journal)" in message
    assert "'source': 'counts_on_self'" in message  # the part's mark names the capability
    # a fresh process rebuilds the counter by replaying from the start, so that mode alone passes
    await assert_replay_identical(
        lambda: _agent(tmp_path, [_CountsOnSelf()]), PROMPT, crash_after=(5,), replay_with=("fresh",)
    )


class _AsksAfterItsFirstRequest:
    """A bad capability: whether it makes a model call depends on what this object saw before."""

    name = "asks_after_first"

    def __init__(self) -> None:
        self.seen = False

    @hookimpl
    async def before_model_request(self, ctx: RequestContext) -> None:
        if self.seen and ctx.model is not None:
            # it swallows errors, and the divergence must still be reported
            with contextlib.suppress(Exception):
                await ctx.request_model(ctx.model, [CanonicalMessage.user("classify")], source=self.name)
        self.seen = True


async def test_a_run_that_asks_for_other_units_than_its_journal_is_reported(tmp_path: Path) -> None:
    with pytest.raises(
        AssertionError,
        match=r"diverged from the journal at position \d+: the run asked for model "
        r"request 1 \(capability, asks_after_first\), the journal has model request 1 \(request, agent\)",
    ):
        await assert_replay_identical(
            lambda: _agent(tmp_path, [_AsksAfterItsFirstRequest()], steps=2), PROMPT, crash_after=(3,)
        )


async def test_crash_points_must_be_units_of_the_run(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="crash point 99 is not a unit of the run"):
        await assert_replay_identical(lambda: _agent(tmp_path, [], steps=1), PROMPT, crash_after=(99,))


def test_the_scenario_stack_is_the_tiered_compaction_and_the_warner(tmp_path: Path) -> None:
    names = [type(c).__name__ for c in scenario_capabilities(Scenario(record_dir=str(tmp_path)))]
    assert names == ["TieredCompaction", "LimitWarner"]
