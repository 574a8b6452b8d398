"""Entry-point plugins: discovery, allow and block lists, load errors, listing."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import pytest

import harness.hooks.entrypoints as entrypoints_module
from harness.capabilities import RequestContext
from harness.core import UserPromptPart
from harness.errors import PluginLoadError
from harness.hooks import PluginInfo, PluginManager, hookimpl

FIXTURES = Path(__file__).parent / "fixtures" / "entrypoints"


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


def tag_last_request(ctx: RequestContext, tag: str) -> None:
    """Append a user-prompt part to the request being sent (keeps every invariant)."""
    last = ctx.messages[-1]
    ctx.messages[-1] = last.replace(parts=(*last.parts, UserPromptPart(tag)))


class StepBase:
    """Name, log and ordering declarations of the test capabilities."""

    def __init__(
        self,
        name: str,
        log: list[str] | None = None,
        *,
        runs_before: tuple[str, ...] | str = (),
        runs_after: tuple[str, ...] | str = (),
    ) -> None:
        self.name = name
        self.log = [] if log is None else log
        self.runs_before = runs_before
        self.runs_after = runs_after

    def __repr__(self) -> str:
        return f"Step({self.name!r})"


class Step(StepBase):
    """A capability that tags the request being sent and logs its name."""

    @hookimpl
    def before_model_request(self, ctx: RequestContext) -> None:
        self.log.append(self.name)
        tag_last_request(ctx, self.name)


# --------------------------------------------------------------------------------------
# entry points
# --------------------------------------------------------------------------------------


GOOD = ["fixture_observer", "fixture_instance", "fixture_capability", "fixture_hooked_class"]


def test_unset_allow_list_loads_everything_that_loads(
    fixture_dists: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(entrypoints_module.DISABLE_ENV, "harness-fixture-broken")
    pm = PluginManager()
    assert sorted(pm.load_entrypoint_plugins()) == sorted(GOOD)
    # modules and instances are registered; classes are only listed
    available = pm.available_capabilities()
    assert sorted(available) == ["fixture_capability", "fixture_hooked_class"]
    assert available["fixture_capability"].__name__ == "FixtureCapability"
    registered = {info.name for info in pm.list_plugins() if info.kind == "plugin"}
    assert registered == {"fixture_observer", "fixture_instance"}
    assert pm.capabilities == ()
    # a second call loads nothing new
    assert pm.load_entrypoint_plugins() == []


def test_list_plugins_reports_distribution_version_and_hooks(fixture_dists: None) -> None:
    pm = PluginManager()
    pm.add_capabilities([Step("mine")])
    pm.load_entrypoint_plugins(allow=["harness-fixture-good"])
    infos = {info.name: info for info in pm.list_plugins()}
    assert infos["mine"] == PluginInfo("mine", "capability", ("before_model_request",))
    assert infos["fixture_observer"] == PluginInfo(
        name="fixture_observer",
        kind="plugin",
        hooks=("on_compaction",),
        distribution="harness-fixture-good",
        version="0.3.1",
        entry_point="harness_fixture_good.observer",
    )
    assert infos["fixture_instance"].hooks == ("count_tokens",)
    capability = infos["fixture_capability"]
    assert capability.kind == "available"
    assert capability.hooks == ("before_model_request",)
    assert capability.entry_point == "harness_fixture_good.capabilities:FixtureCapability"
    assert pm.list_plugins()[0].name == "mine"


def test_registered_entry_point_plugins_work(fixture_dists: None) -> None:
    pm = PluginManager()
    pm.load_entrypoint_plugins(allow=["fixture_instance"])
    assert pm.token_counter(None).count_text("12345") == 5


def test_allow_list_by_entry_point_and_distribution_name(
    fixture_dists: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(entrypoints_module.LOAD_ENV, " fixture_observer , Harness_Fixture.Good ")
    assert sorted(PluginManager().load_entrypoint_plugins()) == sorted(GOOD)
    monkeypatch.setenv(entrypoints_module.LOAD_ENV, "fixture-observer")
    assert PluginManager().load_entrypoint_plugins() == ["fixture_observer"]


def test_empty_allow_list_loads_none(fixture_dists: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(entrypoints_module.LOAD_ENV, "")
    pm = PluginManager()
    assert pm.load_entrypoint_plugins() == []
    assert pm.list_plugins() == []
    assert PluginManager().load_entrypoint_plugins(allow=[]) == []


def test_block_list_wins_over_allow_list(fixture_dists: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(entrypoints_module.LOAD_ENV, "harness-fixture-good")
    monkeypatch.setenv(entrypoints_module.DISABLE_ENV, "fixture_observer,fixture_capability")
    assert sorted(PluginManager().load_entrypoint_plugins()) == ["fixture_hooked_class", "fixture_instance"]
    # explicit arguments override the environment
    loaded = PluginManager().load_entrypoint_plugins(allow=["fixture_observer"], block=[])
    assert loaded == ["fixture_observer"]


def test_failing_import_names_distribution_entry_point_cause_and_fix(fixture_dists: None) -> None:
    pm = PluginManager()
    with pytest.raises(PluginLoadError) as info:
        pm.load_entrypoint_plugins(allow=["fixture_broken"])
    message = str(info.value)
    assert "harness-fixture-broken 0.2.0" in message
    assert "fixture_broken = harness_fixture_broken.exploding" in message
    assert "ImportError: harness_fixture_broken needs the 'frobnicate' package" in message
    assert "HARNESS_DISABLE_PLUGINS=fixture_broken" in message
    assert isinstance(info.value.__cause__, ImportError)


def test_class_without_hooks_is_a_load_error(fixture_dists: None) -> None:
    with pytest.raises(PluginLoadError, match="NotAPlugin, which has no hook implementations"):
        PluginManager().load_entrypoint_plugins(allow=["fixture_plain_class"])


def test_object_without_hooks_is_a_load_error(fixture_dists: None) -> None:
    with pytest.raises(PluginLoadError, match="which has no hook implementations") as info:
        PluginManager().load_entrypoint_plugins(allow=["fixture_function"])
    assert "fixture_function = harness_fixture_broken.plain:helper" in str(info.value)


def test_invalid_entry_point_plugin_is_a_load_error(fixture_dists: None) -> None:
    with pytest.raises(PluginLoadError, match=r"failed to register.*did you mean") as info:
        PluginManager().load_entrypoint_plugins(allow=["fixture_bad_hook"])
    assert "HARNESS_DISABLE_PLUGINS=fixture_bad_hook" in str(info.value)


def test_real_entry_point_group_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """No monkeypatched lookup: the fixture dist is found on sys.path under group "harness"."""
    monkeypatch.syspath_prepend(str(FIXTURES))
    monkeypatch.setenv(entrypoints_module.LOAD_ENV, "fixture_hooked_class")
    monkeypatch.delenv(entrypoints_module.DISABLE_ENV, raising=False)
    pm = PluginManager()
    assert pm.load_entrypoint_plugins() == ["fixture_hooked_class"]
    assert list(pm.available_capabilities()) == ["fixture_hooked_class"]
    sys.modules.pop("harness_fixture_good.capabilities", None)
    sys.modules.pop("harness_fixture_good", None)


# --------------------------------------------------------------------------------------
# structured attributes of PluginLoadError
# --------------------------------------------------------------------------------------


def test_failing_import_fills_in_the_error_attributes(fixture_dists: None) -> None:
    with pytest.raises(PluginLoadError) as info:
        PluginManager().load_entrypoint_plugins(allow=["fixture_broken"])
    exc = info.value
    assert exc.plugin_name == "fixture_broken"
    assert exc.distribution == "harness-fixture-broken"
    assert exc.version == "0.2.0"
    assert exc.entry_point == "harness_fixture_broken.exploding"
    assert exc.reason == (
        "failed to import: ImportError: harness_fixture_broken needs the 'frobnicate' package"
    )
    assert exc.reason in str(exc)


@pytest.mark.parametrize(
    ("name", "entry_point", "reason"),
    [
        (
            "fixture_plain_class",
            "harness_fixture_broken.plain:NotAPlugin",
            "points to the class NotAPlugin, which has no hook implementations",
        ),
        ("fixture_function", "harness_fixture_broken.plain:helper", "which has no hook implementations"),
    ],
)
def test_objects_without_hooks_fill_in_the_error_attributes(
    fixture_dists: None, name: str, entry_point: str, reason: str
) -> None:
    with pytest.raises(PluginLoadError) as info:
        PluginManager().load_entrypoint_plugins(allow=[name])
    exc = info.value
    assert exc.plugin_name == name
    assert exc.distribution == "harness-fixture-broken"
    assert exc.version == "0.2.0"
    assert exc.entry_point == entry_point
    assert exc.reason is not None
    assert reason in exc.reason
    assert exc.__cause__ is None


def test_failed_registration_fills_in_the_error_attributes(fixture_dists: None) -> None:
    pm = PluginManager()
    with pytest.raises(PluginLoadError) as info:
        pm.load_entrypoint_plugins(allow=["fixture_bad_hook"])
    exc = info.value
    assert exc.plugin_name == "fixture_bad_hook"
    assert exc.distribution == "harness-fixture-broken"
    assert exc.version == "0.2.0"
    assert exc.entry_point == "harness_fixture_broken.plain:TYPO"
    assert exc.reason is not None
    assert exc.reason.startswith("failed to register: PluginLoadError: ")
    assert "did you mean 'before_model_request'" in exc.reason
    # the chained registration error names the plugin too, without entry-point facts
    cause = exc.__cause__
    assert isinstance(cause, PluginLoadError)
    assert cause.plugin_name == "fixture_bad_hook"
    assert cause.distribution is None
    assert cause.entry_point is None
    assert pm.list_plugins() == []


def test_entry_point_without_distribution_is_reported_as_unknown() -> None:
    ep = importlib.metadata.EntryPoint("orphan", "no_such_module_for_harness_tests", "harness")
    source = entrypoints_module.PluginSource.of(ep)
    assert source == entrypoints_module.PluginSource(None, None, "no_such_module_for_harness_tests")
    with pytest.raises(PluginLoadError, match="from an unknown distribution failed to import") as info:
        entrypoints_module.load_entry_point(ep, source)
    exc = info.value
    assert exc.plugin_name == "orphan"
    assert exc.distribution is None
    assert exc.version is None
    assert exc.entry_point == "no_such_module_for_harness_tests"
    assert isinstance(exc.__cause__, ModuleNotFoundError)


def test_hook_names_honours_specname() -> None:
    class Renamed:
        @hookimpl(specname="on_tool")
        def watch(self) -> None:
            pass

        @hookimpl
        def after_node(self) -> None:
            pass

    assert entrypoints_module.hook_names(Renamed) == ("after_node", "on_tool")
    assert entrypoints_module.hook_names(Renamed()) == ("after_node", "on_tool")
    assert entrypoints_module.hook_names(object()) == ()
