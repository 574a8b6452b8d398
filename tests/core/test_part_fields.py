"""Parts are what they say they are: keyword-only fields, checked with the wire loader's own field specs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import (
    CanonicalMessage,
    Part,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UnknownPart,
    UserPromptPart,
    replace,
)
from harness.core.fields import PART_FIELDS
from harness.errors import MessageError, PartFieldError
from harness.session import Session
from harness.wire import messages_from_jsonable, messages_to_jsonable
from harness.wire.fields import PART_SPECS

CLASSES: tuple[type[Any], ...] = (
    SystemPromptPart,
    UserPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    RetryPromptPart,
)


def test_the_wire_loader_and_the_constructor_share_one_field_table() -> None:
    for spec in PART_SPECS:
        assert spec.fields is PART_FIELDS[spec.tag or ""]
        assert [f.key for f in spec.fields] == [a.name for a in spec.cls.__attrs_attrs__ if a.name != "extra"]


@pytest.mark.parametrize(
    "build",
    [
        lambda: SystemPromptPart("x", None),  # pyright: ignore[reportCallIssue]
        lambda: UserPromptPart("x", None),  # pyright: ignore[reportCallIssue]
        lambda: TextPart("x", None),  # pyright: ignore[reportCallIssue]
        lambda: ThoughtPart("x", "signature"),  # pyright: ignore[reportCallIssue]
        lambda: RetryPromptPart("again", "read"),  # pyright: ignore[reportCallIssue]
        lambda: UnknownPart("kind", {}),  # pyright: ignore[reportCallIssue]
        lambda: ToolCallPart("c1", tool_name="read"),  # pyright: ignore[reportCallIssue]
        lambda: ToolReturnPart("c1", tool_name="read", content="x"),  # pyright: ignore[reportCallIssue]
        # pydantic-ai's positional order (tool_name, args, tool_call_id) cannot be mistaken for ours:
        lambda: ToolCallPart("read", {"q": "x"}, "c1"),  # pyright: ignore[reportCallIssue]
    ],
)
def test_fields_after_the_first_are_keyword_only(build: Any) -> None:
    with pytest.raises(TypeError, match="positional argument"):
        build()


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: ToolCallPart(tool_call_id="c1", tool_name={"q": "x"}, args=None),  # pyright: ignore[reportArgumentType]
            "ToolCallPart.tool_name must be a string, got object",
        ),
        (
            lambda: ToolCallPart(tool_call_id="", tool_name="read"),
            "ToolCallPart.tool_call_id must be a non-empty string",
        ),
        (
            lambda: ToolCallPart(tool_call_id="c1", tool_name="read", args=[1]),  # pyright: ignore[reportArgumentType]
            "ToolCallPart.args must be an object, a string or null, got array",
        ),
        (
            lambda: ToolReturnPart(tool_call_id=7, tool_name="read", content="x"),  # pyright: ignore[reportArgumentType]
            "ToolReturnPart.tool_call_id must be a non-empty string, got number",
        ),
        (
            lambda: ToolReturnPart(tool_call_id="c1", tool_name="read", content="x", timestamp="2025-01-01"),  # pyright: ignore[reportArgumentType]
            "ToolReturnPart.timestamp must be a datetime, got string",
        ),
        (lambda: TextPart(None), "TextPart.content must be a string, got null"),  # pyright: ignore[reportArgumentType]
        (
            lambda: UserPromptPart({"text": "hi"}),  # pyright: ignore[reportArgumentType]
            "UserPromptPart.content must be a string or a sequence of content items, got object",
        ),
        (
            lambda: RetryPromptPart("again", tool_call_id=3),  # pyright: ignore[reportArgumentType]
            "RetryPromptPart.tool_call_id must be a string, got number",
        ),
        (lambda: ThoughtPart("hmm", signature=b"sig"), "ThoughtPart.signature must be a string, got bytes"),  # pyright: ignore[reportArgumentType]
        (
            lambda: SystemPromptPart("sys", dynamic_ref=1),
            "SystemPromptPart.dynamic_ref must be a string, got number",
        ),  # pyright: ignore[reportArgumentType]
    ],
)
def test_a_wrong_field_type_raises_a_one_line_error_naming_the_part_and_field(
    build: Any, message: str
) -> None:
    with pytest.raises(PartFieldError) as caught:
        build()
    assert str(caught.value) == message
    assert "\n" not in str(caught.value)
    part, field = message.split(" ")[0].split(".")
    assert (caught.value.part, caught.value.field) == (part, field)
    assert isinstance(caught.value, MessageError)


def test_replace_checks_the_new_value_too() -> None:
    part = ToolCallPart(tool_call_id="c1", tool_name="read", args={})
    with pytest.raises(PartFieldError, match=r"^ToolCallPart\.tool_name must be a string, got object$"):
        replace(part, tool_name={"q": "x"})


def test_a_list_of_content_items_is_kept_as_the_tuple_the_loader_gives_back() -> None:
    part = UserPromptPart(["look", {"kind": "image-url", "url": "https://example.com/a.png"}])
    assert part.content == ("look", {"kind": "image-url", "url": "https://example.com/a.png"})
    (loaded,) = messages_from_jsonable(messages_to_jsonable([CanonicalMessage.request(part)]))
    assert loaded.parts == (part,)


def test_a_part_ported_from_pydantic_ai_fails_before_session_save(tmp_path: Path) -> None:
    with pytest.raises(PartFieldError, match=r"ToolCallPart\.tool_name"):
        ToolCallPart(tool_call_id="x", tool_name={"q": "x"}, args="read")  # pyright: ignore[reportArgumentType]
    session = Session(
        messages=[
            CanonicalMessage.request(UserPromptPart("q")),
            CanonicalMessage.response(ToolCallPart(tool_call_id="c1", tool_name="read", args={"q": "x"})),
            CanonicalMessage.request(ToolReturnPart(tool_call_id="c1", tool_name="read", content={"n": 1})),
        ]
    )
    path = session.save(tmp_path / "s.json")
    assert Session.load(path).messages == session.messages


# -- what constructs also loads ------------------------------------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
_STAMPS = st.datetimes(
    min_value=datetime(1990, 1, 1),
    max_value=datetime(2100, 1, 1),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30))]),
)
_ANYTHING = (
    _JSON | _STAMPS | st.tuples(st.text(max_size=3)) | st.binary(max_size=3) | st.floats(allow_nan=False)
)
"""Values a caller might pass to any typed field, right or wrong."""


@st.composite
def _attempts(draw: st.DrawFn) -> tuple[type[Any], dict[str, Any]]:
    cls = draw(st.sampled_from(CLASSES))
    kwargs: dict[str, Any] = {}
    no_default = {a.name for a in attrs.fields(cls) if a.default is attrs.NOTHING}
    for field in PART_FIELDS[cls.part_kind]:
        # A field without a wire check takes any JSON value (a tool return's content, metadata).
        value = draw(_JSON) if field.check is None else draw(_ANYTHING)
        if field.required or field.key in no_default or draw(st.booleans()):
            kwargs[field.key] = value
    return cls, kwargs


@settings(max_examples=400, deadline=None)
@given(_attempts())
def test_whatever_constructs_also_loads_back_equal(attempt: tuple[type[Any], dict[str, Any]]) -> None:
    cls, kwargs = attempt
    try:
        part: Part = cls(**kwargs)
    except PartFieldError:
        return
    kind = (
        "request"
        if cls in (SystemPromptPart, UserPromptPart, ToolReturnPart, RetryPromptPart)
        else "response"
    )
    message = CanonicalMessage(kind, (part,))
    assert messages_from_jsonable(messages_to_jsonable([message])) == [message]
