"""A real Agent whose FunctionModel calls ``compact_context``: what the next request holds, and the guard."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from harness_clear_tool_results import ClearToolResults
from harness_compact_on_request import MARK_KEY, CompactOnRequest, status_of
from harness_sliding_window import SlidingWindow

from harness import (
    Agent,
    CanonicalMessage,
    Capability,
    CompactionEvent,
    PluginManager,
    RequestContext,
    RetryPromptPart,
    Session,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    hookimpl,
    pin,
)
from harness.core import harness_mark, is_pinned
from harness.history import check_invariants
from harness.models.function import FunctionInfo, FunctionModel
from harness.tokens import TokenCounter

CLEAR = "clear_tool_results:keep_pairs=1"


def read_file(path: str) -> str:
    """Read a file of the project.

    Args:
        path: The file.
    """
    return f"contents of {path}\n" + "".join(f"{path} line {n}: some text of the file\n" for n in range(300))


def run_tests() -> str:
    """Run the test suite."""
    return "FAILED tests/test_a.py::test_x - AssertionError: 1 != 2"


class Recorder:
    """An observer plugin: every compaction event, with the number of the request it came before."""

    name = "test_recorder"

    def __init__(self) -> None:
        self.events: list[tuple[int, CompactionEvent]] = []

    @hookimpl
    def on_compaction(self, ctx: RequestContext, event: CompactionEvent) -> None:
        self.events.append((ctx.requests, event))

    def strategies(self, request: int | None = None) -> list[str]:
        return [e.strategy for r, e in self.events if request is None or r == request]


def call(call_id: str, tool: str, **args: Any) -> ToolCallPart:
    return ToolCallPart(tool_call_id=call_id, tool_name=tool, args=args)


def respond(*parts: ToolCallPart | str) -> CanonicalMessage:
    return CanonicalMessage.response(*(TextPart(p) if isinstance(p, str) else p for p in parts))


def scripted(*steps: CanonicalMessage | str) -> FunctionModel:
    """Plays ``steps``; a summarizer's own request (no tools offered) gets a short summary."""
    remaining = list(steps)

    def play(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage | str:
        if not info.tools:
            return "Summary: a.py, b.py and c.py were read."
        return remaining.pop(0)

    return FunctionModel(play)


def reads(*after: CanonicalMessage | str) -> FunctionModel:
    """Three file reads, then ``after``, then a final answer."""
    return scripted(
        respond(call("c1", "read_file", path="a.py")),
        respond(call("c2", "read_file", path="b.py")),
        respond(call("c3", "read_file", path="c.py")),
        *after,
        "All done.",
    )


def agent_with(model: FunctionModel, *capabilities: object) -> tuple[Agent, Recorder]:
    recorder = Recorder()
    manager = PluginManager()
    manager.register(recorder)
    agent = Agent(
        model, tools=[read_file, run_tests], capabilities=list(capabilities), plugin_manager=manager
    )
    return agent, recorder


def size(messages: Sequence[CanonicalMessage]) -> int:
    return TokenCounter().count_messages(messages)


def returns_of(messages: Sequence[CanonicalMessage], tool: str = "compact_context") -> list[ToolReturnPart]:
    return [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart) and p.tool_name == tool]


def test_the_model_compacts_and_the_next_request_is_smaller() -> None:
    model = reads(respond(call("k1", "compact_context", reason="exploration done")))
    agent, recorder = agent_with(model, CompactOnRequest(stack=CLEAR))
    result = agent.run_sync("Explore the project.")
    assert result.output == "All done."
    sent = model.requests
    assert "compact_context" in [d.name for d in agent.tool_definitions]
    # requests: 0 prompt, 1-3 after each read, 4 after compact_context, 5 nothing more
    before, after = size(sent[3]), size(sent[4])
    assert after < before / 4, (before, after)
    assert recorder.strategies() == ["clear_tool_results", "compact_on_request"]
    assert {r for r, _ in recorder.events} == {4}, "compacted right before the request after the call"
    rollup = recorder.events[-1][1]
    assert rollup.reason == "requested by the model: exploration done"
    assert rollup.details["tiers"] == ["clear_tool_results"]
    assert set(rollup.cleared_tool_call_ids) == {"c1", "c2", "c3"}
    [answer] = returns_of(sent[4])
    assert status_of(answer) == "compacted"
    assert str(answer.content).startswith("The context was compacted (reason: 'exploration done'):")
    assert f"{rollup.tokens_before:,} -> {rollup.tokens_after:,} tokens" in str(answer.content)
    assert not check_invariants(result.all_messages)


def test_the_tool_says_what_will_happen() -> None:
    capability = CompactOnRequest(stack=CLEAR)
    [tool] = capability.tools
    history = [
        CanonicalMessage.user("go"),
        respond(call("k1", "compact_context", reason="logs no longer needed")),
    ]
    message = capability.decide(history, "k1").message
    assert message == "The context will be compacted before your next turn: reason 'logs no longer needed'."
    assert tool.name == "compact_context"
    assert capability.tools is capability.tools


def test_twice_in_a_row_is_refused_and_compacts_nothing() -> None:
    model = reads(
        respond(call("k1", "compact_context", reason="first")),
        respond("Compacting once more to be sure.", call("k2", "compact_context", reason="again")),
    )
    agent, recorder = agent_with(model, CompactOnRequest(stack=CLEAR))
    result = agent.run_sync("Explore the project.")
    assert [r for r, _ in recorder.events] == [4, 4], "nothing compacted before request 5"
    first, second = returns_of(result.all_messages)
    assert status_of(first) == "compacted"
    assert status_of(second) == "refused"
    assert str(second.content).startswith("Not compacting: the context was just compacted")
    assert "only 1 message(s) of work" in str(second.content)
    assert size(model.requests[5]) - size(model.requests[4]) < 200, "request 5 only grew by the exchange"


def test_after_enough_work_it_compacts_again() -> None:
    model = scripted(
        respond(call("c1", "read_file", path="a.py")),
        respond(call("k1", "compact_context", reason="first")),
        respond(call("c2", "read_file", path="b.py")),
        respond(call("k2", "compact_context", reason="second")),
        "All done.",
    )
    agent, recorder = agent_with(model, CompactOnRequest(stack=CLEAR, min_messages_between=2))
    result = agent.run_sync("Explore.")
    assert [s for s in recorder.strategies() if s == "compact_on_request"] == ["compact_on_request"] * 2
    assert [status_of(p) for p in returns_of(result.all_messages)] == ["compacted", "compacted"]
    model = scripted(
        respond(call("c1", "read_file", path="a.py")),
        respond(call("k1", "compact_context", reason="first")),
        respond(call("c2", "read_file", path="b.py")),
        respond(call("k2", "compact_context", reason="second")),
        "All done.",
    )
    agent, recorder = agent_with(model, CompactOnRequest(stack=CLEAR, min_messages_between=3))
    result = agent.run_sync("Explore.")
    assert [status_of(p) for p in returns_of(result.all_messages)] == ["compacted", "refused"]


def test_two_calls_in_one_response_compact_once() -> None:
    model = reads(
        respond(call("k1", "compact_context", reason="one"), call("k2", "compact_context", reason="two"))
    )
    agent, recorder = agent_with(model, CompactOnRequest(stack=CLEAR))
    result = agent.run_sync("Explore.")
    assert recorder.strategies().count("compact_on_request") == 1
    first, second = returns_of(result.all_messages)
    assert (status_of(first), status_of(second)) == ("compacted", "refused")
    assert "call 'k1' of this same turn already asked" in str(second.content)


def test_skipped_when_another_capability_compacted_this_request() -> None:
    # The read of b.py and the call arrive together; the automatic ClearToolResults fires on the
    # request carrying both answers, so compact_on_request must not compact a second time.
    model = scripted(
        respond(call("c1", "read_file", path="a.py")),
        respond(call("c2", "read_file", path="b.py"), call("k1", "compact_context", reason="cluttered")),
        "All done.",
    )
    automatic = ClearToolResults(max_tokens=2500, keep_pairs=1)
    agent, recorder = agent_with(model, CompactOnRequest(stack="sliding_window:keep_messages=2"), automatic)
    result = agent.run_sync("Explore.")
    assert recorder.strategies() == ["clear_tool_results"], "only the automatic capability edited"
    [answer] = returns_of(result.all_messages)
    assert status_of(answer) == "skipped"
    assert str(answer.content).startswith(
        "Not compacted again (reason: 'cluttered'): clear_tool_results already compacted the context"
    )
    assert returns_of(model.requests[2]) == [answer]


class Failing(Capability):
    """A stack capability that raises."""

    name = "failing_tier"

    async def compact(self, ctx: RequestContext, *, reason: str = "forced") -> None:
        raise RuntimeError("disk on fire")


def test_a_failing_stack_leaves_the_history_and_says_so() -> None:
    model = reads(respond(call("k1", "compact_context", reason="now")))
    agent, recorder = agent_with(model, CompactOnRequest(stack=[Failing()]))
    result = agent.run_sync("Explore.")
    assert result.output == "All done."
    assert recorder.events == []
    [answer] = returns_of(result.all_messages)
    assert status_of(answer) == "failed"
    assert "the compaction stack failed" in str(answer.content)
    assert "disk on fire" in str(answer.content)
    assert size(model.requests[4]) > size(model.requests[3]), "nothing was removed"


def test_a_stack_that_changes_nothing_says_so() -> None:
    model = scripted(respond(call("k1", "compact_context", reason="tidy")), "All done.")
    agent, recorder = agent_with(model, CompactOnRequest(stack=CLEAR))
    result = agent.run_sync("Hello.")
    [answer] = returns_of(result.all_messages)
    assert status_of(answer) == "unchanged"
    assert "found nothing to remove" in str(answer.content)
    assert recorder.events == []


def test_a_blank_reason_is_a_retry_prompt() -> None:
    model = scripted(respond(call("k1", "compact_context", reason="  ")), "All done.")
    agent, _ = agent_with(model, CompactOnRequest(stack=CLEAR))
    result = agent.run_sync("Hello.")
    retries = [p for m in result.all_messages for p in m.parts if isinstance(p, RetryPromptPart)]
    assert len(retries) == 1
    assert "give a reason" in str(retries[0].content)
    assert returns_of(result.all_messages) == []


def test_pinned_parts_survive_and_the_rest_is_dropped() -> None:
    pinned_prompt = pin(UserPromptPart("Never touch the database."), "constraint")
    model = reads(respond(call("k1", "compact_context", reason="now")))
    stack = [ClearToolResults(max_messages=1, keep_pairs=1), SlidingWindow(max_messages=3, keep_messages=2)]
    agent, recorder = agent_with(model, CompactOnRequest(stack=stack))
    session = Session.new(messages=[CanonicalMessage.request(pinned_prompt), respond("Understood.")])
    result = agent.run_sync("Explore.", session=session)
    assert "sliding_window" in recorder.strategies()
    sent = model.requests[4]
    kept = [p for m in sent for p in m.parts if is_pinned(p)]
    assert [getattr(p, "content", None) for p in kept] == ["Never touch the database."]
    assert len(sent) < len(model.requests[3])
    assert not check_invariants(result.all_messages)


async def test_a_pinned_answer_gets_a_request_scoped_note() -> None:
    capability = CompactOnRequest(stack=CLEAR)
    answer = pin(
        ToolReturnPart(
            tool_call_id="k1", tool_name="compact_context", content="The context will be compacted"
        ),
        "user",
    )
    history = [
        CanonicalMessage.user("go"),
        respond(call("c1", "read_file", path="a.py")),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="c1", tool_name="read_file", content=read_file("a.py"))
        ),
        respond(call("k1", "compact_context", reason="now")),
        CanonicalMessage.request(answer),
    ]
    manager = PluginManager()
    manager.add_capabilities([capability])
    ctx = RequestContext(messages=list(history), token_counter=manager.token_counter(None))
    await manager.run_before_model_request(ctx)
    last = ctx.messages[-1].parts[0]
    assert isinstance(last, ToolReturnPart)
    assert last.content == "The context will be compacted", "a pinned answer keeps its content"
    mark = harness_mark(last)
    assert mark is not None
    assert mark[MARK_KEY] == "compacted"
    assert mark["pinned"] == "user"
    [note] = ctx.request_scoped
    assert isinstance(note, UserPromptPart)
    assert str(note.content).startswith("[compact_context k1] The context was compacted")


class Blocking(Capability):
    """A stack capability that waits until released: a compaction in progress."""

    name = "blocking_tier"

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def compact(self, ctx: RequestContext, *, reason: str = "forced") -> None:
        self.entered.set()
        await self.release.wait()
        cleared = CanonicalMessage.request(
            ToolReturnPart(tool_call_id="c1", tool_name="read_file", content="[cleared]")
        )
        ctx.replace_messages(
            [*ctx.messages[:2], cleared, *ctx.messages[3:]], strategy=self.name, reason=reason
        )


def pending_history(session_text: str) -> list[CanonicalMessage]:
    return [
        CanonicalMessage.user(session_text),
        respond(call("c1", "read_file", path="a.py")),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="c1", tool_name="read_file", content=read_file("a.py"))
        ),
        respond(call("k1", "compact_context", reason="now")),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="k1", tool_name="compact_context", content="will compact")
        ),
    ]


async def test_skipped_while_a_compaction_of_the_session_is_in_progress() -> None:
    blocking = Blocking()
    first = CompactOnRequest(stack=[blocking])
    second = CompactOnRequest(stack=CLEAR)
    session = Session.new()
    contexts: list[RequestContext] = []
    managers: list[PluginManager] = []
    for capability in (first, second):
        manager = PluginManager()
        manager.add_capabilities([capability])
        managers.append(manager)
        contexts.append(
            RequestContext(
                messages=pending_history("go"), token_counter=manager.token_counter(None), session=session
            )
        )
    running = asyncio.create_task(managers[0].run_before_model_request(contexts[0]))
    await blocking.entered.wait()
    await managers[1].run_before_model_request(contexts[1])
    [answer] = returns_of(contexts[1].messages[-1:])
    assert status_of(answer) == "skipped"
    assert "a compaction of this session is already in progress" in str(answer.content)
    assert contexts[1].events == []
    blocking.release.set()
    await running
    [done] = returns_of(contexts[0].messages[-1:])
    assert status_of(done) == "compacted"
    # once it finished, another session's or the same session's next compaction is free again
    third = PluginManager()
    third.add_capabilities([CompactOnRequest(stack=CLEAR)])
    ctx = RequestContext(
        messages=pending_history("go"), token_counter=third.token_counter(None), session=session
    )
    await third.run_before_model_request(ctx)
    assert status_of(returns_of(ctx.messages[-1:])[0]) == "compacted"


def test_the_default_tiered_stack_halves_the_history() -> None:
    model = reads(respond(call("k1", "compact_context", reason="exploration done")))
    agent, recorder = agent_with(model, CompactOnRequest())
    agent.run_sync("Explore the project.")
    assert "tiered" in recorder.strategies()
    assert recorder.strategies()[-1] == "compact_on_request"
    assert size(model.requests[4]) <= size(model.requests[3]) / 2


@pytest.mark.parametrize(
    "stack",
    [
        CLEAR,
        "tiered[clear_tool_results:keep_pairs=1]:target_fraction=0.3",
        [ClearToolResults(max_messages=1, keep_pairs=1)],
    ],
    ids=["string", "tiered-string", "objects"],
)
def test_each_stack_form_compacts(stack: object) -> None:
    model = reads(respond(call("k1", "compact_context", reason="now")))
    agent, recorder = agent_with(model, CompactOnRequest(stack=stack))  # pyright: ignore[reportArgumentType]
    agent.run_sync("Explore.")
    assert "clear_tool_results" in recorder.strategies()
    assert size(model.requests[4]) < size(model.requests[3]) / 2


def test_configured_from_a_stack_string_on_the_agent() -> None:
    model = reads(respond(call("k1", "compact_context", reason="now")))
    recorder = Recorder()
    manager = PluginManager()
    manager.register(recorder)
    agent = Agent(
        model,
        tools=[read_file],
        capabilities='compact_on_request:stack="clear_tool_results:keep_pairs=1",min_messages_between=3',
        plugin_manager=manager,
    )
    [capability] = [c for c in agent.plugin_manager.capabilities if isinstance(c, CompactOnRequest)]
    assert capability.min_messages_between == 3
    assert capability.describe() == "clear_tool_results"
    agent.run_sync("Explore.")
    assert recorder.strategies() == ["clear_tool_results", "compact_on_request"]


class DropAllButTheLast(Capability):
    """A careless stack step: keeps only the last three messages, pinned or not."""

    name = "drop_all_but_the_last"

    async def compact(self, ctx: RequestContext, *, reason: str = "forced") -> None:
        ctx.replace_messages(ctx.messages[-3:], strategy=self.name, reason=reason)


def test_a_stack_step_that_would_lose_a_pin_fails_and_the_pin_is_sent() -> None:
    model = reads(respond(call("k1", "compact_context", reason="now")))
    agent, recorder = agent_with(model, CompactOnRequest(stack=[DropAllButTheLast()]))
    session = Session.new(
        messages=[CanonicalMessage.request(pin(UserPromptPart("Keep the API stable."))), respond("Noted.")]
    )
    result = agent.run_sync("Explore.", session=session)
    assert recorder.events == []
    [answer] = returns_of(result.all_messages)
    assert status_of(answer) == "failed"
    assert "lost_pinned_part" in str(answer.content)
    assert any(is_pinned(p) for m in model.requests[-1] for p in m.parts)
