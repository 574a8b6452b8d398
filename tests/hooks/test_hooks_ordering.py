"""Capability names, ``order_capabilities`` and the order hook implementations run in."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import harness.hooks.ordering as ordering_module
from harness.capabilities import Capability, RequestContext
from harness.core import CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
from harness.errors import CapabilityError, CapabilityOrderError
from harness.hooks import PluginManager, capability_name, hookimpl, order_capabilities
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
    assert capability_name(ordering_module) == "harness.hooks.ordering"
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
# hook implementation order
# --------------------------------------------------------------------------------------


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


def test_order_hookimpls_puts_capabilities_first_then_tiers_then_registration() -> None:
    class Plain:
        @hookimpl
        def on_tool(self) -> None:
            pass

    class First:
        @hookimpl(tryfirst=True)
        def on_tool(self) -> None:
            pass

    class Last:
        @hookimpl(trylast=True)
        def on_tool(self) -> None:
            pass

    pm = PluginManager()
    for name, plugin in [("late", Last()), ("p1", Plain()), ("early", First()), ("p2", Plain())]:
        pm.register(plugin, name=name)
    pm.add_capabilities([Plain(), First()])  # named "Plain" and "First"; not registered above
    impls = pm.pluggy_manager.hook.on_tool.get_hookimpls()
    names = [impl.plugin_name for impl in impls]
    assert sorted(names) == sorted(["late", "p1", "early", "p2", "Plain", "First"])
    positions = {"First": 0, "Plain": 1}
    registration = {"late": 0, "p1": 1, "early": 2, "p2": 3}
    ordered = [impl.plugin_name for impl in ordering_module.order_hookimpls(impls, positions, registration)]
    assert ordered == ["First", "Plain", "early", "p1", "p2", "late"]
    # without positions everything is ordered as a plugin: tier first, then registration
    # rank (unrecorded ones after the recorded ones of their tier), then pluggy's order
    pluggy_order = {name: i for i, name in enumerate(names)}
    ordered = [impl.plugin_name for impl in ordering_module.order_hookimpls(impls, {}, {"p2": 0})]
    assert ordered[:2] == sorted(["early", "First"], key=pluggy_order.__getitem__)
    assert ordered[2:] == ["p2", *sorted(["p1", "Plain"], key=pluggy_order.__getitem__), "late"]
