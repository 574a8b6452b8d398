"""harness.interop.pydantic_ai.MessageConverter: each message is converted once, by identity."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import messages as pai

from harness.core import ToolReturnPart
from harness.interop.pydantic_ai import MessageConverter

STAMP = datetime(2025, 3, 4, 5, 6, 7, 890000, tzinfo=UTC)

LongHistory = Callable[[int], list[pai.ModelRequest | pai.ModelResponse]]
"""The ``long_history`` fixture (see conftest.py)."""


def _request(*parts: Any, **fields: Any) -> pai.ModelRequest:
    return pai.ModelRequest(parts=list(parts), timestamp=STAMP, **fields)


def _response(*parts: Any, **fields: Any) -> pai.ModelResponse:
    return pai.ModelResponse(parts=list(parts), timestamp=STAMP, **fields)


def test_converter_converts_each_message_once(dump_counter: list[int], long_history: LongHistory) -> None:
    converter = MessageConverter()
    history = long_history(20)
    first = converter.to_canonical(history)
    assert dump_counter == [len(history)]
    history.append(_response(pai.TextPart("more")))
    second = converter.to_canonical(history)
    assert dump_counter == [len(history) - 1, 1]
    assert all(a is b for a, b in zip(first, second, strict=False))
    # Unchanged harness messages come back as the very pydantic-ai objects.
    assert all(a is b for a, b in zip(converter.to_pydantic_ai(second), history, strict=True))


def test_converter_notices_in_place_changes_to_a_message(long_history: LongHistory) -> None:
    converter = MessageConverter()
    history = long_history(1)
    converter.to_canonical(history)
    last = history[-1]
    assert isinstance(last, pai.ModelRequest)
    last.run_id = "filled-in-later"  # what pydantic-ai does to the request it sends
    assert converter.to_canonical(history)[-1].run_id == "filled-in-later"


def test_changed_message_reuses_the_unchanged_pydantic_ai_parts() -> None:
    converter = MessageConverter()
    request = _request(
        pai.ToolReturnPart("read", "big output", "c1", timestamp=STAMP),
        pai.UserPromptPart("and then", timestamp=STAMP),
    )
    (canonical,) = converter.to_canonical([request])
    cleared = canonical.replace(
        parts=(
            ToolReturnPart(tool_call_id="c1", tool_name="read", content="[cleared]", timestamp=STAMP),
            canonical.parts[1],
        )
    )
    (theirs,) = converter.to_pydantic_ai([cleared])
    assert theirs is not request
    assert theirs.parts[1] is request.parts[1]
    assert isinstance(theirs.parts[0], pai.ToolReturnPart)
    assert theirs.parts[0].content == "[cleared]"
    # ... and the new object maps back to the same harness message without converting.
    assert converter.to_canonical([theirs])[0] is cleared
