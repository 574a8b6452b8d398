"""Hypothesis property tests of harness.history (and of the public strategies)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import TypeVar

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.history import (
    CHANGE_KINDS,
    HistoryEdit,
    answer_dangling_calls,
    check_invariants,
    is_safe_cutoff,
    merge_consecutive_requests,
    merge_consecutive_responses,
    merge_trailing_request,
    prune_old_tool_outputs,
    remove_empty_responses,
    remove_orphan_returns,
    rename_duplicate_call_ids,
    run_cleanup_loop,
    safe_cutoff,
    safe_token_cutoff,
    sanitize_for_resume,
)
from harness.messages import (
    CanonicalMessage,
    Part,
    RetryPromptPart,
    SystemPromptPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    harness_mark,
    message_text,
)
from harness.testing.strategies import histories, messy_histories

P = TypeVar("P")

FAST = settings(max_examples=150, deadline=None)
SMALL = settings(max_examples=200, deadline=None)

Repair = Callable[[Sequence[CanonicalMessage]], HistoryEdit]

REPAIRS: dict[str, tuple[Repair, set[str]]] = {
    "rename": (rename_duplicate_call_ids, {"duplicate_call_id"}),
    "answer": (answer_dangling_calls, {"dangling_call"}),
    "remove": (lambda m: answer_dangling_calls(m, mode="remove"), {"dangling_call"}),
    "orphans": (remove_orphan_returns, {"orphan_return", "return_before_call"}),
    "empty": (remove_empty_responses, {"empty_response"}),
    "requests": (merge_consecutive_requests, {"consecutive_requests"}),
    "responses": (merge_consecutive_responses, {"consecutive_responses"}),
    "sanitize": (sanitize_for_resume, set()),
}


def snapshot(messages: Sequence[CanonicalMessage]) -> list[tuple[int, CanonicalMessage]]:
    return [(id(m), m) for m in messages]


def unchanged(messages: Sequence[CanonicalMessage], before: list[tuple[int, CanonicalMessage]]) -> bool:
    return len(messages) == len(before) and all(
        id(m) == ident and m == copy for m, (ident, copy) in zip(messages, before, strict=True)
    )


def answer_id(part: Part) -> str | None:
    if isinstance(part, ToolReturnPart):
        return part.tool_call_id
    if isinstance(part, RetryPromptPart) and part.tool_name is not None:
        return part.tool_call_id or ""
    return None


def carried(part: Part) -> str | None:
    if isinstance(part, ToolCallPart):
        return part.tool_call_id
    return answer_id(part) or None


def brute_safe(messages: Sequence[CanonicalMessage], cut: int) -> bool:
    """Independent oracle: no id carried on both sides of the cut."""
    before = {carried(p) for m in messages[:cut] for p in m.parts} - {None}
    after = {carried(p) for m in messages[cut:] for p in m.parts} - {None}
    return not (before & after)


def parts_of(messages: Sequence[CanonicalMessage], kind: type[P]) -> list[P]:
    return [p for m in messages for p in m.parts if isinstance(p, kind)]


def user_ids(messages: Sequence[CanonicalMessage]) -> list[int]:
    return [id(p) for p in parts_of(messages, UserPromptPart)]


def without_id(part: Part) -> str:
    return repr(attrs.evolve(part, tool_call_id="-"))  # pyright: ignore[reportArgumentType]


# --------------------------------------------------------------------------- strategies


@FAST
@given(histories())
def test_generated_histories_are_valid(messages: list[CanonicalMessage]) -> None:
    assert check_invariants(messages) == []
    if messages:
        assert messages[-1].is_request
        assert messages[0].is_request
        assert any(isinstance(p, UserPromptPart) for p in messages[0].parts)
    ids = [p.tool_call_id for p in parts_of(messages, ToolCallPart)]
    assert len(ids) == len(set(ids))


@FAST
@given(
    histories(
        min_messages=2,
        max_messages=12,
        end_with_request=False,
        parallel_calls=False,
        retries=False,
        thinking=False,
        distant_returns=False,
        system_prompts=False,
    )
)
def test_generated_histories_respect_options(messages: list[CanonicalMessage]) -> None:
    assert check_invariants(messages) == []
    assert 2 <= len(messages) <= 12
    assert not parts_of(messages, RetryPromptPart)
    assert not parts_of(messages, SystemPromptPart)
    for index, message in enumerate(messages):
        assert len(message.tool_calls) <= 1
        for call in message.tool_calls:  # answered in the very next request
            assert call.tool_call_id in {
                p.tool_call_id for p in parts_of(messages[index + 1 : index + 2], ToolReturnPart)
            }


def test_histories_rejects_impossible_options() -> None:
    with pytest.raises(ValueError, match="end_with_request"):
        histories(min_messages=2, max_messages=2)
    with pytest.raises(ValueError, match="max_output_chars"):
        histories(max_output_chars=0)


def test_histories_can_generate_long_tool_outputs() -> None:
    longest: list[int] = [0]

    @settings(max_examples=100, deadline=None, derandomize=True, database=None)
    @given(histories(min_messages=3, max_output_chars=3000))
    def collect(messages: list[CanonicalMessage]) -> None:
        assert check_invariants(messages) == []
        for part in parts_of(messages, ToolReturnPart):
            if isinstance(part.content, str):
                assert len(part.content) <= 3000
                longest[0] = max(longest[0], len(part.content))

    collect()
    assert longest[0] > 500


@FAST
@given(messy_histories())
def test_messy_histories_hit_every_violation_kind_eventually(messages: list[CanonicalMessage]) -> None:
    # the strategy is meant to produce invalid input; spot-check it type-checks as history
    check_invariants(messages, persisted=True)


def test_messy_histories_cover_every_violation_kind() -> None:
    seen: set[str] = set()

    @settings(max_examples=300, deadline=None)
    @given(messy_histories())
    def collect(messages: list[CanonicalMessage]) -> None:
        seen.update(v.kind for v in check_invariants(messages, persisted=True))

    collect()
    assert seen == {
        "dangling_call",
        "orphan_return",
        "duplicate_call_id",
        "return_before_call",
        "consecutive_requests",
        "consecutive_responses",
        "empty_response",
        "persisted_system_prompt",
    }


# --------------------------------------------------------------------------- repairs


@FAST
@given(messy_histories(), st.sampled_from(sorted(REPAIRS)))
def test_each_repair_is_pure_and_fixes_its_kind(messages: list[CanonicalMessage], name: str) -> None:
    repair, fixes = REPAIRS[name]
    before = snapshot(messages)
    edit = repair(messages)
    assert unchanged(messages, before)
    assert edit.messages is not messages
    assert {c.kind for c in edit.changes} <= CHANGE_KINDS
    remaining = {v.kind for v in check_invariants(edit.messages)}
    assert not (remaining & fixes)
    assert check_invariants(run_cleanup_loop(edit.messages).messages) == []
    if not edit.changed:
        assert all(a is b for a, b in zip(edit.messages, messages, strict=True))
        assert len(edit.messages) == len(messages)
    # a message that was kept unchanged is the very same object
    originals = {id(m) for m in messages}
    for message in edit.messages:
        if id(message) not in originals:
            assert all(message is not m for m in messages)


@FAST
@given(messy_histories(), st.sampled_from(["answer", "remove"]))
def test_cleanup_loop_makes_any_history_sendable(messages: list[CanonicalMessage], mode: str) -> None:
    before = snapshot(messages)
    edit = run_cleanup_loop(messages, dangling=mode)  # pyright: ignore[reportArgumentType]
    assert unchanged(messages, before)
    out = edit.messages
    assert check_invariants(out) == []
    # idempotent
    again = run_cleanup_loop(out, dangling=mode)  # pyright: ignore[reportArgumentType]
    assert not again.changed
    assert all(a is b for a, b in zip(again.messages, out, strict=True))
    # no user prompt is lost (same objects, same order)
    assert user_ids(out) == user_ids(messages)
    # no answer that follows a call with its id is lost (ids may be renamed)
    first_call: dict[str, int] = {}
    for index, message in enumerate(messages):
        for part in message.tool_calls:
            first_call.setdefault(part.tool_call_id, index)
    kept = Counter(without_id(p) for m in out for p in m.parts if answer_id(p) is not None)
    removed = set(edit.removed_tool_call_ids)
    for index, message in enumerate(messages):
        for part in message.parts:
            answer = answer_id(part)
            if answer is None:
                continue
            if first_call.get(answer, len(messages)) < index:
                assert kept[without_id(part)] > 0, part
                kept[without_id(part)] -= 1
            elif without_id(part) not in kept or kept[without_id(part)] == 0:
                assert answer in removed  # orphans may go, but are reported
    # no tool call is lost in answer mode
    if mode == "answer":
        assert len(parts_of(out, ToolCallPart)) == len(parts_of(messages, ToolCallPart))
        synthetic = [p for p in parts_of(out, ToolReturnPart) if (harness_mark(p) or {}).get("synthetic")]
        dangling_ids = {c.tool_call_ids for c in edit.changes if c.kind == "answered_dangling_call"}
        assert len(synthetic) == sum(len(ids) for ids in dangling_ids)


@FAST
@given(histories())
def test_cleanup_loop_is_noop_on_valid_histories(messages: list[CanonicalMessage]) -> None:
    for mode in ("answer", "remove"):
        edit = run_cleanup_loop(messages, dangling=mode)
        assert not edit.changed
        assert all(a is b for a, b in zip(edit.messages, messages, strict=True))


@FAST
@given(histories(), messy_histories(max_messages=6))
def test_sanitize_for_resume_strips_what_must_not_be_stored(
    valid: list[CanonicalMessage], messy: list[CanonicalMessage]
) -> None:
    edit = sanitize_for_resume(valid)
    assert check_invariants(edit.messages, persisted=True) == []
    assert user_ids(edit.messages) == user_ids(valid)
    out = sanitize_for_resume(messy).messages
    assert not parts_of(out, SystemPromptPart)
    assert all(m.run_id is None for m in out)
    assert not sanitize_for_resume(out).changed


@FAST
@given(messy_histories(max_messages=8), st.lists(st.builds(UserPromptPart, st.text(max_size=5)), max_size=3))
def test_merge_trailing_request_keeps_every_part(
    messages: list[CanonicalMessage], new_parts: list[UserPromptPart]
) -> None:
    new_request = CanonicalMessage.request(*new_parts)
    before = snapshot(messages)
    edit = merge_trailing_request(messages, new_request)
    assert unchanged(messages, before)
    out = edit.messages
    assert [id(p) for m in out for p in m.parts] == [id(p) for m in [*messages, new_request] for p in m.parts]
    assert out[-1].is_request
    assert len(out) == len(messages) + (0 if messages and messages[-1].is_request else 1)
    assert all(a is b for a, b in zip(out[:-1], messages, strict=False))


# --------------------------------------------------------------------------- cut points


def brute_largest_cut(messages: Sequence[CanonicalMessage], keep: int) -> int:
    n = len(messages)
    if n == 0:
        return 0
    candidates = [c for c in range(n) if n - c >= keep and brute_safe(messages, c)]
    return max(candidates) if candidates else 0


@SMALL
@given(st.one_of(histories(max_messages=25), messy_histories(max_messages=12)), st.integers(-2, 30))
def test_safe_cutoff_is_the_largest_safe_cut(messages: list[CanonicalMessage], keep: int) -> None:
    n = len(messages)
    cut = safe_cutoff(messages, keep)
    assert 0 <= cut <= max(n - 1, 0)
    assert is_safe_cutoff(messages, cut)
    assert brute_safe(messages, cut)
    if keep <= n:
        assert n - cut >= keep
    else:
        assert cut == 0
    assert cut == brute_largest_cut(messages, keep)
    if n:
        assert messages[-1] in messages[cut:]


@SMALL
@given(st.one_of(histories(max_messages=25), messy_histories(max_messages=12)))
def test_is_safe_cutoff_matches_brute_force(messages: list[CanonicalMessage]) -> None:
    for cut in range(len(messages) + 1):
        assert is_safe_cutoff(messages, cut) == brute_safe(messages, cut)


def text_tokens(message: CanonicalMessage) -> int:
    return 1 + len(message_text(message)) // 8


@SMALL
@given(st.one_of(histories(max_messages=25), messy_histories(max_messages=12)), st.integers(0, 80))
def test_safe_token_cutoff_keeps_the_most_that_fits(messages: list[CanonicalMessage], budget: int) -> None:
    n = len(messages)
    calls: list[int] = []

    def count(message: CanonicalMessage) -> int:
        calls.append(id(message))
        return text_tokens(message)

    cut = safe_token_cutoff(messages, budget, count)
    assert len(calls) <= n
    if n == 0:
        assert cut == 0
        return
    assert 0 <= cut <= n - 1
    assert brute_safe(messages, cut)
    sizes = [text_tokens(m) for m in messages]
    suffix = list(accumulate(reversed(sizes)))[::-1]  # suffix[c] = tokens of messages[c:]
    fitting = [c for c in range(n + 1) if c == n or suffix[c] <= budget]
    # counted newest first, each message once, stopping at the first that does not fit
    assert len(calls) == n - min(fitting) + (1 if min(fitting) > 0 else 0)
    fitting_safe = [c for c in range(n) if suffix[c] <= budget and brute_safe(messages, c)]
    if fitting_safe:
        assert cut == min(fitting_safe)
    else:
        assert cut == max(c for c in range(n) if brute_safe(messages, c))


# --------------------------------------------------------------------------- prune


class CharCounter:
    def count_part(self, part: Part) -> int:
        content = getattr(part, "content", "")
        return len(content) if isinstance(content, str) else 3


def expected_pruned(
    messages: Sequence[CanonicalMessage], protect: int, minimum: int, counter: CharCounter
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
    counter = CharCounter()
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


@SMALL
@given(histories(max_messages=30), st.data())
def test_changed_span_brackets_every_difference(
    messages: list[CanonicalMessage], data: st.DataObject
) -> None:
    from harness.history import changed_span

    edited = list(messages)
    for _ in range(data.draw(st.integers(0, 3))):
        if not edited:
            break
        index = data.draw(st.integers(0, len(edited) - 1))
        action = data.draw(st.sampled_from(["replace", "delete", "insert"]))
        if action == "replace":
            edited[index] = CanonicalMessage.user(f"replaced {index}")
        elif action == "delete":
            del edited[index]
        else:
            edited.insert(index, CanonicalMessage.user(f"inserted {index}"))
    start, stop = changed_span(messages, edited)
    assert 0 <= start <= stop <= len(edited)
    assert edited[:start] == messages[:start]
    tail = len(edited) - stop
    assert tail <= len(messages) - start
    assert edited[stop:] == messages[len(messages) - tail :]
    # the window is tight: widening the shared prefix or suffix by one would be wrong
    if start < min(len(messages), len(edited)) and start < stop:
        assert edited[start] != messages[start]
    if edited == messages:
        assert start == stop == len(edited)
