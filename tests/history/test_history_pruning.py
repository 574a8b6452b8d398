"""Tests of harness.history.pruning: prune_old_tool_outputs with a caller-supplied counter."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate
from typing import Any, TypeVar

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import (
    CanonicalMessage,
    Part,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    harness_mark,
)
from harness.history import check_invariants, prune_old_tool_outputs
from harness.testing.strategies import histories
from harness.tokens import TokenCounter


def req(*parts: Part, **fields: Any) -> CanonicalMessage:
    return CanonicalMessage.request(*parts, **fields)


def resp(*parts: Part, **fields: Any) -> CanonicalMessage:
    return CanonicalMessage.response(*parts, **fields)


def user(text: str = "hi") -> UserPromptPart:
    return UserPromptPart(text)


def call(call_id: str, name: str = "bash") -> ToolCallPart:
    return ToolCallPart(tool_call_id=call_id, tool_name=name, args={"cmd": "ls"})


def ret(call_id: str, content: Any = "ok", name: str | None = "bash") -> ToolReturnPart:
    return ToolReturnPart(tool_call_id=call_id, tool_name=name, content=content)


def same_objects(a: Sequence[object], b: Sequence[object]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


P = TypeVar("P")

FAST = settings(max_examples=150, deadline=None)


def snapshot(messages: Sequence[CanonicalMessage]) -> list[tuple[int, CanonicalMessage]]:
    return [(id(m), m) for m in messages]


def unchanged(messages: Sequence[CanonicalMessage], before: list[tuple[int, CanonicalMessage]]) -> bool:
    return len(messages) == len(before) and all(
        id(m) == ident and m == copy for m, (ident, copy) in zip(messages, before, strict=True)
    )


def parts_of(messages: Sequence[CanonicalMessage], kind: type[P]) -> list[P]:
    return [p for m in messages for p in m.parts if isinstance(p, kind)]


# --------------------------------------------------------------------------- prune_old_tool_outputs


class CharCounter:
    """One token per character of string content; 1 for anything else."""

    def __init__(self) -> None:
        self.calls = 0

    def count_part(self, part: Part) -> int:
        self.calls += 1
        content = getattr(part, "content", "")
        return len(content) if isinstance(content, str) else 1


def tool_turns(sizes: Sequence[int]) -> list[CanonicalMessage]:
    """user, then one call/return pair per size (oldest first), then a user prompt."""
    history: list[CanonicalMessage] = [req(user("start"))]
    for index, size in enumerate(sizes):
        history.append(resp(call(f"c{index}")))
        history.append(req(ret(f"c{index}", "x" * size)))
    history.append(resp(TextPart("done")))
    history.append(req(user("next")))
    return history


def cleared_ids(messages: Sequence[CanonicalMessage]) -> list[str]:
    return [
        p.tool_call_id
        for m in messages
        for p in m.parts
        if isinstance(p, ToolReturnPart) and (harness_mark(p) or {}).get("cleared") == "pruned"
    ]


def test_prune_clears_from_the_boundary_back() -> None:
    history = tool_turns([50, 50, 50, 50, 50])  # newest first: c4 c3 c2 c1 c0
    # running totals 50, 100, 150 > 120 -> c2 crosses: c2, c1, c0 are candidates (150 tokens)
    edit = prune_old_tool_outputs(history, counter=CharCounter(), protect_tokens=120, minimum_savings=100)
    assert cleared_ids(edit.messages) == ["c0", "c1", "c2"]
    placeholder = "[Old tool result content cleared]"
    assert edit.tokens_reclaimed == 3 * (50 - len(placeholder))
    assert edit.cleared_tool_call_ids == ("c0", "c1", "c2")
    assert [c.kind for c in edit.changes] == ["pruned_tool_output"] * 3
    # only the three returns' requests changed
    changed = [i for i, (a, b) in enumerate(zip(history, edit.messages, strict=True)) if a is not b]
    assert changed == [2, 4, 6]
    part = edit.messages[2].parts[0]
    assert isinstance(part, ToolReturnPart)
    assert (part.tool_call_id, part.tool_name, part.content) == ("c0", "bash", placeholder)
    assert check_invariants(edit.messages) == []


def test_prune_needs_minimum_savings() -> None:
    history = tool_turns([50, 50, 50, 50, 50])
    edit = prune_old_tool_outputs(history, counter=CharCounter(), protect_tokens=120, minimum_savings=151)
    assert not edit.changed
    assert same_objects(edit.messages, history)


def test_prune_needs_user_turns() -> None:
    history = tool_turns([500, 500])[:-1]  # only one user prompt
    edit = prune_old_tool_outputs(history, counter=CharCounter(), protect_tokens=10, minimum_savings=1)
    assert not edit.changed
    edit = prune_old_tool_outputs(
        history, counter=CharCounter(), protect_tokens=10, minimum_savings=1, min_user_turns=1
    )
    assert cleared_ids(edit.messages) == ["c0"]


def test_prune_never_clears_the_newest_result() -> None:
    history = tool_turns([300, 700])  # newest (c1) alone exceeds protect_tokens
    edit = prune_old_tool_outputs(history, counter=CharCounter(), protect_tokens=500, minimum_savings=100)
    assert cleared_ids(edit.messages) == ["c0"]
    only_one = tool_turns([700])
    assert not prune_old_tool_outputs(
        only_one, counter=CharCounter(), protect_tokens=1, minimum_savings=0
    ).changed


def test_prune_is_idempotent_and_skips_unmarkable_parts() -> None:
    history = tool_turns([100, 100, 100])
    odd = req(
        ToolReturnPart(tool_call_id="c0", tool_name="bash", content="y" * 100, metadata="not a mapping")
    )
    history[2] = odd
    counter = CharCounter()
    edit = prune_old_tool_outputs(history, counter=counter, protect_tokens=50, minimum_savings=10)
    assert cleared_ids(edit.messages) == ["c1"]
    assert edit.messages[2] is odd
    again = prune_old_tool_outputs(edit.messages, counter=counter, protect_tokens=50, minimum_savings=10)
    assert not again.changed


def test_prune_custom_placeholder_with_a_token_counter() -> None:
    history = tool_turns([4000, 4000, 4000])
    edit = prune_old_tool_outputs(
        history, counter=TokenCounter(), protect_tokens=100, minimum_savings=10, placeholder="[gone]"
    )
    assert cleared_ids(edit.messages) == ["c0", "c1"]
    assert edit.tokens_reclaimed > 0
    part = edit.messages[2].parts[0]
    assert isinstance(part, ToolReturnPart)
    assert part.content == "[gone]"


# --------------------------------------------------------------------------- properties


class StrLenCounter:
    """The length of string content; 3 for anything else."""

    def count_part(self, part: Part) -> int:
        content = getattr(part, "content", "")
        return len(content) if isinstance(content, str) else 3


def expected_pruned(
    messages: Sequence[CanonicalMessage], protect: int, minimum: int, counter: StrLenCounter
) -> list[int]:
    """Oracle: ids (object ids) of the returns tunacode's rule (newest exempt) clears."""
    returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    if not returns:
        return []
    newest = returns[-1]
    eligible = [p for p in reversed(returns) if p.content not in (None, "")]
    totals = list(accumulate(counter.count_part(p) for p in eligible))
    crossing = next((i for i, total in enumerate(totals) if total > protect), None)
    if crossing is None:
        return []
    chosen = [p for p in eligible[crossing:] if p is not newest]
    if not chosen or sum(counter.count_part(p) for p in chosen) < minimum:
        return []
    return sorted(id(p) for p in chosen)


@FAST
@given(histories(min_messages=1), st.integers(0, 120), st.integers(0, 80))
def test_prune_follows_the_rule_and_keeps_the_history_valid(
    messages: list[CanonicalMessage], protect: int, minimum: int
) -> None:
    counter = StrLenCounter()
    before = snapshot(messages)
    edit = prune_old_tool_outputs(
        messages, counter=counter, protect_tokens=protect, minimum_savings=minimum, min_user_turns=0
    )
    assert unchanged(messages, before)
    assert check_invariants(edit.messages) == []
    assert len(edit.messages) == len(messages)
    cleared: list[int] = []
    for old, new in zip(messages, edit.messages, strict=True):
        if old is new:
            continue
        assert len(old.parts) == len(new.parts)
        for a, b in zip(old.parts, new.parts, strict=True):
            if a is b:
                continue
            assert isinstance(a, ToolReturnPart)
            assert isinstance(b, ToolReturnPart)
            assert (b.tool_call_id, b.tool_name) == (a.tool_call_id, a.tool_name)
            assert b.content == "[Old tool result content cleared]"
            assert (harness_mark(b) or {}).get("cleared") == "pruned"
            cleared.append(id(a))
    assert sorted(cleared) == expected_pruned(messages, protect, minimum, counter)
    returns = parts_of(messages, ToolReturnPart)
    if returns:
        assert id(returns[-1]) not in cleared
    assert edit.tokens_reclaimed == sum(
        counter.count_part(p) - len("[Old tool result content cleared]")
        for p in parts_of(messages, ToolReturnPart)
        if id(p) in cleared
    )
    again = prune_old_tool_outputs(
        edit.messages, counter=counter, protect_tokens=protect, minimum_savings=minimum, min_user_turns=0
    )
    assert not again.changed
