"""Adding usages keeps ``extra``: numbers summed, mappings merged, otherwise the newest value wins."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.core import Usage

keys = st.sampled_from(["cost", "details", "model", "flag", "note", "n", "tags"])
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(-1e6, 1e6, allow_nan=False)
    | st.text(max_size=4)
)
values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=2) | st.dictionaries(keys, children, max_size=3),
    max_leaves=6,
)
extras = st.dictionaries(keys, values, max_size=5)
usages = st.builds(
    Usage,
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    extras,
)


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _expected(left: Any, right: Any) -> Any:
    if _number(left) and _number(right):
        return left + right
    if isinstance(left, dict) and isinstance(right, dict):
        merged: dict[str, Any] = dict(left)  # pyright: ignore[reportUnknownArgumentType]
        for key, value in right.items():  # pyright: ignore[reportUnknownVariableType]
            merged[key] = _expected(merged[key], value) if key in merged else value
        return merged
    return left if right is None else right


@given(usages, usages)
def test_the_sum_keeps_every_extra_key_of_both_sides(a: Usage, b: Usage) -> None:
    total = a + b
    assert set(total.extra) == set(a.extra) | set(b.extra)
    assert total.extra == _expected(dict(a.extra), dict(b.extra))
    assert (total.request_tokens, total.response_tokens) == (
        a.request_tokens + b.request_tokens,
        a.response_tokens + b.response_tokens,
    )
    assert (total.cached_tokens, total.cache_write_tokens) == (
        a.cached_tokens + b.cached_tokens,
        a.cache_write_tokens + b.cache_write_tokens,
    )


@given(usages)
def test_an_empty_usage_is_the_identity(a: Usage) -> None:
    assert a + Usage() == a
    assert Usage() + a == a
    assert sum([a]) == a
    assert sum([a], Usage()) == a


@given(st.floats(0, 1e6), st.floats(0, 1e6), st.integers(0, 10**6), st.integers(0, 10**6))
def test_numeric_extras_add_up_as_numbers(x: float, y: float, m: int, n: int) -> None:
    total = Usage(extra={"cost": x, "calls": m}) + Usage(extra={"cost": y, "calls": n})
    assert math.isclose(total.extra["cost"], x + y)
    assert total.extra["calls"] == m + n
    assert type(total.extra["calls"]) is int


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        pytest.param(True, True, True, id="bools are not summed"),
        pytest.param(True, False, False, id="newest bool wins"),
        pytest.param(1, True, True, id="number against bool: newest wins"),
        pytest.param("gpt-4o", "gpt-5", "gpt-5", id="newest string wins"),
        pytest.param(0.5, None, 0.5, id="null adds nothing"),
        pytest.param(None, 0.5, 0.5, id="null is replaced"),
        pytest.param(0.5, "n/a", "n/a", id="number against string: newest wins"),
        pytest.param([1], [2], [2], id="lists are not concatenated"),
        pytest.param({"a": 1, "m": "x"}, {"a": 2, "b": 3, "m": "y"}, {"a": 3, "b": 3, "m": "y"}, id="nested"),
    ],
)
def test_same_key_rules(left: object, right: object, expected: object) -> None:
    total = Usage(extra={"k": left}) + Usage(extra={"k": right})
    assert total.extra["k"] == expected
    assert isinstance(total.extra["k"], type(expected))


def test_tunacode_cost_survives_many_runs() -> None:
    session_total = Usage(100, 10, extra={"cost": 0.25})
    for _ in range(3):
        session_total = session_total + Usage(10, 1)
    assert session_total.extra == {"cost": 0.25}
    assert (session_total.request_tokens, session_total.response_tokens) == (130, 13)
    assert (session_total + Usage(extra={"cost": 0.5})).extra == {"cost": 0.75}


def test_adding_something_else_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        Usage() + 1  # pyright: ignore[reportOperatorIssue, reportUnusedExpression]
    with pytest.raises(TypeError):
        1 + Usage()  # pyright: ignore[reportOperatorIssue, reportUnusedExpression]
