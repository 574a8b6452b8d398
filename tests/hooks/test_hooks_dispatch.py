"""Dispatch of the context hooks: order, awaiting, errors, interrupts, observers."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from harness.capabilities import Capability, CompactionEvent, RequestContext
from harness.core import CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
from harness.errors import CapabilityError
from harness.hooks import PluginManager, hookimpl
from harness.tokens import TokenCounter

# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


def history() -> list[CanonicalMessage]:
    return [
        CanonicalMessage.user("first question"),
        CanonicalMessage.response(ToolCallPart(tool_call_id="c1", tool_name="read", args={"path": "a.txt"})),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="c1", tool_name="read", content="contents of a")
        ),
        CanonicalMessage.response(TextPart("first answer")),
        CanonicalMessage.user("second question"),
    ]


def make_ctx(messages: list[CanonicalMessage] | None = None) -> RequestContext:
    return RequestContext(messages=history() if messages is None else messages, token_counter=TokenCounter())


def tag_last_request(ctx: RequestContext, tag: str) -> None:
    """Append a user-prompt part to the request being sent (keeps every invariant)."""
    last = ctx.messages[-1]
    ctx.messages[-1] = last.replace(parts=(*last.parts, UserPromptPart(tag)))


def tags(ctx: RequestContext) -> list[str]:
    return [p.text for p in ctx.messages[-1].parts[1:] if isinstance(p, UserPromptPart)]


class StepBase:
    """Name, log and ordering declarations of the test capabilities."""

    def __init__(
        self,
        name: str,
        log: list[str] | None = None,
        *,
        runs_before: tuple[str, ...] | str = (),
        runs_after: tuple[str, ...] | str = (),
    ) -> None:
        self.name = name
        self.log = [] if log is None else log
        self.runs_before = runs_before
        self.runs_after = runs_after

    def __repr__(self) -> str:
        return f"Step({self.name!r})"


class Step(StepBase):
    """A capability that tags the request being sent and logs its name."""

    @hookimpl
    def before_model_request(self, ctx: RequestContext) -> None:
        self.log.append(self.name)
        tag_last_request(ctx, self.name)


class AsyncStep(StepBase):
    """The same, as an ``async def`` implementation."""

    @hookimpl
    async def before_model_request(self, ctx: RequestContext) -> None:
        await asyncio.sleep(0)
        self.log.append(self.name)
        tag_last_request(ctx, self.name)


class Editor:
    """A capability applying ``edit`` to the history."""

    def __init__(self, name: str, edit: Any) -> None:
        self.name = name
        self.edit = edit

    @hookimpl
    async def before_model_request(self, ctx: RequestContext) -> None:
        self.edit(ctx)


class DropOldestTurn(Capability):
    """Drops the first tool round trip (call + return) through replace_messages."""

    name = "drop_oldest_turn"

    async def compact(self, ctx: RequestContext, *, reason: str = "forced") -> None:
        messages = ctx.messages
        new = [messages[0], *messages[3:]]  # user, text answer, user: still alternating
        ctx.replace_messages(new, strategy=self.name, reason=reason, removed_tool_call_ids=["c1"])


# --------------------------------------------------------------------------------------
# before_model_request
# --------------------------------------------------------------------------------------


async def test_sync_and_async_impls_run_in_user_order_and_chain() -> None:
    log: list[str] = []
    pm = PluginManager()
    pm.add_capabilities([AsyncStep("one", log), Step("two", log), AsyncStep("three", log)])
    ctx = make_ctx()
    await pm.run_before_model_request(ctx)
    assert log == ["one", "two", "three"]
    assert tags(ctx) == ["one", "two", "three"]


async def test_impl_may_take_no_arguments() -> None:
    calls: list[str] = []

    class NoArgs:
        @hookimpl
        def before_model_request(self) -> None:
            calls.append("called")

    pm = PluginManager()
    pm.add_capabilities([NoArgs()])
    await pm.run_before_model_request(make_ctx())
    assert calls == ["called"]


async def test_capability_raising_is_wrapped_and_history_restored() -> None:
    def edit(ctx: RequestContext) -> None:
        ctx.messages.clear()
        raise ValueError("boom")

    pm = PluginManager()
    pm.add_capabilities([Step("ok"), Editor("exploder", edit)])
    ctx = make_ctx()
    with pytest.raises(CapabilityError, match=r"exploder.*ValueError: boom") as info:
        await pm.run_before_model_request(ctx)
    assert info.value.capability == "exploder"
    assert isinstance(info.value.__cause__, ValueError)
    assert len(ctx.messages) == 5
    assert tags(ctx) == ["ok"]


async def test_capability_error_from_a_capability_is_not_double_wrapped() -> None:
    def edit(ctx: RequestContext) -> None:
        raise CapabilityError("own", "configuration problem")

    pm = PluginManager()
    pm.add_capabilities([Editor("own", edit)])
    with pytest.raises(CapabilityError) as info:
        await pm.run_before_model_request(make_ctx())
    assert str(info.value) == "capability 'own': configuration problem"


@pytest.mark.parametrize("exc_type", [asyncio.CancelledError, KeyboardInterrupt])
async def test_interrupts_propagate_untouched(exc_type: type[BaseException]) -> None:
    error = exc_type()

    def edit(ctx: RequestContext) -> None:
        ctx.messages.clear()
        raise error

    pm = PluginManager()
    pm.add_capabilities([Editor("slow", edit)])
    ctx = make_ctx()
    with pytest.raises(exc_type) as info:
        await pm.run_before_model_request(ctx)
    assert info.value is error
    assert len(ctx.messages) == 5


async def test_returning_a_value_is_an_error() -> None:
    class Porting:
        name = "ported"

        @hookimpl
        async def before_model_request(self, ctx: RequestContext) -> RequestContext:
            return ctx

    pm = PluginManager()
    pm.add_capabilities([Porting()])
    with pytest.raises(
        CapabilityError, match=r"returned RequestContext; it must edit ctx\.messages in place"
    ):
        await pm.run_before_model_request(make_ctx())


async def test_rebinding_ctx_messages_updates_the_original_list() -> None:
    def edit(ctx: RequestContext) -> None:
        ctx.messages = [ctx.messages[0], *ctx.messages[3:]]

    pm = PluginManager()
    pm.add_capabilities([Editor("rebinder", edit)])
    ctx = make_ctx()
    original = ctx.messages
    await pm.run_before_model_request(ctx)
    assert ctx.messages is original
    assert len(original) == 3


# --------------------------------------------------------------------------------------
# observers
# --------------------------------------------------------------------------------------


class ObserverBase:
    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log
        self.events: list[CompactionEvent] = []

    def record(self, event: CompactionEvent) -> None:
        self.events.append(event)
        self.log.append(f"{self.name}:{event.strategy}")


class Observer(ObserverBase):
    @hookimpl
    def on_compaction(self, ctx: RequestContext, event: CompactionEvent) -> None:
        del ctx
        self.record(event)


class AsyncObserver(ObserverBase):
    @hookimpl
    async def on_compaction(self, ctx: RequestContext, event: CompactionEvent) -> None:
        del ctx
        await asyncio.sleep(0)
        self.record(event)


async def test_on_compaction_reaches_sync_and_async_observers() -> None:
    log: list[str] = []
    sync_observer, async_observer = Observer("sync", log), AsyncObserver("async", log)
    pm = PluginManager()
    pm.register(async_observer)
    pm.register(sync_observer)
    pm.add_capabilities([DropOldestTurn(), Step("next", log)])
    ctx = make_ctx()
    previous: list[CompactionEvent] = []
    ctx.on_event = lambda _ctx, event: previous.append(event)
    await pm.run_before_model_request(ctx)
    assert len(ctx.events) == 1
    event = ctx.events[0]
    assert event.strategy == "drop_oldest_turn"
    assert event.removed_tool_call_ids == ("c1",)
    assert sync_observer.events == [event]
    assert async_observer.events == [event]
    # the async observer is awaited right after the capability's step, before "next"
    assert log == ["sync:drop_oldest_turn", "async:drop_oldest_turn", "next"]
    # a sink the caller installed still receives the event and is put back afterwards
    assert previous == [event]
    assert ctx.on_event is not None
    ctx.on_event(ctx, event)
    assert previous == [event, event]


async def test_failing_observer_is_named() -> None:
    class Broken:
        name = "broken_logger"

        @hookimpl
        async def on_compaction(self, ctx: RequestContext, event: CompactionEvent) -> None:
            raise RuntimeError("disk full")

    pm = PluginManager()
    pm.register(Broken())
    pm.add_capabilities([DropOldestTurn()])
    with pytest.raises(CapabilityError, match=r"'broken_logger'.*RuntimeError: disk full") as info:
        await pm.run_before_model_request(make_ctx())
    assert info.value.capability == "broken_logger"


async def test_failing_sync_observer_inside_report_is_named() -> None:
    class Broken:
        name = "sync_broken"

        @hookimpl
        def on_compaction(self, event: CompactionEvent) -> None:
            raise RuntimeError("nope")

    pm = PluginManager()
    pm.register(Broken())
    pm.add_capabilities([DropOldestTurn()])
    ctx = make_ctx()
    with pytest.raises(CapabilityError) as info:
        await pm.run_before_model_request(ctx)
    assert info.value.capability == "sync_broken"
    assert len(ctx.messages) == 5


async def test_notify_hooks_await_in_order_and_name_failures() -> None:
    log: list[str] = []

    class Watcher:
        def __init__(self, name: str) -> None:
            self.name = name

        @hookimpl
        async def after_node(self, ctx: Any, node: Any) -> None:
            await asyncio.sleep(0)
            log.append(f"{self.name}:node:{node}")

        @hookimpl
        def on_tool(self, event: Any) -> None:
            log.append(f"{self.name}:tool:{event}")

        @hookimpl
        async def on_compaction(self, event: Any) -> None:
            log.append(f"{self.name}:compaction:{event}")

    pm = PluginManager()
    pm.register(Watcher("w1"))
    pm.register(Watcher("w2"))
    ctx = cast(Any, object())
    await pm.notify_after_node(ctx, cast(Any, "N"))
    await pm.notify_tool(ctx, cast(Any, "T"))
    await pm.notify_compaction(ctx, cast(Any, "E"))
    assert log == [
        "w1:node:N",
        "w2:node:N",
        "w1:tool:T",
        "w2:tool:T",
        "w1:compaction:E",
        "w2:compaction:E",
    ]

    class Failing:
        name = "failing"

        @hookimpl
        def on_tool(self, event: Any) -> None:
            raise KeyError(event)

    pm.register(Failing())
    with pytest.raises(CapabilityError, match="'failing': on_tool observer raised KeyError") as info:
        await pm.notify_tool(ctx, cast(Any, "T"))
    assert isinstance(info.value.__cause__, KeyError)


async def test_notify_propagates_cancellation() -> None:
    class Cancelling:
        @hookimpl
        async def after_node(self) -> None:
            raise asyncio.CancelledError

    pm = PluginManager()
    pm.register(Cancelling())
    with pytest.raises(asyncio.CancelledError):
        await pm.notify_after_node(cast(Any, None), cast(Any, None))
