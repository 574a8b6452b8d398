"""The reference grammar: parsing, tolerance of wrappers, call ids, canonical text."""

from __future__ import annotations

import pytest
from harness_recall import HINT, Ref, call_ref, hint, parse_ref
from hypothesis import given, settings
from hypothesis import strategies as st


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("r12", Ref("message", 12, 12)),
        ("r12.3", Ref("part", 12, 12, part=3)),
        ("r10-r40", Ref("range", 10, 40)),
        ("r10-40", Ref("range", 10, 40)),
        ("r7-r7", Ref("message", 7, 7)),
        ("R5.0", Ref("part", 5, 5, part=0)),
        ("call_abc", Ref("call", call_id="call_abc")),
        ("toolu_01AbC-x.y", Ref("call", call_id="toolu_01AbC-x.y")),
        ("call:r12", Ref("call", call_id="r12")),
    ],
)
def test_forms(text: str, expected: Ref) -> None:
    assert parse_ref(text) == expected


@pytest.mark.parametrize(
    "text", ["[recall: r12.3]", ' "r12.3" ', "`r12.3`", "recall: r12.3", "(r12.3)", "recall r12.3"]
)
def test_what_a_model_may_wrap_a_reference_in_is_ignored(text: str) -> None:
    assert parse_ref(text) == Ref("part", 12, 12, part=3)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "empty reference"),
        ("  [] ", "empty reference"),
        ("r40-r10", "ends (r10) before it starts (r40)"),
        ("two words", "is not a reference"),
        ("call:", "names no tool call id"),
        ("x" * 300, "too long"),
    ],
)
def test_bad_references_say_what_is_accepted(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match="r12") as raised:
        parse_ref(text)
    assert problem in str(raised.value)


def test_a_call_id_that_looks_like_a_seq_form_is_written_with_the_call_prefix() -> None:
    assert call_ref("call_1") == "call_1"
    assert call_ref("r12") == "call:r12"
    assert call_ref("r1-2") == "call:r1-2"
    assert call_ref("recall_1") == "call:recall_1"  # "recall" would be taken for a prefix
    assert call_ref("[x]") == "call:[x]"
    for call_id in ("r12", "recall_1", "call_1", "call:x"):
        assert parse_ref(call_ref(call_id)) == Ref("call", call_id=call_id)


def test_hint_is_the_text_placeholders_append() -> None:
    assert hint("r3.1") == " [recall: r3.1]" == HINT.format(ref="r3.1")


def _message(seq: int) -> Ref:
    return Ref("message", seq, seq)


def _part(seq: int, part: int) -> Ref:
    return Ref("part", seq, seq, part=part)


def _range(start: int, length: int) -> Ref:
    return Ref("range", start, start + length)


def _call(call_id: str) -> Ref:
    return Ref("call", call_id=call_id)


refs = st.one_of(
    st.builds(_message, st.integers(0, 10**9)),
    st.builds(_part, st.integers(0, 10**9), st.integers(0, 999)),
    st.builds(_range, st.integers(0, 10**6), st.integers(1, 10**6)),
    st.builds(_call, st.text(st.characters(blacklist_categories=("Z", "C")), min_size=1, max_size=40)),
)


@settings(max_examples=200, deadline=None)
@given(refs)
def test_the_canonical_text_parses_back_to_the_same_reference(ref: Ref) -> None:
    assert parse_ref(str(ref)) == ref
    if ref.call_id is None or ref.call_id.replace("_", "").isalnum():
        assert parse_ref(hint(str(ref))) == ref  # the placeholder's whole hint parses too
