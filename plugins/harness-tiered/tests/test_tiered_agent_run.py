"""TieredCompaction inside a scripted agent run: the history stays under control and valid."""

from __future__ import annotations

from harness_clear_tool_results import ClearToolResults
from harness_sliding_window import SlidingWindow
from harness_summarizing import StructuralDigest, SummarizingCompaction, find_summary_parts
from harness_tiered import TieredCompaction

from harness.core import CanonicalMessage, SystemPromptPart, TextPart, ToolCallPart, UserPromptPart
from harness.history import check_invariants
from harness.models.function import FunctionInfo, FunctionModel
from harness.run import Agent

TASK = "Inspect every file and summarize the findings."
STEPS = 80


def cat(path: str) -> str:
    """Show a file."""
    return f"<returncode>0</returncode><output>{path}\n" + "text " * 300 + "</output>"


async def test_tiered_stack_through_the_agent() -> None:
    seen: list[int] = []

    def script(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage | str:
        assert check_invariants(messages) == []
        assert len(find_summary_parts(messages)) <= 1
        assert sum(isinstance(p, SystemPromptPart) for m in messages for p in m.parts) == 1
        texts = [p.text for m in messages for p in m.parts if isinstance(p, UserPromptPart)]
        assert TASK in texts
        seen.append(len(messages))
        step = len(seen)
        if step > STEPS:
            return "Done."
        return CanonicalMessage.response(
            TextPart(f"step {step}"),
            ToolCallPart(tool_call_id=f"c{step}", tool_name="cat", args={"path": f"f{step}"}),
        )

    tiered = TieredCompaction(
        [
            ClearToolResults(max_messages=1, keep_pairs=2),
            SummarizingCompaction(keep_messages=6, summarizer=StructuralDigest()),
            SlidingWindow(max_messages=10**6, keep_messages=4),
        ],
        target_tokens=1200,
    )
    agent = Agent(
        FunctionModel(script),
        tools=[cat],
        capabilities=[tiered],
        system_prompt="sys",
        max_iterations=STEPS + 5,
    )
    result = await agent.run(TASK)
    assert result.output == "Done."
    # clearing holds the history under the target for a while, then summarizing cuts it back
    # to the summary request + the 6 newest messages, again and again
    assert max(seen) <= 41
    assert seen.count(7) >= 5
    assert check_invariants(result.all_messages) == []
    assert len(find_summary_parts(result.all_messages)) == 1
