"""TieredCompaction: escalation order, early stop, failures, invariant guard, events."""

from __future__ import annotations

import asyncio

import pytest
from harness_tiered import TieredCompaction

from harness.capabilities import RequestContext
from harness.core import (
    CanonicalMessage,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    Usage,
    UserPromptPart,
)
from harness.history import check_invariants, safe_cutoff
from harness.tokens import TokenCounter


def history(steps: int, size: int = 400) -> list[CanonicalMessage]:
    messages = [CanonicalMessage.request(SystemPromptPart("sys"), UserPromptPart("the task"))]
    for i in range(steps):
        messages.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"c{i}", tool_name="read_file", args={"path": f"f{i % 3}.py"})
            )
        )
        messages.append(
            CanonicalMessage.request(
                ToolReturnPart(
                    tool_call_id=f"c{i}", tool_name="read_file", content=f"file {i} " + "word " * size
                )
            )
        )
    return messages


def ctx_for(messages: list[CanonicalMessage], **kwargs: object) -> RequestContext:
    return RequestContext(messages=messages, token_counter=TokenCounter(), **kwargs)  # pyright: ignore[reportArgumentType]


class Recorder:
    """Base tier recording calls."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log
        self.reasons: list[str] = []

    async def compact(self, ctx: RequestContext, *, reason: str = "forced") -> None:
        self.log.append(self.name)
        self.reasons.append(reason)
        await self.act(ctx, reason)

    async def act(self, ctx: RequestContext, reason: str) -> None:
        return None


class DropOldest(Recorder):
    def __init__(self, name: str, log: list[str], keep: int) -> None:
        super().__init__(name, log)
        self.keep = keep

    async def act(self, ctx: RequestContext, reason: str) -> None:
        cut = safe_cutoff(ctx.messages, self.keep)
        ctx.replace_messages(
            [ctx.messages[0], *ctx.messages[cut:]] if cut > 1 else ctx.messages,
            strategy=self.name,
            reason=reason,
            removed_tool_call_ids=["x"],
        )


class Raises(Recorder):
    async def act(self, ctx: RequestContext, reason: str) -> None:
        ctx.messages.pop()  # a partial edit, then failure
        raise RuntimeError("tier failed")


class BreaksPairs(Recorder):
    async def act(self, ctx: RequestContext, reason: str) -> None:
        del ctx.messages[1]  # drops a call, orphaning its return


async def test_under_target_runs_nothing() -> None:
    log: list[str] = []
    ctx = ctx_for(history(2, size=5))
    await TieredCompaction([DropOldest("a", log, 1)], target_tokens=10_000).compact(ctx)
    assert log == []
    assert ctx.events == []


async def test_stops_after_first_tier_that_reaches_target() -> None:
    log: list[str] = []
    ctx = ctx_for(history(20))
    total = ctx.count_tokens()
    tiers = [Recorder("idle", log), DropOldest("cut", log, 5), Recorder("never", log)]
    await TieredCompaction(tiers, target_tokens=total // 2).compact(ctx, reason="why")
    assert log == ["idle", "cut"]
    assert tiers[0].reasons == ["tiered: why"]
    event = ctx.events[-1]
    assert event.strategy == "tiered"
    assert event.reason == "why"
    assert event.details["reached"] is True
    assert event.details["target"] == total // 2
    assert event.details["tiers_run"] == ["idle", "cut"]
    runs = event.details["tiers"]
    assert runs[0]["changed"] is False
    assert runs[0]["tokens_after"] == total
    assert runs[1]["changed"] is True
    assert runs[1]["tokens_after"] == event.tokens_after <= total // 2
    assert event.tokens_before == total
    assert event.removed_tool_call_ids == ("x",)
    # the tier's own event was reported too, before the escalation's
    assert [e.strategy for e in ctx.events] == ["cut", "tiered"]


async def test_full_escalation_reports_not_reached() -> None:
    log: list[str] = []
    ctx = ctx_for(history(10))
    await TieredCompaction([Recorder("a", log), Recorder("b", log)], target_tokens=5).compact(ctx)
    assert log == ["a", "b"]
    assert ctx.events[-1].details["reached"] is False


async def test_raising_tier_is_undone_and_skipped() -> None:
    log: list[str] = []
    messages = history(20)
    before = list(messages)
    ctx = ctx_for(messages)
    tiers = [Raises("bad", log), DropOldest("good", log, 3)]
    await TieredCompaction(tiers, target_tokens=ctx.count_tokens() // 2).compact(ctx)
    assert log == ["bad", "good"]
    runs = ctx.events[-1].details["tiers"]
    assert runs[0]["error"] == "RuntimeError: tier failed"
    assert runs[0]["reverted"] is True
    assert runs[0]["tokens_after"] == ctx.token_counter.count_messages(before)
    assert ctx.events[-1].details["reached"] is True
    assert check_invariants(ctx.messages) == []


async def test_tier_breaking_invariants_is_reverted() -> None:
    log: list[str] = []
    messages = history(10)
    before = list(messages)
    ctx = ctx_for(messages)
    await TieredCompaction([BreaksPairs("breaker", log)], target_tokens=5).compact(ctx)
    assert ctx.messages == before
    run = ctx.events[-1].details["tiers"][0]
    assert run["reverted"] is True
    assert run["changed"] is False
    assert run["error"].startswith("left the history invalid: ")
    assert "tool-return 'c0' answers no tool call" in run["error"]


async def test_pre_existing_violations_do_not_revert_a_tier() -> None:
    messages = history(10)
    messages.insert(1, CanonicalMessage.request(UserPromptPart("two requests in a row")))
    log: list[str] = []
    ctx = ctx_for(messages)
    await TieredCompaction([DropOldest("cut", log, 3)], target_tokens=5).compact(ctx)
    assert ctx.events[-1].details["tiers"][0]["changed"] is True


async def test_cancellation_propagates_and_restores() -> None:
    started = asyncio.Event()

    class Hangs(Recorder):
        async def act(self, ctx: RequestContext, reason: str) -> None:
            ctx.messages.pop()
            started.set()
            await asyncio.sleep(60)

    messages = history(10)
    before = list(messages)
    ctx = ctx_for(messages)
    task = asyncio.create_task(TieredCompaction([Hangs("h", [])], target_tokens=5).compact(ctx))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ctx.messages == before
    assert ctx.events == []


async def test_sync_compact_tiers_are_accepted() -> None:
    calls: list[str] = []

    class SyncTier:
        def compact(self, ctx: RequestContext, *, reason: str = "forced") -> None:
            calls.append(reason)

    ctx = ctx_for(history(5))
    await TieredCompaction([SyncTier()], target_tokens=5).compact(ctx)
    assert calls == ["tiered: forced"]
    assert ctx.events[-1].details["tiers_run"] == ["SyncTier"]


async def test_hook_uses_target_as_default_trigger() -> None:
    log: list[str] = []
    ctx = ctx_for(history(20))
    tiered = TieredCompaction(
        [DropOldest("cut", log, 3)], target_fraction=0.5, context_window=ctx.count_tokens()
    )
    await tiered.before_model_request(ctx)
    assert log == ["cut"]
    assert ctx.events[-1].reason.endswith(f"> target {tiered.target(ctx)}")
    log.clear()
    await tiered.before_model_request(ctx)  # now under target: idle
    assert log == []


def anchored_history() -> list[CanonicalMessage]:
    """A history whose newest response reports the provider's figure: 100K tokens."""
    messages = history(6)
    messages[-2] = messages[-2].replace(usage=Usage(request_tokens=100_000, response_tokens=10))
    return messages


async def test_a_tier_that_changes_nothing_or_fails_is_measured_with_the_anchor() -> None:
    """A no-op or undone tier leaves the provider's 100K figure in force: not reached, next tier runs."""
    ctx = ctx_for(anchored_history())
    anchored = ctx.context_tokens()
    assert anchored > 100_000 > 60_000 > ctx.count_tokens()
    log: list[str] = []
    tiers = [Recorder("noop", log), Raises("fails", log), Recorder("noop again", log)]
    await TieredCompaction(tiers, target_tokens=60_000).compact(ctx)
    event = ctx.events[-1]
    assert log == ["noop", "fails", "noop again"]
    assert [run["tokens_after"] for run in event.details["tiers"]] == [anchored] * 3
    assert event.details["reached"] is False
    assert event.tokens_after == anchored


async def test_after_a_tier_that_edits_before_the_anchor_the_exact_count_is_used() -> None:
    ctx = ctx_for(anchored_history())
    anchored = ctx.context_tokens()
    log: list[str] = []
    tiers = [Recorder("noop", log), DropOldest("cut", log, 2)]
    await TieredCompaction(tiers, target_tokens=60_000).compact(ctx)
    event = ctx.events[-1]
    assert log == ["noop", "cut"]
    assert event.details["tiers"][0]["tokens_after"] == anchored
    assert event.details["tiers"][1]["tokens_after"] == ctx.count_tokens()  # the anchor is no longer trusted
    assert event.details["reached"] is True


async def test_final_response_history_is_supported() -> None:
    messages = history(6)
    messages.append(CanonicalMessage.response(TextPart("done")))
    ctx = ctx_for(messages)
    await TieredCompaction([DropOldest("cut", [], 2)], target_tokens=5).compact(ctx)
    assert check_invariants(ctx.messages) == []
