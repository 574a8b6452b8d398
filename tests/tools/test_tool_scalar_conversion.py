"""Scalar tool arguments reach the function as their annotated types (``Enum | None``, ``int``, ``float``)."""

from __future__ import annotations

import enum
from typing import Any

from harness.core import CanonicalMessage, ToolCallPart, ToolReturnPart
from harness.models.function import FunctionModel
from harness.run import Agent
from harness.tools import Tool


class Mode(enum.Enum):
    FAST = "fast"
    SLOW = "slow"


def test_an_optional_enum_is_converted_to_its_member() -> None:
    def run(mode: Mode | None = None, modes: list[Mode] | None = None) -> None:
        """Run."""

    tool = Tool.from_function(run)
    converted = tool.validate({"mode": "slow", "modes": ["fast", "slow"]})
    assert converted == {"mode": Mode.SLOW, "modes": [Mode.FAST, Mode.SLOW]}
    assert tool.validate({"mode": None}) == {"mode": None}


def test_numbers_are_converted_to_the_annotated_type() -> None:
    def scale(times: int, factor: float, maybe: int | None = None) -> None:
        """Scale."""

    converted = Tool.from_function(scale).validate({"times": 2.0, "factor": 3, "maybe": 4.0})
    assert [(value, type(value)) for value in converted.values()] == [(2, int), (3.0, float), (4, int)]


def test_an_integral_float_for_an_int_runs_the_function_once_with_an_int() -> None:
    seen: list[Any] = []

    def repeat(text: str, times: int) -> str:
        """Repeat ``text``."""
        seen.append(times)
        return text * times  # a float here would raise TypeError

    model = FunctionModel.from_responses(
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="c1", tool_name="repeat", args={"text": "ab", "times": 2.0})
        ),
        "done",
    )
    run = Agent(model, tools=[repeat], tool_retry_base_delay=0.0).run_sync("go")
    part = run.all_messages[2].parts[0]
    assert isinstance(part, ToolReturnPart)
    assert part.content == "abab"
    assert seen == [2]
    assert type(seen[0]) is int
