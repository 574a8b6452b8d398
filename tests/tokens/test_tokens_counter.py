"""Tests for TokenCounter ownership and memory: no shared state, bounded and weak caches."""

from __future__ import annotations

import gc
import itertools
import threading
import weakref
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core import (
    CanonicalMessage,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    Usage,
    UserPromptPart,
)
from harness.tokens import PART_OVERHEAD, TokenCounter
from harness.tokens._incremental import MAX_SNAPSHOTS

_serial = itertools.count()


def conversation(turns: int, *, instructions: str | None = None) -> list[CanonicalMessage]:
    """A unique history: per turn a request, a tool call, its return and an answer with usage."""
    history: list[CanonicalMessage] = []
    for _ in range(turns):
        n = next(_serial)
        history.append(CanonicalMessage.request(UserPromptPart(f"question {n}"), instructions=instructions))
        history.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"c{n}", tool_name="read_file", args={"path": f"f{n}.py"})
            )
        )
        history.append(
            CanonicalMessage.request(
                ToolReturnPart(tool_call_id=f"c{n}", tool_name="read_file", content=f"print({n})\n" * 3)
            )
        )
        history.append(
            CanonicalMessage.response(
                TextPart(f"answer {n}"), usage=Usage(request_tokens=100 + n, response_tokens=10)
            )
        )
    return history


def reference_count(messages: list[CanonicalMessage]) -> int:
    """From-scratch count with a new counter: per-message counts plus the newest instructions."""
    counter = TokenCounter(text_counter=len)
    total = sum(counter.count_message(m) for m in messages)
    for message in reversed(messages):
        if message.kind == "request" and message.instructions:
            return total + len(message.instructions) + PART_OVERHEAD
    return total


def refs_of(history: list[CanonicalMessage]) -> list[weakref.ref[Any]]:
    """Weak references to every message and part of ``history``."""
    refs: list[weakref.ref[Any]] = [weakref.ref(m) for m in history]
    refs += [weakref.ref(p) for m in history for p in m.parts]
    return refs


# --- ownership ---------------------------------------------------------------------------


def test_counters_share_no_state() -> None:
    seen_a: list[str] = []
    seen_b: list[str] = []
    a = TokenCounter(text_counter=lambda text: seen_a.append(text) or len(text))
    b = TokenCounter(text_counter=lambda text: seen_b.append(text) or len(text))
    history = conversation(5)
    total = a.count_messages(history)
    assert b.count_messages(history) == total
    assert seen_b == seen_a  # b tokenized everything again: nothing came from a's caches
    seen_a.clear()
    assert a.count_messages(history) == total
    assert seen_a == []
    assert a._index is not b._index
    assert a._messages is not b._messages
    assert a._short is not b._short


def test_a_counter_reports_only_the_model_name_it_was_given() -> None:
    named = TokenCounter("claude-sonnet-4-5")
    named.count_text("hello")
    plain = TokenCounter()
    assert plain.model_name is None
    assert repr(plain) == "TokenCounter(model_name=None, encoding='cl100k_base')"
    assert named.model_name == "claude-sonnet-4-5"
    assert TokenCounter(encoding="cl100k_base").model_name is None
    assert TokenCounter("gpt-4o").model_name == "gpt-4o"
    with pytest.raises(AttributeError):
        plain.model_name = "gpt-4o"  # pyright: ignore[reportAttributeAccessIssue]


def test_the_shared_registry_is_gone() -> None:
    import harness.tokens as tokens

    assert not hasattr(tokens, "get_token_counter")
    assert "get_token_counter" not in tokens.__all__


# --- nothing keeps a history alive ---------------------------------------------------------


def test_a_dropped_history_is_freed() -> None:
    counter = TokenCounter(text_counter=len)
    history = conversation(500, instructions="be brief")
    total = counter.count_messages(history)
    assert counter.context_tokens(history) > 0
    assert sum(counter.count_message(m) for m in history[:50]) > 0
    assert sum(counter.count_part(p) for m in history[:50] for p in m.parts) > 0
    # An edited copy (a branch), a window and an append: more snapshots of the same lineage.
    edited = list(history)
    edited[1000] = CanonicalMessage.user("edited")
    counter.count_messages(edited)
    counter.count_messages(history[200:])
    history.append(CanonicalMessage.user("one more"))
    counter.context_tokens(history)
    assert counter._index.snapshot_count >= 3
    assert counter._index.anchor_count > 0
    refs = refs_of(history) + refs_of(edited)
    del history, edited
    gc.collect()
    assert [ref for ref in refs if ref() is not None] == []
    assert counter._index.snapshot_count == 0
    assert counter._index.anchor_count == 0
    assert len(counter._messages) == 0
    assert len(counter._parts) == 0
    # The counter still works, and counts as before.
    again = conversation(3)
    assert counter.count_messages(again) == reference_count(again)
    assert total > 0


def test_histories_of_finished_runs_are_freed_while_the_counter_lives() -> None:
    counter = TokenCounter(text_counter=len)
    refs: list[weakref.ref[Any]] = []
    for _ in range(20):  # one agent serving one session after another
        history = conversation(20)
        for end in range(1, len(history) + 1):
            counter.context_tokens(history[:end])
        refs += refs_of(history)
        del history
    gc.collect()
    assert [ref for ref in refs if ref() is not None] == []


def test_histories_sharing_their_first_message_are_held_at_most_max_snapshots() -> None:
    counter = TokenCounter(text_counter=len)
    system = CanonicalMessage.request(SystemPromptPart("a shared system prompt"))
    tails: list[weakref.ref[CanonicalMessage]] = []
    for _ in range(3 * MAX_SNAPSHOTS):
        history = [system, *conversation(3)]
        counter.count_messages(history)
        tails.append(weakref.ref(history[-1]))
        del history
    gc.collect()
    assert sum(ref() is not None for ref in tails) <= MAX_SNAPSHOTS


# --- bounds ------------------------------------------------------------------------------


def test_caches_stay_within_fixed_bounds() -> None:
    counter = TokenCounter(text_counter=len, cache_size=64)
    histories = [conversation(25, instructions=f"rule {i}") for i in range(12)]  # kept alive
    for history in histories:
        assert counter.count_messages(history) == reference_count(history)
        assert len(counter._messages) <= 64
        assert len(counter._parts) <= 128
        assert counter._index.anchor_count <= 64
        assert counter._index.snapshot_count <= MAX_SNAPSHOTS
    long = conversation(1000)  # the bound does not grow with the largest history
    assert counter.count_messages(long) == reference_count(long)
    assert len(counter._messages) <= 64
    assert len(counter._parts) <= 128
    assert counter._index.anchor_count <= 64
    # Counts stay right after every cache overflowed.
    for history in [*histories, long]:
        assert counter.count_messages(history) == reference_count(history)
        assert counter.context_tokens(history) > 0


def test_text_caches_are_bounded() -> None:
    counter = TokenCounter(text_counter=len)
    for i in range(10_000):
        assert counter.count_text(f"text {i}") == len(f"text {i}")
    assert len(counter._short) <= 8_192
    for i in range(200):
        history = [CanonicalMessage.request(UserPromptPart("q"), instructions=f"instructions {i}")]
        assert counter.count_messages(history) == reference_count(history)
    assert len(counter._instructions) <= 64


def test_recently_used_short_texts_stay_cached() -> None:
    calls: list[str] = []
    counter = TokenCounter(text_counter=lambda text: calls.append(text) or len(text))
    for i in range(9_000):
        counter.count_text("placeholder")  # used all along
        counter.count_text(f"once {i}")
    assert calls.count("placeholder") == 1


# --- the weak paths keep counts right ----------------------------------------------------------

_new_message = st.builds(
    lambda kind, usage, instructions: (
        CanonicalMessage.request(UserPromptPart(f"q {next(_serial)}"), instructions=instructions)
        if kind == "request"
        else CanonicalMessage.request(
            # a first request as pydantic-ai re-evaluates it: the same prompt, other dynamic parts
            SystemPromptPart(f"today {next(_serial) % 3}", dynamic_ref="today"),
            UserPromptPart("the task"),
        )
        if kind == "dynamic"
        else CanonicalMessage.response(
            TextPart(f"a {next(_serial)}"),
            usage=Usage(request_tokens=usage, response_tokens=1) if usage else None,
        )
    ),
    st.sampled_from(["request", "response", "dynamic"]),
    st.sampled_from([0, 0, 500]),
    st.sampled_from([None, "be terse"]),
)
_operation = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 1000), _new_message),
    st.tuples(st.just("replace"), st.integers(0, 1000), _new_message),
    st.tuples(st.just("insert"), st.integers(0, 1000), _new_message),
    st.tuples(st.just("delete"), st.integers(0, 1000), st.none()),
    st.tuples(st.just("truncate"), st.integers(0, 1000), st.none()),
    st.tuples(st.just("collect"), st.integers(0, 1000), st.none()),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(initial=st.lists(_new_message, min_size=1, max_size=10), operations=st.lists(_operation, max_size=30))
def test_counts_stay_exact_while_old_versions_die(
    initial: list[CanonicalMessage], operations: list[tuple[str, int, Any]]
) -> None:
    counter = TokenCounter(text_counter=len, cache_size=16)
    history = list(initial)
    del initial
    assert counter.count_messages(history) == reference_count(history)
    for op, where, payload in operations:
        index = where % (len(history) + 1)
        if op == "append":
            history = [*history, payload]  # the old version is dropped at once
        elif op == "replace" and index < len(history):
            history = [*history[:index], payload, *history[index + 1 :]]
        elif op == "insert":
            history = [*history[:index], payload, *history[index:]]
        elif op == "delete" and len(history) > 1 and index < len(history):
            history = history[:index] + history[index + 1 :]
        elif op == "truncate" and index:
            history = history[:index]
        elif op == "collect":
            gc.collect()
        del payload
        assert counter.count_messages(history) == reference_count(history)
        assert counter.context_tokens(history) >= 0


def test_counting_from_many_threads_while_histories_die() -> None:
    counter = TokenCounter(text_counter=len, cache_size=256)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(30):
                history = conversation(10)
                for end in range(1, len(history) + 1, 7):
                    assert counter.count_messages(history[:end]) == reference_count(history[:end])
                del history
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    gc.collect()
    assert counter._index.snapshot_count == 0
