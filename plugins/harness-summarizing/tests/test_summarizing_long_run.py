"""A 200-step scripted agent run with SummarizingCompaction: invariants on every request."""

from __future__ import annotations

from harness_summarizing import DEFAULT_INSTRUCTIONS, SummarizingCompaction, find_summary_parts

from harness.core import (
    CanonicalMessage,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    UserPromptPart,
    harness_mark,
)
from harness.history import check_invariants
from harness.models.function import FunctionInfo, FunctionModel
from harness.run import Agent

TASK = "Audit every module {0..199} and report the total line count."
STEPS = 200


def read_file(path: str) -> str:
    """Read a file."""
    return f"<returncode>0</returncode>\n<output>contents of {path}\n" + "line\n" * 40 + "</output>"


class Script:
    def __init__(self) -> None:
        self.step = 0
        self.summaries = 0
        self.checked = 0

    def __call__(self, messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage | str:
        first = messages[0].parts
        if any(isinstance(p, SystemPromptPart) and p.content == DEFAULT_INSTRUCTIONS for p in first):
            self.summaries += 1
            prompt = next(p.text for p in first if isinstance(p, UserPromptPart))
            assert "<messages>" in prompt
            return f"## Intent\n{TASK}\n## Current state\nsummary number {self.summaries}"
        self.check(messages)
        if self.step >= STEPS:
            return "All modules audited: 8000 lines."
        self.step += 1
        return CanonicalMessage.response(
            TextPart(f"step {self.step}"),
            ToolCallPart(
                tool_call_id=f"call{self.step}", tool_name="read_file", args={"path": f"m{self.step}.py"}
            ),
        )

    def check(self, messages: list[CanonicalMessage]) -> None:
        self.checked += 1
        assert check_invariants(messages) == []
        assert messages[-1].kind == "request"
        assert len(find_summary_parts(messages)) <= 1
        systems = [p for m in messages for p in m.parts if isinstance(p, SystemPromptPart)]
        assert len(systems) == 1, systems
        users = [
            p.text
            for m in messages
            for p in m.parts
            if isinstance(p, UserPromptPart) and harness_mark(p) is None
        ]
        assert users.count(TASK) == 1
        assert len(messages) <= 40


async def test_two_hundred_steps_through_the_agent() -> None:
    script = Script()
    cap = SummarizingCompaction(max_messages=30, keep_messages=10)
    agent = Agent(
        FunctionModel(script, model_name="scripted"),
        tools=[read_file],
        capabilities=[cap],
        system_prompt="You are an auditor.",
        max_iterations=STEPS + 5,
    )
    result = await agent.run(TASK)
    assert result.output == "All modules audited: 8000 lines."
    assert script.checked == STEPS + 1
    assert script.summaries >= 9
    history = result.all_messages
    assert check_invariants(history) == []
    assert len(find_summary_parts(history)) == 1
    summary = history[0].parts[next(i for _, i in find_summary_parts(history))]
    mark = harness_mark(summary)
    assert mark is not None
    assert mark["compactions"] == script.summaries
    assert isinstance(summary, UserPromptPart)
    assert f"summary number {script.summaries}" in summary.text
    # the summarizer's usage is charged to the run on top of the agent's own requests
    assert result.usage.request_tokens > 0


async def test_repeated_compact_calls_with_digest_over_long_run() -> None:
    from harness.capabilities import RequestContext
    from harness.core import ToolReturnPart
    from harness.tokens import TokenCounter

    messages = [CanonicalMessage.request(SystemPromptPart("sys"), UserPromptPart(TASK))]
    ctx = RequestContext(messages=messages, token_counter=TokenCounter())
    cap = SummarizingCompaction(max_messages=30, keep_messages=10)
    for i in range(STEPS):
        ctx.messages.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"c{i}", tool_name="bash", args={"command": f"cat m{i}.py"})
            )
        )
        ctx.messages.append(
            CanonicalMessage.request(
                ToolReturnPart(tool_call_id=f"c{i}", tool_name="bash", content="<returncode>0</returncode>ok")
            )
        )
        await cap.before_model_request(ctx)
        assert check_invariants(ctx.messages) == []
        assert len(find_summary_parts(ctx.messages)) <= 1
        assert sum(isinstance(p, SystemPromptPart) for m in ctx.messages for p in m.parts) == 1
    summary = ctx.messages[0].parts[2]
    mark = harness_mark(summary)
    assert mark is not None
    digest = mark["digest"]
    assert digest["requests"] == [f"(kept verbatim above) {TASK}"]
    assert digest["messages"] + len(ctx.messages) - 1 == 2 * STEPS + 1
    assert len(digest["files_read"]) == 50  # bounded to the newest max_files
    assert digest["files_read"][-1].startswith("m")


async def test_summarizer_usage_is_charged_to_the_run() -> None:
    from harness_summarizing import Summary, SummaryRequest

    from harness.core import Usage

    calls: list[int] = []

    def costly(request: SummaryRequest) -> Summary:
        calls.append(len(request.messages))
        return Summary(
            "a summary that is long enough", usage=Usage(request_tokens=1_000_000, response_tokens=5)
        )

    steps = 12

    def script(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage | str:
        if len(script_calls) >= steps:
            return "finished"
        script_calls.append(len(messages))
        return CanonicalMessage.response(
            ToolCallPart(tool_call_id=f"k{len(script_calls)}", tool_name="read_file", args={"path": "x.py"})
        )

    script_calls: list[int] = []
    agent = Agent(
        FunctionModel(script),
        tools=[read_file],
        capabilities=[SummarizingCompaction(max_messages=8, keep_messages=3, summarizer=costly)],
        max_iterations=steps + 2,
    )
    result = await agent.run(TASK)
    assert calls
    assert result.usage.request_tokens >= 1_000_000 * len(calls)
    assert result.usage.response_tokens >= 5 * len(calls)
