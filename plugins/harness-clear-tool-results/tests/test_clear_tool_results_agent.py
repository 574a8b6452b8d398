"""ClearToolResults inside a real agent run (harness.Agent + FunctionModel)."""

from __future__ import annotations

from harness_clear_tool_results import DEFAULT_PLACEHOLDER, ClearToolResults

from harness.capabilities import CompactionEvent, RequestContext
from harness.core import CanonicalMessage, ToolCallPart, ToolReturnPart, harness_mark
from harness.history import check_invariants
from harness.hooks import PluginManager, hookimpl
from harness.models.function import FunctionInfo, FunctionModel
from harness.run import Agent

OUTPUT = "total 42\n" + "-rw-r--r-- 1 user user 1024 file.py\n" * 30


def run_command(command: str) -> str:
    """Run a shell command.

    Args:
        command: The command.
    """
    return f"$ {command}\n{OUTPUT}"


class Recorder:
    """Collects every compaction event the agent reports."""

    def __init__(self) -> None:
        self.events: list[CompactionEvent] = []

    @hookimpl
    async def on_compaction(self, ctx: RequestContext, event: CompactionEvent) -> None:
        self.events.append(event)


async def test_agent_run_clears_in_batches() -> None:
    steps = 20

    def script(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage | str:
        step = sum(1 for m in messages if m.kind == "response")
        if step < steps:
            return CanonicalMessage.response(
                ToolCallPart(
                    tool_call_id=f"call_{step}", tool_name="run_command", args={"command": f"ls {step}"}
                )
            )
        return "finished"

    model = FunctionModel(script)
    recorder = Recorder()
    manager = PluginManager()
    manager.register(recorder)
    cap = ClearToolResults(max_messages=10, keep_pairs=2, clear_tool_inputs=True)
    agent = Agent(model, tools=[run_command], capabilities=[cap], plugin_manager=manager, max_iterations=50)
    result = await agent.run("explore")
    assert result.output == "finished"
    history = result.all_messages
    assert check_invariants(history) == []
    returns = [p for m in history for p in m.parts if isinstance(p, ToolReturnPart)]
    assert len(returns) == steps
    cleared = [r for r in returns if harness_mark(r) == {"cleared": "clear_tool_results"}]
    # The placeholder, then the one path the listing named (what a cleared result keeps).
    assert all(r.content == f"{DEFAULT_PLACEHOLDER}\npaths: file.py" for r in cleared)
    assert returns[-1].content.startswith("$ ls 19")
    # Batches: far fewer edits than requests, each clearing several results.
    assert 3 <= len(recorder.events) <= steps // 3
    assert all(len(e.cleared_tool_call_ids) >= 2 for e in recorder.events[1:])
    assert sum(len(e.cleared_tool_call_ids) for e in recorder.events) == len(cleared)
    # Each request the model received ended with the request being sent, unchanged.
    for sent in model.requests:
        assert sent[-1].kind == "request"
