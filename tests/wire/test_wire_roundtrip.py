"""Round trips of harness.wire: load(dump(h)) == h, and every corpus file comes back exactly."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import (
    CanonicalMessage,
    MessageKind,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UnknownPart,
    Usage,
    UserPromptPart,
)
from harness.wire import dump_messages, load_messages, messages_from_jsonable, messages_to_jsonable

# ---------------------------------------------------------------------------------------
# Strategies (own, small: every part kind, extra keys, null markers, unknown parts)
# ---------------------------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=8,
)
non_null_json = json_values.filter(lambda value: value is not None)
texts = st.text(max_size=30)
ids = st.text(min_size=1, max_size=12)
opt_texts = st.none() | texts
opt_metadata = st.none() | non_null_json | st.just({"harness": {"kind": "summary"}})
_zones: list[tzinfo] = [UTC, timezone(timedelta(hours=5, minutes=30))]
timestamps = (
    st.none()
    | st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1))
    | st.datetimes(
        min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.sampled_from(_zones)
    )
)
extra_keys = st.dictionaries(st.text(max_size=6).map(lambda key: f"x_{key}"), json_values, max_size=2)


@st.composite
def extras(draw: st.DrawFn, optional_none: tuple[str, ...]) -> dict[str, Any]:
    """Unknown keys plus, for some optional fields that are None, a null marker."""
    extra = draw(extra_keys)
    for key in optional_none:
        if draw(st.booleans()):
            extra[key] = None
    return extra


def _nones(**fields: Any) -> tuple[str, ...]:
    return tuple(key for key, value in fields.items() if value is None)


@st.composite
def system_parts(draw: st.DrawFn) -> SystemPromptPart:
    fields: dict[str, Any] = {
        "timestamp": draw(timestamps),
        "dynamic_ref": draw(opt_texts),
        "metadata": draw(opt_metadata),
    }
    return SystemPromptPart(draw(texts), **fields, extra=draw(extras(_nones(**fields))))


@st.composite
def user_parts(draw: st.DrawFn) -> UserPromptPart:
    content = draw(
        texts
        | st.tuples()
        | st.lists(texts | st.dictionaries(st.text(max_size=5), json_values, max_size=3), max_size=3).map(
            tuple
        )
    )
    fields: dict[str, Any] = {"timestamp": draw(timestamps), "metadata": draw(opt_metadata)}
    return UserPromptPart(content, **fields, extra=draw(extras(_nones(**fields))))


@st.composite
def tool_return_parts(draw: st.DrawFn) -> ToolReturnPart:
    fields: dict[str, Any] = {
        "tool_name": draw(opt_texts),
        "timestamp": draw(timestamps),
        "metadata": draw(opt_metadata),
    }
    return ToolReturnPart(
        tool_call_id=draw(ids), content=draw(json_values), **fields, extra=draw(extras(_nones(**fields)))
    )


@st.composite
def retry_parts(draw: st.DrawFn) -> RetryPromptPart:
    content = draw(texts | st.lists(json_values, max_size=3).map(tuple))
    fields: dict[str, Any] = {
        "tool_name": draw(opt_texts),
        "tool_call_id": draw(st.none() | st.text(max_size=8)),
        "timestamp": draw(timestamps),
        "metadata": draw(opt_metadata),
    }
    return RetryPromptPart(content, **fields, extra=draw(extras(_nones(**fields))))


@st.composite
def text_parts(draw: st.DrawFn) -> TextPart:
    fields: dict[str, Any] = {"metadata": draw(opt_metadata)}
    return TextPart(draw(texts), **fields, extra=draw(extras(_nones(**fields))))


@st.composite
def thought_parts(draw: st.DrawFn) -> ThoughtPart:
    fields: dict[str, Any] = {
        "signature": draw(opt_texts),
        "provider_name": draw(opt_texts),
        "metadata": draw(opt_metadata),
    }
    return ThoughtPart(draw(texts), **fields, extra=draw(extras(_nones(**fields))))


@st.composite
def tool_call_parts(draw: st.DrawFn) -> ToolCallPart:
    args = draw(st.none() | texts | st.dictionaries(st.text(max_size=6), json_values, max_size=3))
    fields: dict[str, Any] = {"args": args, "metadata": draw(opt_metadata)}
    return ToolCallPart(
        tool_call_id=draw(ids), tool_name=draw(texts), **fields, extra=draw(extras(_nones(**fields)))
    )


@st.composite
def unknown_parts(draw: st.DrawFn) -> UnknownPart:
    kind = draw(st.sampled_from(["builtin-tool-call", "builtin-tool-return", "file", "compaction", "x-new"]))
    data = draw(
        st.dictionaries(st.text(max_size=6).filter(lambda k: k != "part_kind"), json_values, max_size=3)
    )
    return UnknownPart(kind, data={**data, "part_kind": kind})


usages = st.builds(
    Usage,
    request_tokens=st.integers(0, 10**7),
    response_tokens=st.integers(0, 10**7),
    cached_tokens=st.integers(0, 10**7),
    cache_write_tokens=st.integers(0, 10**7),
    extra=extra_keys,
)


@st.composite
def messages(draw: st.DrawFn) -> CanonicalMessage:
    kind: MessageKind = draw(st.sampled_from(["request", "response"]))
    if kind == "request":
        part = system_parts() | user_parts() | tool_return_parts() | retry_parts() | unknown_parts()
    else:
        part = text_parts() | thought_parts() | tool_call_parts() | unknown_parts()
    fields: dict[str, Any] = {
        "timestamp": draw(timestamps),
        "model_name": draw(opt_texts),
        "usage": draw(st.none() | usages),
        "run_id": draw(opt_texts),
        "provider_name": draw(opt_texts),
        "provider_response_id": draw(opt_texts),
        "finish_reason": draw(st.none() | st.sampled_from(["stop", "length", "tool_call"])),
        "metadata": draw(opt_metadata),
        "instructions": draw(opt_texts),
    }
    return CanonicalMessage(
        kind, draw(st.lists(part, max_size=3)), **fields, extra=draw(extras(_nones(**fields)))
    )


histories = st.lists(messages(), max_size=4)


# ---------------------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------------------


@settings(max_examples=120, deadline=None)
@given(histories)
def test_load_of_dump_is_identity(history: list[CanonicalMessage]) -> None:
    data = dump_messages(history)
    assert load_messages(data) == history
    assert messages_from_jsonable(messages_to_jsonable(history)) == history
    # dumping is deterministic and idempotent through a load
    assert dump_messages(load_messages(data)) == data
    # the output is compact ASCII JSON of exactly the jsonable form
    assert data.isascii()
    parsed = json.loads(data)
    assert parsed == messages_to_jsonable(history)
    assert data == json.dumps(parsed, separators=(",", ":")).encode()


def test_shared_strategies_round_trip_when_available() -> None:
    strategies = pytest.importorskip("harness.testing.strategies")
    histories_strategy = getattr(strategies, "histories", None)
    if histories_strategy is None:
        pytest.skip("harness.testing.strategies has no histories()")

    @settings(max_examples=50, deadline=None)
    @given(histories_strategy())
    def check(history: list[CanonicalMessage]) -> None:
        assert load_messages(dump_messages(history)) == history

    check()


# ---------------------------------------------------------------------------------------
# Corpus
# ---------------------------------------------------------------------------------------


def test_corpus_file_round_trips_exactly(corpus_file: Path) -> None:
    raw = corpus_file.read_bytes()
    original = json.loads(raw)
    loaded = load_messages(raw)
    assert len(loaded) == len(original)
    dumped = dump_messages(loaded)
    assert json.loads(dumped) == original
    assert load_messages(dumped) == loaded
    for message, item in zip(loaded, original, strict=True):
        assert message.kind == item["kind"]
        assert [p.part_kind for p in message.parts] == [p["part_kind"] for p in item["parts"]]
        assert not any(isinstance(p, UnknownPart) for p in message.parts)
        wire_ids = [p["tool_call_id"] for p in item["parts"] if "tool_call_id" in p]
        ids = [
            p.tool_call_id
            for p in message.parts
            if isinstance(p, (ToolCallPart, ToolReturnPart, RetryPromptPart))
        ]
        assert ids == wire_ids
        for part, wire in zip(message.parts, item["parts"], strict=True):
            if "content" in wire:
                content = cast("Any", part).content
                assert content == (
                    tuple(wire["content"]) if isinstance(wire["content"], list) else wire["content"]
                )
            if "args" in wire:
                assert isinstance(part, ToolCallPart)
                assert part.args == wire["args"]
