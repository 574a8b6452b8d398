"""The invariant guard: ``harness.history.guard`` alone and around every ``before_model_request``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import harness.history.guard as guard_module
from harness.capabilities import RequestContext
from harness.core import CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
from harness.errors import CapabilityError
from harness.history import Violation, check_invariants
from harness.history.guard import EditCheck, check_edit, describe_violation, guard_edit
from harness.hooks import PluginManager, hookimpl
from harness.testing.strategies import histories
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


# --------------------------------------------------------------------------------------
# the guard around before_model_request
# --------------------------------------------------------------------------------------


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

    monkeypatch.setattr(guard_module, "check_invariants", counting)
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
        ctx.messages[2] = CanonicalMessage.request(
            ToolReturnPart(tool_call_id="c1", tool_name="read", content="[cleared]")
        )

    def blank_answer(ctx: RequestContext) -> None:
        ctx.messages[3] = CanonicalMessage.response(TextPart("   "))

    monkeypatch.setattr(guard_module, "check_invariants", counting)
    pm = PluginManager()
    pm.add_capabilities([Editor("clearer", clear_result)])
    ctx = make_ctx()
    await pm.run_before_model_request(ctx)
    assert calls == []
    assert ctx.messages[2].parts[0] == ToolReturnPart(
        tool_call_id="c1", tool_name="read", content="[cleared]"
    )

    # Same part kinds and ids, but the response became empty: that shape change is checked.
    pm = PluginManager()
    pm.add_capabilities([Editor("blanker", blank_answer)])
    ctx = make_ctx()
    with pytest.raises(CapabilityError, match="blanker"):
        await pm.run_before_model_request(ctx)
    assert calls
    assert ctx.messages == history()


# --------------------------------------------------------------------------------------
# harness.history.guard on its own
# --------------------------------------------------------------------------------------


def test_check_edit_of_an_unchanged_history_checks_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(guard_module, "check_invariants", lambda messages, **_: calls.append(1) or [])
    before = history()
    result = check_edit(before, list(before))
    assert result == EditCheck()
    assert result.ok
    assert result.problems == ()
    assert result.violations is None
    assert calls == []


def test_check_edit_skips_content_only_edits() -> None:
    before = history()
    after = list(before)
    after[2] = CanonicalMessage.request(
        ToolReturnPart(tool_call_id="c1", tool_name="read", content="[cleared]")
    )
    assert check_edit(before, after) == EditCheck()


def test_check_edit_reports_new_violations_and_the_baseline() -> None:
    before = history()
    after = [*before[:2], before[4]]  # the tool return and the answer are gone: c1 dangles
    result = check_edit(before, after)
    assert not result.ok
    assert not result.dropped_request
    assert [v.kind for v in result.introduced] == ["dangling_call"]
    assert result.introduced[0].tool_call_id == "c1"
    assert result.violations == tuple(check_invariants(after))
    assert result.problems == (describe_violation(result.introduced[0]),)
    # the inputs are never changed
    assert before == history()
    assert len(after) == 3


def test_check_edit_does_not_blame_preexisting_violations() -> None:
    broken = [*history()[:2], history()[4]]  # c1 dangles
    after = list(broken)
    after[-1] = CanonicalMessage.user("second question, edited")
    after.insert(0, CanonicalMessage.user("zeroth"))
    after.insert(1, CanonicalMessage.response(TextPart("ok")))
    result = check_edit(broken, after)
    assert result.ok
    assert result.introduced == ()
    assert result.violations == tuple(check_invariants(after))
    assert [v.kind for v in result.violations or ()] == ["dangling_call"]


def test_check_edit_uses_the_baseline_it_is_given() -> None:
    before = history()
    after = [*before[:1], *before[3:]]
    fake = Violation("orphan_return", 0, 0, "c9", "made up")
    result = check_edit(before, after, baseline=[fake])
    assert result.ok  # the tool round trip left as a whole: nothing new
    assert result.violations == ()
    # a baseline claiming the violation already existed hides it
    dangling = [*before[:2], before[4]]
    known = check_invariants(dangling)
    assert check_edit(before, dangling, baseline=known).ok


@pytest.mark.parametrize(
    "after",
    [
        pytest.param(lambda m: m[:-1], id="ends-with-response"),
        pytest.param(lambda m: [], id="empty"),
        pytest.param(lambda m: m[:-2], id="older-request"),
    ],
)
def test_check_edit_reports_a_dropped_request(after: Any) -> None:
    before = history()
    result = check_edit(before, after(before))
    assert result.dropped_request
    assert not result.ok
    assert result.problems[0] == "the request being sent was dropped (the history must end with it)"


def test_an_edited_copy_of_the_last_request_is_not_a_drop() -> None:
    before = history()
    after = [*before[:-1], CanonicalMessage.user("second question, rephrased")]
    assert check_edit(before, after) == EditCheck()  # same shape: not even checked
    after.append(CanonicalMessage.response(TextPart("x")))
    after.append(CanonicalMessage.user("third"))
    assert not check_edit(before, after).dropped_request


def test_no_request_to_drop_when_the_history_ends_with_a_response() -> None:
    before = history()[:-1]
    assert not check_edit(before, before[:-2]).dropped_request


def test_guard_edit_raises_naming_the_capability() -> None:
    before = history()
    after = [*before[:2], before[4]]
    with pytest.raises(CapabilityError) as info:
        guard_edit(before, after, "trimmer", hook_name="compact")
    assert info.value.capability == "trimmer"
    message = str(info.value)
    assert message.startswith("capability 'trimmer': compact left a history the provider would reject: ")
    assert "dangling_call at message 1, part 0, tool call 'c1'" in message
    assert message.endswith("the history was restored to what it was before this capability ran")


def test_guard_edit_lists_three_problems_and_counts_the_rest() -> None:
    before = history()
    after = [before[0], before[1], before[1], before[1], before[1]]
    with pytest.raises(CapabilityError, match=r"\(and \d+ more\)") as info:
        guard_edit(before, after, "duplicator")
    assert info.value.capability == "duplicator"
    assert str(info.value).count(" at message ") + str(info.value).count("was dropped") == 3


def test_guard_edit_returns_the_next_baseline() -> None:
    before = history()
    same_shape = list(before)
    same_shape[2] = CanonicalMessage.request(
        ToolReturnPart(tool_call_id="c1", tool_name="read", content="[cleared]")
    )
    sentinel: list[Violation] = []
    assert guard_edit(before, same_shape, "clearer", baseline=sentinel) is sentinel
    assert guard_edit(before, same_shape, "clearer") is None
    shorter = [before[0], *before[3:]]
    assert guard_edit(before, shorter, "dropper") == ()


def test_describe_violation_without_part_or_call() -> None:
    violation = Violation("consecutive_requests", 4, None, None, "two requests in a row")
    assert describe_violation(violation) == "consecutive_requests at message 4: two requests in a row"
