"""Capability stacks from configuration: the short form, TOML files, validation and building."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pytest

from harness.capabilities import Capability
from harness.config import (
    StackEntry,
    build_stack,
    find_stack_file,
    format_stack,
    load_stack_file,
    parse_stack,
    resolve_stack,
)
from harness.errors import HarnessError, StackConfigError
from harness.hooks import PluginManager

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from harness_clear_tool_results import ClearToolResults
    from harness_dedupe_file_reads import DeduplicateFileReads
    from harness_sliding_window import SlidingWindow
    from harness_tiered import TieredCompaction, tier_name

if TYPE_CHECKING:
    from harness.core import Model


# --------------------------------------------------------------------------------------
# Short form: parsing
# --------------------------------------------------------------------------------------


def test_parse_the_issue_example() -> None:
    entries = parse_stack(
        "dedupe_file_reads clear_tool_results:keep_pairs=3 sliding_window:max_tokens=20000,keep_tokens=8000"
    )
    assert entries == [
        StackEntry("dedupe_file_reads", {}),
        StackEntry("clear_tool_results", {"keep_pairs": 3}),
        StackEntry("sliding_window", {"max_tokens": 20000, "keep_tokens": 8000}),
    ]
    assert [e.source for e in entries] == ["--stack entry 1", "--stack entry 2", "--stack entry 3"]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("3", 3),
        ("-2", -2),
        ("20_000", 20000),
        ("0.5", 0.5),
        ("1e-3", 0.001),
        (".5", 0.5),
        ("true", True),
        ("FALSE", False),
        ("none", None),
        ("null", None),
        ("abc", "abc"),
        ("1e999", "1e999"),
        ("9" * 5000, "9" * 5000),
        ("a:b/c.txt", "a:b/c.txt"),
        ('"3"', "3"),
        ('"a b, c=[d]|e"', "a b, c=[d]|e"),
        ('"tab\\there \\"q\\" \\u00e9"', 'tab\there "q" é'),
        ("", ""),
        ('""', ""),
        ("a|b", ["a", "b"]),
        ("a|", ["a"]),
        ("|", []),
        ("1|two|3.5|true", [1, "two", 3.5, True]),
        ('""|x', ["", "x"]),
    ],
)
def test_values_are_typed_literally(text: str, value: Any) -> None:
    (entry,) = parse_stack(f"cap:x={text}")
    assert entry.params == {"x": value}
    assert type(entry.params["x"]) is type(value)


def test_brackets_give_the_tiers_and_nest() -> None:
    (entry,) = parse_stack(
        "tiered[dedupe_file_reads clear_tool_results:keep_pairs=3 tiered[sliding_window]]:target_fraction=0.5"
    )
    assert entry.name == "tiered"
    assert entry.params["target_fraction"] == 0.5
    tiers = entry.params["tiers"]
    assert [t.name for t in tiers] == ["dedupe_file_reads", "clear_tool_results", "tiered"]
    assert tiers[1].params == {"keep_pairs": 3}
    assert tiers[2].params["tiers"] == [StackEntry("sliding_window", {})]
    assert tiers[1].source == "--stack entry 1, tiers entry 2"
    assert tiers[2].params["tiers"][0].source == "--stack entry 1, tiers entry 3, tiers entry 1"


def test_whitespace_is_free_between_entries_and_after_commas() -> None:
    entries = parse_stack("  a:x=1,\n  y=2\t\tb  ", source="cfg")
    assert entries == [StackEntry("a", {"x": 1, "y": 2}), StackEntry("b", {})]
    assert entries[1].source == "cfg entry 2"
    assert parse_stack("   ") == []


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("a:", "expected a parameter name for 'a'"),
        ("a:x", "expected '=' after parameter 'x'"),
        ("a:x=1,x=2", "parameter 'x' of 'a' is given twice"),
        ("a[b]:tiers=c", "parameter 'tiers' of 'a' is given twice"),
        ("a[b", "missing ']'"),
        ("a]", "unexpected ']'"),
        ('a:x="abc', "unterminated quoted string"),
        ('a:x="\\q"', "invalid quoted string"),
        ('a:x="1"2', "unexpected '2' after a quoted string"),
        ("a,b", "unexpected ','"),
        ("a:x=[1]", "unexpected '[' in a value"),
        ("a:x==1", "unexpected '=' in a value"),
        ("=a", "expected a capability name"),
        ("a" + "[a" * 40 + "]" * 40, "nested more than"),
    ],
)
def test_syntax_errors_name_the_column(spec: str, fragment: str) -> None:
    with pytest.raises(StackConfigError, match="column") as info:
        parse_stack(spec)
    assert fragment in str(info.value)
    assert str(info.value).startswith("--stack: ")
    assert isinstance(info.value, HarnessError)


# --------------------------------------------------------------------------------------
# Short form: formatting
# --------------------------------------------------------------------------------------


def test_format_quotes_what_would_read_back_differently() -> None:
    entries = [
        StackEntry(
            "cap",
            {
                "a": "3",
                "b": "true",
                "c": "with space",
                "d": "",
                "e": ["one"],
                "f": [],
                "g": 1.5,
                "h": None,
                "i": "plain",
                "j": [1, "x|y"],
            },
        )
    ]
    text = format_stack(entries)
    assert text == 'cap:a="3",b="true",c="with space",d="",e=one|,f=|,g=1.5,h=none,i=plain,j=1|"x|y"'
    assert parse_stack(text) == entries


def test_format_writes_tiers_in_brackets() -> None:
    entries = parse_stack("tiered[a b:k=1]:target_fraction=0.5 c")
    assert format_stack(entries) == "tiered[a b:k=1]:target_fraction=0.5 c"


@pytest.mark.parametrize(
    "entry",
    [
        StackEntry("cap", {"x": {"nested": 1}}),
        StackEntry("cap", {"x": [[1]]}),
        StackEntry("cap", {"x": float("inf")}),
        StackEntry("cap", {"other": [StackEntry("a", {})]}),
        StackEntry("bad name", {}),
        StackEntry("cap", {"bad key": 1}),
    ],
)
def test_format_refuses_values_without_a_short_form(entry: StackEntry) -> None:
    with pytest.raises(StackConfigError):
        format_stack([entry])


# --------------------------------------------------------------------------------------
# Building: names, parameters, values
# --------------------------------------------------------------------------------------


def test_build_the_installed_capabilities_with_converted_values() -> None:
    capabilities = build_stack(
        parse_stack(
            "dedupe_file_reads clear_tool_results:keep_pairs=2,max_fraction=1,exclude_tools=bash "
            "tiered[sliding_window:max_tokens=20000,keep_tokens=8000]:target_fraction=0.5"
        ),
        context_window=50_000,
    )
    dedupe, clear, tiered = capabilities
    assert isinstance(dedupe, DeduplicateFileReads)
    assert isinstance(clear, ClearToolResults)
    assert clear.keep_pairs == 2
    assert clear.max_fraction == 1.0
    assert isinstance(clear.max_fraction, float)  # int accepted for a float parameter
    assert clear.exclude_tools == frozenset({"bash"})  # a single value for a list parameter
    assert clear.context_window == 50_000
    assert isinstance(tiered, TieredCompaction)
    (window,) = tiered.tiers
    assert isinstance(window, SlidingWindow)
    assert window.keep_tokens == 8000
    assert window.context_window == 50_000  # nested entries get the window too


def test_an_explicit_context_window_is_kept() -> None:
    (clear,) = build_stack(
        parse_stack("clear_tool_results:max_fraction=0.5,context_window=1000"), context_window=9
    )
    assert isinstance(clear, ClearToolResults)
    assert clear.context_window == 1000


def test_unknown_capability_suggests_the_closest_name() -> None:
    with pytest.raises(StackConfigError) as info:
        build_stack(parse_stack("dedupe_file_reads clear_tool_result:keep_pairs=3"))
    error = info.value
    assert str(error).startswith("--stack entry 2: unknown capability 'clear_tool_result'")
    assert "did you mean 'clear_tool_results'?" in str(error)
    assert error.suggestion == "clear_tool_results"
    assert "sliding_window" in error.accepted
    assert error.source == "--stack entry 2"


def test_unknown_parameter_lists_the_accepted_ones_before_constructing() -> None:
    with pytest.raises(StackConfigError) as info:
        build_stack(parse_stack("sliding_window:max_token=20000"))
    error = info.value
    assert error.entry == "sliding_window"
    assert error.suggestion == "max_tokens"
    assert "unknown parameter 'max_token'; did you mean 'max_tokens'?" in str(error)
    assert "accepted: max_messages, max_tokens, max_fraction, context_window, keep_messages" in str(error)
    assert "self" not in error.accepted


def test_unknown_parameter_without_a_close_match_has_no_suggestion() -> None:
    with pytest.raises(StackConfigError) as info:
        build_stack(parse_stack("sliding_window:zzz=1"))
    assert info.value.suggestion is None
    assert "did you mean" not in str(info.value)


@pytest.mark.parametrize(
    ("spec", "parameter", "fragment"),
    [
        ("clear_tool_results:keep_pairs=abc,max_tokens=9", "keep_pairs", "expected int, got 'abc'"),
        ("clear_tool_results:keep_pairs=1.5,max_tokens=9", "keep_pairs", "expected int, got 1.5"),
        ("clear_tool_results:keep_pairs=true,max_tokens=9", "keep_pairs", "expected int, got true"),
        ("clear_tool_results:keep_pairs=none,max_tokens=9", "keep_pairs", "expected int, got none"),
        ("sliding_window:max_fraction=yes", "max_fraction", "expected float | None, got 'yes'"),
        ("limit_warner:role=usr,max_iterations=3", "role", "expected one of 'user', 'system'"),
        ("clear_tool_results:keep_pairs=-1,max_tokens=9", "keep_pairs", "keep_pairs must be non-negative"),
    ],
)
def test_bad_values_name_the_entry_and_parameter(spec: str, parameter: str, fragment: str) -> None:
    with pytest.raises(StackConfigError) as info:
        build_stack(parse_stack(spec))
    assert info.value.parameter == parameter
    assert info.value.source == "--stack entry 1"
    assert f"(parameter {parameter!r}" not in str(info.value)
    assert f"parameter {parameter!r}: " in str(info.value)
    assert fragment in str(info.value)


def test_literal_mismatch_suggests_the_closest_value() -> None:
    with pytest.raises(StackConfigError, match="did you mean 'user'"):
        build_stack(parse_stack("limit_warner:role=usr,max_iterations=3"))


def test_constructor_errors_are_wrapped_and_chained() -> None:
    with pytest.raises(StackConfigError) as info:
        build_stack(parse_stack("clear_tool_results:max_tokens=100,max_fraction=0.5"))
    assert isinstance(info.value.__cause__, ValueError)
    assert "Set at most one of max_tokens or max_fraction" in str(info.value)
    assert info.value.entry == "clear_tool_results"


@pytest.mark.parametrize(
    ("name", "fraction"), [("clear_tool_results", 0.6), ("sliding_window", 0.85), ("summarizing", 0.8)]
)
def test_an_entry_without_a_trigger_gets_the_capabilitys_default(name: str, fraction: float) -> None:
    [capability] = build_stack(parse_stack(name), context_window=10_000)
    trigger = capability.trigger  # pyright: ignore[reportAttributeAccessIssue]
    assert (trigger.max_messages, trigger.max_tokens, trigger.max_fraction) == (None, None, fraction)
    assert trigger.context_window == 10_000


def test_an_entry_with_its_own_trigger_gets_no_default() -> None:
    [capability] = build_stack(parse_stack("clear_tool_results:max_messages=40,keep_pairs=3"))
    trigger = capability.trigger  # pyright: ignore[reportAttributeAccessIssue]
    assert (trigger.max_messages, trigger.max_tokens, trigger.max_fraction) == (40, None, None)


def test_the_issues_example_stack_builds() -> None:
    spec = (
        "dedupe_file_reads clear_tool_results:keep_pairs=3 sliding_window:max_tokens=20000,keep_tokens=8000"
    )
    stack = build_stack(parse_stack(spec), context_window=128_000)
    assert [type(c).__name__ for c in stack] == ["DeduplicateFileReads", "ClearToolResults", "SlidingWindow"]
    assert stack[2].trigger.max_tokens == 20_000  # pyright: ignore[reportAttributeAccessIssue]


def test_missing_required_parameter_is_named() -> None:
    with pytest.raises(StackConfigError, match="missing required parameter 'tiers'"):
        build_stack(parse_stack("tiered:target_fraction=0.5"))


def test_errors_in_nested_tiers_name_the_nested_entry() -> None:
    with pytest.raises(StackConfigError) as info:
        build_stack(parse_stack("a tiered[dedupe_file_reads slidin_window]:target_fraction=0.5"))
    assert info.value.source == "--stack entry 1"  # the unknown "a" comes first
    with pytest.raises(StackConfigError) as info:
        build_stack(parse_stack("tiered[dedupe_file_reads slidin_window]:target_fraction=0.5"))
    assert info.value.source == "--stack entry 1, tiers entry 2"
    assert info.value.suggestion == "sliding_window"


# A capability with every kind of annotation, served by a plugin manager of its own.


class Probe(Capability):
    """Records its constructor arguments."""

    name = "probe"

    def __init__(
        self,
        label: str = "",
        *,
        names: tuple[str, ...] = (),
        sizes: list[int] | None = None,
        ratio: float = 1.0,
        flag: bool = False,
        mode: Literal["a", "b", 3] = "a",
        model: Model | None = None,
        anything: Any = None,
        untyped=None,  # pyright: ignore[reportMissingParameterType]
    ) -> None:
        self.seen: dict[str, object] = {
            "label": label,
            "names": names,
            "sizes": sizes,
            "ratio": ratio,
            "flag": flag,
            "mode": mode,
            "model": model,
            "anything": anything,
            "untyped": untyped,
        }


class Open(Capability):
    name = "open"

    def __init__(self, first: int = 0, /, second: int = 0, **extra: object) -> None:
        self.seen = (first, second, extra)


class Positional(Capability):
    name = "positional"

    def __init__(self, first: int, /) -> None:
        self.first = first


class Broken(Capability):
    name = "broken"

    def __init__(self, size: int = 0) -> None:
        raise HarnessError(f"size {size} is cursed")


class _Manager(PluginManager):
    def available_capabilities(self) -> dict[str, type]:
        return {"probe": Probe, "open": Open, "broken": Broken, "positional": Positional}


def _probe(spec: str) -> dict[str, object]:
    (capability,) = build_stack(parse_stack(spec), plugin_manager=_Manager())
    assert isinstance(capability, Probe)
    return capability.seen


def test_values_are_converted_by_annotation() -> None:
    seen = _probe("probe:label=7,names=a|b,sizes=3,ratio=2,flag=true,mode=b")
    assert seen["label"] == "7"
    assert seen["names"] == ("a", "b")
    assert seen["sizes"] == [3]
    assert seen["ratio"] == 2.0
    assert seen["flag"] is True
    assert seen["mode"] == "b"
    assert _probe("probe:mode=3")["mode"] == 3
    assert _probe("probe:names=x|")["names"] == ("x",)


def test_strings_from_toml_are_read_as_numbers_and_booleans() -> None:
    entry = StackEntry("probe", {"sizes": ["1", "2"], "ratio": "0.25", "flag": "off"}, "test")
    (probe,) = build_stack([entry], plugin_manager=_Manager())
    assert isinstance(probe, Probe)
    assert probe.seen["sizes"] == [1, 2]
    assert probe.seen["ratio"] == 0.25
    assert probe.seen["flag"] is False


def test_unresolvable_and_missing_annotations_pass_values_through() -> None:
    seen = _probe("probe:model=test:tiny,anything=1|2,untyped=x")
    # `Model | None` is only importable for type checking, and still read as a model string
    assert getattr(seen["model"], "model_name", None) == "tiny"
    assert seen["anything"] == [1, 2]
    assert seen["untyped"] == "x"


def test_sequence_items_are_checked() -> None:
    with pytest.raises(StackConfigError, match="parameter 'sizes': expected int, got 'x'"):
        _probe("probe:sizes=1|x")


def test_var_keyword_accepts_anything_and_positional_only_is_not_a_parameter() -> None:
    manager = _Manager()
    (capability,) = build_stack(parse_stack("open:second=2,other=x"), plugin_manager=manager)
    assert isinstance(capability, Open)
    assert capability.seen == (0, 2, {"other": "x"})
    with pytest.raises(StackConfigError, match="positional-only argument"):
        build_stack(parse_stack("positional"), plugin_manager=manager)


def test_harness_errors_of_the_constructor_are_wrapped() -> None:
    with pytest.raises(StackConfigError, match=r"parameter 'size': HarnessError: size 4 is cursed"):
        build_stack(parse_stack("broken:size=4"), plugin_manager=_Manager())


# --------------------------------------------------------------------------------------
# TOML files
# --------------------------------------------------------------------------------------


HARNESS_TOML = """
[[stack]]
name = "dedupe_file_reads"

[[stack]]
name = "clear_tool_results"
keep_pairs = 3
max_fraction = 0.8
exclude_tools = ["bash"]

[[stack]]
name = "tiered"
target_fraction = 0.5
tiers = [{name = "dedupe_file_reads"}, {name = "sliding_window", keep_messages = 6, max_tokens = 100}]

[[stacks.small]]
name = "sliding_window"
max_tokens = 20000

[stacks]
short = "dedupe_file_reads sliding_window:max_tokens=9"
"""


def test_harness_toml_array_of_tables_with_inline_tiers(tmp_path: Path) -> None:
    path = tmp_path / "harness.toml"
    path.write_text(HARNESS_TOML)
    entries = load_stack_file(path)
    assert entries == parse_stack(
        "dedupe_file_reads clear_tool_results:keep_pairs=3,max_fraction=0.8,exclude_tools=bash| "
        "tiered[dedupe_file_reads sliding_window:keep_messages=6,max_tokens=100]:target_fraction=0.5"
    )
    assert entries[1].source == "harness.toml [[stack]] 2"
    assert entries[2].params["tiers"][1].source == "harness.toml [[stack]] 3, tiers 2"
    capabilities = build_stack(entries, context_window=10_000)
    assert [type(c) for c in capabilities] == [DeduplicateFileReads, ClearToolResults, TieredCompaction]


def test_named_stacks(tmp_path: Path) -> None:
    path = tmp_path / "harness.toml"
    path.write_text(HARNESS_TOML)
    assert load_stack_file(path, name="small") == [StackEntry("sliding_window", {"max_tokens": 20000})]
    assert load_stack_file(path, name="short") == parse_stack("dedupe_file_reads sliding_window:max_tokens=9")
    with pytest.raises(StackConfigError) as info:
        load_stack_file(path, name="smal")
    assert info.value.suggestion == "small"
    assert "named stacks: short, small" in str(info.value)


def test_sub_tables_and_strings_for_tiers(tmp_path: Path) -> None:
    path = tmp_path / "harness.toml"
    path.write_text(
        """
stack = ["dedupe_file_reads", {name = "limit_warner", max_iterations = 5}]

[[stacks.deep]]
name = "tiered"
target_fraction = 0.5

[[stacks.deep.tiers]]
name = "clear_tool_results"
keep_pairs = 1

[[stacks.deep.tiers]]
name = "sliding_window"

[[stacks.strings]]
name = "tiered"
tiers = "dedupe_file_reads sliding_window:max_tokens=5"
"""
    )
    assert load_stack_file(path) == parse_stack("dedupe_file_reads limit_warner:max_iterations=5")
    assert load_stack_file(path, name="deep") == parse_stack(
        "tiered[clear_tool_results:keep_pairs=1 sliding_window]:target_fraction=0.5"
    )
    assert load_stack_file(path, name="strings") == parse_stack(
        "tiered[dedupe_file_reads sliding_window:max_tokens=5]"
    )


def test_pyproject_tool_harness_table(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(
        '[project]\nname = "x"\n\n[[tool.harness.stack]]\nname = "sliding_window"\nmax_tokens = 7\n'
    )
    (entry,) = load_stack_file(path)
    assert entry == StackEntry("sliding_window", {"max_tokens": 7})
    assert entry.source == "pyproject.toml [[tool.harness.stack]] 1"


@pytest.mark.parametrize(
    ("name", "text", "fragment"),
    [
        ("harness.toml", "[[stack]\nname = 1", "invalid TOML"),
        ("harness.toml", "[[stack]]\nkeep_pairs = 3", "every entry needs a `name` string"),
        ("harness.toml", '[stack]\nname = "a"', "write one [[...]] table per capability"),
        ("harness.toml", "stack = 3", "expected an array of tables or a short-form string"),
        ("harness.toml", "stack = [3]", "item 1 is a int"),
        ("harness.toml", '[[stack]]\nname = "a"\nwhen = 1979-05-27', "parameter 'when': a TOML date"),
        ("harness.toml", "stack = 'a:x=\"\" b[c'", "missing ']'"),
        ("harness.toml", "other = 1", "no `stack` defined"),
        ("harness.toml", 'stacks.fast = "a"', "named stacks (fast)"),
        ("harness.toml", 'stacks = "a"', "must be a table of named stacks"),
        ("pyproject.toml", '[project]\nname = "x"', "no [tool.harness] table"),
    ],
)
def test_bad_files_are_named(tmp_path: Path, name: str, text: str, fragment: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(StackConfigError) as info:
        load_stack_file(path)
    assert fragment in str(info.value)
    assert name in str(info.value)


def test_unreadable_and_non_utf8_files(tmp_path: Path) -> None:
    with pytest.raises(StackConfigError, match="cannot read the file"):
        load_stack_file(tmp_path / "missing.toml")
    path = tmp_path / "harness.toml"
    path.write_bytes(b"stack = '\xff'")
    with pytest.raises(StackConfigError, match="not UTF-8"):
        load_stack_file(path)


def test_find_stack_file_searches_upwards(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find_stack_file(deep) is None
    (tmp_path / "pyproject.toml").write_text("[tool.harness]\nstack = 'a'\n")
    assert find_stack_file(deep) == tmp_path / "pyproject.toml"
    (tmp_path / "a" / "pyproject.toml").write_text('[project]\nname = "no harness here"\n')
    (tmp_path / "a" / "b" / "pyproject.toml").write_text("not toml [")
    assert find_stack_file(deep) == tmp_path / "pyproject.toml"
    (tmp_path / "harness.toml").write_text("stack = 'b'")
    assert find_stack_file(deep) == tmp_path / "harness.toml"  # harness.toml wins in a folder
    (tmp_path / "a" / "harness.toml").write_text("stack = 'c'")
    assert find_stack_file(deep / "pyproject.toml") == tmp_path / "a" / "harness.toml"  # nearest wins


def test_resolve_stack_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    default = "sliding_window:max_tokens=1"
    assert resolve_stack(default=None) == ([], [])
    caps, entries = resolve_stack(default=default)
    assert entries == parse_stack(default)
    assert entries[0].source == "default stack entry 1"
    assert isinstance(caps[0], SlidingWindow)
    (tmp_path / "harness.toml").write_text("stack = 'sliding_window:max_tokens=2'")
    assert resolve_stack(default=default)[1] == parse_stack("sliding_window:max_tokens=2")
    explicit = tmp_path / "other.toml"
    explicit.write_text("stack = 'sliding_window:max_tokens=3'\nstacks.n = 'sliding_window:max_tokens=4'")
    assert resolve_stack(config=explicit, default=default)[1] == parse_stack("sliding_window:max_tokens=3")
    assert resolve_stack(config=explicit, name="n")[1] == parse_stack("sliding_window:max_tokens=4")
    caps, entries = resolve_stack("sliding_window:max_tokens=5", config=explicit, default=default)
    assert entries == parse_stack("sliding_window:max_tokens=5")
    assert resolve_stack("", config=explicit) == ([], [])  # an explicit empty stack
    caps, _ = resolve_stack("sliding_window:max_fraction=0.5", context_window=4000)
    assert isinstance(caps[0], SlidingWindow)
    assert caps[0].context_window == 4000


def test_resolve_stack_name_needs_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StackConfigError, match="cannot be combined"):
        resolve_stack("a", name="n")
    with pytest.raises(StackConfigError, match=r"no harness\.toml or pyproject\.toml"):
        resolve_stack(name="n")


def test_stacks_module_builds_the_default_stack_through_config() -> None:
    from harness.config import default_stack_entries, default_stack_spec, tiered_stack_entries

    spec = default_stack_spec()
    assert parse_stack(spec) == default_stack_entries()
    capabilities = build_stack(default_stack_entries(), context_window=8000)
    assert [type(c).__name__ for c in capabilities] == ["TieredCompaction", "LimitWarner"]
    assert [tier_name(t) for t in capabilities[0].tiers] == [  # pyright: ignore[reportAttributeAccessIssue]
        "dedupe_file_reads",
        "clear_tool_results",
        "summarizing",
        "sliding_window",
    ]
    [tiered] = build_stack(tiered_stack_entries(target_fraction=0.4), context_window=8000)
    assert type(tiered) is TieredCompaction
    assert tiered.target_fraction == 0.4
    only = default_stack_entries(installed={"sliding_window", "limit_warner"})
    assert [e.name for e in only] == ["sliding_window", "limit_warner"]
    assert default_stack_entries(installed=set()) == []
