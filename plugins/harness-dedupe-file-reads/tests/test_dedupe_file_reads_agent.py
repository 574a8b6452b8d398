"""DeduplicateFileReads inside a real agent run (harness.Agent + FunctionModel)."""

from __future__ import annotations

from harness_dedupe_file_reads import DeduplicateFileReads

from harness.capabilities import CompactionEvent, RequestContext
from harness.core import CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart, harness_mark
from harness.history import check_invariants
from harness.hooks import PluginManager, hookimpl
from harness.models.function import FunctionInfo, FunctionModel
from harness.run import Agent

FILES = {name: f"# {name}\n" + "def body():\n    return 42\n" * 40 for name in ("a.py", "b.py")}


def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: The file to read.
    """
    return FILES[path]


class Recorder:
    """Collects every compaction event the agent reports."""

    def __init__(self) -> None:
        self.events: list[CompactionEvent] = []

    @hookimpl
    async def on_compaction(self, ctx: RequestContext, event: CompactionEvent) -> None:
        self.events.append(event)


async def test_agent_run_supersedes_repeated_reads() -> None:
    plan = ["a.py", "b.py", "a.py", "a.py"]

    def script(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage | str:
        step = sum(1 for m in messages if m.kind == "response")
        if step < len(plan):
            return CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"call_{step}", tool_name="read_file", args={"path": plan[step]})
            )
        return "done"

    model = FunctionModel(script)
    recorder = Recorder()
    manager = PluginManager()
    manager.register(recorder)
    agent = Agent(model, tools=[read_file], capabilities=[DeduplicateFileReads()], plugin_manager=manager)
    result = await agent.run("read things")
    assert result.output == "done"
    history = result.all_messages
    assert check_invariants(history) == []
    returns = {p.tool_call_id: p for m in history for p in m.parts if isinstance(p, ToolReturnPart)}
    assert returns["call_1"].content == FILES["b.py"]
    assert returns["call_3"].content == FILES["a.py"]
    assert returns["call_0"].content == "[superseded file read: see the later read of a.py (call call_2)]"
    assert returns["call_2"].content == "[superseded file read: see the later read of a.py (call call_3)]"
    assert harness_mark(returns["call_0"]) is not None
    # Events: the request after call_2's return superseded call_0, the next one call_2.
    assert [e.cleared_tool_call_ids for e in recorder.events] == [("call_0",), ("call_2",)]
    # What the model saw on its last request already had the pointers.
    last_sent = model.requests[-1]
    sent = {p.tool_call_id: p.content for m in last_sent for p in m.parts if isinstance(p, ToolReturnPart)}
    assert sent["call_0"].startswith("[superseded file read")
    assert sent["call_3"] == FILES["a.py"]
    assert isinstance(history[-1].parts[-1], TextPart)
