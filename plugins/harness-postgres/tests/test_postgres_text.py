"""The lossless text escape: any string round-trips, and ordinary text is left as it is."""

from __future__ import annotations

import json
import re

from harness_postgres.text import ESCAPE, ascii_json, escape, unescape
from hypothesis import given, settings
from hypothesis import strategies as st

_ANY = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=40) | st.text(
    alphabet=st.sampled_from(["\x00", "\ud800", "\udfff", ESCAPE, "0", "u", "d", "a", "x"]), max_size=20
)


@settings(max_examples=300, deadline=None)
@given(_ANY)
def test_every_string_round_trips_and_escapes_into_valid_postgres_text(value: str) -> None:
    stored = escape(value)
    assert stored is not None
    assert "\x00" not in stored
    stored.encode("utf-8")  # no lone surrogate left
    assert unescape(stored) == value


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(exclude_categories=("Cs",), exclude_characters="\x00\ue000")))
def test_ordinary_text_is_stored_unchanged(value: str) -> None:
    assert escape(value) is value


def test_specific_escapes() -> None:
    assert escape("a\x00b\udce9c\ue000") == "a\ue0000b\ue000udce9c\ue000\ue000"
    assert unescape("a\ue0000b\ue000udce9c\ue000\ue000") == "a\x00b\udce9c\ue000"
    assert escape(None) is None
    assert unescape(None) is None
    assert unescape("\ue000zz") == "\ue000zz"  # not an escape: kept


# In JSON a high surrogate directly followed by a low one is one character (as in harness.wire.jsontext).
_NO_PAIR = _ANY.filter(lambda s: not re.search("[\ud800-\udbff][\udc00-\udfff]", s))


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        _NO_PAIR, st.lists(_NO_PAIR | st.integers() | st.floats(allow_nan=False), max_size=3), max_size=3
    )
)
def test_ascii_json_is_ascii_and_means_the_same(value: dict[str, list[object]]) -> None:
    text = json.dumps(value, ensure_ascii=False)
    converted = ascii_json(text)
    assert converted.isascii()
    assert json.loads(converted) == json.loads(text)
