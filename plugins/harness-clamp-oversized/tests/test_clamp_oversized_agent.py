"""ClampOversizedMessages inside real agent runs (harness.Agent + FunctionModel), and from stack strings."""

from __future__ import annotations

import itertools

import pytest
from harness_clamp_oversized import MARK_KEY, ClampOversizedMessages

from harness import Agent, CanonicalMessage, ToolCallPart, ToolReturnPart, UserPromptPart
from harness.capabilities import Capability, CompactionEvent, RequestContext
from harness.config import build_stack, parse_stack
from harness.core import harness_mark
from harness.errors import StackConfigError
from harness.history import check_invariants
from harness.hooks import PluginManager, hookimpl
from harness.models.function import FunctionInfo, FunctionModel
from harness.tokens import TokenCounter

BIG = "".join(f"src/module_{i}.py:{i}: warning: unused variable 'x{i}'\n" for i in range(5000))  # ~200 KB
STEPS = 4


def run_command(command: str) -> str:
    """Run a shell command.

    Args:
        command: The command.
    """
    return f"$ {command}\n{BIG}" if command.startswith("make") else f"$ {command}\nok\n"


def script(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage | str:
    step = sum(1 for m in messages[messages_since_last_prompt(messages) :] if m.kind == "response")
    if step < STEPS:
        command = "make all" if step % 2 == 0 else "ls"
        return CanonicalMessage.response(
            ToolCallPart(tool_call_id=f"c{len(messages)}", tool_name="run_command", args={"command": command})
        )
    return "built"


def messages_since_last_prompt(messages: list[CanonicalMessage]) -> int:
    return max(i for i, m in enumerate(without_request_scoped(messages)) if any(prompts(m)))


def prompts(message: CanonicalMessage) -> list[UserPromptPart]:
    return [p for p in message.parts if isinstance(p, UserPromptPart)]


def without_request_scoped(sent: list[CanonicalMessage]) -> list[CanonicalMessage]:
    """What was sent minus the parts sent with one request only (notes, warnings): the history."""
    kept: list[CanonicalMessage] = []
    for message in sent:
        parts = tuple(p for p in message.parts if not (harness_mark(p) or {}).get("request_scoped"))
        if parts:
            kept.append(message if len(parts) == len(message.parts) else message.replace(parts=parts))
    return kept


class Recorder:
    def __init__(self) -> None:
        self.events: list[CompactionEvent] = []

    @hookimpl
    async def on_compaction(self, ctx: RequestContext, event: CompactionEvent) -> None:
        self.events.append(event)


def returns(messages: list[CanonicalMessage]) -> list[ToolReturnPart]:
    return [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]


async def test_an_agent_never_sends_an_oversized_result_and_never_edits_a_sent_prefix() -> None:
    model = FunctionModel(script)
    recorder = Recorder()
    manager = PluginManager()
    manager.register(recorder)
    cap = ClampOversizedMessages(max_tokens=2000)
    agent = Agent(model, tools=[run_command], capabilities=[cap], plugin_manager=manager)
    big_prompt = "Fix every warning below.\n" + BIG[:40_000]
    first = await agent.run(big_prompt)
    assert first.output == "built"
    counter = TokenCounter(model.model_name)
    for sent in model.requests:
        assert check_invariants(sent) == []
        for part in returns(sent):
            assert counter.count_part(part) <= 2000
    # The big prompt is the newest prompt for the whole run: sent whole every time.
    assert all(any(p.content == big_prompt for m in s for p in prompts(m)) for s in model.requests)
    # Cache-friendly: each request extends the previous one; nothing sent is edited later.
    views = [without_request_scoped(s) for s in model.requests]
    for earlier, later in itertools.pairwise(views):
        assert later[: len(earlier)] == earlier
    clamped = [r for r in returns(first.all_messages) if harness_mark(r) is not None]
    assert len(clamped) == STEPS // 2
    for r in clamped:
        mark = dict(harness_mark(r) or {})
        assert mark.pop(MARK_KEY) == cap.name
        assert mark.pop("original_tokens") > 2000
        assert mark == {}
    assert [e.cleared_tool_call_ids for e in recorder.events] == [(r.tool_call_id,) for r in clamped]

    # A newer prompt: the old one is clamped once, on the first request of the next run.
    sent_before = len(model.requests)
    second = await agent.run("Now run the tests.", session=first.session)
    assert second.output == "built"
    new_requests = [without_request_scoped(s) for s in model.requests[sent_before:]]
    old_prompt = prompts(new_requests[0][0])[0]
    assert isinstance(old_prompt.content, str)
    assert "cut from the middle of this prompt" in old_prompt.content
    assert counter.count_part(old_prompt) <= 2000
    assert recorder.events[len(clamped)].details["clamped_prompts"] == 1
    for earlier, later in itertools.pairwise(new_requests):
        assert later[: len(earlier)] == earlier
    # The results clamped in the first run went out unchanged in the second.
    last_of_first = returns(model.requests[sent_before - 1])
    assert returns(new_requests[-1])[: len(last_of_first)] == last_of_first


async def test_the_newest_results_are_clamped_before_the_model_sees_them() -> None:
    model = FunctionModel(script)
    agent = Agent(model, tools=[run_command], capabilities=[ClampOversizedMessages(max_tokens=500)])
    await agent.run("build")
    after_make = model.requests[1]  # the request carrying the first 'make' result
    [result] = returns(after_make[-1:])  # (a request-scoped note may follow it)
    assert isinstance(result.content, str)
    assert result.content.startswith("$ make all\nsrc/module_0.py:0: warning")
    assert result.content.endswith("src/module_4999.py:4999: warning: unused variable 'x4999'\n")
    assert "tokens (4," in result.content  # thousands of lines cut from the middle


# ------------------------------------------------------------------------------ stack strings


def stack(text: str) -> list[Capability]:
    return build_stack(parse_stack(text))


def test_built_from_a_stack_string() -> None:
    [cap] = stack("clamp_oversized_messages:max_tokens=2000,per_tool=bash:4000|read_file:none")
    assert isinstance(cap, ClampOversizedMessages)
    assert cap.max_tokens == 2000
    assert dict(cap.per_tool) == {"bash": 4000, "read_file": None}
    [default] = stack("clamp_oversized_messages")
    assert isinstance(default, ClampOversizedMessages)
    assert default.max_tokens == 4000
    [prompts_off] = stack("clamp_oversized_messages:prompts=false,head_fraction=0.5,min_saved_tokens=0")
    assert isinstance(prompts_off, ClampOversizedMessages)
    assert (prompts_off.prompts, prompts_off.head_fraction, prompts_off.min_saved_tokens) == (False, 0.5, 0)


async def test_an_agent_takes_it_as_a_string() -> None:
    model = FunctionModel(script)
    agent = Agent(model, tools=[run_command], capabilities=["clamp_oversized_messages:max_tokens=800"])
    await agent.run("build")
    counter = TokenCounter(model.model_name)
    assert all(counter.count_part(p) <= 800 for s in model.requests for p in returns(s))


@pytest.mark.parametrize(
    ("text_of_stack", "parameter", "text"),
    [
        ("clamp_oversized_messages:max_tokens=5", "max_tokens", "max_tokens must be at least 64 tokens"),
        (
            "clamp_oversized_messages:head_fraction=2",
            "head_fraction",
            "head_fraction must be between 0 and 1",
        ),
        ("clamp_oversized_messages:per_tool=bash", "per_tool", "per_tool items must be 'tool:limit'"),
        ("clamp_oversized_messages:per_tool=bash:few", "per_tool", "per_tool['bash'] must be a token limit"),
        ("clamp_oversized_messages:prompts=maybe", "prompts", "prompts"),
    ],
)
def test_a_bad_stack_parameter_is_named(text_of_stack: str, parameter: str, text: str) -> None:
    with pytest.raises(StackConfigError) as caught:
        stack(text_of_stack)
    message = str(caught.value)
    assert "clamp_oversized_messages" in message
    assert parameter in message
    assert text in message


def test_an_unknown_parameter_is_named() -> None:
    with pytest.raises(StackConfigError, match="unknown parameter 'max_token'; did you mean 'max_tokens'"):
        stack("clamp_oversized_messages:max_token=100")
