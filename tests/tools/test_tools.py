"""Tools from functions: schema, docstrings, validation, calling."""

from __future__ import annotations

import enum
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.errors import ToolArgumentsError, ToolDefinitionError
from harness.tools import RunContext, Tool, parse_google_docstring, schema_for_annotation, validate_arguments


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


def search(
    query: str,
    limit: int = 10,
    ratio: float = 0.5,
    exact: bool = False,
    tags: list[str] | None = None,
    mode: Literal["fast", "slow"] = "fast",
    color: Color = Color.RED,
    weights: dict[str, float] | None = None,
    pair: tuple[int, str] | None = None,
) -> str:
    """Search the index.

    Longer explanation that spans
    two lines.

    Args:
        query: What to look for. It may
            continue on the next line.
        limit: Maximum hits.
        ratio (float): A ratio.
        exact: Exact matching.
        tags: Filter tags.
        mode: Speed.
        color: A color.
        weights: Field weights.
        pair: A pair.

    Returns:
        The hits.
    """
    return f"{query}|{limit}|{ratio}|{exact}|{tags}|{mode}|{color}|{weights}|{pair}"


def test_schema_from_signature_and_docstring() -> None:
    tool = Tool.from_function(search)
    assert tool.name == "search"
    assert tool.description == "Search the index.\n\nLonger explanation that spans\ntwo lines."
    schema = tool.parameters_json_schema
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["query"]
    props = schema["properties"]
    assert props["query"] == {
        "type": "string",
        "description": "What to look for. It may continue on the next line.",
    }
    assert props["limit"] == {"type": "integer", "description": "Maximum hits.", "default": 10}
    assert props["ratio"]["type"] == "number"
    assert props["ratio"]["description"] == "A ratio."
    assert props["exact"]["type"] == "boolean"
    assert props["tags"]["anyOf"] == [
        {"type": "array", "items": {"type": "string"}},
        {"type": "null"},
    ]
    assert props["mode"]["enum"] == ["fast", "slow"]
    assert props["color"]["enum"] == ["red", "blue"]
    assert props["color"]["default"] == "red"
    assert props["weights"]["anyOf"][0] == {"type": "object", "additionalProperties": {"type": "number"}}
    assert props["pair"]["anyOf"][0]["prefixItems"] == [{"type": "integer"}, {"type": "string"}]
    assert tool.definition.name == "search"
    assert tool.definition.parameters_json_schema is schema


def test_name_and_description_overrides() -> None:
    tool = Tool.from_function(search, name="find", description="Finds.")
    assert (tool.name, tool.description) == ("find", "Finds.")


@pytest.mark.parametrize("bad", ["", "has space", "x" * 65, "1abc", "a<b"])
def test_invalid_names_rejected(bad: str) -> None:
    with pytest.raises(ToolDefinitionError, match="invalid tool name"):
        Tool.from_function(search, name=bad)


def test_unsupported_signatures_rejected() -> None:
    def star(*args: int) -> None:
        """Star args."""

    def kw(**kwargs: int) -> None:
        """Kw args."""

    def obj(x: object) -> None:
        """Object."""

    def int_keys(x: dict[int, str]) -> None:
        """Int keys."""

    def pos(x: int, /) -> None:
        """Positional only."""

    with pytest.raises(ToolDefinitionError, match=r"\*args"):
        Tool.from_function(star)
    with pytest.raises(ToolDefinitionError, match=r"\*\*kwargs"):
        Tool.from_function(kw)
    with pytest.raises(ToolDefinitionError, match="parameter 'x': unsupported annotation"):
        Tool.from_function(obj)
    with pytest.raises(ToolDefinitionError, match="dict keys must be str"):
        Tool.from_function(int_keys)
    with pytest.raises(ToolDefinitionError, match="positional-only"):
        Tool.from_function(pos)


def test_run_context_parameter_is_not_in_schema() -> None:
    def with_ctx(ctx: RunContext, path: str) -> str:
        """Uses the context."""
        return path

    tool = Tool.from_function(with_ctx)
    assert tool.takes_ctx
    assert list(tool.parameters_json_schema["properties"]) == ["path"]


def test_unannotated_and_any_parameters_accept_anything() -> None:
    def loose(a, b: Any = None) -> None:
        """Loose."""

    tool = Tool.from_function(loose)
    assert tool.parameters_json_schema["properties"] == {"a": {}, "b": {"default": None}}
    assert tool.validate({"a": [1, {"x": 2}], "b": "s"}) == {"a": [1, {"x": 2}], "b": "s"}


def test_parse_google_docstring_edge_cases() -> None:
    assert parse_google_docstring(None) == ("", {})
    assert parse_google_docstring("Only a summary.") == ("Only a summary.", {})
    doc = """Summary.

    Args:
        *args: Star.
        **kw: Kws.
        x (int): An int.

    Raises:
        ValueError: never.
    """
    assert parse_google_docstring(doc) == ("Summary.", {"args": "Star.", "kw": "Kws.", "x": "An int."})


VALID_CASES: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"query": "q"}, {"query": "q"}),
    ({"query": "q", "limit": 3, "ratio": 1}, {"query": "q", "limit": 3, "ratio": 1}),
    ({"query": "q", "limit": 3.0}, {"query": "q", "limit": 3.0}),
    ({"query": "q", "tags": None}, {"query": "q", "tags": None}),
    ({"query": "q", "tags": ["a", "b"]}, {"query": "q", "tags": ["a", "b"]}),
    ({"query": "q", "weights": {"a": 1.5}}, {"query": "q", "weights": {"a": 1.5}}),
    ({"query": "q", "pair": [1, "x"]}, {"query": "q", "pair": (1, "x")}),
]


@pytest.mark.parametrize(("args", "expected"), VALID_CASES)
def test_valid_arguments_pass(args: dict[str, Any], expected: dict[str, Any]) -> None:
    assert Tool.from_function(search).validate(args) == expected


INVALID_CASES: list[tuple[Any, str]] = [
    ({}, "query: missing required argument"),
    ({"query": 1}, "query: expected string, got integer 1"),
    ({"query": "q", "limit": "3"}, "limit: expected integer, got string"),
    ({"query": "q", "limit": 2.5}, "limit: expected integer, got number"),
    ({"query": "q", "limit": True}, "limit: expected integer, got boolean"),
    ({"query": "q", "exact": "yes"}, "exact: expected boolean"),
    ({"query": "q", "tags": ["a", 2]}, r"tags\[1\]: expected string, got integer 2"),
    ({"query": "q", "mode": "medium"}, "mode: 'medium' is not one of \\['fast', 'slow'\\]"),
    ({"query": "q", "color": "green"}, "color: 'green' is not one of"),
    ({"query": "q", "weights": {"a": "heavy"}}, r"weights\.a: expected number, got string"),
    ({"query": "q", "weights": 3}, r"weights: expected one of object, null, got integer 3"),
    ({"query": "q", "pair": [1]}, "pair: expected 2 items, got 1"),
    ({"query": "q", "bogus": 1}, "bogus: unexpected argument \\(accepted: color, exact,"),
    ([1, 2], "arguments must be a JSON object, got array"),
]


@pytest.mark.parametrize(("args", "message"), INVALID_CASES)
def test_invalid_arguments_explained(args: Any, message: str) -> None:
    with pytest.raises(ToolArgumentsError, match=message) as info:
        Tool.from_function(search).validate(args)
    assert info.value.tool_name == "search"
    assert "validation error" in str(info.value)


def test_multiple_errors_all_listed() -> None:
    with pytest.raises(ToolArgumentsError) as info:
        Tool.from_function(search).validate({"limit": "x", "extra": 1})
    assert len(info.value.errors) == 3
    assert str(info.value).startswith("3 validation errors for tool 'search':")


def test_nested_schema_paths() -> None:
    schema = {
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}}}
        },
    }
    with pytest.raises(ToolArgumentsError, match=r"items\[1\]\.n: expected integer"):
        validate_arguments("t", {"items": [{"n": 1}, {"n": "x"}]}, schema)


def test_enum_arguments_converted() -> None:
    tool = Tool.from_function(search)
    assert tool.validate({"query": "q", "color": "blue"})["color"] is Color.BLUE


async def test_call_sync_async_and_ctx() -> None:
    async def async_tool(x: int) -> int:
        """Async."""
        return x * 2

    def ctx_tool(ctx: RunContext, x: int) -> str:
        """Ctx."""
        return f"{ctx.tool_call_id}:{x}"

    assert (
        await Tool.from_function(search).call({"query": "a"})
        == "a|10|0.5|False|None|fast|Color.RED|None|None"
    )
    assert await Tool.from_function(async_tool).call({"x": 4}) == 8
    from harness.models.function import FunctionModel
    from harness.session import Session

    ctx = RunContext(model=FunctionModel(lambda m, i: "x"), session=Session()).for_tool("id1", "ctx_tool", 0)
    assert await Tool.from_function(ctx_tool).call({"x": 1}, ctx) == "id1:1"


def test_schema_for_annotation_basics() -> None:
    assert schema_for_annotation(int | None) == {"type": ["integer", "null"]}
    assert schema_for_annotation(list[int]) == {"type": "array", "items": {"type": "integer"}}
    assert schema_for_annotation(tuple[str, ...]) == {"type": "array", "items": {"type": "string"}}
    assert schema_for_annotation(list) == {"type": "array"}
    assert schema_for_annotation(dict) == {"type": "object"}
    assert schema_for_annotation(None) == {"type": "null"}


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(
    args=st.dictionaries(st.sampled_from(["query", "limit", "tags", "mode", "x"]), JSON_VALUES, max_size=4)
)
def test_validation_never_crashes_and_accepts_only_schema_conforming(args: dict[str, Any]) -> None:
    tool = Tool.from_function(search)
    try:
        result = tool.validate(args)
    except ToolArgumentsError as exc:
        errors = exc.errors
        result = None
    else:
        errors = ()
    if result is None:
        assert errors
        return
    assert isinstance(result["query"], str)
    assert set(result) <= {"query", "limit", "tags", "mode"}
    if "limit" in result:
        assert isinstance(result["limit"], int | float)
        assert not isinstance(result["limit"], bool)
    if "mode" in result:
        assert result["mode"] in ("fast", "slow")
