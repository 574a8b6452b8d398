"""Hypothesis properties of ClampOversizedMessages over random histories with big tool results and prompts."""

from __future__ import annotations

from typing import Any

from harness_clamp_oversized import MARK_KEY, ClampOversizedMessages
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import compact_sync, is_pinned, pin
from harness.core import CanonicalMessage, Part, ToolReturnPart, UserPromptPart, harness_mark, replace
from harness.testing import (
    assert_invariants,
    assert_no_split_tool_pairs,
    assert_request_kept,
    check_capability_invariants,
)
from harness.testing.strategies import histories
from harness.tokens import TokenCounter

COUNTER = TokenCounter()
WORDS = ["error", "ok", "src/app.py", "line", "42", "Traceback", "    return x", "", "ÿ€💡", "a" * 40]


@st.composite
def big_text(draw: st.DrawFn) -> str:
    """A multi-line text of up to ~40,000 characters (lines repeated, some very long)."""
    lines = draw(st.lists(st.sampled_from(WORDS).map(lambda w: w + "\n"), min_size=1, max_size=8))
    times = draw(st.integers(1, 400))
    tail = draw(st.sampled_from(["", "no newline at the end", "x" * 3000]))
    return "".join(lines) * times + tail


@st.composite
def big_histories(draw: st.DrawFn) -> list[CanonicalMessage]:
    """Valid histories whose tool results and prompts are often big, some pinned."""
    messages = draw(histories(min_messages=1, max_messages=16))
    out: list[CanonicalMessage] = []
    for message in messages:
        parts: list[Part] = []
        for part in message.parts:
            if isinstance(part, ToolReturnPart | UserPromptPart) and draw(st.booleans()):
                part = replace(part, content=draw(big_text()))
            if message.kind == "request" and draw(st.integers(0, 9)) == 0:
                part = pin(part)
            parts.append(part)
        out.append(replace(message, parts=tuple(parts)))
    return out


CONFIGS = st.fixed_dictionaries(
    {
        "max_tokens": st.sampled_from([64, 200, 1000]),
        "head_fraction": st.sampled_from([0.0, 0.3, 0.6, 1.0]),
        "prompts": st.booleans(),
        "clamp_latest_prompt": st.booleans(),
        "min_saved_tokens": st.sampled_from([0, 100]),
        "per_tool": st.sampled_from([{}, {"read_file": None}, {"bash": 300, "read_file": 64}]),
    }
)


def latest_prompt_message(messages: list[CanonicalMessage]) -> int:
    found = [i for i, m in enumerate(messages) if any(isinstance(p, UserPromptPart) for p in m.parts)]
    return found[-1] if found else -1


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(big_histories(), CONFIGS)
def test_clamping_keeps_every_part_and_bounds_every_clamped_one(
    before: list[CanonicalMessage], config: dict[str, Any]
) -> None:
    cap = ClampOversizedMessages(**config)
    result = compact_sync(before, [cap])  # through the plugin manager: ordering and the invariant guard apply
    after = result.messages
    assert_invariants(after)
    assert_no_split_tool_pairs(before, after)
    if not config["clamp_latest_prompt"]:  # configured to shorten the prompt being sent
        assert_request_kept(before, after)
    # nothing is removed, moved or re-kinded: one part for one part, same ids
    assert [m.kind for m in after] == [m.kind for m in before]
    latest = latest_prompt_message(before)
    for mi, (old_message, new_message) in enumerate(zip(before, after, strict=True)):
        assert len(new_message.parts) == len(old_message.parts)
        for old, new in zip(old_message.parts, new_message.parts, strict=True):
            assert type(new) is type(old)
            assert getattr(new, "tool_call_id", None) == getattr(old, "tool_call_id", None)
            if new == old:
                continue
            # only a tool result or a prompt changed, and only its content (and mark)
            assert isinstance(old, ToolReturnPart | UserPromptPart)
            assert isinstance(new, ToolReturnPart | UserPromptPart)
            assert isinstance(old.content, str)
            assert isinstance(new.content, str)
            assert not is_pinned(old)
            assert (harness_mark(new) or {}).get(MARK_KEY) == cap.name
            if isinstance(old, UserPromptPart):
                assert config["prompts"]
                assert config["clamp_latest_prompt"] or mi != latest  # the newest prompt stays whole
            if isinstance(old, ToolReturnPart):
                assert config["per_tool"].get(old.tool_name, 0) is not None
            limit = config["max_tokens"]
            if isinstance(old, ToolReturnPart) and old.tool_name in config["per_tool"]:
                limit = config["per_tool"][old.tool_name]
            text: str = new.content  # type: ignore[union-attr]
            head, marker_start, rest = text.partition("[... ")
            assert marker_start, "the marker is there"
            tail = rest.split("]", 1)[1].removeprefix("\n")
            original: str = old.content
            assert original.startswith((head, head[:-1]))  # a cut inside a line adds "\n"
            assert original.endswith(tail)
            # at or under the limit, or (a limit too small for any text) the marker alone
            assert COUNTER.count_part(new) <= limit or (head == "" and tail == "")
            assert COUNTER.count_part(new) < COUNTER.count_part(old)
    # idempotent: the same instance and a fresh one change nothing more
    assert compact_sync(after, [cap]).messages == after
    assert compact_sync(after, [ClampOversizedMessages(**config)]).messages == after


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(big_histories(), st.integers(1, 15))
def test_clamping_request_by_request_never_edits_what_an_earlier_request_sent(
    history: list[CanonicalMessage], cut: int
) -> None:
    """Replayed in two steps (a prefix, then the rest appended), the first step's tool results stay."""
    cap = ClampOversizedMessages(max_tokens=200)
    prefix = history[: min(cut, len(history))]
    if prefix[-1].kind != "request":
        prefix = prefix[:-1]
    if not prefix:
        return
    first = compact_sync(prefix, [cap]).messages
    second = compact_sync([*first, *history[len(prefix) :]], [cap]).messages
    latest = latest_prompt_message(prefix)
    for mi, message in enumerate(first):
        for old, new in zip(message.parts, second[mi].parts, strict=True):
            if isinstance(old, UserPromptPart) and mi == latest:
                continue  # the prompt that was the newest may be clamped once a newer one arrived
            assert new == old


def test_the_kit_properties_hold() -> None:
    check_capability_invariants(
        lambda: ClampOversizedMessages(max_tokens=64, min_saved_tokens=0),
        max_examples=60,
        user_prompts=False,
        idempotent=True,
    )
