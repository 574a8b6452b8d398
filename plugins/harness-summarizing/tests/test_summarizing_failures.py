"""Failure injection: a failing summarizer never loses history or leaks its error into the summary."""

from __future__ import annotations

import asyncio

import pytest
from harness_summarizing import SummarizingCompaction, SummaryRequest, find_summary_parts

from harness.capabilities import RequestContext
from harness.core import (
    CanonicalMessage,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    Usage,
    UserPromptPart,
    harness_mark,
)
from harness.history import check_invariants
from harness.models.function import FunctionInfo, FunctionModel
from harness.tokens import TokenCounter

ERROR_TEXT = "provider exploded: secret-error-marker"


def history(steps: int) -> list[CanonicalMessage]:
    messages = [CanonicalMessage.request(SystemPromptPart("sys"), UserPromptPart("the task"))]
    for i in range(steps):
        messages.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"c{i}", tool_name="bash", args={"command": f"cat f{i}.py"})
            )
        )
        messages.append(
            CanonicalMessage.request(
                ToolReturnPart(
                    tool_call_id=f"c{i}", tool_name="bash", content=f"<returncode>0</returncode> {i}"
                )
            )
        )
    return messages


def ctx_for(messages: list[CanonicalMessage]) -> RequestContext:
    return RequestContext(messages=messages, token_counter=TokenCounter())


def raising(request: SummaryRequest) -> str:
    raise RuntimeError(ERROR_TEXT)


async def slow(request: SummaryRequest) -> str:
    await asyncio.sleep(5)
    return "never returned in time"


def empty(request: SummaryRequest) -> str:
    return "   \n "


def short(request: SummaryRequest) -> str:
    return "ok"


FAILURES = [
    pytest.param(raising, f"summarizer raised RuntimeError: {ERROR_TEXT}", id="raises"),
    pytest.param(slow, "summarizer timed out after 0.05s", id="times-out"),
    pytest.param(empty, "summarizer returned an empty summary", id="empty"),
    pytest.param(short, "summary too short (2 < min_summary_chars 20)", id="too-short"),
]


def all_text(messages: list[CanonicalMessage]) -> str:
    return "\n".join(
        getattr(p, "content", "") if isinstance(getattr(p, "content", ""), str) else ""
        for m in messages
        for p in m.parts
    )


@pytest.mark.parametrize(("summarizer", "error"), FAILURES)
async def test_digest_fallback(summarizer: object, error: str) -> None:
    ctx = ctx_for(history(8))
    cap = SummarizingCompaction(keep_messages=3, summarizer=summarizer, timeout=0.05)  # pyright: ignore[reportArgumentType]
    await cap.compact(ctx)
    event = ctx.events[0]
    assert event.details["fallback_used"] == "digest"
    assert event.details["error"] == error
    assert event.details["summarizer"] == "digest"
    summary = ctx.messages[0].parts[-1]
    assert isinstance(summary, UserPromptPart)
    assert "Structural digest of" in summary.text
    assert ERROR_TEXT not in all_text(ctx.messages)
    assert "timed out" not in summary.text
    assert check_invariants(ctx.messages) == []
    assert len(find_summary_parts(ctx.messages)) == 1


@pytest.mark.parametrize(("summarizer", "error"), FAILURES)
async def test_no_fallback_leaves_history_unchanged(summarizer: object, error: str) -> None:
    messages = history(8)
    before = list(messages)
    ctx = ctx_for(messages)
    cap = SummarizingCompaction(keep_messages=3, summarizer=summarizer, timeout=0.05, fallback=None)  # pyright: ignore[reportArgumentType]
    await cap.compact(ctx)
    assert ctx.messages == before
    event = ctx.events[0]
    assert event.details["applied"] is False
    assert event.details["fallback_used"] is None
    assert event.details["error"] == error
    assert event.messages_before == event.messages_after == len(before)
    assert event.tokens_before == event.tokens_after


@pytest.mark.parametrize(("summarizer", "error"), FAILURES)
async def test_sliding_fallback_drops_range_keeps_task_and_old_summary(
    summarizer: object, error: str
) -> None:
    ctx = ctx_for(history(8))
    good = SummarizingCompaction(keep_messages=3)
    await good.compact(ctx)
    old_summary = ctx.messages[0].parts[-1]
    for i in range(20, 25):
        ctx.messages.append(
            CanonicalMessage.response(
                TextPart(f"t{i}"),
                ToolCallPart(tool_call_id=f"c{i}", tool_name="bash", args={"command": "ls"}),
            )
        )
        ctx.messages.append(
            CanonicalMessage.request(ToolReturnPart(tool_call_id=f"c{i}", tool_name="bash", content="x"))
        )
    cap = SummarizingCompaction(keep_messages=3, summarizer=summarizer, timeout=0.05, fallback="sliding")  # pyright: ignore[reportArgumentType]
    await cap.compact(ctx)
    event = ctx.events[-1]
    assert event.details["fallback_used"] == "sliding"
    assert event.details["error"] == error
    assert ctx.messages[0].parts[-1] is old_summary
    assert next(p.text for p in ctx.messages[0].parts if isinstance(p, UserPromptPart)) == "the task"
    # summary request + the newest 4 messages (keep 3, moved back to keep a call with its return)
    assert len(ctx.messages) == 5
    assert ctx.messages[1].kind == "response"
    assert check_invariants(ctx.messages) == []


async def test_identical_summary_counts_as_useless() -> None:
    def constant(request: SummaryRequest) -> str:
        return "the very same summary every time"

    ctx = ctx_for(history(8))
    cap = SummarizingCompaction(keep_messages=3, summarizer=constant)
    await cap.compact(ctx)
    assert ctx.events[0].details["error"] is None
    for i in range(20, 25):
        ctx.messages.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"c{i}", tool_name="bash", args={"command": "ls"})
            )
        )
        ctx.messages.append(
            CanonicalMessage.request(ToolReturnPart(tool_call_id=f"c{i}", tool_name="bash", content="x"))
        )
    await cap.compact(ctx)
    assert ctx.events[1].details["error"] == (
        "summary identical to the previous summary although new messages were summarized"
    )
    assert ctx.events[1].details["fallback_used"] == "digest"
    mark = harness_mark(ctx.messages[0].parts[-1])
    assert mark is not None
    assert mark["digest"]["earlier_summary"] == "the very same summary every time"


async def test_min_summary_chars_zero_accepts_short_summaries() -> None:
    ctx = ctx_for(history(8))
    await SummarizingCompaction(keep_messages=3, summarizer=short, min_summary_chars=0).compact(ctx)
    assert ctx.events[0].details["error"] is None
    summary = ctx.messages[0].parts[-1]
    assert isinstance(summary, UserPromptPart)
    assert summary.text.endswith("\n\nok")


async def test_model_failure_falls_back_and_charges_spent_usage() -> None:
    def blank(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        return CanonicalMessage.response(TextPart(""), usage=Usage(request_tokens=50, response_tokens=0))

    ctx = ctx_for(history(8))
    await SummarizingCompaction(keep_messages=3, model=FunctionModel(blank)).compact(ctx)
    assert ctx.usage == Usage(request_tokens=50)
    assert ctx.events[0].details["fallback_used"] == "digest"


async def test_model_raising_falls_back() -> None:
    def boom(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
        raise ConnectionError(ERROR_TEXT)

    ctx = ctx_for(history(8))
    await SummarizingCompaction(keep_messages=3, model=FunctionModel(boom)).compact(ctx)
    assert ctx.events[0].details["error"] == f"summarizer raised ConnectionError: {ERROR_TEXT}"
    assert ERROR_TEXT not in all_text(ctx.messages)


async def test_cancellation_propagates_and_history_is_untouched() -> None:
    started = asyncio.Event()

    async def hangs(request: SummaryRequest) -> str:
        started.set()
        await asyncio.sleep(60)
        return "unreachable"

    messages = history(8)
    before = list(messages)
    ctx = ctx_for(messages)
    task = asyncio.create_task(SummarizingCompaction(keep_messages=3, summarizer=hangs).compact(ctx))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ctx.messages == before
    assert ctx.events == []


async def test_failing_digest_without_other_fallback_leaves_history() -> None:
    class BrokenDigest:
        def __call__(self, request: SummaryRequest) -> str:
            raise ValueError("bad")

    ctx = ctx_for(history(8))
    before = list(ctx.messages)
    cap = SummarizingCompaction(keep_messages=3, summarizer=BrokenDigest(), fallback=None)
    await cap.compact(ctx)
    assert ctx.messages == before
    assert ctx.events[0].details["error"] == "summarizer raised ValueError: bad"


async def test_sliding_fallback_never_starts_history_with_a_response() -> None:
    messages: list[CanonicalMessage] = []
    for i in range(6):
        messages.append(CanonicalMessage.user(f"u{i}"))
        messages.append(CanonicalMessage.response(TextPart(f"a{i}")))
    messages.append(CanonicalMessage.user("last"))
    before = list(messages)
    ctx = ctx_for(messages)
    cap = SummarizingCompaction(
        keep_messages=4, summarizer=raising, fallback="sliding", preserve_first_user_message=False
    )
    await cap.compact(ctx)
    assert ctx.messages == before
    assert ctx.events[0].details["applied"] is False
