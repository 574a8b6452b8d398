"""Properties of the short form: format/parse round trip, and parse only ever raising StackConfigError."""

from __future__ import annotations

import inspect
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.config import StackEntry, format_stack, installed_capability_classes, parse_stack
from harness.errors import StackConfigError

CLASSES = installed_capability_classes()
NAMES = sorted(CLASSES)
PARAMETERS = {
    name: sorted(
        p.name
        for p in inspect.signature(cls).parameters.values()
        if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "tiers"
    )
    for name, cls in CLASSES.items()
}

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["3", "true", "none", "0.5", "a|b", "x y", "", '"', "\\", "1_0", "-", "é"]),
)
values = st.one_of(scalars, st.lists(scalars, max_size=4))


@st.composite
def entries(draw: st.DrawFn, depth: int = 0) -> StackEntry:
    name = draw(st.sampled_from(NAMES))
    keys = (
        draw(st.lists(st.sampled_from(PARAMETERS[name]), unique=True, max_size=4)) if PARAMETERS[name] else []
    )
    params: dict[str, Any] = {key: draw(values) for key in keys}
    if name == "tiered" and depth < 2:
        params["tiers"] = draw(st.lists(entries(depth + 1), min_size=1, max_size=3))
    return StackEntry(name, params, "generated")


stacks = st.lists(entries(), max_size=5)


@settings(max_examples=200, deadline=None)
@given(stacks)
def test_format_then_parse_gives_the_same_entries(stack: list[StackEntry]) -> None:
    text = format_stack(stack)
    assert parse_stack(text) == stack
    assert format_stack(parse_stack(text)) == text


GRAMMAR_CHARACTERS = st.sampled_from([*'ab_1.-:=,[]"|\\ \t\n', "tiered", "true", "\\u00", "é"])


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=40), st.lists(GRAMMAR_CHARACTERS, max_size=30).map("".join)))
def test_parse_raises_nothing_but_stack_config_error(text: str) -> None:
    error: StackConfigError | None = None
    parsed: list[StackEntry] = []
    try:
        parsed = parse_stack(text)
    except StackConfigError as exc:
        error = exc
    if error is not None:
        assert str(error).startswith("--stack: ")
        assert "column" in str(error)
    else:
        assert all(isinstance(entry, StackEntry) for entry in parsed)
        assert parse_stack(format_stack(parsed)) == parsed
