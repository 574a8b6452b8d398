"""Scenario tests of the agent loop, driven by FunctionModel scripts."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.capabilities import Capability, RequestContext
from harness.core import (
    CallToolsNode,
    CanonicalMessage,
    EndNode,
    ModelRequestNode,
    Part,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    Usage,
    UserPromptPart,
    harness_mark,
)
from harness.errors import (
    EmptyResponseError,
    HarnessError,
    MaxIterationsExceeded,
    ModelResponseError,
    RequestTimeout,
    ToolRetry,
    ToolRetryBudgetExceeded,
)
from harness.history import check_invariants
from harness.hooks import hookimpl
from harness.models.function import FunctionInfo, FunctionModel
from harness.run import EMPTY_RESPONSE_NUDGE, INTERRUPTED_UNKNOWN_CONTENT, Agent, build_outgoing
from harness.session import Session
from harness.testing.strategies import histories
from harness.tools import RunContext, ToolCallStatus

# ----------------------------------------------------------------------------- helpers


def resp(*parts: Part, **fields: Any) -> CanonicalMessage:
    return CanonicalMessage.response(*parts, **fields)


def call(call_id: str, name: str, args: Any = None) -> ToolCallPart:
    return ToolCallPart(tool_call_id=call_id, tool_name=name, args={} if args is None else args)


class Recorder:
    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.events: list[Any] = []

    @hookimpl
    def after_node(self, ctx: Any, node: Any) -> None:
        self.nodes.append(node)

    @hookimpl
    def on_tool(self, ctx: Any, event: Any) -> None:
        self.events.append(event)


def content(part: Any) -> Any:
    """The ``content`` of a part known to have one (keeps the type checker out of unions)."""
    return part.content


def reload(session: Session) -> Session:
    assert session.path is not None
    return Session.load(session.path)


def clean(messages: list[CanonicalMessage]) -> None:
    assert check_invariants(messages, persisted=True) == []


def parts_of(messages: list[CanonicalMessage], kind: type) -> list[Any]:
    return [p for m in messages for p in m.parts if isinstance(p, kind)]


def echo(text: str) -> str:
    """Echo the text back.

    Args:
        text: What to echo.
    """
    return f"echo:{text}"


def add(a: int, b: int = 0) -> int:
    """Add two numbers."""
    return a + b


# ----------------------------------------------------------------------------- conversations


async def test_multi_turn_conversation_sends_previous_turns() -> None:
    model = FunctionModel.from_responses("one", "two", "three")
    agent = Agent(model)
    session = Session()
    for prompt in ("a", "b", "c"):
        await agent.run(prompt, session=session)
    assert [len(m) for m in model.requests] == [1, 3, 5]
    assert [p.text for p in parts_of(session.messages, UserPromptPart)] == ["a", "b", "c"]
    assert [content(p) for p in parts_of(session.messages, TextPart)] == ["one", "two", "three"]
    clean(session.messages)


async def test_run_result_fields_and_new_messages() -> None:
    agent = Agent(
        FunctionModel.from_responses(resp(call("c1", "echo", {"text": "x"})), "done", "bye"), tools=[echo]
    )
    first = await agent.run("go")
    assert first.output == "done"
    assert len(first.new_messages) == 4
    assert first.all_messages == first.session.messages
    assert first.iterations == 2
    assert len(first.request_id) == 8
    second = await agent.run("again", session=first.session)
    assert [m.kind for m in second.new_messages] == ["request", "response"]
    assert second.all_messages[:4] == first.all_messages


async def test_system_prompt_and_instructions_sent_every_request_never_stored() -> None:
    seen_ctx: list[RunContext] = []

    def instructions(ctx: RunContext) -> str:
        seen_ctx.append(ctx)
        return f"iteration {ctx.iteration}"

    model = FunctionModel.from_responses(
        resp(call("c1", "echo", {"text": "x"})), "first", resp(call("c2", "echo", {"text": "y"})), "second"
    )
    agent = Agent(model, tools=[echo], system_prompt="You are terse.", instructions=instructions)
    session = Session()
    await agent.run("turn one", session=session)
    await agent.run("turn two", session=session)
    assert len(model.requests) == 4
    for index, sent in enumerate(model.requests, start=1):
        first = sent[0]
        assert first.kind == "request"
        assert isinstance(first.parts[0], SystemPromptPart)
        assert first.parts[0].content == "You are terse."
        assert isinstance(first.parts[1], SystemPromptPart)
        expected = index if index <= 2 else index - 2
        assert first.parts[1].content == f"iteration {expected}"
        assert parts_of(sent, SystemPromptPart) == list(first.parts[:2])
    assert parts_of(session.messages, SystemPromptPart) == []
    assert seen_ctx[0].session is session
    clean(session.messages)


async def test_async_instructions_supported() -> None:
    async def instructions(ctx: RunContext) -> str:
        await asyncio.sleep(0)
        return "dynamic"

    model = FunctionModel.from_responses("ok")
    await Agent(model, instructions=instructions).run("hi")
    assert [content(p) for p in parts_of(model.requests[0], SystemPromptPart)] == ["dynamic"]


async def test_stored_system_prompts_and_run_ids_are_sanitized_before_run() -> None:
    session = Session(
        messages=[
            CanonicalMessage.request(SystemPromptPart("old system"), UserPromptPart("hi"), run_id="r1"),
            resp(TextPart("hello"), run_id="r1"),
        ]
    )
    model = FunctionModel.from_responses("ok")
    await Agent(model, system_prompt="new system").run("next", session=session)
    assert [content(p) for p in parts_of(model.requests[0], SystemPromptPart)] == ["new system"]
    assert all(m.run_id is None for m in session.messages)
    clean(session.messages)


async def test_trailing_unanswered_request_is_merged_not_dropped() -> None:
    session = Session(messages=[CanonicalMessage.user("lost prompt?")])
    model = FunctionModel.from_responses("ok")
    await Agent(model).run("new prompt", session=session)
    assert [p.text for p in parts_of(model.requests[0], UserPromptPart)] == ["lost prompt?", "new prompt"]
    assert len(session.messages) == 2
    clean(session.messages)


async def test_prompt_none_continues_pending_request_and_requires_one() -> None:
    session = Session(messages=[CanonicalMessage.user("pending")])
    result = await Agent(FunctionModel.from_responses("answer")).run(None, session=session)
    assert result.output == "answer"
    with pytest.raises(HarnessError, match="does not end with one"):
        await Agent(FunctionModel.from_responses("x")).run(None, session=session)


async def test_runtime_reset_request_id_and_original_query_kept_when_set() -> None:
    session = Session()
    session.original_query = "the task"
    agent = Agent(FunctionModel.from_responses(resp(call("c1", "echo", {"text": "x"})), "done"), tools=[echo])
    result = await agent.run("sub step", session=session)
    runtime = result.state
    assert runtime.request_id == result.request_id
    assert runtime.request_id is not None
    assert len(runtime.request_id) == 8
    assert runtime.original_query == "the task"
    assert runtime.batch_counter == 1
    assert runtime.iteration_count == runtime.current_iteration == 2
    assert session.original_query == "the task"
    second = await Agent(FunctionModel.from_responses("again")).run("next step", session=session)
    assert second.state is not runtime, "every run starts from a fresh runtime state"
    assert second.state.batch_counter == 0
    fresh = Session()
    first = await Agent(FunctionModel.from_responses("x")).run("first query", session=fresh)
    assert first.state.original_query == fresh.original_query == "first query"


# ----------------------------------------------------------------------------- tools


async def test_parallel_tool_calls_bounded_and_results_in_call_order() -> None:
    running = 0
    peak = 0
    finished: list[str] = []

    async def slow(name: str, delay: float) -> str:
        """Sleep, then return the name."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(delay)
        running -= 1
        finished.append(name)
        return name

    delays = [0.04, 0.01, 0.03, 0.0, 0.02]
    response = resp(*(call(f"p{i}", "slow", {"name": f"n{i}", "delay": d}) for i, d in enumerate(delays)))
    agent = Agent(FunctionModel.from_responses(response, "done"), tools=[slow], max_parallel_tools=2)
    result = await agent.run("go")
    tool_results = result.all_messages[2]
    assert [getattr(p, "tool_call_id", None) for p in tool_results.parts] == [f"p{i}" for i in range(5)]
    assert [content(p) for p in tool_results.parts] == [f"n{i}" for i in range(5)]
    assert peak == 2
    assert finished != [f"n{i}" for i in range(5)]  # completion order differed from call order


async def test_sync_tools_run_in_parallel_threads() -> None:
    import threading

    barrier = threading.Barrier(2, timeout=5)

    def meet(tag: str) -> str:
        """Wait for the other call."""
        barrier.wait()
        return tag

    response = resp(call("a", "meet", {"tag": "a"}), call("b", "meet", {"tag": "b"}))
    result = await Agent(FunctionModel.from_responses(response, "done"), tools=[meet]).run("go")
    assert [content(p) for p in result.all_messages[2].parts] == ["a", "b"]


async def test_tool_retry_becomes_retry_prompt_then_success() -> None:
    attempts: list[int] = []

    def flaky(ctx: RunContext, value: int) -> int:
        """Needs a positive value."""
        attempts.append(ctx.retry)
        if value < 0:
            raise ToolRetry("value must be positive, e.g. 5")
        return value

    model = FunctionModel.from_responses(
        resp(call("c1", "flaky", {"value": -1})), resp(call("c2", "flaky", {"value": 5})), "ok"
    )
    recorder = Recorder()
    agent = Agent(model, tools=[flaky])
    agent.plugin_manager.register(recorder)
    result = await agent.run("go")
    retry = result.all_messages[2].parts[0]
    assert isinstance(retry, RetryPromptPart)
    assert retry.tool_name == "flaky"
    assert retry.tool_call_id == "c1"
    assert "value must be positive, e.g. 5" in str(retry.content)
    assert "Fix the errors and try again." in str(retry.content)
    assert attempts == [0, 1]
    assert result.output == "ok"
    statuses = {r.tool_call_id: r.status for r in result.state.tool_registry}
    assert statuses == {"c1": ToolCallStatus.FAILED, "c2": ToolCallStatus.COMPLETED}
    clean(result.all_messages)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"a": "one"}, "a: expected integer"),
        ({}, "a: missing required argument"),
        ({"a": 1, "c": 2}, "c: unexpected argument"),
        ('{"a": 1', "not valid JSON"),
        ("[1, 2]", "arguments must be a JSON object"),
    ],
)
async def test_invalid_arguments_become_retry_prompt(args: Any, expected: str) -> None:
    model = FunctionModel.from_responses(resp(call("c1", "add", args)), "ok")
    result = await Agent(model, tools=[add]).run("go")
    retry = result.all_messages[2].parts[0]
    assert isinstance(retry, RetryPromptPart)
    assert retry.tool_call_id == "c1"
    assert expected in str(retry.content)
    assert model.requests[1][-1].parts[0] == retry  # the model saw it
    clean(result.all_messages)


async def test_json_string_arguments_are_accepted() -> None:
    result = await Agent(
        FunctionModel.from_responses(resp(call("c1", "add", '{"a": 2, "b": 3}')), "ok"), tools=[add]
    ).run("go")
    assert result.all_messages[2].parts[0] == ToolReturnPart(
        tool_call_id="c1",
        tool_name="add",
        content=5,
        timestamp=getattr(result.all_messages[2].parts[0], "timestamp", None),
    )


async def test_unknown_tool_retry_prompt_lists_available_tools() -> None:
    model = FunctionModel.from_responses(resp(call("c1", "delete_everything")), "ok")
    result = await Agent(model, tools=[add, echo]).run("go")
    retry = result.all_messages[2].parts[0]
    assert isinstance(retry, RetryPromptPart)
    assert "Unknown tool name: 'delete_everything'" in str(retry.content)
    assert "Available tools: add, echo" in str(retry.content)


async def test_retry_budget_exceeded_names_tool_and_saves(tmp_path: Path) -> None:
    def always(x: int) -> int:
        """Always asks for a retry."""
        raise ToolRetry(f"bad {x}")

    steps = [resp(call(f"c{i}", "always", {"x": i})) for i in range(5)]
    session = Session.create(tmp_path)
    agent = Agent(FunctionModel.from_responses(*steps), tools=[always], tool_retry_budget=2)
    with pytest.raises(ToolRetryBudgetExceeded, match="'always'") as info:
        await agent.run("go", session=session)
    assert info.value.tool_name == "always"
    assert info.value.budget == 2
    assert info.value.session is session
    assert len(parts_of(session.messages, RetryPromptPart)) == 3
    clean(session.messages)
    assert info.value.state.tool_registry.check_against(session.messages) == []
    loaded = reload(session)
    assert loaded.messages == session.messages


async def test_retry_budget_resets_after_success() -> None:
    calls_made = 0

    def alternating(x: int) -> int:
        """Fails every other call."""
        nonlocal calls_made
        calls_made += 1
        if calls_made % 2:
            raise ToolRetry("again")
        return x

    steps = [resp(call(f"c{i}", "alternating", {"x": i})) for i in range(8)] + ["done"]
    result = await Agent(FunctionModel.from_responses(*steps), tools=[alternating], tool_retry_budget=1).run(
        "go"
    )
    assert result.output == "done"


async def test_per_tool_retry_budget_override() -> None:
    from harness.tools import Tool

    def strict(x: int) -> int:
        """Never happy."""
        raise ToolRetry("no")

    tool = Tool.from_function(strict, retry_budget=0)
    agent = Agent(FunctionModel.from_responses(resp(call("c1", "strict", {"x": 1}))), tools=[tool])
    with pytest.raises(ToolRetryBudgetExceeded):
        await agent.run("go")


async def test_transient_failures_retried_with_backoff_then_succeed() -> None:
    attempts = 0

    async def shaky() -> str:
        """Fails twice."""
        nonlocal attempts
        attempts += 1
        if attempts < 3:
            raise ConnectionResetError("network blip")
        return "ok"

    agent = Agent(
        FunctionModel.from_responses(resp(call("c1", "shaky")), "done"),
        tools=[shaky],
        tool_max_retries=3,
        tool_retry_base_delay=0.001,
    )
    result = await agent.run("go")
    assert attempts == 3
    assert content(result.all_messages[2].parts[0]) == "ok"
    record = result.state.tool_registry.get("c1")
    assert record.attempts == 3
    assert record.status is ToolCallStatus.COMPLETED


async def test_transient_failure_exhausted_becomes_error_return_and_run_continues() -> None:
    def broken() -> str:
        """Always fails."""
        raise TimeoutError("backend down")

    model = FunctionModel.from_responses(resp(call("c1", "broken")), "I could not reach it")
    agent = Agent(model, tools=[broken], tool_max_retries=2, tool_retry_base_delay=0.0)
    result = await agent.run("go")
    part = result.all_messages[2].parts[0]
    assert isinstance(part, ToolReturnPart)
    assert "failed after 2 attempt(s): TimeoutError: backend down" in part.content
    assert harness_mark(part) == {"tool_error": True}
    assert result.output == "I could not reach it"
    assert result.state.tool_registry.get("c1").status is ToolCallStatus.FAILED


async def test_non_retryable_error_stops_run_after_saving(tmp_path: Path) -> None:
    class ConfigurationError(HarnessError):
        pass

    attempts = 0

    def misconfigured() -> str:
        """Raises a configuration error."""
        nonlocal attempts
        attempts += 1
        raise ConfigurationError("API key missing")

    session = Session.create(tmp_path)
    agent = Agent(
        FunctionModel.from_responses(resp(call("c1", "misconfigured"), call("c2", "echo", {"text": "t"}))),
        tools=[misconfigured, echo],
    )
    with pytest.raises(ConfigurationError):
        await agent.run("go", session=session)
    assert attempts == 1
    answers = {p.tool_call_id: p for p in parts_of(session.messages, ToolReturnPart)}
    assert "API key missing" in answers["c1"].content
    assert answers["c2"].content == "echo:t"
    clean(session.messages)
    assert reload(session).messages == session.messages


async def test_tool_receives_run_context() -> None:
    seen: list[tuple[str | None, str | None, str]] = []

    def inspect_ctx(ctx: RunContext) -> str:
        """Reports its context."""
        seen.append((ctx.tool_call_id, ctx.tool_name, ctx.request_id))
        return "ok"

    result = await Agent(
        FunctionModel.from_responses(resp(call("c9", "inspect_ctx")), "done"), tools=[inspect_ctx]
    ).run("go")
    assert seen == [("c9", "inspect_ctx", result.request_id)]


async def test_tool_return_values_made_json_ready() -> None:
    import attrs

    @attrs.define
    class Point:
        x: int
        y: int

    class Opaque:
        def __str__(self) -> str:
            return "opaque!"

    def point() -> Any:
        """A point."""
        return Point(1, 2)

    def opaque() -> Any:
        """An opaque object."""
        return Opaque()

    import dataclasses

    @dataclasses.dataclass
    class Size:
        w: int

    class PydanticLike:
        def model_dump(self, mode: str = "python") -> dict[str, str]:
            return {"mode": mode}

    def size() -> Any:
        """A dataclass."""
        return Size(3)

    def pyd() -> Any:
        """Something with model_dump."""
        return PydanticLike()

    result = await Agent(
        FunctionModel.from_responses(
            resp(call("a", "point"), call("b", "opaque"), call("c", "size"), call("d", "pyd")), "done"
        ),
        tools=[point, opaque, size, pyd],
    ).run("go")
    assert [content(p) for p in result.all_messages[2].parts] == [
        {"x": 1, "y": 2},
        "opaque!",
        {"w": 3},
        {"mode": "json"},
    ]
    json.dumps([content(p) for p in result.all_messages[2].parts])


async def test_duplicate_tool_call_ids_from_model_are_renamed() -> None:
    steps = [
        resp(call("call_0", "echo", {"text": "a"})),
        "one",
        resp(call("call_0", "echo", {"text": "b"})),
        "two",
    ]
    agent = Agent(FunctionModel.from_responses(*steps), tools=[echo])
    session = Session()
    await agent.run("first", session=session)
    await agent.run("second", session=session)
    ids = [p.tool_call_id for p in parts_of(session.messages, ToolCallPart)]
    assert ids[0] == "call_0"
    assert ids[1].startswith("call_0_")
    assert len(set(ids)) == 2
    clean(session.messages)
    renamed = parts_of(session.messages, ToolCallPart)[1]
    assert harness_mark(renamed) == {"original_id": "call_0"}


async def test_tool_events_follow_lifecycle_and_match_history() -> None:
    recorder = Recorder()
    model = FunctionModel.from_responses(resp(call("c1", "echo", {"text": "x"}), call("c2", "nope")), "done")
    agent = Agent(model, tools=[echo])
    agent.plugin_manager.register(recorder)
    result = await agent.run("go")
    kinds = [(e.kind, e.record.tool_call_id) for e in recorder.events]
    assert kinds[:2] == [("registered", "c1"), ("registered", "c2")]
    assert kinds.index(("started", "c1")) < kinds.index(("completed", "c1"))
    assert kinds.index(("started", "c2")) < kinds.index(("failed", "c2"))
    assert result.state.tool_registry.check_against(result.all_messages) == []


# ----------------------------------------------------------------------------- nodes


async def test_nodes_passed_to_after_node_with_contract_attributes() -> None:
    recorder = Recorder()
    model = FunctionModel.from_responses(
        resp(ThoughtPart("let me think"), call("c1", "echo", {"text": "x"})), resp(TextPart("final"))
    )
    agent = Agent(model, tools=[echo])
    agent.plugin_manager.register(recorder)
    session = Session()
    await agent.run("go", session=session)
    types = [type(n) for n in recorder.nodes]
    assert types == [ModelRequestNode, CallToolsNode, ModelRequestNode, CallToolsNode, EndNode]
    first, tools_node = recorder.nodes[0], recorder.nodes[1]
    assert first.request.parts[0] == session.messages[0].parts[0]
    assert tools_node.model_response == session.messages[1]
    assert tools_node.thought == "let me think"
    assert tools_node.tool_results == session.messages[2]
    assert recorder.nodes[2].request == session.messages[2]
    assert recorder.nodes[-1].result == "final"
    assert session.thoughts == ["let me think"]


# ----------------------------------------------------------------------------- fallback


FALLBACK_FORMS = {
    "tool_call_tag": '<tool_call>{"name": "echo", "arguments": {"text": "hi"}}</tool_call>',
    "function_tag": '<function=echo>{"text": "hi"}</function>',
    "fenced": 'Calling:\n```json\n{"tool": "echo", "args": {"text": "hi"}}\n```',
    "bare": 'I will do {"function": "echo", "parameters": "{\\"text\\": \\"hi\\"}"} now',
}


@pytest.mark.parametrize("form", list(FALLBACK_FORMS))
async def test_fallback_text_tool_calls_run_and_pair_up(form: str) -> None:
    model = FunctionModel.from_responses(FALLBACK_FORMS[form], "done")
    result = await Agent(model, tools=[echo]).run("go")
    stored = result.all_messages[1]
    assert stored.parts[0] == TextPart(FALLBACK_FORMS[form])  # text kept
    (fallback_call,) = stored.tool_calls
    assert fallback_call.tool_call_id.startswith("fallback_")
    assert fallback_call.args == {"text": "hi"}
    answer = result.all_messages[2].parts[0]
    assert isinstance(answer, ToolReturnPart)
    assert answer.tool_call_id == fallback_call.tool_call_id
    assert answer.content == "echo:hi"
    clean(result.all_messages)


async def test_fallback_ignores_unregistered_tools() -> None:
    text = '{"name": "rm_rf", "arguments": {}}'
    result = await Agent(FunctionModel.from_responses(text), tools=[echo]).run("go")
    assert result.output == text
    assert result.all_messages[-1].tool_calls == ()


# ----------------------------------------------------------------------------- empty responses


async def test_empty_response_nudges_then_succeeds() -> None:
    model = FunctionModel.from_responses(resp(), resp(TextPart("  ")), "finally")
    session = Session()
    result = await Agent(model, max_empty_responses=2).run("go", session=session)
    assert result.output == "finally"
    nudges = [p for p in parts_of(session.messages, RetryPromptPart) if p.content == EMPTY_RESPONSE_NUDGE]
    assert len(nudges) == 2
    assert content(model.requests[1][-1].parts[-1]) == EMPTY_RESPONSE_NUDGE
    assert result.state.consecutive_empty_responses == 0
    clean(session.messages)


async def test_thinking_only_response_is_empty_but_thought_kept() -> None:
    model = FunctionModel.from_responses(resp(ThoughtPart("hmm")), "answer")
    session = Session()
    await Agent(model).run("go", session=session)
    assert session.thoughts == ["hmm"]
    clean(session.messages)


async def test_empty_responses_fail_after_bound(tmp_path: Path) -> None:
    session = Session.create(tmp_path)
    model = FunctionModel.from_responses(resp(), resp(), resp(), resp())
    with pytest.raises(EmptyResponseError, match="3 empty responses") as info:
        await Agent(model, max_empty_responses=2).run("go", session=session)
    assert info.value.count == 3
    clean(session.messages)
    assert reload(session).messages == session.messages


# ----------------------------------------------------------------------------- limits


async def test_max_iterations_enforced_and_history_saved_then_continued(tmp_path: Path) -> None:
    steps = [resp(call(f"c{i}", "echo", {"text": str(i)})) for i in range(3)]
    session = Session.create(tmp_path)
    agent = Agent(FunctionModel.from_responses(*steps, "finished"), tools=[echo], max_iterations=3)
    with pytest.raises(MaxIterationsExceeded, match="max_iterations=3") as info:
        await agent.run("go", session=session)
    assert info.value.session is session
    clean(session.messages)
    assert session.messages[-1].kind == "request"
    on_disk = reload(session)
    assert on_disk.messages == session.messages
    result = await agent.run(None, session=on_disk)
    assert result.output == "finished"
    clean(on_disk.messages)


async def test_request_timeout_raises_and_keeps_completed_work(tmp_path: Path) -> None:
    async def slow() -> str:
        """Never finishes in time."""
        await asyncio.sleep(10)
        return "late"

    session = Session.create(tmp_path)
    model = FunctionModel.from_responses(resp(call("fast", "echo", {"text": "x"}), call("slow", "slow")))
    agent = Agent(model, tools=[echo, slow], request_timeout=0.2)
    with pytest.raises(RequestTimeout) as info:
        await agent.run("go", session=session)
    assert isinstance(info.value, TimeoutError)
    answers = {p.tool_call_id: p.content for p in parts_of(session.messages, ToolReturnPart)}
    assert answers == {"fast": "echo:x", "slow": INTERRUPTED_UNKNOWN_CONTENT}  # it had begun
    assert content(session.messages[-1].parts[-1]) == "[INTERRUPTED]"
    clean(session.messages)
    assert info.value.state.tool_registry.get("slow").status is ToolCallStatus.CANCELLED
    assert reload(session).messages == session.messages


async def test_model_returning_a_request_is_an_error() -> None:
    model = FunctionModel(lambda m, i: CanonicalMessage.user("wrong"))
    with pytest.raises(ModelResponseError, match="a request"):
        await Agent(model).run("go")


# ----------------------------------------------------------------------------- usage


async def test_usage_accumulates_across_runs_with_cached_tokens(tmp_path: Path) -> None:
    u1 = Usage(request_tokens=100, response_tokens=10, cached_tokens=60, cache_write_tokens=5)
    u2 = Usage(request_tokens=200, response_tokens=20, cached_tokens=150)
    model = FunctionModel.from_responses(
        resp(call("c1", "echo", {"text": "x"}), usage=u1),
        resp(TextPart("a"), usage=u2),
        resp(TextPart("b"), usage=u1),
    )
    agent = Agent(model, tools=[echo])
    session = Session.create(tmp_path)
    first = await agent.run("one", session=session)
    assert first.usage == u1 + u2
    second = await agent.run("two", session=session)
    assert second.usage == u1
    assert session.usage == u1 + u2 + u1
    assert session.usage.cached_tokens == 270
    assert session.path is not None
    data = json.loads(session.path.read_text())
    assert data["session_total_usage"]["cached_tokens"] == 270
    assert reload(session).usage == session.usage


async def test_provider_usage_mapping_is_normalised() -> None:
    raw = {"prompt_tokens": 50, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 40}}
    response = resp(TextPart("ok"), usage=raw)
    result = await Agent(FunctionModel.from_responses(response)).run("go")
    assert result.usage == Usage(request_tokens=50, response_tokens=7, cached_tokens=40)
    assert result.all_messages[-1].usage == result.usage


async def test_function_model_estimates_usage_when_missing() -> None:
    result = await Agent(FunctionModel.from_responses("hello there")).run("hi")
    assert result.usage.request_tokens > 0
    assert result.usage.response_tokens > 0


async def test_token_count_updated_after_run() -> None:
    session = Session()
    await Agent(FunctionModel.from_responses("hello")).run("hi", session=session)
    from harness.tokens import TokenCounter

    assert session.total_tokens == TokenCounter("function").count_messages(session.messages) > 0


# ----------------------------------------------------------------------------- capabilities


class Editor(Capability):
    """Clears old tool returns persistently, adds a request-scoped warning, charges usage."""

    name = "editor"

    def __init__(self) -> None:
        self.calls = 0

    @hookimpl
    async def before_model_request(self, ctx: RequestContext) -> None:
        self.calls += 1
        ctx.add_usage(Usage(request_tokens=7, response_tokens=3))
        ctx.add_request_scoped(UserPromptPart(f"warning {self.calls}"), source="editor")
        new: list[CanonicalMessage] = []
        for message in ctx.messages[:-1]:
            parts = tuple(
                ToolReturnPart(tool_call_id=p.tool_call_id, tool_name=p.tool_name, content="[cleared]")
                if isinstance(p, ToolReturnPart)
                else p
                for p in message.parts
            )
            new.append(message.replace(parts=parts) if parts != message.parts else message)
        new.append(ctx.messages[-1])
        ctx.replace_messages(new, strategy="editor", reason="test")


async def test_capability_edits_persist_and_request_scoped_parts_are_not_stored() -> None:
    editor = Editor()
    model = FunctionModel.from_responses(
        resp(call("c1", "echo", {"text": "x"}), usage=Usage(request_tokens=1)),
        resp(call("c2", "echo", {"text": "y"}), usage=Usage(request_tokens=1)),
        resp(TextPart("done"), usage=Usage(request_tokens=1)),
    )
    session = Session()
    result = await Agent(model, tools=[echo], capabilities=[editor]).run("go", session=session)
    # sent: the warning is the last part of the last request
    for index, sent in enumerate(model.requests, start=1):
        last_part = sent[-1].parts[-1]
        assert isinstance(last_part, UserPromptPart)
        assert last_part.content == f"warning {index}"
        assert harness_mark(last_part) == {"request_scoped": True, "source": "editor"}
    # stored: no warning, and the first return was cleared persistently (c2's stays: newest)
    assert not any(
        isinstance(p, UserPromptPart) and p.text.startswith("warning")
        for m in session.messages
        for p in m.parts
    )
    returns = {p.tool_call_id: p.content for p in parts_of(session.messages, ToolReturnPart)}
    assert returns == {"c1": "[cleared]", "c2": "echo:y"}
    # capability usage counted in the run and the session
    assert result.usage.request_tokens == 3 + 21
    assert result.usage.response_tokens == 9
    assert session.usage == result.usage


async def test_capability_breaking_invariants_is_rejected_and_history_saved(tmp_path: Path) -> None:
    from harness.errors import CapabilityError

    class Breaker(Capability):
        name = "breaker"

        @hookimpl
        async def before_model_request(self, ctx: RequestContext) -> None:
            ctx.messages.insert(0, resp(call("ghost", "echo")))

    session = Session.create(tmp_path)
    with pytest.raises(CapabilityError, match="breaker"):
        await Agent(FunctionModel.from_responses("x"), capabilities=[Breaker()]).run("go", session=session)
    clean(session.messages)
    assert [p.text for p in parts_of(reload(session).messages, UserPromptPart)] == ["go"]


# ----------------------------------------------------------------------------- build_outgoing


def test_build_outgoing_rebuilds_only_first_and_last() -> None:
    history = [CanonicalMessage.user(str(i)) if i % 2 == 0 else resp(TextPart(str(i))) for i in range(9)]
    system = [SystemPromptPart("sys")]
    scoped: list[Part] = [UserPromptPart("scoped")]
    out = build_outgoing(history, system, scoped)
    assert out[0].parts == (system[0], *history[0].parts)
    assert out[-1].parts == (*history[-1].parts, scoped[0])
    assert all(a is b for a, b in zip(out[1:-1], history[1:-1], strict=True))
    assert history[0].parts == (UserPromptPart("0"),)  # input untouched
    assert build_outgoing([history[0]], system, scoped)[0].parts == (
        system[0],
        UserPromptPart("0"),
        scoped[0],
    )
    starts_with_response = [resp(TextPart("x")), CanonicalMessage.user("y")]
    assert build_outgoing(starts_with_response, system, [])[0].parts == (system[0],)


# ----------------------------------------------------------------------------- property: random runs

ACTIONS = st.lists(
    st.lists(st.sampled_from(["ok", "retry", "invalid", "unknown", "transient"]), min_size=1, max_size=3),
    min_size=0,
    max_size=4,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(runs=st.lists(ACTIONS, min_size=1, max_size=3))
def test_random_runs_keep_invariants_and_registry_in_sync(runs: list[list[list[str]]]) -> None:
    flips: dict[str, int] = {}

    def work(key: str, mode: str) -> str:
        """A tool whose behaviour the script picks."""
        if mode == "retry":
            raise ToolRetry("try again")
        if mode == "transient":
            flips[key] = flips.get(key, 0) + 1
            if flips[key] == 1:
                raise OSError("blip")
        return key

    session = Session()
    counter = 0

    def to_call(action: str) -> ToolCallPart:
        nonlocal counter
        counter += 1
        key = f"k{counter}"
        if action == "invalid":
            return ToolCallPart(tool_call_id=f"id{counter}", tool_name="work", args={"key": 1})
        if action == "unknown":
            return ToolCallPart(tool_call_id=f"id{counter}", tool_name="missing", args={})
        return ToolCallPart(tool_call_id=f"id{counter}", tool_name="work", args={"key": key, "mode": action})

    agent_budget = 100
    for batches in runs:
        steps: list[CanonicalMessage | str] = [resp(*(to_call(a) for a in batch)) for batch in batches]
        steps.append("done")
        agent = Agent(
            FunctionModel.from_responses(*steps),
            tools=[work],
            tool_retry_budget=agent_budget,
            tool_retry_base_delay=0.0,
            max_iterations=10,
        )
        result = asyncio.run(agent.run("go", session=session))
        assert result.output == "done"
        clean(session.messages)
        assert result.state.tool_registry.check_against(session.messages) == []
        assert not result.state.tool_registry.unfinished()


async def test_model_sees_info_tools_and_settings() -> None:
    from harness.core import ModelSettings

    infos: list[FunctionInfo] = []

    def fn(messages: list[CanonicalMessage], info: FunctionInfo) -> str:
        infos.append(info)
        return "ok"

    settings_ = ModelSettings(temperature=0.1)
    await Agent(FunctionModel(fn), tools=[echo], settings=settings_).run("go")
    (info,) = infos
    assert info.settings is settings_
    assert [t.name for t in info.tools] == ["echo"]
    assert info.tools[0].parameters_json_schema["properties"]["text"]["description"] == "What to echo."


# ----------------------------------------------------------------------------- provider errors


async def test_provider_error_propagates_after_saving_the_prompt(tmp_path: Path) -> None:
    class ProviderDownError(RuntimeError):
        pass

    def failing(messages: list[CanonicalMessage], info: FunctionInfo) -> str:
        raise ProviderDownError("503 from provider")

    session = Session.create(tmp_path)
    with pytest.raises(ProviderDownError):
        await Agent(FunctionModel(failing)).run("important question", session=session)
    saved = reload(session)
    assert [p.text for p in parts_of(saved.messages, UserPromptPart)] == ["important question"]
    # the next run merges the unanswered prompt with the new one: nothing is dropped
    model = FunctionModel.from_responses("answer")
    await Agent(model).run("retrying", session=saved)
    assert [p.text for p in parts_of(model.requests[0], UserPromptPart)] == ["important question", "retrying"]
    clean(saved.messages)


async def test_observer_failure_stops_the_run_with_history_saved(tmp_path: Path) -> None:
    from harness.errors import CapabilityError

    class BrokenLogger:
        @hookimpl
        def after_node(self, ctx: Any, node: Any) -> None:
            raise ValueError("log disk full")

    agent = Agent(FunctionModel.from_responses(resp(call("c1", "echo", {"text": "x"})), "done"), tools=[echo])
    agent.plugin_manager.register(BrokenLogger(), name="broken_logger")
    session = Session.create(tmp_path)
    with pytest.raises(CapabilityError, match="broken_logger"):
        await agent.run("go", session=session)
    clean(session.messages)
    assert reload(session).messages == session.messages


@settings(max_examples=100, deadline=None)
@given(
    history=histories(min_messages=1, max_messages=20), n_system=st.integers(0, 2), n_scoped=st.integers(0, 2)
)
def test_build_outgoing_properties(history: list[CanonicalMessage], n_system: int, n_scoped: int) -> None:
    original = list(history)
    system = [SystemPromptPart(f"s{i}") for i in range(n_system)]
    scoped: list[Part] = [UserPromptPart(f"w{i}") for i in range(n_scoped)]
    out = build_outgoing(history, system, scoped)
    assert history == original
    assert all(a is b for a, b in zip(history, original, strict=True))
    flat_out = [p for m in out for p in m.parts]
    flat_in = [p for m in history for p in m.parts]
    assert history[0].kind == "request"  # valid histories start with a request
    assert flat_out == [*system, *flat_in, *scoped]
    assert len(out) == len(history)
    assert [m.kind for m in out] == [m.kind for m in history]
    assert check_invariants(out) == check_invariants(history) == []
    for index in range(1, len(history) - 1):
        assert out[index] is history[index]


async def test_sessions_saved_and_resumed_across_runs_keep_identical_parts_and_ids(tmp_path: Path) -> None:
    first_agent = Agent(
        FunctionModel.from_responses(
            resp(ThoughtPart("plan"), call("id_a", "echo", {"text": "one"}), call("id_b", "add", '{"a": 1}')),
            resp(TextPart("first answer")),
        ),
        tools=[echo, add],
        system_prompt="sys",
    )
    session = Session.create(tmp_path)
    first = await first_agent.run("first", session=session)
    assert session.path is not None
    before = list(session.messages)

    resumed = Session.load(session.path)  # a new process would do exactly this
    assert resumed.messages == before
    assert resumed.session_id == session.session_id
    model = FunctionModel.from_responses(resp(call("id_c", "echo", {"text": "two"})), "second answer")
    second = await Agent(model, tools=[echo, add], system_prompt="sys").run("second", session=resumed)
    assert resumed.messages[: len(before)] == before  # the first run's parts and ids are untouched
    assert model.requests[0][1:-1] == before[1:]  # and were sent as they were stored
    final = Session.load(session.path)
    assert final.messages == resumed.messages
    ids = [p.tool_call_id for p in parts_of(final.messages, ToolCallPart)]
    assert ids == ["id_a", "id_b", "id_c"]
    assert [p.tool_call_id for p in parts_of(final.messages, ToolReturnPart)] == ids
    assert final.usage == first.usage + second.usage
    assert final.thoughts == ["plan"]


async def test_duplicate_ids_within_one_response_are_renamed() -> None:
    model = FunctionModel.from_responses(
        resp(call("same", "echo", {"text": "a"}), call("same", "echo", {"text": "b"})), "done"
    )
    result = await Agent(model, tools=[echo]).run("go")
    first, second = result.all_messages[1].tool_calls
    assert first.tool_call_id == "same"
    assert second.tool_call_id.startswith("same_")
    answers = {getattr(p, "tool_call_id", None): content(p) for p in result.all_messages[2].parts}
    assert answers == {"same": "echo:a", second.tool_call_id: "echo:b"}
    clean(result.all_messages)


async def test_instructions_returning_nothing_add_no_part() -> None:
    model = FunctionModel.from_responses("ok")
    await Agent(model, instructions=lambda ctx: None).run("go")
    assert parts_of(model.requests[0], SystemPromptPart) == []


async def test_tool_raising_arguments_error_gets_retry_prompt() -> None:
    from harness.errors import ToolArgumentsError

    def picky(path: str) -> str:
        """Checks its argument further."""
        raise ToolArgumentsError("picky", [f"path: {path!r} must be absolute"])

    model = FunctionModel.from_responses(resp(call("c1", "picky", {"path": "rel"})), "ok")
    result = await Agent(model, tools=[picky]).run("go")
    retry = result.all_messages[2].parts[0]
    assert isinstance(retry, RetryPromptPart)
    assert "path: 'rel' must be absolute" in str(retry.content)
    assert result.output == "ok"


async def test_request_context_state_is_shared_by_every_request_of_a_run() -> None:
    seen: list[int] = []

    class Counting(Capability):
        name = "counting"

        @hookimpl
        async def before_model_request(self, ctx: RequestContext) -> None:
            ctx.state["requests"] = ctx.state.get("requests", 0) + 1
            seen.append(ctx.state["requests"])

    def read(path: str) -> str:
        """Read a file."""
        return f"contents of {path}"

    model = FunctionModel.from_responses(
        resp(call("c1", "read", {"path": "a"})),
        resp(call("c2", "read", {"path": "b"})),
        resp(TextPart("done")),
        resp(TextPart("done again")),
    )
    agent = Agent(model, tools=[read], capabilities=[Counting()])
    await agent.run("go")
    assert seen == [1, 2, 3]
    seen.clear()
    await agent.run("again", session=None)
    assert seen == [1], "a new run starts with fresh state"
