"""Frozen all the way down: read-only extra, metadata and data; no shared defaults; no hashing."""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.core import (
    HARNESS_KEY,
    CanonicalMessage,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UnknownPart,
    Usage,
    UserPromptPart,
    harness_mark,
    marked_metadata,
    replace,
    with_harness_mark,
)
from harness.core.frozen import EMPTY, FrozenDict, FrozenList, freeze, thaw
from harness.wire import dump_messages, load_messages

ALL_PARTS: list[Any] = [
    SystemPromptPart("s"),
    UserPromptPart("u"),
    TextPart("t"),
    ThoughtPart("th"),
    ToolCallPart(tool_call_id="c1", tool_name="read", args={"path": "a"}),
    ToolReturnPart(tool_call_id="c1", tool_name="read", content="r"),
    RetryPromptPart("again"),
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=10,
)


def _mutations(value: Any) -> list[Any]:
    """Every in-place change a dict or a list offers, as callables."""
    if isinstance(value, dict):
        return [
            lambda: value.__setitem__("k", 1),
            lambda: value.__delitem__("k"),
            lambda: value.update(k=1),
            lambda: value.setdefault("k", 1),
            lambda: value.pop("k", None),
            lambda: value.popitem(),
            lambda: value.clear(),
            lambda: value.__ior__({"k": 1}),
        ]
    return [
        lambda: value.append(1),
        lambda: value.extend([1]),
        lambda: value.insert(0, 1),
        lambda: value.__setitem__(0, 1),
        lambda: value.__delitem__(0),
        lambda: value.pop(),
        lambda: value.remove(1),
        lambda: value.clear(),
        lambda: value.sort(),
        lambda: value.reverse(),
        lambda: value.__iadd__([1]),
        lambda: value.__imul__(2),
    ]


def _is_deeply_frozen(value: Any) -> bool:
    if isinstance(value, dict):
        return type(value) is FrozenDict and all(_is_deeply_frozen(v) for v in value.values())  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, list):
        return type(value) is FrozenList and all(_is_deeply_frozen(v) for v in value)  # pyright: ignore[reportUnknownVariableType]
    return True


@pytest.mark.parametrize("part", ALL_PARTS, ids=lambda p: type(p).__name__)
def test_a_plugin_cannot_change_the_default_extra_of_later_parts(part: Any) -> None:
    with pytest.raises(TypeError, match="read-only"):
        part.extra["injected"] = True
    assert type(part)(**_required(part)).extra == {}
    assert part.extra is EMPTY


def _required(part: Any) -> dict[str, Any]:
    if isinstance(part, ToolCallPart):
        return {"tool_call_id": "c2", "tool_name": "read"}
    if isinstance(part, ToolReturnPart):
        return {"tool_call_id": "c2", "tool_name": "read", "content": "x"}
    return {"content": "x"}


def test_given_mappings_are_copied_and_frozen_all_the_way_down() -> None:
    given_extra: dict[str, Any] = {"provider_details": {"finish_reason": "stop", "ids": [1, 2]}}
    given_metadata: dict[str, Any] = {HARNESS_KEY: {"kind": "summary"}, "files": ["a.py", {"b": [1]}]}
    part = TextPart("x", metadata=given_metadata, extra=given_extra)
    given_extra["provider_details"]["finish_reason"] = "changed"
    given_metadata["files"].append("c.py")
    assert part.extra == {"provider_details": {"finish_reason": "stop", "ids": [1, 2]}}
    assert part.metadata == {HARNESS_KEY: {"kind": "summary"}, "files": ["a.py", {"b": [1]}]}
    assert _is_deeply_frozen(part.extra)
    assert _is_deeply_frozen(part.metadata)
    for inner in (
        part.extra,
        part.extra["provider_details"],
        part.metadata["files"],
        part.metadata["files"][1],
    ):
        for mutate in _mutations(inner):
            with pytest.raises(TypeError, match="read-only"):
                mutate()
    extra: Any = part.extra
    extra.__init__({"k": 1})  # a no-op: the constructor filled it
    assert "k" not in part.extra
    same = TextPart(
        "x",
        metadata={HARNESS_KEY: {"kind": "summary"}, "files": ["a.py", {"b": [1]}]},
        extra={"provider_details": {"finish_reason": "stop", "ids": [1, 2]}},
    )
    assert part == same


def test_unknown_data_usage_extra_and_message_fields_are_frozen() -> None:
    unknown = UnknownPart("file", data={"part_kind": "file", "content": {"url": "u", "sizes": [1]}})
    usage = Usage(1, 2, extra={"details": {"reasoning_tokens": 3}})
    message = CanonicalMessage.response(
        TextPart("x"), usage=usage, metadata={"a": [1]}, extra={"id": {"n": 1}}
    )
    values: tuple[Any, ...] = (unknown.data, usage.extra, message.metadata, message.extra)
    for value in values:
        assert _is_deeply_frozen(value)
        with pytest.raises(TypeError):
            value["k"] = 1
    with pytest.raises(TypeError):
        unknown.data["content"]["sizes"].append(2)


def test_non_mapping_metadata_is_kept_or_frozen() -> None:
    assert TextPart("x", metadata="note").metadata == "note"
    assert TextPart("x", metadata=3).metadata == 3
    listed = TextPart("x", metadata=[{"a": 1}]).metadata
    assert type(listed) is FrozenList
    assert type(listed[0]) is FrozenDict
    assert TextPart("x", metadata=({"a": [1]},)).metadata == ({"a": [1]},)
    assert type(TextPart("x", metadata=({"a": [1]},)).metadata[0]["a"]) is FrozenList
    assert TextPart("x", metadata={"s": {1, 2}}).metadata["s"] == frozenset({1, 2})


@given(json_values)
def test_freeze_keeps_the_value_and_json_and_thaw_undoes_it(value: Any) -> None:
    frozen = freeze(value)
    assert frozen == value
    assert _is_deeply_frozen(frozen)
    assert json.dumps(frozen) == json.dumps(value)
    thawed = thaw(frozen)
    assert thawed == value
    assert type(thawed) is type(value)
    assert freeze(frozen) is frozen


def test_frozen_containers_copy_pickle_and_combine_like_values() -> None:
    frozen = freeze({"a": [1, {"b": 2}]})
    assert copy.copy(frozen) is frozen
    assert copy.deepcopy(frozen) is frozen
    restored = pickle.loads(pickle.dumps(frozen))
    assert restored == frozen
    assert _is_deeply_frozen(restored)
    mutable = frozen.copy()
    mutable["c"] = 3
    assert type(frozen | {"c": 3}) is dict
    assert type(frozen["a"] + [2]) is list
    assert type(frozen["a"] * 2) is list
    assert FrozenDict({"x": [1]}, y={"z": 1}) == {"x": [1], "y": {"z": 1}}
    assert _is_deeply_frozen(FrozenDict({"x": [1]}, y={"z": 1}))
    assert _is_deeply_frozen(FrozenList([[1], {"a": []}]))
    assert repr(freeze({"a": [1]})) == "{'a': [1]}"


@pytest.mark.parametrize(
    "obj",
    [*ALL_PARTS, UnknownPart("file", data={"part_kind": "file"}), CanonicalMessage.user("x"), Usage(1)],
    ids=lambda o: type(o).__name__,
)
def test_messages_parts_and_usage_compare_by_value_but_are_not_hashable(obj: Any) -> None:
    with pytest.raises(TypeError, match=rf"{type(obj).__name__} is not hashable.*id\(\) with a weakref"):
        hash(obj)
    with pytest.raises(TypeError):
        _ = {obj}
    assert obj == copy.deepcopy(obj)
    assert obj is not copy.deepcopy(obj)
    for value in (FrozenDict(a=1), FrozenList([1])):
        with pytest.raises(TypeError, match="unhashable"):
            hash(value)


def test_marks_build_frozen_metadata_without_touching_the_original() -> None:
    part = ToolReturnPart(
        tool_call_id="c1", tool_name="read", content="r", metadata={"mine": [1], HARNESS_KEY: {"kind": "x"}}
    )
    marked = with_harness_mark(part, cleared="me", detail={"by": ["rule"]})
    assert marked.metadata == {
        "mine": [1],
        HARNESS_KEY: {"kind": "x", "cleared": "me", "detail": {"by": ["rule"]}},
    }
    assert _is_deeply_frozen(marked.metadata)
    assert part.metadata == {"mine": [1], HARNESS_KEY: {"kind": "x"}}
    assert harness_mark(marked) == {"kind": "x", "cleared": "me", "detail": {"by": ["rule"]}}
    fresh = marked_metadata(None, cleared="me")
    assert fresh == {HARNESS_KEY: {"cleared": "me"}}
    assert _is_deeply_frozen(fresh)
    plain = marked_metadata({"a": {"b": [1]}}, cleared="me")
    assert _is_deeply_frozen(plain)
    assert replace(part, content="[cleared]", metadata=plain).metadata is plain


def test_replace_carries_frozen_fields_over_without_copying() -> None:
    part = ToolCallPart(
        tool_call_id="c1", tool_name="read", args={"path": "a"}, metadata={"m": [1]}, extra={"id": "x"}
    )
    copied = replace(part, tool_name="write")
    assert copied.metadata is part.metadata
    assert copied.extra is part.extra
    message = CanonicalMessage.response(part, extra={"id": "r"})
    assert message.replace(model_name="m").extra is message.extra


def test_frozen_values_load_and_dump_as_plain_json() -> None:
    history = [
        CanonicalMessage.request(
            UserPromptPart("hi", metadata={"tags": ["a"], HARNESS_KEY: {"kind": "summary"}}),
            extra={"provider_details": {"x": [1, 2]}},
        ),
        CanonicalMessage.response(
            TextPart("yo", extra={"id": "t1", "provider_details": None}),
            UnknownPart("file", data={"part_kind": "file", "content": {"sizes": [1]}}),
            usage=Usage(3, 4, extra={"details": {"reasoning_tokens": 1}}),
        ),
    ]
    data = dump_messages(history)
    assert load_messages(data) == history
    doc = json.loads(data)
    assert doc[0]["parts"][0]["metadata"] == {"tags": ["a"], HARNESS_KEY: {"kind": "summary"}}
    assert doc[0]["provider_details"] == {"x": [1, 2]}
    assert doc[1]["usage"]["details"] == {"reasoning_tokens": 1}
    loaded = load_messages(data)
    unknown, prompt = loaded[1].parts[1], loaded[0].parts[0]
    assert isinstance(unknown, UnknownPart)
    assert isinstance(prompt, UserPromptPart)
    assert _is_deeply_frozen(unknown.data)
    assert _is_deeply_frozen(prompt.metadata)
