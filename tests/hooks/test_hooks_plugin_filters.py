"""Loading past broken entry points, why the allow and block lists left one out, and unmatched entries."""

from __future__ import annotations

import warnings

import pytest

import harness.hooks.entrypoints as entrypoints_module
from harness.errors import HarnessWarning, PluginLoadError, UnknownPluginNameWarning
from harness.hooks import DISABLE_ENV, LOAD_ENV, PluginManager

GOOD = ["fixture_observer", "fixture_instance", "fixture_capability", "fixture_hooked_class"]
BROKEN = ["fixture_broken", "fixture_plain_class", "fixture_bad_hook", "fixture_function"]
INSTALLED = sorted(GOOD + BROKEN)


# --------------------------------------------------------------------------------------
# errors="collect"
# --------------------------------------------------------------------------------------


def test_collect_loads_every_good_plugin_and_keeps_each_failure(fixture_dists: None) -> None:
    pm = PluginManager()
    assert sorted(pm.load_entrypoint_plugins(errors="collect")) == sorted(GOOD)
    assert sorted(pm.available_capabilities()) == ["fixture_capability", "fixture_hooked_class"]
    errors = pm.load_errors()
    assert sorted(error.plugin_name or "" for error in errors) == sorted(BROKEN)
    by_name = {error.plugin_name: error for error in errors}
    broken = by_name["fixture_broken"]
    assert broken.distribution == "harness-fixture-broken"
    assert broken.version == "0.2.0"
    assert broken.entry_point == "harness_fixture_broken.exploding"
    assert "failed to import" in str(broken)
    assert f"{DISABLE_ENV}=fixture_broken" in str(broken)
    assert isinstance(broken.__cause__, ImportError)
    assert "did you mean 'before_model_request'" in str(by_name["fixture_bad_hook"])


def test_collect_does_not_list_a_failure_twice(fixture_dists: None) -> None:
    pm = PluginManager()
    pm.load_entrypoint_plugins(errors="collect")
    pm.load_entrypoint_plugins(errors="collect")
    assert len(pm.load_errors()) == len(BROKEN)
    assert PluginManager().load_errors() == []


def test_raise_is_still_the_default(fixture_dists: None) -> None:
    pm = PluginManager()
    with pytest.raises(PluginLoadError) as info:
        pm.load_entrypoint_plugins()
    assert info.value.plugin_name in BROKEN
    assert pm.load_errors() == []


# --------------------------------------------------------------------------------------
# why an entry point was left out
# --------------------------------------------------------------------------------------


def test_excluded_plugins_say_which_list_and_entry_left_each_one_out(
    fixture_dists: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DISABLE_ENV, "Harness_Fixture.Broken, fixture-observer")
    pm = PluginManager()
    loaded = pm.load_entrypoint_plugins()
    assert sorted(loaded) == sorted(set(GOOD) - {"fixture_observer"})
    excluded = pm.excluded_plugins()
    assert excluded["fixture_observer"] == f"disabled by {DISABLE_ENV} (entry 'fixture-observer')"
    for name in BROKEN:  # matched through their distribution's name
        assert excluded[name] == f"disabled by {DISABLE_ENV} (entry 'Harness_Fixture.Broken')"
    assert set(excluded) == {"fixture_observer", *BROKEN}


def test_excluded_plugins_name_the_allow_list(fixture_dists: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LOAD_ENV, "fixture_observer")
    pm = PluginManager()
    assert pm.load_entrypoint_plugins() == ["fixture_observer"]
    assert pm.excluded_plugins()["fixture_capability"] == f"not listed in {LOAD_ENV} (fixture_observer)"
    monkeypatch.setenv(LOAD_ENV, "")
    empty = PluginManager()
    assert empty.load_entrypoint_plugins() == []
    assert empty.excluded_plugins()["fixture_observer"] == f"not loaded because {LOAD_ENV} is set but empty"


def test_explicit_lists_are_named_as_such(fixture_dists: None) -> None:
    pm = PluginManager()
    pm.load_entrypoint_plugins(allow=["harness-fixture-good"], block=["fixture_instance"])
    excluded = pm.excluded_plugins()
    assert excluded["fixture_instance"] == "disabled by the block list (entry 'fixture_instance')"
    assert excluded["fixture_broken"] == "not listed in the allow list (harness-fixture-good)"


def test_a_later_load_that_lets_a_plugin_through_clears_its_exclusion(fixture_dists: None) -> None:
    pm = PluginManager()
    pm.load_entrypoint_plugins(allow=["fixture_observer"])
    assert "fixture_capability" in pm.excluded_plugins()
    pm.load_entrypoint_plugins(allow=["fixture_capability"])
    assert "fixture_capability" not in pm.excluded_plugins()
    assert "fixture_capability" in pm.available_capabilities()
    pm.load_entrypoint_plugins(allow=["fixture_capability"], block=["fixture_capability"])  # loaded: kept
    assert "fixture_capability" not in pm.excluded_plugins()


# --------------------------------------------------------------------------------------
# entries that match nothing
# --------------------------------------------------------------------------------------


def test_a_disable_entry_matching_nothing_warns_once_with_a_suggestion(
    fixture_dists: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DISABLE_ENV, "fixture_obsrever,harness-fixture-broken")
    with pytest.warns(UnknownPluginNameWarning) as record:
        PluginManager().load_entrypoint_plugins()
    assert len(record) == 1
    warning = record[0].message
    assert isinstance(warning, UnknownPluginNameWarning)
    assert isinstance(warning, HarnessWarning)
    assert warning.variable == DISABLE_ENV
    assert warning.entry == "fixture_obsrever"
    assert warning.suggestion == "fixture_observer"
    assert warning.installed == tuple(INSTALLED)
    text = str(warning)
    assert f"{DISABLE_ENV} entry 'fixture_obsrever' matches no installed harness plugin" in text
    assert "did you mean 'fixture_observer'?" in text
    assert f"installed: {', '.join(INSTALLED)}" in text
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second load, or a second manager, does not warn again
        PluginManager().load_entrypoint_plugins()


def test_a_far_off_entry_gets_no_suggestion_and_an_allow_entry_warns_too(
    fixture_dists: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DISABLE_ENV, "zzz")
    monkeypatch.setenv(LOAD_ENV, "fixture_capabilty")
    with pytest.warns(UnknownPluginNameWarning) as record:
        PluginManager().load_entrypoint_plugins()
    warned = {
        w.message.variable: w.message for w in record if isinstance(w.message, UnknownPluginNameWarning)
    }
    assert set(warned) == {DISABLE_ENV, LOAD_ENV}
    assert warned[DISABLE_ENV].suggestion is None
    assert "did you mean" not in str(warned[DISABLE_ENV])
    assert warned[LOAD_ENV].suggestion == "fixture_capability"


def test_entries_matching_an_entry_point_or_a_distribution_do_not_warn(
    fixture_dists: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DISABLE_ENV, "FIXTURE-OBSERVER, harness_fixture_broken, ,")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        PluginManager().load_entrypoint_plugins()


def test_an_explicit_block_list_entry_is_named_as_such(fixture_dists: None) -> None:
    with pytest.warns(UnknownPluginNameWarning, match="the block list entry 'nope'") as record:
        PluginManager().load_entrypoint_plugins(block=["nope", "harness-fixture-broken"])
    assert [w.message.variable for w in record if isinstance(w.message, UnknownPluginNameWarning)] == [
        "block"
    ]


def test_no_plugin_installed_is_said_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(entrypoints_module, "_warned_entries", set[tuple[str, str]]())
    monkeypatch.setattr(
        entrypoints_module.importlib.metadata,
        "entry_points",
        lambda *, group: entrypoints_module.importlib.metadata.EntryPoints([]),  # pyright: ignore[reportUnknownLambdaType]
    )
    with pytest.warns(UnknownPluginNameWarning, match="no harness plugin is installed") as record:
        entrypoints_module.select_entry_points(block=["anything"])
    assert isinstance(record[0].message, UnknownPluginNameWarning)
    assert record[0].message.installed == ()
