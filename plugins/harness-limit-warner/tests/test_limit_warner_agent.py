"""LimitWarner inside a real agent run (harness.Agent + FunctionModel)."""

from __future__ import annotations

import pytest
from harness_limit_warner import LimitWarner, is_warning_part

from harness.capabilities import CompactionEvent, RequestContext
from harness.core import CanonicalMessage, ToolCallPart, UserPromptPart, with_harness_mark
from harness.history import check_invariants
from harness.hooks import capability_name, hookimpl
from harness.models.function import FunctionInfo, FunctionModel
from harness.run import Agent


def _looper(steps: int) -> FunctionModel:
    state = {"step": 0}

    def respond(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage | str:
        state["step"] += 1
        step = state["step"]
        if step > steps:
            return "Finished."
        return CanonicalMessage.response(
            ToolCallPart(tool_call_id=f"c{step}", tool_name="bash", args={"cmd": f"step {step}"})
        )

    return FunctionModel(respond)


def bash(cmd: str) -> str:
    """Run a shell command."""
    return f"ran {cmd}\n" + "output line\n" * 20


def _warnings_in(messages: list[CanonicalMessage]) -> list[str]:
    return [p.text for m in messages for p in m.parts if isinstance(p, UserPromptPart) and is_warning_part(p)]


async def test_the_model_is_warned_near_the_agents_iteration_limit() -> None:
    model = _looper(9)
    agent = Agent(model, tools=[bash], capabilities=[LimitWarner(warn_on=["iterations"])], max_iterations=10)
    result = await agent.run("Do ten steps.")
    assert result.output == "Finished."
    seen = [_warnings_in(sent) for sent in model.requests]
    # requests 1..7 (0..6 made before) are below 70 %; from the 8th on, one warning each
    assert [len(w) for w in seen] == [0] * 7 + [1, 1, 1]
    assert "- Iterations: 7/10 requests used (70%); 3 remaining." in seen[7][0]
    assert "CRITICAL" in seen[7][0]
    # the warning rides on the request being sent, at its end
    for sent, warnings in zip(model.requests, seen, strict=True):
        if warnings:
            assert is_warning_part(sent[-1].parts[-1])
    # and is never stored
    assert _warnings_in(result.all_messages) == []
    assert _warnings_in(result.session.messages) == []
    assert check_invariants(result.all_messages, persisted=True) == []


async def test_a_stored_warning_from_an_old_session_is_stripped_before_sending() -> None:
    model = _looper(1)
    agent = Agent(model, tools=[bash], capabilities=[LimitWarner(max_iterations=50)])
    first = await agent.run("Hello.")
    session = first.session
    # simulate a session written by older code that persisted a warning
    marked = with_harness_mark(
        UserPromptPart("[LimitWarner]\nURGENT: old"), request_scoped=True, source="limit_warner"
    )
    session.messages[0] = session.messages[0].replace(parts=(*session.messages[0].parts, marked))
    model2 = _looper(0)
    agent2 = Agent(model2, tools=[bash], capabilities=[LimitWarner(max_iterations=50)])
    second = await agent2.run("Quote: [LimitWarner] is that you?", session)
    assert second.output == "Finished."
    assert _warnings_in(model2.requests[0]) == []
    texts = [p.text for m in model2.requests[0] for p in m.parts if isinstance(p, UserPromptPart)]
    assert "Quote: [LimitWarner] is that you?" in texts
    assert _warnings_in(second.all_messages) == []


async def test_stack_with_sliding_window_warns_about_the_compacted_context() -> None:
    window_module = pytest.importorskip("harness_sliding_window")
    model = _looper(30)
    warner = LimitWarner(max_context_tokens=3_000, warning_threshold=0.5)
    window = window_module.SlidingWindow(max_tokens=2_500, keep_tokens=1_200)
    # listed first, the warner still runs after the window (runs_after)
    agent = Agent(model, tools=[bash], capabilities=[warner, window], max_iterations=40)
    result = await agent.run("Loop.")
    assert result.output == "Finished."
    for sent in model.requests:
        assert check_invariants(sent) == []
        assert len(_warnings_in(sent)) <= 1
    assert any(_warnings_in(sent) for sent in model.requests)
    assert _warnings_in(result.all_messages) == []
    assert [type(c).__name__ for c in agent.plugin_manager.capabilities] == ["SlidingWindow", "LimitWarner"]


class _Recorder:
    name = "recorder"

    def __init__(self) -> None:
        self.strategies: list[str] = []

    @hookimpl
    async def on_compaction(self, ctx: RequestContext, event: CompactionEvent) -> None:
        self.strategies.append(event.strategy)


def read_file(path: str) -> str:
    """Return a file's content."""
    return f"# {path}\n" + "def f():\n    return 1\n" * 30


async def test_stack_of_all_four_capabilities_over_a_long_scripted_run() -> None:
    window_module = pytest.importorskip("harness_sliding_window")
    clear_module = pytest.importorskip("harness_clear_tool_results")
    dedupe_module = pytest.importorskip("harness_dedupe_file_reads")
    steps = 50
    state = {"step": 0}

    def respond(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage | str:
        state["step"] += 1
        step = state["step"]
        if step > steps:
            return "Done."
        if step % 3 == 0:
            return CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"b{step}", tool_name="bash", args={"cmd": f"pytest -k t{step}"})
            )
        path = "pkg/a.py" if step % 2 else "pkg/b.py"  # the same two files, read again and again
        return CanonicalMessage.response(
            ToolCallPart(tool_call_id=f"r{step}", tool_name="read_file", args={"path": path})
        )

    model = FunctionModel(respond)
    recorder = _Recorder()
    capabilities = [
        LimitWarner(max_context_tokens=4_000, warning_threshold=0.6),  # listed first, runs last
        clear_module.ClearToolResults(max_messages=20, keep_pairs=3),
        window_module.SlidingWindow(max_messages=30, keep_messages=12, receipt=True),
        dedupe_module.DeduplicateFileReads(),  # listed last, runs first (runs_before)
    ]
    agent = Agent(model, tools=[bash, read_file], capabilities=capabilities, max_iterations=60)
    agent.plugin_manager.register(recorder)
    result = await agent.run("Work through the package.")

    assert result.output == "Done."
    assert [capability_name(c) for c in agent.plugin_manager.capabilities] == [
        "dedupe_file_reads",
        "clear_tool_results",
        "sliding_window",
        "limit_warner",
    ]
    for sent in model.requests:
        assert check_invariants(sent) == []
        assert len(_warnings_in(sent)) <= 1
    # from the 37th request on, 36/60 iterations (60 %) are used: every request is warned
    assert all(len(_warnings_in(sent)) == 1 for sent in model.requests[36:])
    assert "Iterations: 36/60 requests used (60%)" in _warnings_in(model.requests[36])[0]
    assert _warnings_in(result.all_messages) == []
    assert check_invariants(result.all_messages, persisted=True) == []
    assert {"dedupe_file_reads", "clear_tool_results", "sliding_window"} <= set(recorder.strategies)
    assert "limit_warner" not in recorder.strategies  # nothing stale to strip
