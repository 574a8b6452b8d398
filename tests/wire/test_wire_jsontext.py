"""Lone surrogates and non-finite floats in the wire format: kept losslessly, never a crash."""

from __future__ import annotations

import json
import math
import os
from typing import Any

import pytest
from hypothesis import find, given
from hypothesis import strategies as st

from harness.core import (
    CanonicalMessage,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UnknownPart,
    Usage,
    UserPromptPart,
)
from harness.errors import WireFormatError
from harness.wire import decode_json, dump_messages, encode_json, load_messages, messages_to_jsonable

# Every code point, lone surrogates included, with surrogates and non-ASCII drawn often. (st.text
# with a union of character strategies drops the surrogates: build the text from a list.)
any_text = st.lists(
    st.characters(exclude_categories=())
    | st.characters(categories=["Cs"])
    | st.sampled_from('é中😀\x00"\\\n'),
    max_size=20,
).map("".join)


def as_json_reads_it(text: str) -> str:
    """``text`` with each adjacent high + low surrogate pair read as the one character it encodes."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _returned(message: CanonicalMessage) -> Any:
    part = message.parts[0]
    assert isinstance(part, ToolReturnPart)
    return part.content


def _history(text: str) -> list[CanonicalMessage]:
    return [
        CanonicalMessage.request(UserPromptPart(text), UserPromptPart(("item", text)), extra={text: text}),
        CanonicalMessage.response(
            TextPart(text, metadata={text: [text]}),
            ToolCallPart(tool_call_id="c1", tool_name=text, args={text: text}),
            model_name=text,
        ),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="c1", tool_name=text, content=[text, {"name": text}])
        ),
        CanonicalMessage.response(UnknownPart("file", data={"part_kind": "file", "content": text})),
    ]


def test_the_text_strategy_draws_lone_surrogates() -> None:
    found = find(any_text, lambda text: any(0xD800 <= ord(c) <= 0xDFFF for c in text))
    assert len(found) == 1


@given(any_text)
def test_any_text_is_written_as_valid_utf8_and_read_back(text: str) -> None:
    data = dump_messages(_history(text))
    data.decode("utf-8")  # strict: valid UTF-8 whatever the text
    assert load_messages(data) == _history(as_json_reads_it(text))
    for ascii_only in (True, False):
        encoded = encode_json(
            {"k": text, text: [text]}, ascii_only=ascii_only, indent=None if ascii_only else 1
        )
        encoded.decode("utf-8")
        assert decode_json(encoded) == {
            "k": as_json_reads_it(text),
            as_json_reads_it(text): [as_json_reads_it(text)],
        }
        assert json.loads(encoded) == decode_json(encoded)  # what any standard reader reads


@given(
    st.lists(
        st.characters(exclude_categories=("Cs",)) | st.characters(min_codepoint=0xDC80, max_codepoint=0xDCFF)
    ).map("".join)
)
def test_surrogateescape_text_round_trips_identically(text: str) -> None:
    # What os.fsdecode, os.listdir and surrogateescape subprocess output produce: \udc80-\udcff only.
    history = _history(text)
    assert load_messages(dump_messages(history)) == history
    assert decode_json(encode_json(text, ascii_only=False)) == text


def test_a_non_utf8_file_name_survives() -> None:
    name = os.fsdecode(b"caf\xe9")
    assert name == "caf\udce9"
    history = [
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="c1", tool_name="list_dir", content=[name, "ok.txt"])
        )
    ]
    data = dump_messages(history)
    assert b"caf\\udce9" in data
    assert load_messages(data) == history
    assert os.fsencode(_returned(load_messages(data)[0])[0]) == b"caf\xe9"
    readable = encode_json(["café", name], ascii_only=False)
    assert readable == '["café","caf\\udce9"]'.encode()


def test_a_surrogate_pair_reads_as_its_character_as_in_every_json_reader() -> None:
    pair = "\ud83d\ude00"
    assert dump_messages([CanonicalMessage.user(pair)]) == dump_messages([CanonicalMessage.user("😀")])
    assert load_messages(dump_messages([CanonicalMessage.user(pair)])) == [CanonicalMessage.user("😀")]


NON_FINITE = [math.nan, math.inf, -math.inf]


@pytest.mark.parametrize("value", NON_FINITE, ids=["nan", "inf", "-inf"])
def test_non_finite_floats_are_written_as_null_everywhere(value: float) -> None:
    history = [
        CanonicalMessage.request(
            ToolReturnPart(
                tool_call_id="c1",
                tool_name="stats",
                content={"mean": value, "rows": [1.5, value]},
                metadata={"score": value},
            )
        ),
        CanonicalMessage.response(
            ToolCallPart(
                tool_call_id="c2",
                tool_name="plot",
                args={"x": value},
                extra={"provider_details": {"p": value}},
            ),
            usage=Usage(1, 2, extra={"cost": value}),
            extra={"score": value},
        ),
    ]
    data = dump_messages(history)
    assert b"NaN" not in data
    assert b"Infinity" not in data
    doc = json.loads(data, parse_constant=lambda name: pytest.fail(f"{name} written"))
    assert doc[0]["parts"][0]["content"] == {"mean": None, "rows": [1.5, None]}
    assert doc[0]["parts"][0]["metadata"] == {"score": None}
    assert doc[1]["parts"][0]["args"] == {"x": None}
    assert doc[1]["parts"][0]["provider_details"] == {"p": None}
    assert doc[1]["usage"]["cost"] is None
    assert doc[1]["score"] is None
    again = load_messages(data)
    assert dump_messages(again) == data
    assert _returned(again[0]) == {"mean": None, "rows": [1.5, None]}
    assert encode_json({"v": value}, indent=1, ascii_only=False) == b'{\n "v": null\n}'
    assert messages_to_jsonable(history)[0]["parts"][0]["content"]["mean"] is value  # in memory: untouched


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_non_standard_tokens_are_read_as_null(token: str) -> None:
    part = (
        f'{{"part_kind": "tool-return", "tool_call_id": "c", "tool_name": "t", "content": {{"v": {token}}}}}'
    )
    doc = f'[{{"kind": "request", "parts": [{part}]}}]'
    (message,) = load_messages(doc.encode())
    assert _returned(message) == {"v": None}
    assert decode_json(f"[{token}]") == [None]
    assert decode_json(f"[{token}]".encode()) == [None]


def test_values_json_cannot_write_still_name_their_place() -> None:
    loop: list[Any] = []
    loop.append(loop)
    for bad, field in ((object(), "content"), (loop, "content")):
        with pytest.raises(WireFormatError) as caught:
            dump_messages(
                [
                    CanonicalMessage.request(
                        ToolReturnPart(tool_call_id="c", tool_name="t", content={"x": math.nan, "y": bad})
                    )
                ]
            )
        assert (caught.value.message_index, caught.value.part_index, caught.value.field) == (0, 0, field)
    with pytest.raises(TypeError):
        encode_json({"x": math.nan, "y": object()})
