"""Tests of harness.history.cutoffs: is_safe_cutoff, safe_cutoff and safe_token_cutoff."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import (
    CanonicalMessage,
    Part,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    message_text,
)
from harness.history import is_safe_cutoff, safe_cutoff, safe_token_cutoff
from harness.testing.strategies import histories, messy_histories


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


SMALL = settings(max_examples=200, deadline=None)


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


# --------------------------------------------------------------------------- cut points


def test_is_safe_cutoff() -> None:
    history = [req(user()), resp(call("a")), req(user("x")), resp(TextPart("t")), req(ret("a"))]
    assert [is_safe_cutoff(history, c) for c in range(6)] == [True, True, False, False, False, True]
    with pytest.raises(ValueError, match="cut"):
        is_safe_cutoff(history, 6)
    with pytest.raises(ValueError, match="cut"):
        is_safe_cutoff(history, -1)


def test_safe_cutoff_keeps_distant_pair_the_reference_splits() -> None:
    # call at index 0, its (deferred) return at index 8; the reference only looks +-5
    # messages around the cut and keeps the return without its call.
    history = [
        resp(call("far")),
        req(user("u0")),
        resp(TextPart("t0")),
        req(user("u1")),
        resp(TextPart("t1")),
        req(user("u2")),
        resp(TextPart("t2")),
        req(user("u3")),
        req(ret("far")),
    ]
    assert not is_safe_cutoff(history, 6)  # where keep=3 would cut
    cut = safe_cutoff(history, 3)
    assert cut == 0
    kept = history[cut:]
    assert history[0] in kept
    assert history[8] in kept


def test_safe_cutoff_basic_rules() -> None:
    history = [req(user()), resp(TextPart("a")), req(user()), resp(TextPart("b")), req(user())]
    assert safe_cutoff(history, 2) == 3
    assert safe_cutoff(history, 0) == 4  # the request being sent is always kept
    assert safe_cutoff(history, -5) == 4
    assert safe_cutoff(history, 5) == 0
    assert safe_cutoff(history, 50) == 0
    assert safe_cutoff([], 0) == 0
    assert safe_cutoff([], 3) == 0


def test_safe_cutoff_parallel_calls_walks_back() -> None:
    history = [
        req(user()),
        resp(call("a"), call("b"), call("c")),
        req(ret("a"), ret("b")),
        resp(TextPart("partial")),
        req(ret("c")),
        resp(TextPart("done")),
        req(user("next")),
    ]
    assert safe_cutoff(history, 3) == 1
    assert safe_cutoff(history, 2) == 5
    assert safe_cutoff(history, 5) == 1


def test_safe_token_cutoff() -> None:
    history = [req(user()), resp(call("a")), req(ret("a")), resp(TextPart("t")), req(user())]
    sizes = [10, 10, 10, 10, 10]
    counted: list[int] = []

    def count(message: CanonicalMessage) -> int:
        index = next(i for i, m in enumerate(history) if m is message)
        counted.append(index)
        return sizes[index]

    assert safe_token_cutoff(history, 50, count) == 0
    counted.clear()
    assert safe_token_cutoff(history, 20, count) == 3
    assert counted == [4, 3, 2]  # stops at the first message that does not fit
    # fits from index 2, but 2 splits the pair: move forward to the next safe cut
    assert safe_token_cutoff(history, 30, count) == 3
    assert safe_token_cutoff(history, 5, count) == 4  # the last message alone is too big: still kept
    assert safe_token_cutoff([], 10, count) == 0


def test_safe_token_cutoff_falls_back_below_when_no_fitting_cut_is_safe() -> None:
    history = [req(user()), resp(TextPart("x")), req(user()), resp(call("a")), req(ret("a"))]

    def count(message: CanonicalMessage) -> int:
        return 100 if message is history[-1] else 1

    # nothing fits (last message 100 > 50); cut 4 splits the pair -> walk back to 3
    assert safe_token_cutoff(history, 50, count) == 3
    assert safe_token_cutoff(history, 101, count) == 3  # fits from 3 on; 3 is safe
    assert safe_token_cutoff(history, 1000, count) == 0


# --------------------------------------------------------------------------- properties (brute-force oracles)


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
