"""Whole documents in harness.wire: accepted inputs, JSON errors, dump errors (harness.wire.document)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest

from harness.core import CanonicalMessage, ToolCallPart, ToolReturnPart, UserPromptPart
from harness.errors import WireFormatError
from harness.wire import (
    dump_messages,
    load_messages,
    load_messages_and_thoughts,
    messages_from_jsonable,
    messages_to_jsonable,
)


def test_accepted_inputs() -> None:
    doc = [{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "héllo ☃ 😀"}]}]
    text = json.dumps(doc, ensure_ascii=False)
    expected = [CanonicalMessage.user("héllo ☃ 😀")]
    assert load_messages(text) == expected
    assert load_messages(text.encode()) == expected
    assert load_messages(bytearray(text.encode())) == expected
    assert load_messages(memoryview(text.encode())) == expected
    assert load_messages(b"\xef\xbb\xbf" + text.encode()) == expected  # UTF-8 BOM
    assert load_messages(doc) == expected
    assert messages_from_jsonable(doc) == expected
    assert load_messages(b"[]") == []
    assert load_messages_and_thoughts("[]") == ([], [])
    assert dump_messages([]) == b"[]"


def test_non_ascii_and_lone_surrogates_round_trip() -> None:
    history = [CanonicalMessage.user("héllo ☃ 😀 \ud800 end")]
    data = dump_messages(history)
    data.decode("utf-8")  # always valid UTF-8
    assert load_messages(data) == history


def test_jsonable_is_what_dump_writes() -> None:
    history = [
        CanonicalMessage.request(UserPromptPart(("a", {"b": 1}))),
        CanonicalMessage.response(ToolCallPart(tool_call_id="c", tool_name="t", args={"x": (1, 2)})),
    ]
    jsonable = messages_to_jsonable(history)
    assert jsonable[0]["parts"][0]["content"] == ["a", {"b": 1}]
    assert json.loads(dump_messages(history)) == json.loads(json.dumps(jsonable))


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        pytest.param(b"", "invalid JSON", id="empty"),
        pytest.param(b'[{"kind": "request", "parts": [', "line 1 column 32 \\(char 31\\)", id="truncated"),
        pytest.param(b'[{"kind": "request"}\n,,]', "line 2 column 2", id="junk"),
        pytest.param(b"\xff\xfe[]", "invalid UTF-8 at byte 0", id="not utf-8"),
        pytest.param(b"[" * 100_000 + b"]" * 100_000, "invalid JSON", id="too deep"),
        pytest.param(b"[" + b"1" * 5000 + b"]", "invalid JSON", id="huge integer"),
    ],
)
def test_invalid_json_is_a_wire_format_error(data: bytes, reason: str) -> None:
    with pytest.raises(WireFormatError, match=reason) as caught:
        load_messages(data)
    assert caught.value.message_index is None


def test_non_list_jsonable_and_wrong_input_types() -> None:
    with pytest.raises(WireFormatError, match="JSON array"):
        messages_from_jsonable({"kind": "request"})  # pyright: ignore[reportArgumentType]
    with pytest.raises(WireFormatError, match="JSON array"):
        load_messages(3)  # pyright: ignore[reportArgumentType]


def test_dump_errors_name_the_location() -> None:
    with pytest.raises(WireFormatError) as caught:
        dump_messages([CanonicalMessage.user("x"), "not a message"])  # pyright: ignore[reportArgumentType]
    assert caught.value.message_index == 1

    bad_content = CanonicalMessage.request(
        ToolReturnPart(tool_call_id="c", tool_name="t", content={"x": float("nan"), "y": object()})
    )
    with pytest.raises(WireFormatError) as caught:
        dump_messages([CanonicalMessage.user("x"), bad_content])
    assert (caught.value.message_index, caught.value.part_index, caught.value.field) == (1, 0, "content")

    bad_args = CanonicalMessage.response(ToolCallPart(tool_call_id="c", tool_name="t", args={"x": object()}))
    with pytest.raises(WireFormatError) as caught:
        dump_messages([bad_args])
    assert (caught.value.message_index, caught.value.part_index, caught.value.field) == (0, 0, "args")

    bad_metadata = CanonicalMessage.user("x").replace(
        metadata={"when": {1, 2}, "f": float("inf"), "o": object()}
    )
    with pytest.raises(WireFormatError) as caught:
        dump_messages([bad_metadata])
    assert (caught.value.message_index, caught.value.part_index, caught.value.field) == (0, None, "metadata")

    class Alien:
        part_kind = "alien"

    with pytest.raises(WireFormatError) as caught:
        dump_messages([_with_alien_part(Alien())])
    assert (caught.value.message_index, caught.value.part_index) == (0, 0)


def _with_alien_part(part: object) -> CanonicalMessage:
    message = CanonicalMessage.response()
    object.__setattr__(message, "parts", (part,))  # bypass validation to simulate a foreign object
    return message


def test_dump_converts_non_json_containers() -> None:
    from types import MappingProxyType

    message = CanonicalMessage.response(
        ToolCallPart(tool_call_id="c", tool_name="t", args=MappingProxyType({"a": (1, 2)}))
    )
    assert json.loads(dump_messages([message]))[0]["parts"][0]["args"] == {"a": [1, 2]}
    stamped = CanonicalMessage.request(
        ToolReturnPart(tool_call_id="c", tool_name="t", content={"at": datetime(2024, 1, 1, tzinfo=UTC)})
    )
    assert json.loads(dump_messages([stamped]))[0]["parts"][0]["content"] == {"at": "2024-01-01T00:00:00Z"}


def test_loading_leaves_the_garbage_collector_alone() -> None:
    import gc
    import threading

    big = dump_messages([CanonicalMessage.user(f"question {n}") for n in range(20_000)])
    parsed = json.loads(big)
    seen: list[bool] = []
    done = threading.Event()

    def watch() -> None:  # another thread of the process: it must never see the collector off
        while not done.is_set():
            seen.append(gc.isenabled())
            time.sleep(0)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for _ in range(3):
            load_messages(big)
            load_messages_and_thoughts(big)
            load_messages(parsed)
    finally:
        done.set()
        watcher.join()
    assert len(seen) > 10
    assert all(seen)

    gc.disable()  # as another thread of the process may have
    try:
        load_messages(big[:200_000].rsplit(b",{", 1)[0] + b"]")
        with pytest.raises(WireFormatError):
            load_messages(b'[{"kind": "request", "parts": [{"part_kind": "text", "content": "x"}]}]')
        assert not gc.isenabled(), "a collector someone else disabled stays disabled"
    finally:
        gc.enable()


def test_a_large_document_is_never_held_whole_beside_its_history() -> None:
    import tracemalloc

    from harness.wire import document

    history = [CanonicalMessage.user(f"question {n} " + "x" * 600) for n in range(15_000)]
    big = dump_messages(history)
    assert len(big) >= document._STREAM_FROM  # pyright: ignore[reportPrivateUsage]

    def peak(load: object) -> int:
        tracemalloc.start()
        try:
            assert load() == history  # pyright: ignore[reportCallIssue]
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    text = big.decode()
    streamed = peak(lambda: load_messages(text))
    whole = peak(lambda: document.load_items(json.loads(text), None))
    assert streamed < 0.8 * whole, (streamed, whole)
