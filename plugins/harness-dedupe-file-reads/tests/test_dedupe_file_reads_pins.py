"""DeduplicateFileReads never supersedes a pinned read (a pinned call protects its return)."""

from __future__ import annotations

import asyncio

import attrs
from harness_dedupe_file_reads import DeduplicateFileReads
from hypothesis import event, given, settings
from hypothesis import strategies as st

from harness import is_pinned, pin
from harness.capabilities import RequestContext
from harness.core import (
    CanonicalMessage,
    Part,
    RetryPromptPart,
    ToolCallPart,
    ToolReturnPart,
    harness_mark,
    lost_pins,
    pinned_call_ids,
    pinned_parts,
    replace,
)
from harness.history import check_invariants
from harness.hooks import PluginManager
from harness.run.compaction import compact_sync
from harness.testing import assert_memo_matches_fresh, assert_transformation_safe
from harness.testing.strategies import histories
from harness.tokens import TokenCounter

FILE = "line of the file\n" * 30


def reads(n: int, path: str = "a.py") -> list[CanonicalMessage]:
    messages = [CanonicalMessage.user("task")]
    for i in range(n):
        messages.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"r{i}", tool_name="read_file", args={"path": path})
            )
        )
        messages.append(
            CanonicalMessage.request(
                ToolReturnPart(tool_call_id=f"r{i}", tool_name="read_file", content=f"{i}\n{FILE}")
            )
        )
    return messages


def pin_part(messages: list[CanonicalMessage], mi: int, pi: int) -> list[CanonicalMessage]:
    parts = list(messages[mi].parts)
    parts[pi] = pin(parts[pi], "test")
    out = list(messages)
    out[mi] = replace(messages[mi], parts=tuple(parts))
    return out


def superseded(messages: list[CanonicalMessage]) -> list[str]:
    return [
        p.tool_call_id
        for m in messages
        for p in m.parts
        if isinstance(p, ToolReturnPart) and (harness_mark(p) or {}).get("cleared") == "dedupe_file_reads"
    ]


async def deduplicated(cap: DeduplicateFileReads, messages: list[CanonicalMessage]) -> RequestContext:
    ctx = RequestContext(messages=list(messages), token_counter=TokenCounter())
    await cap.compact(ctx, reason="test")
    return ctx


async def test_a_pinned_read_is_never_superseded() -> None:
    messages = pin_part(reads(4), 4, 0)  # the return of r1
    ctx = await deduplicated(DeduplicateFileReads(), messages)
    assert superseded(ctx.messages) == ["r0", "r2"]
    assert ctx.messages[4] is messages[4]
    assert is_pinned(ctx.messages[4].parts[0])
    assert lost_pins(messages, ctx.messages) == []


async def test_a_pinned_call_protects_its_read() -> None:
    messages = pin_part(reads(4), 1, 0)  # the call r0
    ctx = await deduplicated(DeduplicateFileReads(), messages)
    assert superseded(ctx.messages) == ["r1", "r2"]


async def test_pins_of_appended_messages_reach_the_remembered_pass() -> None:
    cap = DeduplicateFileReads()
    counter = TokenCounter()
    history = reads(2)
    ctx = RequestContext(messages=list(history), token_counter=counter)
    await cap.compact(ctx, reason="first")
    assert superseded(ctx.messages) == ["r0"]
    history = list(ctx.messages) + reads(4)[len(history) :]
    history = pin_part(history, 6, 0)  # r2, appended after the first pass
    ctx = RequestContext(messages=list(history), token_counter=counter)
    await cap.compact(ctx, reason="second")
    assert superseded(ctx.messages) == ["r0", "r1"]  # r1 by r3; the pinned r2 stays
    assert lost_pins(history, ctx.messages) == []


def test_the_guard_accepts_a_deduplication_of_a_pinned_history() -> None:
    messages = pin_part(reads(5), 2, 0)
    result = compact_sync(messages, [DeduplicateFileReads()], force=True, plugin_manager=PluginManager())
    assert result.events
    assert lost_pins(messages, result.messages) == []
    assert_transformation_safe(messages, result.messages)


SPECS = [
    ("read_file", {"path": "a.py"}),
    ("read_file", {"path": "b.py"}),
    ("bash", {"command": "cat a.py"}),
    ("bash", {"command": "sed -n '1,5p' a.py"}),
    ("bash", {"command": "cat b.py"}),
    ("bash", {"command": "ls"}),
]


@st.composite
def pinned_read_histories(draw: st.DrawFn) -> list[CanonicalMessage]:
    """Valid histories of file reads with a random subset of their parts pinned."""
    messages = draw(histories(min_messages=1, max_messages=30))
    spec_of: dict[str, tuple[str, dict[str, str]]] = {}
    out: list[CanonicalMessage] = []
    for message in messages:
        parts: list[Part] = []
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                tool, args = spec_of[part.tool_call_id] = draw(st.sampled_from(SPECS))
                part = attrs.evolve(part, tool_name=tool, args=args)
            elif isinstance(part, ToolReturnPart) and part.tool_call_id in spec_of:
                part = attrs.evolve(
                    part, tool_name=spec_of[part.tool_call_id][0], content=draw(st.sampled_from([FILE, "x"]))
                )
            elif isinstance(part, RetryPromptPart) and part.tool_call_id in spec_of:
                part = attrs.evolve(part, tool_name=spec_of[part.tool_call_id][0])
            parts.append(pin(part, "property") if draw(st.integers(0, 3)) == 0 else part)
        out.append(message.replace(parts=tuple(parts)))
    return out


@st.composite
def configs(draw: st.DrawFn) -> DeduplicateFileReads:
    file_key = draw(st.sampled_from(["auto", "read_tool", "shell_cat"]))
    return DeduplicateFileReads(
        file_key,
        supersede_covered_ranges=file_key != "read_tool" and draw(st.booleans()),
        shell_keeps_directory=draw(st.booleans()),
        cache_aware=draw(st.booleans()),
        expected_remaining_requests=draw(st.none() | st.integers(1, 100)),
    )


@settings(max_examples=200, deadline=None)
@given(pinned_read_histories(), configs(), st.booleans())
def test_random_pins_survive_any_configuration(
    messages: list[CanonicalMessage], cap: DeduplicateFileReads, triggered: bool
) -> None:
    ids = pinned_call_ids(messages)
    ctx = RequestContext(messages=list(messages), token_counter=TokenCounter(), requests=5)
    if triggered:
        asyncio.run(cap.before_model_request(ctx))
    else:
        asyncio.run(cap.compact(ctx, reason="property"))
    after = ctx.messages
    event("superseded" if ctx.events else "nothing superseded")
    assert check_invariants(after) == []
    assert lost_pins(messages, after) == []
    for mi, pi, part in pinned_parts(messages):
        assert after[mi].parts[pi] is part
    for before_message, after_message in zip(messages, after, strict=True):
        for old, new in zip(before_message.parts, after_message.parts, strict=True):
            if isinstance(old, ToolReturnPart) and old.tool_call_id in ids:
                assert new is old
    for reported in ctx.events:
        assert not set(reported.cleared_tool_call_ids) & ids


@settings(max_examples=100, deadline=None)
@given(pinned_read_histories(), configs(), st.booleans())
def test_remembered_passes_of_pinned_histories_match_fresh_passes(
    messages: list[CanonicalMessage], cap: DeduplicateFileReads, forced: bool
) -> None:
    """Request by request, the memo (pins and cache-aware holds included) decides as a fresh pass."""
    assert_memo_matches_fresh(cap, messages, forced=forced)
