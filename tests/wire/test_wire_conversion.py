"""The cattrs converter of harness.wire and its hooks (harness.wire.conversion)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import cattrs
import pytest

from harness.core import CanonicalMessage, Part, TextPart, ToolCallPart, UnknownPart, UserPromptPart
from harness.errors import WireFormatError
from harness.wire import converter, load_messages, load_messages_and_thoughts, messages_to_jsonable


def test_converter_is_a_cattrs_converter_with_hooks_for_every_class() -> None:
    any_part: Any = Part  # a union, which cattrs' type hints do not spell
    assert isinstance(converter, cattrs.Converter)
    assert converter.structure({"part_kind": "text", "content": "x"}, TextPart) == TextPart("x")
    assert converter.structure({"part_kind": "text", "content": "x"}, any_part) == TextPart("x")
    assert converter.structure({"part_kind": "user-prompt", "content": "x"}, any_part) == UserPromptPart("x")
    assert converter.structure({"part_kind": "odd", "a": 1}, any_part) == UnknownPart(
        "odd", data={"part_kind": "odd", "a": 1}
    )
    assert converter.structure({"part_kind": "odd"}, UnknownPart) == UnknownPart(
        "odd", data={"part_kind": "odd"}
    )
    message = CanonicalMessage.response(
        TextPart("x"), ToolCallPart(tool_call_id="c", tool_name="t", args="{}")
    )
    assert converter.unstructure(message) == messages_to_jsonable([message])[0]
    assert converter.structure(converter.unstructure(message), CanonicalMessage) == message
    assert converter.unstructure(TextPart("x"), unstructure_as=Part) == {"part_kind": "text", "content": "x"}
    stamp = datetime(2024, 1, 1, tzinfo=UTC)
    assert converter.structure(converter.unstructure(stamp), datetime) == stamp
    # the fast path for minimal parts and the general path build equal objects
    assert converter.structure({"part_kind": "text", "content": "x", "metadata": None}, TextPart) == TextPart(
        "x", extra={"metadata": None}
    )
    with pytest.raises(WireFormatError, match="part must be a JSON object"):
        converter.structure(["x"], TextPart)


def test_unexpected_errors_inside_hooks_are_wrapped(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.wire import conversion

    def broken(data: Any, _type: Any) -> Any:
        raise cattrs.ClassValidationError("broken hook", [KeyError("x")], UserPromptPart)  # pyright: ignore[reportCallIssue]

    monkeypatch.setitem(conversion.REQUEST_STRUCTURE, "user-prompt", broken)
    doc = [{"kind": "response", "parts": []}, {"kind": "request", "parts": [{"part_kind": "user-prompt"}]}]
    for loader in (load_messages, load_messages_and_thoughts):
        with pytest.raises(WireFormatError, match="ClassValidationError") as caught:
            loader(json.dumps(doc))
        assert caught.value.message_index == 1
        assert isinstance(caught.value.__cause__, cattrs.ClassValidationError)
