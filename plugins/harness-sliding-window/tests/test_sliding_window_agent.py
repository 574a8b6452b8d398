"""SlidingWindow inside a real agent run (harness.Agent + FunctionModel)."""

from __future__ import annotations

from harness_sliding_window import SlidingWindow, is_receipt_part

from harness.capabilities import CompactionEvent, RequestContext
from harness.core import CanonicalMessage, SystemPromptPart, TextPart, ToolCallPart, UserPromptPart
from harness.history import check_invariants
from harness.hooks import hookimpl
from harness.models.function import FunctionInfo, FunctionModel
from harness.run import Agent

TASK = "Read every module and summarise the package."


class _Recorder:
    """Observer plugin collecting on_compaction events."""

    name = "recorder"

    def __init__(self) -> None:
        self.events: list[CompactionEvent] = []

    @hookimpl
    async def on_compaction(self, ctx: RequestContext, event: CompactionEvent) -> None:
        self.events.append(event)


def _reader(steps: int) -> FunctionModel:
    state = {"step": 0}

    def respond(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage | str:
        state["step"] += 1
        step = state["step"]
        if step > steps:
            return "All modules read."
        call = ToolCallPart(
            tool_call_id=f"read_{step}", tool_name="read_file", args={"path": f"pkg/mod{step}.py"}
        )
        return CanonicalMessage.response(TextPart(f"Reading module {step}."), call)

    return FunctionModel(respond)


def read_file(path: str) -> str:
    """Return the content of a file."""
    return f"# {path}\n" + "x = 1\n" * 40


async def test_sliding_window_in_an_agent_run() -> None:
    model = _reader(30)
    recorder = _Recorder()
    window = SlidingWindow(max_messages=12, keep_messages=6, receipt=True)
    agent = Agent(
        model, tools=[read_file], capabilities=[window], system_prompt="Be terse.", max_iterations=40
    )
    agent.plugin_manager.register(recorder)
    result = await agent.run(TASK)

    assert result.output == "All modules read."
    assert check_invariants(result.all_messages, persisted=True) == []
    # every request the model saw was sendable, bounded, and still held the task
    for sent in model.requests:
        assert check_invariants(sent) == []
        assert len(sent) <= 13
        prompts = [p.content for m in sent for p in m.parts if isinstance(p, UserPromptPart)]
        assert prompts[0] == TASK
        assert sent[-1].is_request
        assert isinstance(sent[0].parts[0], SystemPromptPart)
    # batches, not one cut per request: the window refills before the next cut
    assert recorder.events
    assert all(e.strategy == "sliding_window" for e in recorder.events)
    assert all(e.messages_after <= 7 for e in recorder.events)
    assert len(recorder.events) <= (len(model.requests) * 2) // 6 + 1
    assert all(e.tokens_after < e.tokens_before for e in recorder.events)
    receipts = [p for m in result.all_messages for p in m.parts if is_receipt_part(p)]
    assert len(receipts) == 1
    assert len(result.all_messages) <= 13


async def test_token_window_in_an_agent_run_settles_below_the_trigger() -> None:
    model = _reader(25)
    recorder = _Recorder()
    window = SlidingWindow(max_tokens=3_000, keep_tokens=1_500)
    agent = Agent(model, tools=[read_file], capabilities=[window], max_iterations=40)
    agent.plugin_manager.register(recorder)
    result = await agent.run(TASK)
    assert result.output == "All modules read."
    assert recorder.events
    for event in recorder.events:
        assert event.tokens_after <= 1_500
    assert check_invariants(result.all_messages) == []
