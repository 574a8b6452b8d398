"""Property tests: any valid history, any configuration."""

from __future__ import annotations

import asyncio

from harness_summarizing import SummarizingCompaction, SummaryRequest, find_summary_parts
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.capabilities import RequestContext
from harness.core import CanonicalMessage, SystemPromptPart, UserPromptPart, harness_mark
from harness.history import check_invariants, first_user_request_index
from harness.testing.strategies import histories
from harness.tokens import TokenCounter


def _config(
    keep: int, keep_tokens: int, use_tokens: bool, preserve: bool, keep_users: bool, incremental: bool
) -> SummarizingCompaction:
    return SummarizingCompaction(
        keep_messages=keep,
        keep_tokens=keep_tokens if use_tokens else None,
        preserve_first_user_message=preserve,
        keep_user_messages=keep_users,
        incremental=incremental,
    )


def configs() -> st.SearchStrategy[SummarizingCompaction]:
    return st.builds(
        _config,
        st.integers(0, 12),
        st.integers(0, 400),
        st.booleans(),
        st.booleans(),
        st.booleans(),
        st.booleans(),
    )


def user_parts(messages: list[CanonicalMessage]) -> list[UserPromptPart]:
    return [p for m in messages for p in m.parts if isinstance(p, UserPromptPart) and harness_mark(p) is None]


def systems(messages: list[CanonicalMessage]) -> list[str]:
    return [p.content for m in messages for p in m.parts if isinstance(p, SystemPromptPart)]


def run(cap: SummarizingCompaction, messages: list[CanonicalMessage]) -> RequestContext:
    ctx = RequestContext(messages=list(messages), token_counter=TokenCounter())
    asyncio.run(cap.compact(ctx))
    return ctx


@settings(max_examples=150, deadline=None)
@given(histories(min_messages=1, max_messages=41), configs())
def test_compaction_properties(messages: list[CanonicalMessage], cap: SummarizingCompaction) -> None:
    ctx = run(cap, messages)
    out = ctx.messages
    assert check_invariants(out) == []
    # the request being sent is kept, with its parts in order at the end
    last = messages[-1]
    assert out[-1].kind == "request"
    assert out[-1].parts[-len(last.parts) :] == last.parts
    summaries = find_summary_parts(out)
    if ctx.events:
        assert len(summaries) == 1
        assert ctx.events[0].messages_before == len(messages)
    else:
        assert out == messages
    # system prompts: never lost, never duplicated
    assert sorted(set(systems(out))) == sorted(set(systems(messages)))
    assert len(systems(out)) <= len(systems(messages))
    before_users = user_parts(messages)
    after_users = user_parts(out)
    if cap.preserve_first_user_message:
        first = first_user_request_index(messages)
        if first is not None:
            for part in messages[first].parts:
                if isinstance(part, UserPromptPart):
                    assert part in after_users
    if cap.keep_user_messages:
        assert after_users == before_users
    # idempotent at a fixed configuration
    again = run(cap, out)
    assert again.messages == out
    assert again.events == []


@settings(max_examples=60, deadline=None)
# No distant answers and no retry-then-return: an answer arriving after its call was
# compacted away is orphaned by growth, whatever the strategy (the loop's cleanup removes it).
@given(
    histories(min_messages=9, max_messages=41, distant_returns=False, retries=False),
    st.integers(1, 4),
    st.lists(st.integers(1, 9), min_size=1, max_size=4),
)
def test_repeated_compaction_with_growth_keeps_one_summary(
    messages: list[CanonicalMessage], keep: int, growth: list[int]
) -> None:
    cap = SummarizingCompaction(keep_messages=keep)
    cut = len(messages) // 2
    cut -= cut % 2 == 0  # odd length: ends with a request
    ctx = RequestContext(messages=list(messages[:cut]), token_counter=TokenCounter())
    assert check_invariants(ctx.messages) == []  # every odd-length prefix is a valid history
    position = cut
    for extra in growth:
        stop = min(len(messages), position + 2 * extra)
        ctx.messages.extend(messages[position:stop])
        position = stop
        asyncio.run(cap.compact(ctx))
        assert check_invariants(ctx.messages) == []
        assert len(find_summary_parts(ctx.messages)) <= 1
        assert len(systems(ctx.messages)) == len(set(systems(messages[:position])))


@settings(max_examples=60, deadline=None)
@given(
    histories(min_messages=3, max_messages=31),
    st.integers(1, 6),
    st.sampled_from(["digest", "sliding", None]),
)
def test_failing_summarizer_never_breaks_history(
    messages: list[CanonicalMessage], keep: int, fallback: str | None
) -> None:
    def boom(request: SummaryRequest) -> str:
        raise RuntimeError("boom")

    cap = SummarizingCompaction(keep_messages=keep, summarizer=boom, fallback=fallback)  # pyright: ignore[reportArgumentType]
    ctx = run(cap, messages)
    assert check_invariants(ctx.messages) == []
    assert ctx.messages[-1].parts[-len(messages[-1].parts) :] == messages[-1].parts
    if fallback is None:
        assert ctx.messages == messages
    for event in ctx.events:
        assert event.details["error"] == "summarizer raised RuntimeError: boom"
    assert "boom" not in "".join(p.text for p in user_parts(ctx.messages))
