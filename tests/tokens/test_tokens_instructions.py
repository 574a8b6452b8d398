"""Tests for harness.tokens: instructions that change after the anchor are counted as a difference."""

from __future__ import annotations

import gc
import itertools
import weakref
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core import CanonicalMessage, SystemPromptPart, TextPart, Usage, UserPromptPart
from harness.tokens import PART_OVERHEAD, TokenCounter

_serial = itertools.count()

LONG = "Follow the style guide to the letter. " * 422  # over 16,000 characters


def ask(instructions: str | None = None, *parts: SystemPromptPart) -> CanonicalMessage:
    return CanonicalMessage.request(
        *parts, UserPromptPart(f"question {next(_serial)}"), instructions=instructions
    )


def answer(request_tokens: int = 1_000, instructions: str | None = None) -> CanonicalMessage:
    return CanonicalMessage.response(
        TextPart(f"answer {next(_serial)}"),
        usage=Usage(request_tokens=request_tokens, response_tokens=50),
        instructions=instructions,
    )


def instruction_tokens(counter: TokenCounter, text: str) -> int:
    return counter.count_text(text) + PART_OVERHEAD


# --- the ``instructions`` field ------------------------------------------------------------------


def test_longer_instructions_after_the_anchor_are_counted() -> None:
    counter = TokenCounter(text_counter=len)
    start = [ask("Be brief."), answer()]
    same = counter.context_tokens([*start, ask("Be brief.")])
    longer = counter.context_tokens([*start, ask("Be brief. " + LONG)])
    assert len(LONG) > 16_000
    assert longer - same == instruction_tokens(counter, "Be brief. " + LONG) - instruction_tokens(
        counter, "Be brief."
    )


def test_equal_instructions_change_nothing() -> None:
    counter = TokenCounter(text_counter=len)
    history = [ask("".join(["be ", "brief"])), answer(), ask("be brief")]  # equal, not the same object
    assert counter.context_tokens(history) == 1_050 + counter.count_message(history[-1])


def test_instructions_first_given_after_the_anchor_are_added() -> None:
    counter = TokenCounter(text_counter=len)
    history = [ask(), answer(), ask("Now be formal.")]
    after = counter.count_message(history[-1])
    assert counter.context_tokens(history) == 1_050 + instruction_tokens(counter, "Now be formal.") + after


def test_a_request_without_instructions_keeps_the_anchored_ones() -> None:
    # Only the newest request that carries instructions sends them (pydantic-ai's rule),
    # so a later request without any sends the same ones: nothing changed.
    counter = TokenCounter(text_counter=len)
    history = [ask("Be brief."), answer(), ask()]
    assert counter.context_tokens(history) == 1_050 + counter.count_message(history[-1])


def test_a_response_that_records_its_instructions_is_believed() -> None:
    counter = TokenCounter(text_counter=len)
    # The request before the anchor says "Be brief.", but the response was produced under
    # other instructions: those are what its usage covered.
    history = [ask("Be brief."), answer(instructions="Be very brief."), ask("Be brief.")]
    after = counter.count_message(history[-1])
    change = instruction_tokens(counter, "Be brief.") - instruction_tokens(counter, "Be very brief.")
    assert counter.context_tokens(history) == 1_050 + change + after


def test_removing_instructions_never_takes_the_anchor_below_zero() -> None:
    # The provider's figure (60) is smaller than the local count of the old instructions:
    # the anchored part goes to zero, and the new instructions still count in full.
    counter = TokenCounter(text_counter=len)
    history = [ask(LONG), answer(request_tokens=10), ask("short")]
    after = counter.count_message(history[-1])
    assert counter.context_tokens(history) == 0 + instruction_tokens(counter, "short") + after


def test_the_exact_count_is_unchanged() -> None:
    counter = TokenCounter(text_counter=len)
    history = [ask("Be brief."), answer(), ask(LONG)]
    messages = sum(counter.count_message(m) for m in history)
    assert counter.count_messages(history) == messages + instruction_tokens(counter, LONG)


# --- dynamic system prompts (``SystemPromptPart.dynamic_ref``) --------------------------------


def dynamic(text: str) -> SystemPromptPart:
    return SystemPromptPart(text, dynamic_ref="today")


def test_a_re_evaluated_dynamic_system_prompt_is_counted_and_the_anchor_kept() -> None:
    counter = TokenCounter(text_counter=len)
    first = ask(None, SystemPromptPart("You are terse."), dynamic("Today is Monday."))
    history = [first, answer(), ask()]
    counter.context_tokens(history)  # the history as the request before the anchor was sent
    anchor = answer(request_tokens=5_000)
    # The next run re-evaluates the dynamic prompt in the first request (as pydantic-ai does).
    first_again = first.replace(
        parts=(first.parts[0], dynamic("Today is Tuesday, the 2nd of June."), first.parts[2])
    )
    rerun = [first_again, *history[1:], anchor, ask()]
    grown = len("Today is Tuesday, the 2nd of June.") - len("Today is Monday.")
    assert counter.context_tokens(rerun) == 5_050 + grown + counter.count_message(rerun[-1])
    assert counter.count_messages(rerun) == sum(counter.count_message(m) for m in rerun)
    assert counter._index.anchor_trusted(anchor)  # pyright: ignore[reportPrivateUsage]
    # A response to a request sent with the new prompt needs no correction.
    newer = answer(request_tokens=6_000)
    rerun += [newer, ask()]
    assert counter.context_tokens(rerun) == 6_050 + counter.count_message(rerun[-1])


def test_a_dynamic_prompt_that_appears_or_goes_is_counted() -> None:
    counter = TokenCounter(text_counter=len)
    first = ask(None, SystemPromptPart("You are terse."))
    history = [first, answer(), ask()]
    counter.context_tokens(history)
    with_prompt = first.replace(parts=(first.parts[0], dynamic("Today is Monday."), first.parts[1]))
    rerun = [with_prompt, *history[1:]]
    part = counter.count_part(with_prompt.parts[1])
    assert counter.context_tokens(rerun) == 1_050 + part + counter.count_message(rerun[-1])
    assert counter.context_tokens(history) == 1_050 + counter.count_message(history[-1])


def test_a_changed_static_system_prompt_is_an_edit() -> None:
    counter = TokenCounter(text_counter=len)
    first = ask(None, SystemPromptPart("You are terse."))
    history = [first, answer(), ask()]
    counter.context_tokens(history)
    edited = [first.replace(parts=(SystemPromptPart("You are chatty."), first.parts[1])), *history[1:]]
    assert counter.context_tokens(edited) == counter.count_messages(edited)


def test_a_dynamic_change_with_another_edit_is_an_edit() -> None:
    counter = TokenCounter(text_counter=len)
    first = ask(None, dynamic("Today is Monday."))
    history = [first, answer(), ask(), answer(), ask()]
    counter.context_tokens(history)
    again = first.replace(parts=(dynamic("Today is Tuesday."), first.parts[1]))
    edited = [again, history[1], ask(), *history[3:]]
    assert counter.context_tokens(edited) == counter.count_messages(edited)


_step = st.one_of(
    st.tuples(st.just("ask"), st.sampled_from([None, "be terse", "be verbose"])),
    st.tuples(st.just("answer"), st.sampled_from([0, 30, 2_000])),
    st.tuples(st.just("today"), st.sampled_from(["", "Monday", "Tuesday the 2nd of June"])),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(_step, max_size=30))
def test_a_run_with_changing_prompts_is_anchored_and_corrected(steps: list[tuple[str, Any]]) -> None:
    """A model of a conversation counted before every request while both kinds of prompt change."""
    counter = TokenCounter(text_counter=len)
    reference = TokenCounter(text_counter=len)
    history = [ask(None, SystemPromptPart("You are terse."), dynamic("today is Sunday"))]
    changes: list[tuple[int, int]] = []  # (history length when the prompt changed, tokens added)
    for kind, value in steps:
        if kind == "ask":
            history.append(ask(value))
        elif kind == "answer":
            history.append(answer(value) if value else CanonicalMessage.response(TextPart("no usage")))
        else:
            first = history[0]
            parts = (first.parts[0], *((dynamic(value),) if value else ()), first.parts[-1])
            again = first.replace(parts=parts)
            changes.append((len(history), reference.count_message(again) - reference.count_message(first)))
            history[0] = again
        exact = sum(reference.count_message(m) for m in history)
        texts = [m.instructions for m in history if m.kind == "request" and m.instructions]
        exact += instruction_tokens(reference, texts[-1]) if texts else 0
        assert counter.count_messages(history) == exact
        anchors = [i for i, m in enumerate(history) if m.usage is not None and m.usage.request_tokens > 0]
        expected = exact
        if anchors:
            a = anchors[-1]
            usage = history[a].usage
            assert usage is not None
            delta = sum(change for length, change in changes if length > a)
            removed, added = max(-delta, 0), max(delta, 0)
            sent = [m.instructions for m in history[:a] if m.kind == "request" and m.instructions]
            if (texts[-1] if texts else "") != (sent[-1] if sent else ""):
                removed += instruction_tokens(reference, sent[-1]) if sent else 0
                added += instruction_tokens(reference, texts[-1]) if texts else 0
            after = sum(reference.count_message(m) for m in history[a + 1 :])
            expected = max(usage.request_tokens + usage.response_tokens - removed, 0) + added + after
        assert counter.context_tokens(history) == expected


def test_a_change_before_a_truncation_does_not_reach_later_anchors() -> None:
    counter = TokenCounter(text_counter=len)
    first = ask(None, dynamic("today is Monday"))
    history = [first, answer(), ask(), answer(), ask(), answer(), ask()]
    counter.context_tokens(history)
    history[0] = first.replace(parts=(dynamic("today is Tuesday, a much longer day"), first.parts[1]))
    counter.context_tokens(history)  # a change recorded for the anchors up to here
    kept = history[:3]
    counter.context_tokens(kept)  # truncated: the older anchor keeps its correction
    grown = len("today is Tuesday, a much longer day") - len("today is Monday")
    assert counter.context_tokens(kept) == 1_050 + grown + counter.count_message(kept[2])
    later = answer(request_tokens=2_000)
    kept += [later, ask()]  # a response to a request sent with the new prompt
    assert counter.context_tokens(kept) == 2_050 + counter.count_message(kept[-1])


def test_two_views_of_one_history_counted_in_turn_stay_right_and_small() -> None:
    # A loop that keeps its instructions out of the stored history, counted both as stored
    # and as sent: each count is right for what it is given, and the two views of a turn
    # leave one record of the change between them, not two.
    counter = TokenCounter(text_counter=len)
    stored = [ask(), answer(), ask()]
    for turn in range(50):
        rules = dynamic(f"rules for turn {turn} " * (turn % 4 + 1))
        sent = [stored[0].replace(parts=(rules, *stored[0].parts)), *stored[1:]]
        as_stored = counter.context_tokens(stored)
        as_sent = counter.context_tokens(sent)
        assert as_sent == as_stored + counter.count_part(rules)
        if turn:
            # The provider's figure covered the previous turn's rules.
            previous = f"rules for turn {turn - 1} " * ((turn - 1) % 4 + 1)
            assert as_stored == 1_050 - len(previous) - PART_OVERHEAD + counter.count_message(stored[-1])
        stored += [answer(), ask()]
    snapshot = counter._index._snapshots[0]  # pyright: ignore[reportPrivateUsage]
    assert len(snapshot.changed_at) == 50


def test_the_replaced_first_request_need_not_be_kept_by_the_caller() -> None:
    counter = TokenCounter(text_counter=len)
    history = [ask(None, dynamic("today is Monday")), answer(), ask()]
    counter.context_tokens(history)
    anchor = answer(request_tokens=3_000)
    history += [anchor, ask()]
    # Replaced in place: nothing but the counter could still hold the old first request.
    history[0] = history[0].replace(
        parts=(dynamic("today is Tuesday, a much longer day"), history[0].parts[1])
    )
    gc.collect()
    grown = len("today is Tuesday, a much longer day") - len("today is Monday")
    assert counter.context_tokens(history) == 3_050 + grown + counter.count_message(history[-1])


def test_a_history_with_dynamic_prompts_is_freed_once_dropped() -> None:
    counter = TokenCounter(text_counter=len)
    history = [ask(None, dynamic("today is Monday")), answer(), ask()]
    counter.context_tokens(history)
    probe = weakref.ref(history[0])
    del history
    gc.collect()
    assert probe() is None
    assert counter._index.snapshot_count == 0  # pyright: ignore[reportPrivateUsage]


def test_after_any_edit_a_first_request_with_dynamic_prompts_stays_comparable() -> None:
    counter = TokenCounter(text_counter=len)
    history = [ask(None, dynamic("today is Monday")), answer(), ask(), answer(), ask()]
    counter.context_tokens(history)
    before = list(history)  # alive while the edit is counted: the edit is seen as one
    del history[1:3]  # an edit grafting everything after the first request
    counter.context_tokens(history)
    del before
    newer = answer(request_tokens=4_000)
    history += [newer, ask()]
    counter.context_tokens(history)
    history[0] = history[0].replace(
        parts=(dynamic("today is Tuesday, a much longer day"), history[0].parts[1])
    )
    gc.collect()
    grown = len("today is Tuesday, a much longer day") - len("today is Monday")
    assert counter.context_tokens(history) == 4_050 + grown + counter.count_message(history[-1])


def test_a_first_request_counted_alone_stays_comparable_once_answered() -> None:
    counter = TokenCounter(text_counter=len)
    history = [ask(None, dynamic("today is Monday"))]
    counter.context_tokens(history)  # the first request, sent alone
    anchor = answer(request_tokens=2_000)
    history += [anchor, ask()]
    counter.context_tokens(history)
    history[0] = history[0].replace(
        parts=(dynamic("today is Tuesday, a much longer day"), history[0].parts[1])
    )
    gc.collect()
    grown = len("today is Tuesday, a much longer day") - len("today is Monday")
    assert counter.context_tokens(history) == 2_050 + grown + counter.count_message(history[-1])
