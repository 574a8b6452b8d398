"""When and how LimitWarner warns, and what it does to the stored history."""

from __future__ import annotations

from typing import Any

import harness_limit_warner._warner as warner_module
import pytest
from harness_limit_warner import LimitStatus, LimitWarner, is_warning_part

from harness.capabilities import RequestContext
from harness.core import (
    CanonicalMessage,
    Part,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    Usage,
    UserPromptPart,
    harness_mark,
    with_harness_mark,
)
from harness.errors import CapabilityError
from harness.run import compact, compact_sync
from harness.tokens import TokenCounter


def _history(turns: int = 2) -> list[CanonicalMessage]:
    messages = [CanonicalMessage.user("Fix the bug.")]
    for i in range(turns):
        messages.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"c{i}", tool_name="bash", args={"cmd": "ls"})
            )
        )
        messages.append(
            CanonicalMessage.request(
                ToolReturnPart(tool_call_id=f"c{i}", tool_name="bash", content="a.py b.py")
            )
        )
    return messages


def _ctx(messages: list[CanonicalMessage] | None = None, **fields: Any) -> RequestContext:
    return RequestContext(
        messages=list(_history() if messages is None else messages),
        token_counter=TokenCounter(),
        **fields,
    )


def _stale(text: str = "[LimitWarner]\nURGENT: old") -> UserPromptPart:
    return with_harness_mark(UserPromptPart(text), request_scoped=True, source="limit_warner")


async def _warning(warner: LimitWarner, ctx: RequestContext) -> str | None:
    await warner.before_model_request(ctx)
    parts = [p for p in ctx.request_scoped if is_warning_part(p)]
    assert len(parts) <= 1
    if not parts:
        return None
    part = parts[0]
    assert isinstance(part, (UserPromptPart, SystemPromptPart))
    return part.content if isinstance(part.content, str) else None


# -- thresholds and severity -----------------------------------------------------------


async def test_below_the_threshold_nothing_happens() -> None:
    ctx = _ctx(requests=13)
    assert await _warning(LimitWarner(max_iterations=20), ctx) is None
    assert ctx.request_scoped == []
    assert ctx.events == []


async def test_urgent_iteration_warning_text() -> None:
    ctx = _ctx(requests=15)
    text = await _warning(LimitWarner(max_iterations=20), ctx)
    assert text == (
        "[LimitWarner]\n"
        "URGENT: Configured run limits are approaching.\n"
        "- Iterations: 15/20 requests used (75%); 5 remaining.\n"
        "Complete the current task efficiently and avoid unnecessary tool calls."
    )


async def test_threshold_is_inclusive() -> None:
    assert await _warning(LimitWarner(max_iterations=10), _ctx(requests=7)) is not None
    assert await _warning(LimitWarner(max_iterations=10), _ctx(requests=6)) is None
    assert await _warning(LimitWarner(max_iterations=10, warning_threshold=0.5), _ctx(requests=5)) is not None


@pytest.mark.parametrize(("requests", "severity"), [(16, "URGENT"), (17, "CRITICAL"), (20, "CRITICAL")])
async def test_iterations_turn_critical_at_the_remaining_count(requests: int, severity: str) -> None:
    text = await _warning(LimitWarner(max_iterations=20), _ctx(requests=requests))
    assert text is not None
    assert text.splitlines()[1].startswith(f"{severity}: ")
    closing = "immediately" if severity == "CRITICAL" else "efficiently"
    assert text.endswith(f"Complete the current task {closing} and avoid unnecessary tool calls.")


async def test_critical_remaining_iterations_is_configurable() -> None:
    text = await _warning(LimitWarner(max_iterations=20, critical_remaining_iterations=0), _ctx(requests=19))
    assert text is not None
    assert "URGENT" in text
    text = await _warning(LimitWarner(max_iterations=20, critical_remaining_iterations=0), _ctx(requests=20))
    assert text is not None
    assert "CRITICAL" in text
    assert "20/20 requests used (100%); 0 remaining." in text


async def test_the_agents_iteration_limit_is_used_unless_one_is_given() -> None:
    text = await _warning(LimitWarner(warn_on=["iterations"]), _ctx(requests=8, max_iterations=10))
    assert text is not None
    assert "8/10 requests used (80%); 2 remaining." in text
    # explicit wins over the agent's limit
    assert await _warning(LimitWarner(max_iterations=100), _ctx(requests=8, max_iterations=10)) is None
    # default warn_on includes the agent's limit too
    text = await _warning(LimitWarner(max_total_tokens=1_000_000), _ctx(requests=8, max_iterations=10))
    assert text is not None
    assert "Iterations: 8/10" in text
    # without any iteration limit, nothing to say
    assert await _warning(LimitWarner(warn_on=["iterations"]), _ctx(requests=99)) is None


async def test_context_warning_uses_the_cached_context_count() -> None:
    ctx = _ctx()
    used = ctx.context_tokens()
    text = await _warning(LimitWarner(max_context_tokens=used), ctx)
    assert text is not None
    assert f"- Context window: {used:,}/{used:,} tokens used (100%)." in text
    assert "CRITICAL" in text  # a reached non-iteration limit is critical
    ctx = _ctx()
    limit = int(used / 0.8)
    text = await _warning(LimitWarner(max_context_tokens=limit), ctx)
    assert text is not None
    assert "URGENT" in text
    assert await _warning(LimitWarner(max_context_tokens=used * 2), _ctx()) is None


async def test_context_fraction_of_the_models_or_the_overridden_window() -> None:
    used = _ctx().context_tokens()
    text = await _warning(LimitWarner(max_context_fraction=0.5), _ctx(context_window=used * 2))
    assert text is not None
    assert f"{used:,}/{used:,} tokens" in text
    # the override wins over the model's window
    assert (
        await _warning(
            LimitWarner(max_context_fraction=0.5, context_window=used * 10), _ctx(context_window=used)
        )
        is None
    )


async def test_context_fraction_without_a_window_names_the_fix() -> None:
    with pytest.raises(CapabilityError, match=r"pass context_window=\.\.\. to LimitWarner"):
        await LimitWarner(max_context_fraction=0.5).before_model_request(_ctx())


async def test_total_tokens_warning() -> None:
    ctx = _ctx(usage=Usage(request_tokens=700, response_tokens=100))
    text = await _warning(LimitWarner(max_total_tokens=1000), ctx)
    assert text is not None
    assert "- Total tokens: 800/1,000 tokens used (80%)." in text
    assert "URGENT" in text
    ctx = _ctx(usage=Usage(request_tokens=900, response_tokens=200))
    text = await _warning(LimitWarner(max_total_tokens=1000), ctx)
    assert text is not None
    assert "CRITICAL" in text


async def test_lines_in_fixed_order_and_only_for_near_limits() -> None:
    ctx = _ctx(requests=18, usage=Usage(request_tokens=9_000, response_tokens=0))
    used = ctx.context_tokens()
    warner = LimitWarner(max_iterations=20, max_context_tokens=used * 10, max_total_tokens=10_000)
    text = await _warning(warner, ctx)
    assert text is not None
    lines = text.splitlines()
    assert lines[2].startswith("- Iterations:")
    assert lines[3].startswith("- Total tokens:")
    assert len(lines) == 5  # context is far from its limit: not listed
    ctx = _ctx(requests=18, usage=Usage(request_tokens=9_000, response_tokens=0))
    text = await _warning(
        LimitWarner(max_iterations=20, max_context_tokens=used, max_total_tokens=10_000), ctx
    )
    assert text is not None
    assert [line.split(":")[0] for line in text.splitlines()[2:5]] == [
        "- Iterations",
        "- Context window",
        "- Total tokens",
    ]


async def test_warn_on_selects_the_kinds() -> None:
    warner = LimitWarner(max_iterations=10, max_total_tokens=100, warn_on=["total_tokens"])
    assert await _warning(warner, _ctx(requests=9)) is None
    text = await _warning(warner, _ctx(requests=9, usage=Usage(request_tokens=90)))
    assert text is not None
    assert "Iterations" not in text


async def test_system_role() -> None:
    ctx = _ctx(requests=9)
    await LimitWarner(max_iterations=10, role="system").before_model_request(ctx)
    (part,) = ctx.request_scoped
    assert isinstance(part, SystemPromptPart)
    assert is_warning_part(part)


def test_statuses_report_every_watched_limit() -> None:
    ctx = _ctx(requests=2, usage=Usage(request_tokens=10, response_tokens=5))
    used = ctx.context_tokens()
    statuses = LimitWarner(max_iterations=4, max_context_tokens=used * 4, max_total_tokens=30).statuses(ctx)
    assert statuses == [
        LimitStatus("iterations", 2, 4, 0.5, True),  # 2 remaining <= 3
        LimitStatus("context_window", used, used * 4, 0.25, False),
        LimitStatus("total_tokens", 15, 30, 0.5, False),
    ]
    assert statuses[0].remaining == 2


# -- request-scoped, never stored ------------------------------------------------------


async def test_the_warning_is_request_scoped_and_never_stored() -> None:
    warner = LimitWarner(max_iterations=10)
    ctx = _ctx(requests=9)
    before = list(ctx.messages)
    await warner.before_model_request(ctx)
    assert all(a is b for a, b in zip(ctx.messages, before, strict=True))
    assert len(ctx.messages) == len(before)
    (part,) = ctx.request_scoped
    assert harness_mark(part) == {"request_scoped": True, "source": "limit_warner"}
    assert ctx.events == []


async def test_warnings_never_accumulate_over_a_run() -> None:
    warner = LimitWarner(max_iterations=10)
    ctx = _ctx()
    for step in range(10):
        ctx.requests = step
        ctx.request_scoped = []
        await warner.before_model_request(ctx)
        ctx.messages.append(CanonicalMessage.response(TextPart(f"step {step}")))
        ctx.messages.append(CanonicalMessage.user(f"continue {step}"))
        assert not any(is_warning_part(p) for m in ctx.messages for p in m.parts)
    assert ctx.events == []


# -- stripping stale stored warnings ---------------------------------------------------


async def test_stale_marked_warnings_are_stripped_and_reported() -> None:
    history = _history()
    history[2] = CanonicalMessage.request(*history[2].parts, _stale())
    history[-1] = CanonicalMessage.request(*history[-1].parts, _stale("old 2"))
    ctx = _ctx(history)
    await LimitWarner(max_iterations=100).before_model_request(ctx)
    assert not any(is_warning_part(p) for m in ctx.messages for p in m.parts)
    assert ctx.messages[0] is history[0]
    assert ctx.messages[2].parts == history[2].parts[:-1]
    (event,) = ctx.events
    assert event.strategy == "limit_warner"
    assert event.details == {"stripped_parts": 2, "messages_edited": 2}
    assert event.tokens_after < event.tokens_before
    assert ctx.request_scoped == []


async def test_a_user_message_quoting_the_marker_survives() -> None:
    quote = UserPromptPart("Why did you print [LimitWarner] URGENT: Configured run limits are approaching.?")
    system_quote = SystemPromptPart("[LimitWarner] is a harness feature.")
    history = [CanonicalMessage.request(system_quote, quote), CanonicalMessage.response(TextPart("ok"))]
    history.append(CanonicalMessage.request(UserPromptPart("[LimitWarner]"), _stale()))
    ctx = _ctx(history)
    await LimitWarner(max_iterations=10).before_model_request(ctx)
    assert ctx.messages[0] is history[0]
    assert ctx.messages[2].parts == (history[2].parts[0],)
    assert [e.details["stripped_parts"] for e in ctx.events] == [1]


async def test_other_harness_marks_are_not_warnings() -> None:
    other = with_harness_mark(UserPromptPart("x"), request_scoped=True, source="someone_else")
    receipt = with_harness_mark(UserPromptPart("y"), kind="receipt", source="limit_warner")
    history = [CanonicalMessage.request(other, receipt)]
    ctx = _ctx(history)
    await LimitWarner(max_iterations=10).before_model_request(ctx)
    assert ctx.messages == history
    assert ctx.events == []


@pytest.mark.parametrize(
    "request_parts",
    [
        (),
        (RetryPromptPart("Please respond with text or a tool call."),),
        (_stale(),),
    ],
    ids=["empty", "general-retry", "only-a-stale-warning"],
)
async def test_an_empty_request_is_never_dropped_or_merged(request_parts: tuple[Part, ...]) -> None:
    history = [
        CanonicalMessage.user("task"),
        CanonicalMessage.response(TextPart("")),
        CanonicalMessage.request(*request_parts),
    ]
    ctx = _ctx(history, requests=9)
    await LimitWarner(max_iterations=10).before_model_request(ctx)
    assert len(ctx.messages) == 3
    assert ctx.messages[-1].is_request
    assert ctx.messages[-1].parts == tuple(p for p in request_parts if not is_warning_part(p))
    assert len(ctx.request_scoped) == 1


async def test_only_new_messages_are_scanned_on_later_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[CanonicalMessage] = []
    original = warner_module._has_warning

    def spy(message: CanonicalMessage) -> bool:
        calls.append(message)
        return original(message)

    monkeypatch.setattr(warner_module, "_has_warning", spy)
    warner = LimitWarner(max_iterations=1000)
    ctx = _ctx(_history(50))
    await warner.before_model_request(ctx)
    assert len(calls) == len(ctx.messages)
    calls.clear()
    appended = [
        CanonicalMessage.response(TextPart("more")),
        CanonicalMessage.request(UserPromptPart("again"), _stale()),
    ]
    ctx.messages.extend(appended)
    await warner.before_model_request(ctx)
    assert calls == appended  # the two new messages only
    assert [e.details["stripped_parts"] for e in ctx.events] == [1]
    # a history replaced by someone else (e.g. a compaction) is scanned again
    calls.clear()
    ctx.messages[:] = [CanonicalMessage.request(_stale(), UserPromptPart("kept")), *ctx.messages[-2:]]
    await warner.before_model_request(ctx)
    assert len(calls) == len(ctx.messages)
    assert [p for p in ctx.messages[0].parts if isinstance(p, UserPromptPart)] == [UserPromptPart("kept")]


async def test_incremental_scan_works_with_a_fresh_context_per_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[CanonicalMessage] = []
    original = warner_module._has_warning

    def spy(message: CanonicalMessage) -> bool:
        calls.append(message)
        return original(message)

    monkeypatch.setattr(warner_module, "_has_warning", spy)
    warner = LimitWarner(max_iterations=1000)
    history = _history(50)
    await warner.before_model_request(_ctx(history))
    history.append(CanonicalMessage.response(TextPart("more")))
    history.append(CanonicalMessage.user("again"))
    calls.clear()
    ctx = _ctx(history)  # the loop builds a new context for every request
    await warner.before_model_request(ctx)
    assert calls == history[-2:]  # the two new messages only


# -- outside a run ---------------------------------------------------------------------


async def test_through_harness_compact_returns_the_request_scoped_warning() -> None:
    history = _history()
    used = TokenCounter().count_messages(history)
    result = await compact(history, [LimitWarner(max_context_tokens=used)])
    assert result.messages == history
    assert not result.changed
    (part,) = result.request_scoped
    assert is_warning_part(part)


def test_through_compact_sync_and_forced() -> None:
    history = _history()
    used = TokenCounter().count_messages(history)
    forced = compact_sync(history, [LimitWarner(max_context_tokens=used)], force=True)
    assert len(forced.request_scoped) == 1
    quiet = compact_sync(history, [LimitWarner(max_context_tokens=used * 10)])
    assert quiet.request_scoped == ()


def test_has_no_compact_step() -> None:
    warner = LimitWarner(max_iterations=3)
    assert warner.should_compact(_ctx(requests=3)) is None
    assert "compact" not in type(warner).__dict__
