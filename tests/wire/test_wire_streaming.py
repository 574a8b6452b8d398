"""Loading a document one message at a time gives what parsing it whole gives, errors included."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core import CanonicalMessage
from harness.errors import WireFormatError
from harness.testing.strategies import histories
from harness.wire import document, dump_messages, load_messages, load_messages_and_thoughts


@pytest.fixture(autouse=True, scope="module")
def _stream_every_document() -> Iterator[None]:
    """Stream documents of any size here (by default only large ones are)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(document, "_STREAM_FROM", 0)
        yield


def _careful(text: str, thoughts: list[str] | None) -> list[CanonicalMessage]:
    """The path that parses the whole document first (what every load did before streaming)."""
    return document.load_items(document._parse(text), thoughts)  # pyright: ignore[reportPrivateUsage]


def _outcome(load: Any, *args: Any) -> tuple[str, Any]:
    try:
        return "ok", load(*args)
    except WireFormatError as exc:
        return "error", (str(exc), exc.message_index, exc.part_index, exc.field)


layouts = st.sampled_from([None, 0, 1, 2, "\t"])
separators = st.sampled_from([(",", ":"), (", ", ": "), (" ,\r\n", " :\n ")])


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(histories(max_messages=8), layouts, separators)
def test_any_layout_loads_the_same_history(
    history: list[CanonicalMessage], indent: int | str | None, seps: tuple[str, str]
) -> None:
    text = json.dumps(json.loads(dump_messages(history)), indent=indent, separators=seps)
    text = f" \n{text}\r\n "
    assert load_messages(text.encode()) == history
    assert load_messages(text) == history
    assert load_messages(b"\xef\xbb\xbf" + text.encode()) == history


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(histories(min_messages=1, max_messages=5), st.data())
def test_a_damaged_document_fails_as_the_whole_document_parse_does(
    history: list[CanonicalMessage], data: st.DataObject
) -> None:
    text = json.dumps(json.loads(dump_messages(history)), indent=data.draw(layouts))
    at = data.draw(st.integers(0, len(text)))
    damage = data.draw(st.sampled_from(["cut", "drop", "insert"]))
    if damage == "cut":
        text = text[:at]
    elif damage == "drop":
        text = text[:at] + text[at + 1 :]
    else:
        text = (
            text[:at]
            + data.draw(st.sampled_from([",", "]", "[", "{}", '"x"', "1", "null", "NaN"]))
            + text[at:]
        )
    assert _outcome(load_messages, text.encode()) == _outcome(_careful, text, None)


def test_thoughts_and_legacy_entries_load_the_same_either_way() -> None:
    doc = [
        {"content": "legacy prompt"},
        {"thought": "first thought"},
        {"kind": "response", "parts": [{"part_kind": "text", "content": "hi"}]},
        {"thought": "second thought"},
    ]
    text = json.dumps(doc, indent=2)
    thoughts: list[str] = []
    expected = _careful(text, thoughts)
    assert load_messages_and_thoughts(text.encode()) == (expected, thoughts)
    assert thoughts == ["first thought", "second thought"]
    assert load_messages(text) == _careful(text, None)
    assert len(load_messages(text)) == 4


def test_errors_after_a_valid_prefix_keep_their_index_and_precedence() -> None:
    good = {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hi"}]}
    bad = {"kind": "request", "parts": [{"part_kind": "text", "content": "x"}]}
    text = json.dumps([good, good, bad, good])
    outcome = _outcome(load_messages, text.encode())
    assert outcome[0] == "error"
    assert outcome[1][1:] == (2, 0, "part_kind")
    # A JSON error later in the document wins over an invalid message earlier, as before.
    broken = json.dumps([good, bad])[:-1] + ",]"
    assert _outcome(load_messages, broken)[1][0].startswith("invalid JSON")
    assert _outcome(load_messages, broken) == _outcome(_careful, broken, None)
