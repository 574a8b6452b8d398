"""A stack naming a capability the allow or block lists left out says so, instead of "unknown capability"."""

from __future__ import annotations

import pytest

import harness.hooks.entrypoints as entrypoints_module
from harness.config import StackEntry, build_stack, parse_stack, resolve_stack
from harness.errors import StackConfigError
from harness.hooks import DISABLE_ENV, LOAD_ENV, PluginManager


@pytest.fixture(autouse=True)
def no_filters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(entrypoints_module, "_warned_entries", set[tuple[str, str]]())
    monkeypatch.delenv(LOAD_ENV, raising=False)
    monkeypatch.delenv(DISABLE_ENV, raising=False)


def test_a_capability_disabled_by_the_environment_is_reported_as_disabled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(DISABLE_ENV, "harness-summarizing")  # by distribution name
    with pytest.raises(StackConfigError) as info:
        resolve_stack("sliding_window summarizing")
    assert str(info.value) == (
        "--stack entry 2: capability 'summarizing' is installed but disabled by "
        f"{DISABLE_ENV} (entry 'harness-summarizing')"
    )
    assert info.value.source == "--stack entry 2"


def test_a_capability_the_allow_list_omits_is_reported_as_not_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LOAD_ENV, "sliding_window,tiered")
    with pytest.raises(StackConfigError, match=rf"not listed in {LOAD_ENV} \(sliding_window, tiered\)"):
        build_stack(parse_stack("clear_tool_results"))


def test_a_nested_tier_that_is_disabled_is_reported_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DISABLE_ENV, "summarizing")
    tiers = [StackEntry("sliding_window", {}, "tier 1"), StackEntry("summarizing", {}, "tier 2")]
    with pytest.raises(
        StackConfigError, match=r"^tier 2: capability 'summarizing' is installed but disabled"
    ):
        build_stack([StackEntry("tiered", {"tiers": tiers}, "the stack")])


def test_a_plugin_managers_own_lists_are_the_ones_reported() -> None:
    pm = PluginManager()
    pm.load_entrypoint_plugins(block=["summarizing"])
    with pytest.raises(StackConfigError, match=r"disabled by the block list \(entry 'summarizing'\)"):
        build_stack(parse_stack("summarizing"), plugin_manager=pm)
    assert len(build_stack(parse_stack("sliding_window"), plugin_manager=pm)) == 1


def test_a_name_nothing_installs_is_still_unknown_with_a_suggestion() -> None:
    with pytest.raises(
        StackConfigError, match=r"unknown capability 'sumarizing'; did you mean 'summarizing'\?"
    ):
        build_stack(parse_stack("sumarizing"))
