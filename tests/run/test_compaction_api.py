"""harness.run.compaction: applying a capability stack outside of a run."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import click
import pytest
from hypothesis import given, settings

from harness.capabilities import Capability, CompactionEvent, RequestContext, Trigger
from harness.core import (
    CanonicalMessage,
    ModelSettings,
    TextPart,
    ToolCallPart,
    ToolDefinition,
    ToolReturnPart,
    UserPromptPart,
    harness_mark,
    tool_call_ids,
)
from harness.errors import CapabilityError, HarnessError
from harness.history import check_invariants, is_safe_cutoff, safe_cutoff
from harness.hooks import PluginManager, hookimpl
from harness.run import CompactionResult, compact, compact_sync
from harness.testing.strategies import histories
from harness.tokens import TokenCounter


def conversation(turns: int = 4) -> list[CanonicalMessage]:
    """``turns`` user turns, each answered by one tool round trip and a text answer."""
    messages: list[CanonicalMessage] = []
    for turn in range(turns):
        messages += [
            CanonicalMessage.user(f"question {turn} " + "word " * 20),
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"call_{turn}", tool_name="read", args={"path": f"{turn}.txt"})
            ),
            CanonicalMessage.request(
                ToolReturnPart(tool_call_id=f"call_{turn}", tool_name="read", content="file body " * 30)
            ),
            CanonicalMessage.response(TextPart(f"answer {turn}")),
        ]
    messages.append(CanonicalMessage.user("the request being sent"))
    return messages


class KeepLast(Capability):
    """Keeps the newest ``keep`` messages (more when a tool pair straddles the cut)."""

    name = "keep_last"

    def __init__(self, *, keep: int, max_messages: int | None = None) -> None:
        self.keep = keep
        self.trigger = Trigger.create(max_messages=max_messages, required=False)

    def should_compact(self, ctx: RequestContext) -> str | None:
        return self.trigger.exceeded(ctx, self.name) if self.trigger.configured else None

    async def compact(self, ctx: RequestContext, *, reason: str = "forced") -> None:
        messages = ctx.messages
        cut = safe_cutoff(messages, self.keep)
        while cut > 0 and not (messages[cut].is_request and is_safe_cutoff(messages, cut)):
            cut -= 1
        removed = [i for m in messages[:cut] for i in tool_call_ids(m)]
        ctx.replace_messages(messages[cut:], strategy=self.name, reason=reason, removed_tool_call_ids=removed)


class Warner(Capability):
    """Adds a request-scoped warning; has no compact of its own."""

    name = "warner"
    runs_after = ("keep_last",)

    def __init__(self, log: list[str] | None = None) -> None:
        self.log = [] if log is None else log

    @hookimpl
    async def before_model_request(self, ctx: RequestContext) -> None:
        self.log.append(f"warner saw {len(ctx.messages)}")
        ctx.add_request_scoped(UserPromptPart(f"{len(ctx.messages)} messages"), source=self.name)


class Breaker(Capability):
    name = "breaker"

    async def compact(self, ctx: RequestContext, *, reason: str = "forced") -> None:
        del ctx.messages[2]  # a tool return: leaves call_0 dangling


class Recorder:
    name = "recorder"

    def __init__(self) -> None:
        self.events: list[CompactionEvent] = []

    @hookimpl
    def on_compaction(self, event: CompactionEvent) -> None:
        self.events.append(event)


class StubModel:
    """Just enough of the Model protocol for compact()."""

    @property
    def model_name(self) -> str:
        return "stub-model"

    @property
    def context_window(self) -> int | None:
        return 1234

    async def request(
        self, messages: Sequence[CanonicalMessage], tools: Sequence[ToolDefinition], settings: ModelSettings
    ) -> CanonicalMessage:
        raise AssertionError("compact() must not call the model by itself")


async def test_input_is_not_mutated_and_events_are_returned() -> None:
    messages = conversation()
    before = list(messages)
    result = await compact(messages, [KeepLast(keep=5, max_messages=10)], force=False)
    assert isinstance(result, CompactionResult)
    assert messages == before
    assert all(a is b for a, b in zip(messages, before, strict=True))
    assert result.messages is not messages
    assert result.messages == messages[-5:]
    assert len(result.events) == 1
    event = result.events[0]
    assert event.strategy == "keep_last"
    assert event.reason == "17 messages > max_messages 10"
    assert event.removed_tool_call_ids == ("call_0", "call_1", "call_2")
    assert result.changed
    counter = TokenCounter()
    assert result.tokens_before == counter.count_messages(messages)
    assert result.tokens_after == counter.count_messages(result.messages)
    assert result.tokens_saved > 0
    assert check_invariants(result.messages) == []


async def test_trigger_decides_unless_forced() -> None:
    messages = conversation()
    idle = await compact(messages, [KeepLast(keep=5, max_messages=100)], force=False)
    assert idle.messages == messages
    assert idle.events == ()
    assert not idle.changed
    assert idle.tokens_before == idle.tokens_after
    forced = await compact(messages, [KeepLast(keep=5, max_messages=100)])  # forced by default
    assert forced.messages == messages[-5:]
    assert [e.reason for e in forced.events] == ["forced"]
    # a capability with no trigger at all also acts when forced
    assert (await compact(messages, [KeepLast(keep=1)], force=True)).messages == messages[-1:]


async def test_request_scoped_parts_are_returned_not_stored() -> None:
    log: list[str] = []
    result = await compact(conversation(), [Warner(log), KeepLast(keep=5)], force=True)
    # declared ordering applies: the warner runs after keep_last even though listed first,
    # and under force it runs its ordinary hook because it has no compact of its own
    assert log == ["warner saw 5"]
    assert len(result.request_scoped) == 1
    part = result.request_scoped[0]
    assert isinstance(part, UserPromptPart)
    assert part.content == "5 messages"
    assert harness_mark(part) == {"request_scoped": True, "source": "warner"}
    assert all(part not in m.parts for m in result.messages)


async def test_invariant_guard_applies_and_input_is_untouched() -> None:
    messages = conversation()
    before = list(messages)
    with pytest.raises(CapabilityError, match="dangling_call") as info:
        await compact(messages, [Breaker()], force=True)
    assert info.value.capability == "breaker"
    assert messages == before


async def test_events_are_forwarded_to_the_callers_manager() -> None:
    recorder = Recorder()
    pm = PluginManager()
    pm.register(recorder)
    result = await compact(conversation(), [KeepLast(keep=5)], force=True, plugin_manager=pm)
    assert recorder.events == list(result.events)
    assert len(recorder.events) == 1
    assert pm.capabilities == ()  # the caller's manager is not modified


async def test_capabilities_none_runs_the_managers_own_stack() -> None:
    recorder = Recorder()
    pm = PluginManager()
    pm.register(recorder)
    pm.add_capabilities([KeepLast(keep=3, max_messages=4)])
    result = await compact(conversation(), None, plugin_manager=pm)
    assert len(result.messages) == 5  # keep 3 would split call_3 from its return: the turn is kept
    assert recorder.events == list(result.events)
    with pytest.raises(HarnessError, match="needs capabilities, or a plugin_manager"):
        await compact(conversation(), None)


async def test_count_tokens_plugin_of_the_manager_is_used() -> None:
    class OnePerChar:
        @hookimpl
        def count_tokens(self, text: str) -> int | None:
            return len(text)

    pm = PluginManager()
    pm.register(OnePerChar())
    messages = [CanonicalMessage.user("x" * 1000)]
    with_plugin = await compact(messages, [], plugin_manager=pm)
    without = await compact(messages, [])
    assert with_plugin.tokens_before - without.tokens_before == 1000 - TokenCounter().count_text("x" * 1000)


async def test_context_supplies_settings_and_shares_state() -> None:
    seen: list[tuple[str | None, int | None, int]] = []

    class Spy(Capability):
        name = "spy"

        @hookimpl
        async def before_model_request(self, ctx: RequestContext) -> None:
            seen.append((ctx.model_name, ctx.context_window, ctx.requests))
            ctx.state["spy"] = "was here"

    template = RequestContext(
        messages=[CanonicalMessage.user("not used")],
        token_counter=TokenCounter(),
        model_name="template-model",
        context_window=999,
        requests=7,
    )
    result = await compact(conversation(), [Spy()], context=template)
    assert seen == [("template-model", 999, 7)]
    assert template.state == {"spy": "was here"}
    assert len(template.messages) == 1
    assert template.events == []
    assert len(result.messages) == 17
    await compact(conversation(), [Spy()], context=template, model_name="override", context_window=5)
    assert seen[-1] == ("override", 5, 7)


async def test_model_supplies_name_and_window() -> None:
    seen: list[Any] = []

    class Spy(Capability):
        name = "spy"

        @hookimpl
        async def before_model_request(self, ctx: RequestContext) -> None:
            seen.append((ctx.model, ctx.model_name, ctx.context_window))

    model = StubModel()
    await compact(conversation(), [Spy()], model=model)
    assert seen == [(model, "stub-model", 1234)]
    await compact(conversation(), [Spy()], model=model, model_name="explicit", context_window=10)
    assert seen[-1] == (model, "explicit", 10)


def test_compact_sync_outside_a_loop() -> None:
    messages = conversation()
    result = compact_sync(messages, [KeepLast(keep=5)], force=True)
    assert result.messages == messages[-5:]
    assert len(messages) == 17


async def test_compact_sync_inside_a_running_loop_is_refused() -> None:
    with pytest.raises(HarnessError, match=r"running event loop.*use `await harness\.compact"):
        compact_sync(conversation(), [KeepLast(keep=5)])


@settings(max_examples=150, deadline=None)
@given(messages=histories(min_messages=1, max_messages=30))
def test_property_forced_stack_keeps_history_valid(messages: list[CanonicalMessage]) -> None:
    before = list(messages)
    result = compact_sync(messages, [Warner(), KeepLast(keep=3)], force=True)
    assert messages == before  # input untouched
    assert check_invariants(result.messages) == []
    assert result.messages[-1] is messages[-1]  # the request being sent survives
    assert result.messages == messages[len(messages) - len(result.messages) :]  # a suffix
    assert len(result.request_scoped) == 1
    assert len(result.events) == (1 if len(result.messages) < len(messages) else 0)


def test_results_and_sessions_repr_without_their_histories() -> None:
    # CPython 3.11's asyncio.run formats its finished task, result included, when it
    # restores the SIGINT handler: a repr proportional to the history made every
    # compact_sync / run_sync pay for printing 10,000 messages.
    from harness import Agent, Session
    from harness.models.function import FunctionModel

    long_history = [
        CanonicalMessage.user(f"message {i} " * 20)
        if i % 2 == 0
        else CanonicalMessage.response(TextPart(f"answer {i} " * 20))
        for i in range(2_000)
    ]
    result = compact_sync(long_history, [])
    assert "<2000 messages>" in repr(result)
    assert len(repr(result)) < 300
    session = Session(messages=list(long_history))
    run = Agent(FunctionModel(lambda messages, info: "done")).run_sync("go", session=session)
    assert len(run.all_messages) == 2_002
    assert "all_messages=<2002 messages>" in repr(run)
    assert len(repr(run)) < 1_500


def test_compact_sync_compacts_now_by_default_as_harness_compact_does() -> None:
    # A fraction trigger needs a context window; the default (forced) needs none.
    stack = ["clear_tool_results:max_fraction=0.5,keep_pairs=1"]
    result = compact_sync(conversation(), stack)
    assert result.changed
    assert [e.reason for e in result.events] == ["forced"]
    with pytest.raises(CapabilityError, match="needs the model's context window"):
        compact_sync(conversation(), stack, force=False)
    for function in (compact, compact_sync):
        assert inspect.signature(function).parameters["force"].default is True
    from harness.cli.compact import compact as command

    (if_needed,) = [p for p in command.params if p.name == "if_needed"]
    assert isinstance(if_needed, click.Option)
    assert if_needed.is_flag
    assert not if_needed.get_default(click.Context(command))  # `harness compact` forces unless --if-needed
