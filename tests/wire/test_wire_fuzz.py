"""Fuzzing harness.wire: whatever the input, loading returns messages or raises WireFormatError."""

from __future__ import annotations

import copy
import json
from functools import cache
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import CanonicalMessage
from harness.errors import WireFormatError
from harness.testing import corpus_files
from harness.wire import dump_messages, load_messages, load_messages_and_thoughts, messages_from_jsonable

FUZZ = settings(max_examples=200, deadline=None)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10)
    | st.sampled_from(
        [
            "request",
            "response",
            "text",
            "tool-call",
            "tool-return",
            "thinking",
            "user-prompt",
            "",
            "2024-01-01Z",
        ]
    )
)
wire_keys = st.sampled_from(
    [
        "kind",
        "parts",
        "part_kind",
        "content",
        "tool_call_id",
        "tool_name",
        "args",
        "timestamp",
        "usage",
        "metadata",
        "thought",
        "signature",
        "input_tokens",
        "model_name",
    ]
) | st.text(max_size=5)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(wire_keys, children, max_size=4),
    max_leaves=20,
)


def _try_load(data: Any) -> list[CanonicalMessage] | WireFormatError:
    try:
        return load_messages(data)
    except WireFormatError as exc:
        return exc


def _check_load(data: Any) -> list[CanonicalMessage] | None:
    """Load ``data``; only WireFormatError may escape, and a loaded history must round-trip."""
    loaded = _try_load(data)
    if isinstance(loaded, WireFormatError):
        assert str(loaded)
        assert loaded.message_index is None or loaded.message_index >= 0
        assert loaded.part_index is None or loaded.message_index is not None
        return None
    assert load_messages(dump_messages(loaded)) == loaded
    with_thoughts, thoughts = load_messages_and_thoughts(data)
    assert len(with_thoughts) + len(thoughts) == len(loaded)
    return loaded


@FUZZ
@given(json_values)
def test_arbitrary_json_documents(document: Any) -> None:
    _check_load(json.dumps(document))
    if isinstance(document, list):
        loaded = _check_load(document)
        if loaded is not None:
            assert messages_from_jsonable(document) == loaded  # pyright: ignore[reportUnknownArgumentType]


@FUZZ
@given(st.lists(json_values, max_size=4))
def test_arbitrary_json_arrays(document: list[Any]) -> None:
    _check_load(json.dumps(document).encode())


@FUZZ
@given(st.binary(max_size=200) | st.text(max_size=200))
def test_arbitrary_bytes_and_text(data: bytes | str) -> None:
    _check_load(data)


# ---------------------------------------------------------------------------------------
# Mutations of valid documents
# ---------------------------------------------------------------------------------------

_texts = st.text(max_size=12)
_ids = st.text(min_size=1, max_size=6)


def _part(kind: str, **fields: Any) -> dict[str, Any]:
    return {"part_kind": kind, **fields}


request_parts = st.one_of(
    st.builds(lambda c: _part("user-prompt", content=c), _texts | st.lists(_texts, max_size=2)),
    st.builds(
        lambda c, t: _part("system-prompt", content=c, timestamp=t), _texts, st.just("2024-01-02T03:04:05Z")
    ),
    st.builds(
        lambda i, n, c: _part("tool-return", tool_call_id=i, tool_name=n, content=c),
        _ids,
        _texts,
        json_values,
    ),
    st.builds(lambda c, n: _part("retry-prompt", content=c, tool_name=n), _texts, st.none() | _texts),
    st.builds(lambda c: _part("builtin-tool-return", content=c), json_values),
)
response_parts = st.one_of(
    st.builds(lambda c: _part("text", content=c), _texts),
    st.builds(lambda c, s: _part("thinking", content=c, signature=s), _texts, st.none() | _texts),
    st.builds(
        lambda i, n, a: _part("tool-call", tool_call_id=i, tool_name=n, args=a),
        _ids,
        _texts,
        st.none() | _texts | st.dictionaries(_texts, json_values, max_size=2),
    ),
    st.builds(lambda c: _part("file", content=c), json_values),
)
valid_messages = st.one_of(
    st.builds(lambda p: {"kind": "request", "parts": p}, st.lists(request_parts, max_size=3)),
    st.builds(
        lambda p, u: {"kind": "response", "parts": p, "usage": u, "model_name": "m"},
        st.lists(response_parts, max_size=3),
        st.fixed_dictionaries({"input_tokens": st.integers(0, 99), "output_tokens": st.integers(0, 99)}),
    ),
    st.builds(lambda t: {"thought": t}, _texts),
    st.builds(lambda t: {"content": t}, _texts),
)
valid_documents = st.lists(valid_messages, min_size=1, max_size=5)


def _containers(node: Any, out: list[Any]) -> list[Any]:
    """Every dict and list inside ``node`` (``node`` included), depth first."""
    if isinstance(node, (dict, list)):
        out.append(node)
        children = node.values() if isinstance(node, dict) else node  # pyright: ignore[reportUnknownVariableType]
        for child in children:  # pyright: ignore[reportUnknownVariableType]
            _containers(child, out)
    return out


def _mutate(data: st.DataObject, document: list[Any], rounds: int) -> list[Any]:
    """Apply ``rounds`` random edits (drop, retype, insert junk, replace) at random places."""
    for _ in range(rounds):
        targets = _containers(document, [])
        target = data.draw(st.sampled_from(targets))
        operation = data.draw(st.sampled_from(["drop", "set", "insert", "wrap"]))
        if isinstance(target, dict):
            keys = list(target)  # pyright: ignore[reportUnknownArgumentType]
            if operation == "insert" or not keys:
                target[data.draw(wire_keys)] = data.draw(json_values)
                continue
            key = data.draw(st.sampled_from(keys))
            if operation == "drop":
                del target[key]
            elif operation == "set":
                target[key] = data.draw(json_values)
            else:
                target[key] = [target[key]]
        else:
            if operation == "insert" or not target:
                target.insert(data.draw(st.integers(0, len(target))), data.draw(json_values))  # pyright: ignore[reportUnknownArgumentType]
                continue
            index = data.draw(st.integers(0, len(target) - 1))  # pyright: ignore[reportUnknownArgumentType]
            if operation == "drop":
                del target[index]
            elif operation == "set":
                target[index] = data.draw(json_values)
            else:
                target[index] = [target[index]]
    return document


@FUZZ
@given(valid_documents)
def test_valid_generated_documents_load(document: list[Any]) -> None:
    loaded = _check_load(json.dumps(document))
    assert loaded is not None
    assert len(loaded) == len(document)


@FUZZ
@given(valid_documents, st.integers(1, 4), st.data())
def test_mutated_documents(document: list[Any], rounds: int, data: st.DataObject) -> None:
    mutated = _mutate(data, document, rounds)
    _check_load(json.dumps(mutated))
    _check_load(mutated)


@FUZZ
@given(valid_documents, st.data())
def test_truncated_documents(document: list[Any], data: st.DataObject) -> None:
    raw = json.dumps(document).encode()
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(WireFormatError, match="invalid JSON"):
        load_messages(raw[:cut])


@FUZZ
@given(valid_documents, st.data())
def test_byte_flips(document: list[Any], data: st.DataObject) -> None:
    raw = bytearray(json.dumps(document, ensure_ascii=False).encode())
    for _ in range(data.draw(st.integers(1, 3))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    _check_load(bytes(raw))


# ---------------------------------------------------------------------------------------
# Mutations of real transcripts
# ---------------------------------------------------------------------------------------


@cache
def _corpus_documents() -> tuple[str, ...]:
    """The two smallest corpus files (JSON text), read once."""
    files = sorted(corpus_files(), key=lambda path: path.stat().st_size)[:2]
    return tuple(path.read_text(encoding="utf-8") for path in files)


@FUZZ
@given(st.data())
def test_mutated_corpus_messages(data: st.DataObject) -> None:
    documents = _corpus_documents()
    if not documents:
        return  # corpus absent: nothing to mutate (the generated-document tests still run)
    document: list[Any] = json.loads(data.draw(st.sampled_from(documents)))
    index = data.draw(st.integers(0, len(document) - 1))
    message = copy.deepcopy(document[index])
    _mutate(data, [message], data.draw(st.integers(1, 3)))
    document[index] = message
    loaded = _try_load(document)
    if isinstance(loaded, WireFormatError):
        # the error points at the mutated message (every other one is valid)
        assert loaded.message_index == index
        return
    assert len(loaded) == len(document)
    assert load_messages(dump_messages(loaded)) == loaded
