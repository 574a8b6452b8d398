"""Tests for incremental history counting and anchoring in harness.tokens."""

from __future__ import annotations

import gc
import itertools
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core import CanonicalMessage, SystemPromptPart, TextPart, Usage, UserPromptPart
from harness.tokens import PART_OVERHEAD, TokenCounter

# --- incremental counting ----------------------------------------------------------------

_serial = itertools.count()


def make_message(kind: str, usage: int = 0, instructions: str | None = None) -> CanonicalMessage:
    """A unique message (its text holds a serial number, so no two are equal)."""
    n = next(_serial)
    if kind == "request":
        return CanonicalMessage.request(
            UserPromptPart(f"question {n} " * (n % 3 + 1)), instructions=instructions
        )
    return CanonicalMessage.response(
        TextPart(f"answer {n}"),
        usage=Usage(request_tokens=usage, response_tokens=usage // 10) if usage else None,
    )


def reference_count(counter: TokenCounter, messages: list[CanonicalMessage]) -> int:
    """From-scratch count: sum of per-message counts plus the newest instructions."""
    total = sum(counter.count_message(m) for m in messages)
    for message in reversed(messages):
        if message.kind == "request" and message.instructions:
            total += counter.count_text(message.instructions) + PART_OVERHEAD
            break
    return total


def newest_text(messages: list[CanonicalMessage]) -> str:
    """The instructions of the newest request that carries any (``""`` for none)."""
    for message in reversed(messages):
        if message.kind == "request" and message.instructions:
            return message.instructions
    return ""


def newest_instructions(counter: TokenCounter, messages: list[CanonicalMessage]) -> int:
    """Tokens of those instructions, counted like a part."""
    text = newest_text(messages)
    return counter.count_text(text) + PART_OVERHEAD if text else 0


_new_message = st.builds(
    make_message,
    st.sampled_from(["request", "response"]),
    st.sampled_from([0, 0, 1000, 5000]),
    st.sampled_from([None, None, "be terse", "be verbose"]),
)
_operation = st.one_of(
    st.tuples(st.just("append"), st.just(0), st.lists(_new_message, min_size=1, max_size=3)),
    st.tuples(st.just("replace"), st.integers(1, 1000), _new_message),
    st.tuples(st.just("insert"), st.integers(1, 1000), _new_message),
    st.tuples(st.just("delete"), st.integers(1, 1000), st.just(None)),
    st.tuples(st.just("truncate"), st.integers(1, 1000), st.just(None)),
    st.tuples(st.just("recount"), st.integers(0, 1000), st.booleans()),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    initial=st.lists(_new_message, min_size=1, max_size=12),
    operations=st.lists(_operation, max_size=25),
    as_tuple=st.booleans(),
    dynamic_first=st.booleans(),
)
def test_incremental_counts_match_from_scratch(
    initial: list[CanonicalMessage],
    operations: list[tuple[str, Any, Any]],
    as_tuple: bool,
    dynamic_first: bool,
) -> None:
    counter = TokenCounter(text_counter=len)
    reference = TokenCounter(text_counter=len)
    history = list(initial)
    if dynamic_first:  # the second message is then what frees the history (see Snapshot)
        history[0] = CanonicalMessage.request(
            SystemPromptPart("today is Monday", dynamic_ref="today"), UserPromptPart("the task")
        )
    # trusted[id] models the anchor rule: appended responses are trusted; an edit at or
    # before a response's index (or replacing/inserting it) makes it untrusted for good.
    trusted: dict[int, bool] = {id(m): True for m in history}
    older: list[list[CanonicalMessage]] = []

    def check(messages: list[CanonicalMessage]) -> None:
        given_messages: Any = tuple(messages) if as_tuple else messages
        exact = reference_count(reference, messages)
        assert counter.count_messages(given_messages) == exact
        anchors = [i for i, m in enumerate(messages) if m.usage is not None and m.usage.request_tokens > 0]
        expected = exact
        if anchors and trusted[id(messages[anchors[-1]])]:
            a = anchors[-1]
            usage = messages[a].usage
            assert usage is not None
            after = sum(reference.count_message(m) for m in messages[a + 1 :])
            # The instructions sent now replace those the anchor's request was sent with.
            removed = added = 0
            if newest_text(messages) != newest_text(messages[:a]):
                removed = newest_instructions(reference, messages[:a])
                added = newest_instructions(reference, messages)
            expected = max(usage.request_tokens + usage.response_tokens - removed, 0) + added + after
        assert counter.context_tokens(given_messages) == expected

    def untrust_from(index: int) -> None:
        for message in history[index:]:
            trusted[id(message)] = False

    check(history)
    for op, where, payload in operations:
        older.append(list(history))
        index = 1 + where % len(history)  # anywhere but the first message
        if op == "append":
            history.extend(payload)
            trusted.update({id(m): True for m in payload})
        elif op == "replace" and index < len(history):
            history[index] = payload
            trusted[id(payload)] = False
            untrust_from(index)
        elif op == "insert":
            history.insert(index, payload)
            # Inserting at the end is an append: the new response is trusted.
            trusted[id(payload)] = index == len(history) - 1
            untrust_from(index + 1)
        elif op == "delete" and index < len(history):
            del history[index]
            untrust_from(index)
        elif op == "truncate":
            del history[index:]
        check(history)
        if op == "recount":
            # Counting an older history or a prefix in between must not disturb the
            # current one.
            other = older[where % len(older)] if payload else history[: where % (len(history) + 1)]
            assert counter.count_messages(other) == reference_count(reference, other)
            check(history)


def test_recount_after_append_only_counts_the_new_message(spied: tuple[TokenCounter, list[str]]) -> None:
    counter, calls = spied
    history = [make_message("request" if i % 2 == 0 else "response") for i in range(200)]
    total = counter.count_messages(history)
    calls.clear()
    new = make_message("request")
    history.append(new)
    assert counter.count_messages(history) == total + counter.count_message(new)
    assert calls == [new.parts[0].content]  # pyright: ignore[reportAttributeAccessIssue]


def test_in_place_mutation_of_the_callers_list_is_seen() -> None:
    counter = TokenCounter(text_counter=len)
    history = [make_message("request"), make_message("response"), make_message("request")]
    counter.count_messages(history)
    history[1] = CanonicalMessage.response(TextPart("x" * 500))
    assert counter.count_messages(history) == sum(counter.count_message(m) for m in history)
    history[:] = history[:1]
    assert counter.count_messages(history) == counter.count_message(history[0])


def test_equal_but_not_identical_history_reuses_counts(spied: tuple[TokenCounter, list[str]]) -> None:
    counter, calls = spied
    history = [CanonicalMessage.user("same"), CanonicalMessage.response(TextPart("text"))]
    total = counter.count_messages(history)
    calls.clear()
    copy = [CanonicalMessage.user("same"), CanonicalMessage.response(TextPart("text"))]
    assert counter.count_messages(copy) == total
    assert calls == []


def test_anchor_marks_live_as_long_as_their_responses() -> None:
    counter = TokenCounter(text_counter=len)
    history, response = anchored_history()
    counter.context_tokens(history)
    history[0] = CanonicalMessage.user("edited before the anchor")
    exact = counter.context_tokens(history)
    assert exact == counter.count_messages(history)
    for _ in range(10):  # unrelated histories evict every snapshot holding the edit
        counter.context_tokens([make_message("request"), make_message("response", usage=100)])
    assert counter.context_tokens(history) == exact
    assert counter._index.anchor_trusted(response) is False
    # Once nothing else holds a response (the counter holds it only weakly), its mark goes
    # with it.
    key = id(response)
    del history, response
    gc.collect()
    assert key not in counter._index._anchors


# --- anchoring ---------------------------------------------------------------------------


def anchored_history() -> tuple[list[CanonicalMessage], CanonicalMessage]:
    response = CanonicalMessage.response(
        TextPart("done"), usage=Usage(request_tokens=10_000, response_tokens=50)
    )
    history = [
        CanonicalMessage.user("first question"),
        CanonicalMessage.response(
            TextPart("first answer"), usage=Usage(request_tokens=4_000, response_tokens=20)
        ),
        CanonicalMessage.user("second question"),
        response,
        CanonicalMessage.user("third question"),
    ]
    return history, response


def test_context_tokens_anchors_on_newest_usage() -> None:
    counter = TokenCounter()
    history, _ = anchored_history()
    assert counter.context_tokens(history) == 10_000 + 50 + counter.count_message(history[-1])
    history.append(CanonicalMessage.response(TextPart("more")))
    after = counter.count_message(history[-2]) + counter.count_message(history[-1])
    assert counter.context_tokens(history) == 10_050 + after


def test_context_tokens_without_usage_is_exact() -> None:
    counter = TokenCounter()
    history = [CanonicalMessage.user("q"), CanonicalMessage.response(TextPart("a"), usage=Usage())]
    assert counter.context_tokens(history) == counter.count_messages(history)


def test_edit_before_anchor_falls_back_to_exact_for_good() -> None:
    counter = TokenCounter()
    history, response = anchored_history()
    assert counter.context_tokens(history) > counter.count_messages(history)
    history[2] = CanonicalMessage.user("compacted")
    assert counter.context_tokens(history) == counter.count_messages(history)
    # Undoing the edit does not bring the stale anchor back.
    restored, _ = anchored_history()
    restored[3] = response
    assert counter.context_tokens(restored) == counter.count_messages(restored)
    # A new response with usage becomes the anchor again.
    history.append(
        CanonicalMessage.response(TextPart("ok"), usage=Usage(request_tokens=7, response_tokens=1))
    )
    assert counter.context_tokens(history) == 8


def test_sliding_window_invalidates_anchor() -> None:
    counter = TokenCounter()
    history, _ = anchored_history()
    counter.context_tokens(history)
    window = history[2:]
    assert counter.context_tokens(window) == counter.count_messages(window)


def test_edit_after_anchor_keeps_it() -> None:
    counter = TokenCounter()
    history, _ = anchored_history()
    counter.context_tokens(history)
    history[4] = CanonicalMessage.user("a different last question")
    assert counter.context_tokens(history) == 10_050 + counter.count_message(history[4])


def test_freshly_loaded_history_trusts_its_anchor() -> None:
    counter = TokenCounter()
    counter.context_tokens([CanonicalMessage.user("unrelated")])
    history, _ = anchored_history()
    assert counter.context_tokens(history) == 10_050 + counter.count_message(history[-1])


def test_equal_copy_of_a_remembered_history_keeps_its_anchor() -> None:
    # A durable engine replaying a run with the same agent rebuilds every message as an
    # equal copy while the counter still remembers the first execution's objects.
    counter = TokenCounter()
    history, _ = anchored_history()
    assert counter.context_tokens(history) == 10_050 + counter.count_message(history[-1])
    copy, copied_response = anchored_history()
    assert copy == history
    assert copy[3] is not history[3]
    assert counter.context_tokens(copy) == 10_050 + counter.count_message(copy[-1])
    assert counter._index.anchor_trusted(copied_response) is True
    copy.append(CanonicalMessage.response(TextPart("later")))
    after = counter.count_message(copy[-2]) + counter.count_message(copy[-1])
    assert counter.context_tokens(copy) == 10_050 + after


def test_equal_copy_of_an_untrusted_anchor_stays_untrusted() -> None:
    counter = TokenCounter()
    history, _ = anchored_history()
    counter.context_tokens(history)
    history[2] = CanonicalMessage.user("compacted")
    counter.context_tokens(history)
    copy, copied_response = anchored_history()
    copy[2] = CanonicalMessage.user("compacted")
    assert counter.context_tokens(copy) == counter.count_messages(copy)
    assert counter._index.anchor_trusted(copied_response) is not True


def test_edited_copy_of_anchor_is_not_trusted() -> None:
    counter = TokenCounter()
    history, response = anchored_history()
    counter.context_tokens(history)
    history[3] = response.replace(parts=(TextPart("do"),))
    assert counter.context_tokens(history) == counter.count_messages(history)


def test_prefix_count_does_not_hide_a_later_edit() -> None:
    counter = TokenCounter()
    history, response = anchored_history()
    counter.context_tokens(history)
    counter.count_messages(history[:1])  # e.g. a capability measuring what it would keep
    history[2] = CanonicalMessage.user("edited between the prefix and the anchor")
    assert counter.context_tokens(history) == counter.count_messages(history)
    assert counter._index.anchor_trusted(response) is False


def test_truncate_then_append_trusts_the_new_response() -> None:
    counter = TokenCounter()
    history, _ = anchored_history()
    counter.context_tokens(history)
    del history[-1]
    counter.context_tokens(history)
    history.append(CanonicalMessage.user("retry"))
    answer = CanonicalMessage.response(TextPart("ok"), usage=Usage(request_tokens=123, response_tokens=4))
    history.append(answer)
    assert counter.context_tokens(history) == 127


def test_middle_edit_in_a_long_history_reuses_both_sides(spied: tuple[TokenCounter, list[str]]) -> None:
    counter, calls = spied
    history = [
        make_message("request") if i % 2 == 0 else make_message("response", usage=500) for i in range(400)
    ]
    counter.context_tokens(history)
    calls.clear()
    history[200] = CanonicalMessage.user("edited in the middle")
    assert counter.count_messages(history) == reference_count(counter, history)
    assert calls == ["edited in the middle"]  # nothing else was tokenized
    # Every response after the edit lost its anchor status, even once later ones are gone.
    assert counter.context_tokens(history) == counter.count_messages(history)
    assert counter.context_tokens(history[:301]) == counter.count_messages(history[:301])
    del history[250]
    assert counter.context_tokens(history) == counter.count_messages(history)
    # Responses before the edit still anchor.
    before = history[:200]
    assert before[-1].usage is not None
    assert counter.context_tokens(before) == 500 + 50


def _rebuilt(history: list[CanonicalMessage]) -> list[CanonicalMessage]:
    """Equal copies of every message (as a session reloaded from disk would give)."""
    return [attrs.evolve(m, parts=tuple(attrs.evolve(p) for p in m.parts)) for m in history]


def test_a_rebuilt_equal_history_is_compared_deeply_once_then_by_identity(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = [
        message
        for i in range(1000)
        for message in (
            CanonicalMessage.user(f"question {i}"),
            CanonicalMessage.response(TextPart(f"answer {i}")),
        )
    ]
    counter = TokenCounter()
    total = counter.count_messages(original)
    copy = _rebuilt(original)
    assert counter.count_messages(copy) == total

    calls = 0
    real_eq = CanonicalMessage.__eq__

    def counting_eq(self: CanonicalMessage, other: object) -> Any:
        nonlocal calls
        calls += 1
        return real_eq(self, other)

    monkeypatch.setattr(CanonicalMessage, "__eq__", counting_eq)
    grown = list(copy)
    for step in range(20):
        grown = [*grown, CanonicalMessage.user(f"more {step}")]
        grown[5 + step] = CanonicalMessage.user(f"edited {step}")  # an edit mid-history
        counter.count_messages(grown)
    # Without adopting the rebuilt objects every call re-compared ~2,000 messages deeply;
    # now each call costs a few deep comparisons per binary-search step.
    assert calls < 20 * 200


def test_a_response_whose_context_the_provider_edited_is_no_anchor() -> None:
    # Anthropic context management: the usage counts the server's edited context, far
    # smaller than the history kept here; a request to another provider must not trust it.
    counter = TokenCounter()
    edited = {
        "provider_details": {"context_management": {"applied_edits": [{"type": "clear_tool_uses_20250919"}]}}
    }
    history = [
        CanonicalMessage.user("word " * 500),
        CanonicalMessage.response(
            TextPart("a"), usage=Usage(request_tokens=12, response_tokens=1), extra=edited
        ),
        CanonicalMessage.user("next"),
    ]
    assert counter.context_tokens(history) == counter.count_messages(history)
    untouched = {"provider_details": {"context_management": {"applied_edits": []}}}
    history[1] = CanonicalMessage.response(
        TextPart("a"), usage=Usage(request_tokens=12, response_tokens=1), extra=untouched
    )
    fresh = TokenCounter()  # an unedited history, seen for the first time
    assert fresh.context_tokens(history) == 13 + fresh.count_message(history[2])
