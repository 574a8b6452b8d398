"""Tool arguments converted to their annotations: numbers, enums, and structures through cattrs."""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import Any, Literal, NotRequired, TypedDict

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import CanonicalMessage, RetryPromptPart, ToolCallPart, ToolReturnPart
from harness.errors import ToolArgumentsError, ToolDefinitionError
from harness.models.function import FunctionModel
from harness.run import Agent
from harness.tools import Tool, schema_for_annotation, validate_arguments


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass
class Point:
    """A point on the canvas.

    Attributes:
        x: Horizontal position.
        y: Vertical position.
        color: Its color, if any.
    """

    x: int
    y: int = 0
    color: Color | None = None

    def __post_init__(self) -> None:
        if self.x < 0:
            raise ValueError("x must be >= 0")


def _positive(instance: Any, attribute: Any, value: float) -> None:
    if value <= 0:
        raise ValueError(f"{attribute.name} must be positive")


@attrs.define
class Shape:
    """A shape made of points."""

    name: str
    points: list[Point]
    kind: Literal["open", "closed"] = "open"
    scale: float = attrs.field(default=1.0, validator=_positive)
    tags: tuple[str, ...] = ()


class Options(TypedDict):
    """Drawing options.

    Keys:
        depth: How deep to draw.
        label: A caption.
    """

    depth: int
    label: NotRequired[str]
    level: NotRequired[Level]


@dataclasses.dataclass
class Tree:
    value: int
    children: list[Tree] = dataclasses.field(default_factory=lambda: list[Tree]())


@dataclasses.dataclass
class Circle:
    radius: float


@dataclasses.dataclass
class Square:
    side: int
    filled: bool = False


class Plain:
    def __init__(self, x: int) -> None:
        self.x = x


@dataclasses.dataclass
class Holder:
    inner: Plain


received: dict[str, Any] = {}


def draw(
    shape: Shape,
    options: Options,
    color: Color | None = None,
    count: int = 1,
    ratio: float = 0.5,
    tree: Tree | None = None,
    extra: list[Circle | Square] | None = None,
    by_name: dict[str, Color] | None = None,
) -> str:
    """Draw a shape.

    Args:
        shape: What to draw.
        options: How to draw it.
        color: Override the color.
        count: How many copies.
        ratio: Aspect ratio.
        tree: A tree of values.
        extra: More shapes.
        by_name: Colors by name.
    """
    received.update(
        shape=shape,
        options=options,
        color=color,
        count=count,
        ratio=ratio,
        tree=tree,
        extra=extra,
        by_name=by_name,
    )
    return "drawn"


TOOL = Tool.from_function(draw)
VALID: dict[str, Any] = {
    "shape": {"name": "s", "points": [{"x": 1.0, "color": "red"}, {"x": 2, "y": 3}], "tags": ["a"]},
    "options": {"depth": 2, "level": 2},
}


# --------------------------------------------------------------------------- schemas


def test_a_dataclass_becomes_an_object_schema_described_by_its_docstring() -> None:
    assert schema_for_annotation(Point) == {
        "type": "object",
        "description": "A point on the canvas.",
        "properties": {
            "x": {"type": "integer", "description": "Horizontal position."},
            "y": {"type": "integer", "description": "Vertical position.", "default": 0},
            "color": {
                "anyOf": [{"enum": ["red", "blue"]}, {"type": "null"}],
                "description": "Its color, if any.",
                "default": None,
            },
        },
        "required": ["x"],
        "additionalProperties": False,
    }


def test_attrs_classes_and_typeddicts_nest_with_defaults_not_required() -> None:
    properties = TOOL.parameters_json_schema["properties"]
    shape = properties["shape"]
    assert shape["required"] == ["name", "points"]
    assert shape["additionalProperties"] is False
    assert shape["properties"]["points"]["items"] == schema_for_annotation(Point)
    assert shape["properties"]["kind"] == {"enum": ["open", "closed"], "default": "open"}
    assert shape["properties"]["scale"] == {"type": "number", "default": 1.0}
    assert shape["properties"]["tags"] == {"type": "array", "items": {"type": "string"}, "default": []}
    options = properties["options"]
    assert options["required"] == ["depth"]  # NotRequired, even under `from __future__ import annotations`
    assert options["properties"]["label"] == {"type": "string", "description": "A caption."}
    assert options["description"] == "How to draw it."  # the parameter's own description wins
    assert schema_for_annotation(Options)["description"] == "Drawing options."
    assert options["properties"]["level"] == {"enum": [1, 2]}


def test_a_structure_that_contains_itself_is_defined_once_and_referenced() -> None:
    schema = TOOL.parameters_json_schema
    assert schema["properties"]["tree"]["anyOf"][0] == {"$ref": "#/$defs/Tree"}
    assert schema["$defs"]["Tree"]["properties"]["children"] == {
        "type": "array",
        "items": {"$ref": "#/$defs/Tree"},
    }
    json.dumps(schema)  # what is sent to a provider
    assert schema_for_annotation(Tree)["$defs"]["Tree"]["required"] == ["value"]


def test_a_class_that_is_not_a_structure_is_refused_with_its_parameter() -> None:
    def bad(p: Plain) -> None:
        """Bad."""

    with pytest.raises(ToolDefinitionError, match=r"tool 'bad' parameter 'p': unsupported annotation"):
        Tool.from_function(bad)

    def nested(h: Holder) -> None:
        """Nested."""

    with pytest.raises(ToolDefinitionError, match=r"field .*Holder\.inner: unsupported annotation"):
        Tool.from_function(nested)


# --------------------------------------------------------------------------- conversion


def test_arguments_are_converted_to_their_annotations() -> None:
    args = {
        **VALID,
        "color": "blue",
        "count": 2.0,
        "ratio": 1,
        "tree": {"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]},
        "extra": [{"radius": 2}, {"side": 3}],
        "by_name": {"sky": "blue"},
    }
    converted = TOOL.validate(args)
    assert converted["shape"] == Shape("s", [Point(1, 0, Color.RED), Point(2, 3)], tags=("a",))
    assert type(converted["shape"].points[0].x) is int
    assert converted["options"] == {"depth": 2, "level": Level.HIGH}
    assert converted["options"]["level"] is Level.HIGH
    assert converted["color"] is Color.BLUE  # Enum | None: converted, not the raw string
    assert (converted["count"], type(converted["count"])) == (2, int)  # 2.0 for an int is 2
    assert (converted["ratio"], type(converted["ratio"])) == (1.0, float)
    assert converted["tree"] == Tree(1, [Tree(2, [Tree(3)])])
    assert converted["extra"] == [Circle(2.0), Square(3)]  # each union member chosen by its schema
    assert converted["by_name"] == {"sky": Color.BLUE}
    assert validate_arguments("draw", args, TOOL.parameters_json_schema) == args  # validation alone: JSON


def test_none_stays_none_for_optional_parameters() -> None:
    converted = TOOL.validate({**VALID, "color": None, "tree": None})
    assert converted["color"] is None
    assert converted["tree"] is None


def test_literals_keep_their_declared_values_and_types() -> None:
    def pick(n: Literal[1, 2], flag: Literal[True] | None = None) -> None:
        """Pick."""

    tool = Tool.from_function(pick)
    converted = tool.validate({"n": 1.0})
    assert (converted["n"], type(converted["n"])) == (1, int)
    with pytest.raises(ToolArgumentsError, match=r"flag: expected one of \[True\], null, got integer 1"):
        tool.validate({"n": 1, "flag": 1})


def test_every_problem_is_listed_with_its_argument_path() -> None:
    bad = {
        "shape": {"name": "s", "points": [{"x": "a"}, {"x": 1, "z": 0}], "kind": "round"},
        "options": {"depth": 1.5, "other": 1},
        "color": "green",
        "count": 2.5,
    }
    with pytest.raises(ToolArgumentsError) as caught:
        TOOL.validate(bad)
    assert caught.value.tool_name == "draw"
    assert caught.value.errors == (
        "shape.points[0].x: expected integer, got string 'a'",
        "shape.points[1].z: unexpected field (accepted: color, x, y)",
        "shape.kind: 'round' is not one of ['open', 'closed']",
        "options.depth: expected integer, got number 1.5",
        "options.other: unexpected field (accepted: depth, label, level)",
        "color: 'green' is not one of ['red', 'blue']",
        "count: expected integer, got number 2.5",
    )


def test_what_a_structure_itself_refuses_becomes_an_argument_error_with_its_path() -> None:
    bad = {"shape": {"name": "s", "points": [{"x": 1}, {"x": -1}]}, "options": {"depth": 1}}
    with pytest.raises(ToolArgumentsError) as caught:
        TOOL.validate(bad)
    assert caught.value.errors == ("shape.points[1]: x must be >= 0",)  # __post_init__
    bad = {"shape": {"name": "s", "points": [], "scale": -2}, "options": {"depth": 1}}
    with pytest.raises(ToolArgumentsError) as caught:
        TOOL.validate(bad)
    assert caught.value.errors == ("shape: scale must be positive",)  # an attrs validator


def test_conversion_problems_join_the_validation_problems_of_other_arguments() -> None:
    bad = {"shape": {"name": "s", "points": [{"x": -1}]}, "options": {"depth": "deep"}}
    with pytest.raises(ToolArgumentsError) as caught:
        TOOL.validate(bad)
    assert caught.value.errors == (
        "options.depth: expected integer, got string 'deep'",
        "shape.points[0]: x must be >= 0",
    )


def test_a_custom_converter_error_is_translated_too() -> None:
    def echo(text: str) -> str:
        """Echo."""
        return text

    def shout(text: str) -> str:
        if not text:
            raise ValueError("must not be empty")
        return text.upper()

    tool = attrs.evolve(Tool.from_function(echo), converters={"text": shout})
    assert tool.validate({"text": "hi"}) == {"text": "HI"}
    with pytest.raises(ToolArgumentsError, match="text: must not be empty"):
        tool.validate({"text": ""})


# --------------------------------------------------------------------------- in the loop


def _responses(*args: dict[str, Any]) -> list[CanonicalMessage | str]:
    steps: list[CanonicalMessage | str] = [
        CanonicalMessage.response(ToolCallPart(tool_call_id=f"c{i}", tool_name="draw", args=a))
        for i, a in enumerate(args, 1)
    ]
    return [*steps, "done"]


def test_the_function_receives_converted_values_in_a_run() -> None:
    received.clear()
    model = FunctionModel.from_responses(*_responses({**VALID, "color": "red", "count": 3.0}))
    run = Agent(model, tools=[TOOL]).run_sync("draw")
    part = run.all_messages[2].parts[0]
    assert isinstance(part, ToolReturnPart)
    assert part.content == "drawn"
    assert received["color"] is Color.RED
    assert type(received["count"]) is int
    assert isinstance(received["shape"], Shape)


def test_invalid_arguments_become_one_retry_prompt_and_the_function_does_not_run() -> None:
    received.clear()
    bad = {"shape": {"name": "s", "points": [{"x": -1}]}, "options": {"depth": 1}, "count": 2.5}
    model = FunctionModel.from_responses(*_responses(bad, VALID))
    run = Agent(model, tools=[TOOL]).run_sync("draw")
    prompt = run.all_messages[2].parts[0]
    assert isinstance(prompt, RetryPromptPart)
    assert "- count: expected integer, got number 2.5" in prompt.content
    assert "- shape.points[0]: x must be >= 0" in prompt.content
    assert run.state.tool_registry.get("c1").attempts == 0  # never called, never retried as transient
    assert received["shape"] == Shape("s", [Point(1, 0, Color.RED), Point(2, 3)], tags=("a",))


# --------------------------------------------------------------------------- properties


points = st.builds(
    Point,
    x=st.integers(0, 10**12),
    y=st.integers(-(10**12), 10**12),
    color=st.none() | st.sampled_from(Color),
)


def _json_point(point: Point, integral_floats: bool) -> dict[str, Any]:
    return {
        "x": float(point.x) if integral_floats and point.x < 2**53 else point.x,
        "y": point.y,
        "color": None if point.color is None else point.color.value,
    }


@settings(max_examples=100, deadline=None)
@given(
    shape=st.builds(
        Shape,
        name=st.text(max_size=5),
        points=st.lists(points, max_size=4),
        kind=st.sampled_from(["open", "closed"]),
        scale=st.floats(0.001, 1e6),
        tags=st.lists(st.text(max_size=3), max_size=3).map(tuple),
    ),
    integral_floats=st.booleans(),
)
def test_structures_round_trip_through_json(shape: Shape, integral_floats: bool) -> None:
    sent = {
        "name": shape.name,
        "points": [_json_point(p, integral_floats) for p in shape.points],
        "kind": shape.kind,
        "scale": shape.scale,
        "tags": list(shape.tags),
    }
    wire = json.loads(json.dumps({"shape": sent, "options": {"depth": 0}}))
    assert TOOL.validate(wire)["shape"] == shape


@settings(max_examples=200, deadline=None)
@given(number=st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False, width=32))
def test_an_int_parameter_takes_integral_numbers_only(number: float) -> None:
    args = {**VALID, "count": number}
    if float(number).is_integer():
        converted = TOOL.validate(args)["count"]
        assert type(converted) is int
        assert converted == number
    else:
        with pytest.raises(ToolArgumentsError, match="count: expected integer"):
            TOOL.validate(args)
