"""PluginManager: capability ordering, async-aware hooks, the invariant guard, entry points."""

from __future__ import annotations

import asyncio
import importlib.metadata
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import harness.plugins as plugins_module
from harness.capability import Capability
from harness.context import CompactionEvent, RequestContext
from harness.errors import CapabilityError, CapabilityOrderError, PluginLoadError
from harness.history import check_invariants
from harness.markers import hookimpl
from harness.messages import (
    CanonicalMessage,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from harness.plugins import PluginInfo, PluginManager, capability_name, order_capabilities
from harness.testing.strategies import histories
from harness.tokens import TokenCounter, get_token_counter

FIXTURES = Path(__file__).parent / "fixtures" / "entrypoints"


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


def history() -> list[CanonicalMessage]:
    return [
        CanonicalMessage.user("first question"),
        CanonicalMessage.response(ToolCallPart("c1", "read", {"path": "a.txt"})),
        CanonicalMessage.request(ToolReturnPart("c1", "read", "contents of a")),
        CanonicalMessage.response(TextPart("first answer")),
        CanonicalMessage.user("second question"),
    ]


def make_ctx(messages: list[CanonicalMessage] | None = None) -> RequestContext:
    return RequestContext(
        messages=history() if messages is None else messages, token_counter=get_token_counter()
    )


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


class Idle:
    def __init__(self, name: str) -> None:
        self.name = name

    @hookimpl
    def before_model_request(self, ctx: RequestContext) -> None:
        del ctx


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
# names and ordering
# --------------------------------------------------------------------------------------


def test_capability_name_sources() -> None:
    class Plain:
        pass

    class Named(Capability):
        pass

    assert capability_name(Step("x")) == "x"
    assert capability_name(Plain()) == "Plain"
    assert capability_name(Named()) == "named"
    assert capability_name(plugins_module) == "harness.plugins"
    with pytest.raises(CapabilityError, match=r"pass Named\(\.\.\.\)"):
        capability_name(Named)


def test_user_order_is_kept_without_constraints() -> None:
    caps = [Step("c"), Step("a"), Step("b")]
    assert order_capabilities(caps) == caps


def test_runs_before_and_after_are_honoured_stably() -> None:
    a, b, c, d = Step("a"), Step("b", runs_before=("a",)), Step("c"), Step("d", runs_after="c")
    assert order_capabilities([a, b, c, d]) == [b, a, c, d]
    # runs_after pulls a capability later; unconstrained ones keep the user's order
    e = Step("e", runs_after=("d",))
    assert order_capabilities([e, a, c, d]) == [a, c, d, e]


def test_unknown_names_in_constraints_are_ignored() -> None:
    caps = [Step("a", runs_before=("not_installed",)), Step("b", runs_after=("also_missing",))]
    assert order_capabilities(caps) == caps


def test_contradiction_names_both_capabilities() -> None:
    caps = [Step("window", runs_before=("clear",)), Step("clear", runs_before=("window",))]
    with pytest.raises(CapabilityOrderError, match="contradict each other") as info:
        order_capabilities(caps)
    assert "'window'" in str(info.value)
    assert "'clear'" in str(info.value)
    assert "runs_before" in str(info.value)


def test_before_and_after_on_one_pair_is_a_contradiction() -> None:
    caps = [Step("a", runs_before=("b",), runs_after=("b",)), Step("b")]
    with pytest.raises(CapabilityOrderError, match=r"'a'.*'b'|'b'.*'a'"):
        order_capabilities(caps)


def test_longer_cycle_names_every_member() -> None:
    caps = [
        Step("free"),
        Step("x", runs_before=("y",)),
        Step("y", runs_before=("z",)),
        Step("z", runs_before=("x",)),
    ]
    with pytest.raises(CapabilityOrderError, match="cycle") as info:
        order_capabilities(caps)
    message = str(info.value)
    assert all(f"'{n}'" in message for n in "xyz")
    assert "'free'" not in message


def test_self_reference_is_rejected() -> None:
    with pytest.raises(CapabilityOrderError, match="names itself"):
        order_capabilities([Step("a", runs_after=("a",))])


def test_bad_constraint_type_is_rejected() -> None:
    step = Step("a")
    step.runs_before = cast(Any, 3)
    with pytest.raises(CapabilityOrderError, match="runs_before must be a sequence"):
        order_capabilities([step])


def test_duplicate_names_name_both_objects() -> None:
    first, second = Step("dup"), Step("dup")
    with pytest.raises(CapabilityOrderError, match="two capabilities are named 'dup'") as info:
        order_capabilities([first, second])
    assert "position 0" in str(info.value)
    assert "position 1" in str(info.value)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), size=st.integers(0, 8))
def test_ordering_satisfies_every_acyclic_constraint(data: st.DataObject, size: int) -> None:
    names = [f"c{i}" for i in range(size)]
    # constraints consistent with a hidden permutation can always be satisfied
    hidden = data.draw(st.permutations(names))
    rank = {n: i for i, n in enumerate(hidden)}
    pairs = [(a, b) for a in names for b in names if rank[a] < rank[b]]
    chosen = data.draw(st.lists(st.sampled_from(pairs), unique=True) if pairs else st.just([]))
    before: dict[str, list[str]] = {n: [] for n in names}
    after: dict[str, list[str]] = {n: [] for n in names}
    for a, b in chosen:
        if data.draw(st.booleans()):
            before[a].append(b)
        else:
            after[b].append(a)
    caps = [Step(n, runs_before=tuple(before[n]), runs_after=tuple(after[n])) for n in names]
    result = [c.name for c in cast(list[Step], order_capabilities(caps))]
    assert sorted(result) == sorted(names)
    position = {n: i for i, n in enumerate(result)}
    for a, b in chosen:
        assert position[a] < position[b]
    if not chosen:
        assert result == names


# --------------------------------------------------------------------------------------
# registration
# --------------------------------------------------------------------------------------


def test_add_capabilities_resolves_and_appends() -> None:
    pm = PluginManager()
    a, b = Step("a"), Step("b", runs_before=("a",))
    pm.add_capabilities([a, b])
    assert pm.capabilities == (b, a)
    c = Step("c", runs_before=("b",))
    pm.add_capabilities([c])
    assert pm.capabilities == (c, b, a)
    pm.unregister("b")
    assert pm.capabilities == (a, c)  # no constraint left: back to the user's order
    pm.unregister(a)
    assert pm.capabilities == (c,)
    with pytest.raises(PluginLoadError, match="not registered"):
        pm.unregister("b")


def test_duplicate_capability_names_across_calls_and_with_plugins() -> None:
    pm = PluginManager()
    pm.add_capabilities([Step("a")])
    with pytest.raises(CapabilityOrderError, match="'a'") as info:
        pm.add_capabilities([Step("a")])
    assert str(info.value).count("Step('a')") == 2
    pm.register(Idle("logger"))
    with pytest.raises(CapabilityOrderError, match="already registered"):
        pm.add_capabilities([Step("logger")])


def test_failed_add_registers_nothing() -> None:
    pm = PluginManager()
    with pytest.raises(CapabilityOrderError):
        pm.add_capabilities([Step("x", runs_before="y"), Step("y", runs_before="x")])
    assert pm.capabilities == ()
    assert pm.list_plugins() == []


def test_unknown_hook_is_rejected_with_a_suggestion() -> None:
    class Typo:
        @hookimpl
        def before_model_requests(self, ctx: RequestContext) -> None:
            del ctx

    pm = PluginManager()
    with pytest.raises(PluginLoadError, match="did you mean 'before_model_request'"):
        pm.register(Typo())
    assert pm.list_plugins() == []


def test_optional_unknown_hook_is_allowed() -> None:
    class Future:
        @hookimpl(optionalhook=True)
        def some_future_hook(self) -> None:
            pass

    PluginManager().register(Future())


def test_wrapper_on_awaited_hook_is_rejected() -> None:
    class Wrapping:
        @hookimpl(wrapper=True)
        def before_model_request(self, ctx: RequestContext) -> Iterator[None]:
            del ctx
            return (yield)

    with pytest.raises(PluginLoadError, match="cannot be a wrapper"):
        PluginManager().register(Wrapping())


def test_async_count_tokens_is_rejected() -> None:
    class AsyncCounter:
        @hookimpl
        async def count_tokens(self, text: str, model_name: str | None) -> int | None:
            return len(text)

    with pytest.raises(PluginLoadError, match="count_tokens must be synchronous"):
        PluginManager().register(AsyncCounter())


def test_argument_not_in_spec_is_rejected() -> None:
    class Wrong:
        @hookimpl
        def before_model_request(self, ctx: RequestContext, request: object) -> None:
            del ctx, request

    with pytest.raises(PluginLoadError, match="'Wrong' is invalid"):
        PluginManager().register(Wrong(), name="Wrong")


def test_registering_twice_is_a_load_error() -> None:
    pm = PluginManager()
    plugin = Idle("p")
    pm.register(plugin)
    with pytest.raises(PluginLoadError, match="already registered"):
        pm.register(plugin, name="other")


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


async def test_capabilities_run_before_plugins_in_registration_order() -> None:
    log: list[str] = []

    class Late(Step):
        @hookimpl(trylast=True)
        def before_model_request(self, ctx: RequestContext) -> None:
            super().before_model_request(ctx)

    class Early(Step):
        @hookimpl(tryfirst=True)
        def before_model_request(self, ctx: RequestContext) -> None:
            super().before_model_request(ctx)

    pm = PluginManager()
    pm.register(Late("late", log))
    pm.register(Step("plugin1", log))
    pm.register(AsyncStep("plugin2", log))
    pm.register(Early("early", log))
    pm.add_capabilities([Step("cap2", log, runs_after="cap1"), Step("cap1", log)])
    await pm.run_before_model_request(make_ctx())
    assert log == ["cap1", "cap2", "early", "plugin1", "plugin2", "late"]


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


def _dangling(ctx: RequestContext) -> None:
    del ctx.messages[2]  # the tool return: c1 is left unanswered


def _orphan(ctx: RequestContext) -> None:
    del ctx.messages[1]  # the tool call: its return is left orphaned


def _two_requests(ctx: RequestContext) -> None:
    ctx.messages.append(CanonicalMessage.user("injected"))


def _drops_request(ctx: RequestContext) -> None:
    del ctx.messages[-1]


def _falls_back_to_older_request(ctx: RequestContext) -> None:
    del ctx.messages[-2:]  # ends with the tool return: alternating, but not the request being sent


def _rebinds_badly(ctx: RequestContext) -> None:
    ctx.messages = ctx.messages[:2] + ctx.messages[3:]


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (_dangling, "dangling_call"),
        (_orphan, "orphan_return"),
        (_two_requests, "consecutive_requests"),
        (_drops_request, "request being sent was dropped"),
        (_falls_back_to_older_request, "request being sent was dropped"),
        (_rebinds_badly, "dangling_call"),
    ],
)
async def test_invariant_guard_restores_and_names_the_capability(edit: Any, expected: str) -> None:
    log: list[str] = []
    pm = PluginManager()
    pm.add_capabilities([Step("before", log), Editor("breaker", edit), Step("after", log)])
    ctx = make_ctx()
    original = ctx.messages
    with pytest.raises(CapabilityError, match=expected) as info:
        await pm.run_before_model_request(ctx)
    assert info.value.capability == "breaker"
    assert "restored" in str(info.value)
    # the history is what "before" left: same list object, no violation, no later step
    assert ctx.messages is original
    assert check_invariants(ctx.messages) == []
    assert tags(ctx) == ["before"]
    assert log == ["before"]


@settings(max_examples=150, deadline=None)
@given(data=st.data(), messages=histories(min_messages=1, max_messages=25))
def test_property_guard_never_lets_a_broken_history_through(
    data: st.DataObject, messages: list[CanonicalMessage]
) -> None:
    """A capability deleting a random range either leaves a valid history or is rolled back."""
    start = data.draw(st.integers(0, len(messages) - 1))
    stop = data.draw(st.integers(start + 1, len(messages)))

    def edit(ctx: RequestContext) -> None:
        del ctx.messages[start:stop]

    pm = PluginManager()
    pm.add_capabilities([Editor("deleter", edit)])
    ctx = make_ctx(list(messages))
    error: CapabilityError | None = None
    try:
        asyncio.run(pm.run_before_model_request(ctx))
    except CapabilityError as exc:
        error = exc
    if error is not None:
        assert error.capability == "deleter"
        assert ctx.messages == messages
    else:
        assert check_invariants(ctx.messages) == []
        assert ctx.messages[-1] is messages[-1]
        assert len(ctx.messages) == len(messages) - (stop - start)


async def test_guard_rolls_back_events_and_request_scoped_parts() -> None:
    def edit(ctx: RequestContext) -> None:
        ctx.add_request_scoped(UserPromptPart("warning"), source="breaker")
        ctx.replace_messages(ctx.messages[:1] + ctx.messages[2:], strategy="breaker", reason="bad")

    pm = PluginManager()
    pm.add_capabilities([Editor("breaker", edit)])
    ctx = make_ctx()
    before = list(ctx.messages)
    with pytest.raises(CapabilityError):
        await pm.run_before_model_request(ctx)
    assert ctx.messages == before
    assert ctx.events == []
    assert ctx.request_scoped == []


async def test_preexisting_violations_do_not_blame_a_capability() -> None:
    messages = history()
    del messages[2]  # c1 dangling before any capability runs
    messages[2:3] = []  # and drop the text answer so kinds still alternate
    assert check_invariants(messages)
    pm = PluginManager()
    pm.add_capabilities([Step("tagger")])
    ctx = make_ctx(messages)
    await pm.run_before_model_request(ctx)
    assert tags(ctx) == ["tagger"]


async def test_guard_checks_only_when_the_history_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = check_invariants

    def counting(messages: Any, **kwargs: Any) -> Any:
        calls.append(len(messages))
        return real(messages, **kwargs)

    monkeypatch.setattr(plugins_module, "check_invariants", counting)
    pm = PluginManager()
    pm.add_capabilities([Idle(f"idle{i}") for i in range(5)])
    await pm.run_before_model_request(make_ctx())
    assert calls == []
    pm.add_capabilities([Step("t1"), Idle("idle5"), Step("t2")])
    await pm.run_before_model_request(make_ctx())
    # one baseline check, then one check after each changing capability
    assert len(calls) == 3


async def test_content_only_edits_skip_the_full_check_but_shape_edits_do_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []
    real = check_invariants

    def counting(messages: Any, **kwargs: Any) -> Any:
        calls.append(len(messages))
        return real(messages, **kwargs)

    def clear_result(ctx: RequestContext) -> None:
        ctx.messages[2] = CanonicalMessage.request(ToolReturnPart("c1", "read", "[cleared]"))

    def blank_answer(ctx: RequestContext) -> None:
        ctx.messages[3] = CanonicalMessage.response(TextPart("   "))

    monkeypatch.setattr(plugins_module, "check_invariants", counting)
    pm = PluginManager()
    pm.add_capabilities([Editor("clearer", clear_result)])
    ctx = make_ctx()
    await pm.run_before_model_request(ctx)
    assert calls == []
    assert ctx.messages[2].parts[0] == ToolReturnPart("c1", "read", "[cleared]")

    # Same part kinds and ids, but the response became empty: that shape change is checked.
    pm = PluginManager()
    pm.add_capabilities([Editor("blanker", blank_answer)])
    ctx = make_ctx()
    with pytest.raises(CapabilityError, match="blanker"):
        await pm.run_before_model_request(ctx)
    assert calls
    assert ctx.messages == history()


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


# --------------------------------------------------------------------------------------
# tokens
# --------------------------------------------------------------------------------------


class CharCounter:
    @hookimpl
    def count_tokens(self, text: str, model_name: str | None) -> int | None:
        return None if text.startswith("tiktoken:") else len(text)


def test_token_counter_without_plugins_is_the_shared_one() -> None:
    assert PluginManager().token_counter(None) is get_token_counter(None)


def test_count_tokens_hook_overrides_the_tokenizer() -> None:
    pm = PluginManager()
    pm.register(CharCounter())
    counter = pm.token_counter("claude-sonnet-4")
    assert isinstance(counter, TokenCounter)
    assert counter.count_text("abcdefghij") == 10
    # None falls back to tiktoken
    text = "tiktoken: hello world"
    assert counter.count_text(text) == get_token_counter("claude-sonnet-4").count_text(text)
    # the counter is kept (its caches survive) until the plugins change
    assert pm.token_counter("claude-sonnet-4") is counter
    pm.register(Idle("other"))
    assert pm.token_counter("claude-sonnet-4") is not counter


def test_count_tokens_bad_answer_is_rejected() -> None:
    class Bad:
        @hookimpl
        def count_tokens(self, text: str) -> int | None:
            return -1

    pm = PluginManager()
    pm.register(Bad())
    with pytest.raises(CapabilityError, match="non-negative int"):
        pm.count_tokens("x", None)


def test_count_tokens_model_name_is_passed() -> None:
    seen: list[str | None] = []

    class Spy:
        @hookimpl
        def count_tokens(self, text: str, model_name: str | None) -> int | None:
            seen.append(model_name)
            return 1

    pm = PluginManager()
    pm.register(Spy())
    assert pm.token_counter("my-model").count_text("some text") == 1
    assert seen == ["my-model"]


# --------------------------------------------------------------------------------------
# entry points
# --------------------------------------------------------------------------------------


@pytest.fixture
def fixture_dists(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Make the fixture distributions the only ones entry-point discovery sees."""
    monkeypatch.syspath_prepend(str(FIXTURES))
    monkeypatch.delenv(plugins_module.LOAD_ENV, raising=False)
    monkeypatch.delenv(plugins_module.DISABLE_ENV, raising=False)

    def only_fixtures(*, group: str) -> importlib.metadata.EntryPoints:
        found = [
            ep
            for dist in importlib.metadata.distributions(path=[str(FIXTURES)])
            for ep in dist.entry_points
            if ep.group == group
        ]
        return importlib.metadata.EntryPoints(found)

    monkeypatch.setattr(importlib.metadata, "entry_points", only_fixtures)
    yield
    for module in list(sys.modules):
        if module.startswith(("harness_fixture_good", "harness_fixture_broken")):
            del sys.modules[module]


GOOD = ["fixture_observer", "fixture_instance", "fixture_capability", "fixture_hooked_class"]


def test_unset_allow_list_loads_everything_that_loads(
    fixture_dists: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(plugins_module.DISABLE_ENV, "harness-fixture-broken")
    pm = PluginManager()
    assert sorted(pm.load_entrypoint_plugins()) == sorted(GOOD)
    # modules and instances are registered; classes are only listed
    available = pm.available_capabilities()
    assert sorted(available) == ["fixture_capability", "fixture_hooked_class"]
    assert available["fixture_capability"].__name__ == "FixtureCapability"
    registered = {info.name for info in pm.list_plugins() if info.kind == "plugin"}
    assert registered == {"fixture_observer", "fixture_instance"}
    assert pm.capabilities == ()
    # a second call loads nothing new
    assert pm.load_entrypoint_plugins() == []


def test_list_plugins_reports_distribution_version_and_hooks(fixture_dists: None) -> None:
    pm = PluginManager()
    pm.add_capabilities([Step("mine")])
    pm.load_entrypoint_plugins(allow=["harness-fixture-good"])
    infos = {info.name: info for info in pm.list_plugins()}
    assert infos["mine"] == PluginInfo("mine", "capability", ("before_model_request",))
    assert infos["fixture_observer"] == PluginInfo(
        name="fixture_observer",
        kind="plugin",
        hooks=("on_compaction",),
        distribution="harness-fixture-good",
        version="0.3.1",
        entry_point="harness_fixture_good.observer",
    )
    assert infos["fixture_instance"].hooks == ("count_tokens",)
    capability = infos["fixture_capability"]
    assert capability.kind == "available"
    assert capability.hooks == ("before_model_request",)
    assert capability.entry_point == "harness_fixture_good.capabilities:FixtureCapability"
    assert pm.list_plugins()[0].name == "mine"


def test_registered_entry_point_plugins_work(fixture_dists: None) -> None:
    pm = PluginManager()
    pm.load_entrypoint_plugins(allow=["fixture_instance"])
    assert pm.token_counter(None).count_text("12345") == 5


def test_allow_list_by_entry_point_and_distribution_name(
    fixture_dists: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(plugins_module.LOAD_ENV, " fixture_observer , Harness_Fixture.Good ")
    assert sorted(PluginManager().load_entrypoint_plugins()) == sorted(GOOD)
    monkeypatch.setenv(plugins_module.LOAD_ENV, "fixture-observer")
    assert PluginManager().load_entrypoint_plugins() == ["fixture_observer"]


def test_empty_allow_list_loads_none(fixture_dists: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(plugins_module.LOAD_ENV, "")
    pm = PluginManager()
    assert pm.load_entrypoint_plugins() == []
    assert pm.list_plugins() == []
    assert PluginManager().load_entrypoint_plugins(allow=[]) == []


def test_block_list_wins_over_allow_list(fixture_dists: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(plugins_module.LOAD_ENV, "harness-fixture-good")
    monkeypatch.setenv(plugins_module.DISABLE_ENV, "fixture_observer,fixture_capability")
    assert sorted(PluginManager().load_entrypoint_plugins()) == ["fixture_hooked_class", "fixture_instance"]
    # explicit arguments override the environment
    loaded = PluginManager().load_entrypoint_plugins(allow=["fixture_observer"], block=[])
    assert loaded == ["fixture_observer"]


def test_failing_import_names_distribution_entry_point_cause_and_fix(fixture_dists: None) -> None:
    pm = PluginManager()
    with pytest.raises(PluginLoadError) as info:
        pm.load_entrypoint_plugins(allow=["fixture_broken"])
    message = str(info.value)
    assert "harness-fixture-broken 0.2.0" in message
    assert "fixture_broken = harness_fixture_broken.exploding" in message
    assert "ImportError: harness_fixture_broken needs the 'frobnicate' package" in message
    assert "HARNESS_DISABLE_PLUGINS=fixture_broken" in message
    assert isinstance(info.value.__cause__, ImportError)


def test_class_without_hooks_is_a_load_error(fixture_dists: None) -> None:
    with pytest.raises(PluginLoadError, match="NotAPlugin, which has no hook implementations"):
        PluginManager().load_entrypoint_plugins(allow=["fixture_plain_class"])


def test_object_without_hooks_is_a_load_error(fixture_dists: None) -> None:
    with pytest.raises(PluginLoadError, match="which has no hook implementations") as info:
        PluginManager().load_entrypoint_plugins(allow=["fixture_function"])
    assert "fixture_function = harness_fixture_broken.plain:helper" in str(info.value)


def test_invalid_entry_point_plugin_is_a_load_error(fixture_dists: None) -> None:
    with pytest.raises(PluginLoadError, match=r"failed to register.*did you mean") as info:
        PluginManager().load_entrypoint_plugins(allow=["fixture_bad_hook"])
    assert "HARNESS_DISABLE_PLUGINS=fixture_bad_hook" in str(info.value)


def test_real_entry_point_group_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """No monkeypatched lookup: the fixture dist is found on sys.path under group "harness"."""
    monkeypatch.syspath_prepend(str(FIXTURES))
    monkeypatch.setenv(plugins_module.LOAD_ENV, "fixture_hooked_class")
    monkeypatch.delenv(plugins_module.DISABLE_ENV, raising=False)
    pm = PluginManager()
    assert pm.load_entrypoint_plugins() == ["fixture_hooked_class"]
    assert list(pm.available_capabilities()) == ["fixture_hooked_class"]
    sys.modules.pop("harness_fixture_good.capabilities", None)
    sys.modules.pop("harness_fixture_good", None)
