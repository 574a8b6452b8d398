"""Plugins are imported only when what they provide is asked for, and warn at the user's line.

A test-only distribution is written into a temporary folder put on ``sys.path`` (a package
and its ``dist-info`` with an ``entry_points.txt``): a capability, a store scheme, an
engine and a model provider, each under an entry-point name that says what it provides. Its package calls
``warn_experimental`` on import, as the plugins under ``plugins/`` do.
"""

from __future__ import annotations

import pickle
import sys
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

import harness
import harness.hooks.entrypoints as entrypoints_module
from harness import Agent, HarnessExperimentalWarning, HarnessWarning, PluginLoadWarning, hookimpl
from harness.errors import PluginLoadError, warn_at_caller
from harness.hooks.defaults import add_installed, default_plugin_manager
from harness.hooks.entrypoints import provides, select_entry_points
from harness.hooks.ordering import capability_name
from harness.hooks.stacks import installed_capability_classes
from harness.models.test import TestModel

MODULE = "harness_lazy_fixture"
DISTRIBUTION = "harness-lazy-fixture"

PACKAGE = '''
"""A test plugin: a capability, a store scheme, an engine and a model provider."""

from harness import Capability, hookimpl, warn_experimental
from harness.stores.sqlite import SqliteStore

warn_experimental("harness_lazy_fixture")


class LazyCapability(Capability):
    name = "lazy_fixture_capability"

    def should_compact(self, ctx):
        return None

    async def compact(self, ctx, *, reason):
        return None


@hookimpl
def resolve_store(url):
    return SqliteStore(":memory:") if url.startswith("lazyfix://") else None


@hookimpl
def resolve_engine(name):
    return "the lazyfix engine" if name == "lazyfix" else None


@hookimpl
def resolve_model(model_string):
    if model_string.startswith("lazyfix:"):
        from harness.models.test import TestModel

        return TestModel(model_name=model_string)
    return None
'''


@pytest.fixture
def lazy_dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The fixture distribution installed beside the real plugins; not imported yet."""
    root = tmp_path / "site"
    (root / MODULE).mkdir(parents=True)
    (root / MODULE / "__init__.py").write_text(textwrap.dedent(PACKAGE))
    info = root / f"{MODULE}-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DISTRIBUTION}\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(
        "[harness]\n"
        f"lazy_fixture_capability = {MODULE}:LazyCapability\n"
        f"store.lazyfix = {MODULE}\n"
        f"engine.lazyfix = {MODULE}\n"
        f"model.lazyfix = {MODULE}\n"
    )
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.delenv(entrypoints_module.LOAD_ENV, raising=False)
    monkeypatch.delenv(entrypoints_module.DISABLE_ENV, raising=False)
    assert MODULE not in sys.modules
    yield root
    sys.modules.pop(MODULE, None)


def _experimental(caught: list[warnings.WarningMessage]) -> list[warnings.WarningMessage]:
    return [w for w in caught if w.category is HarnessExperimentalWarning and MODULE in str(w.message)]


def test_the_entry_point_name_says_what_it_provides() -> None:
    assert provides("sliding_window") == ("capability", "sliding_window")
    assert provides("store.postgresql") == ("store", "postgresql")
    assert provides("store.PostgreSQL") == ("store", "postgresql")
    assert provides("engine.dbos") == ("engine", "dbos")
    assert provides("plugin.otel") == ("plugin", "otel")
    assert provides("model.mine") == ("model", "mine")
    assert provides("store.") == ("capability", "store.")  # no key: not a store
    assert provides("storage.x") == ("capability", "storage.x")


def test_listing_the_capabilities_imports_no_plugin(lazy_dist: Path) -> None:
    classes = installed_capability_classes()
    assert "lazy_fixture_capability" in list(classes)
    assert MODULE not in sys.modules, "the names come from the metadata alone"
    assert "store.lazyfix" not in classes
    assert "engine.lazyfix" not in classes


def test_a_capability_string_imports_its_plugin_and_warns_at_the_agents_line(lazy_dist: Path) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = sys._getframe().f_lineno + 1  # pyright: ignore[reportPrivateUsage]
        agent = Agent(TestModel(), capabilities=["lazy_fixture_capability"])
    assert [capability_name(c) for c in agent.plugin_manager.capabilities] == ["lazy_fixture_capability"]
    [warning] = _experimental(caught)
    assert warning.filename == __file__
    assert warning.lineno == line
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        Agent(TestModel(), capabilities=["lazy_fixture_capability"])
    assert _experimental(again) == [], "once per plugin: it is imported once"


def test_opening_a_store_imports_only_the_plugin_of_its_scheme(lazy_dist: Path, tmp_path: Path) -> None:
    harness.open_store(f"sqlite:///{tmp_path}/s.db").close()
    assert MODULE not in sys.modules
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = sys._getframe().f_lineno + 1  # pyright: ignore[reportPrivateUsage]
        store = harness.open_store("lazyfix://anything")
    store.close()
    [warning] = _experimental(caught)
    assert (warning.filename, warning.lineno) == (__file__, line)


def test_an_engine_is_imported_by_its_name_only(lazy_dist: Path) -> None:
    manager = default_plugin_manager()
    assert add_installed(manager, "engine", "nosuch") == []
    assert MODULE not in sys.modules
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", HarnessExperimentalWarning)
        assert add_installed(manager, "engine", " LazyFix ") == ["lazyfix"]
    assert manager.resolve_engine("lazyfix") == "the lazyfix engine"
    assert add_installed(manager, "engine", "lazyfix") == [], "already registered: left alone"


def test_a_model_provider_is_imported_by_its_prefix(lazy_dist: Path) -> None:
    assert Agent("test").model.model_name == "test"
    assert MODULE not in sys.modules
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = sys._getframe().f_lineno + 1  # pyright: ignore[reportPrivateUsage]
        agent = Agent("lazyfix:big")
    assert agent.model.model_name == "lazyfix:big"
    [warning] = _experimental(caught)
    assert (warning.filename, warning.lineno) == (__file__, line)


def test_warn_at_caller_names_the_callers_line() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = sys._getframe().f_lineno + 1  # pyright: ignore[reportPrivateUsage]
        warn_at_caller(HarnessWarning("here"))
    [warning] = caught
    assert (warning.filename, warning.lineno) == (__file__, line)


def test_one_plugin_under_two_scheme_names_is_one_plugin_for_the_lists() -> None:
    # harness-postgres publishes store.postgres and store.postgresql, both its resolver module
    selection = select_entry_points(block=["postgres"])
    assert {"store.postgres", "store.postgresql"} <= set(selection.excluded)
    manager = harness.PluginManager()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", HarnessExperimentalWarning)
        assert manager.load_entrypoint_plugins(allow=["postgresql"]) == ["postgres"]
    assert [info.name for info in manager.list_plugins()] == ["postgres"]


def test_a_plugin_load_warning_pickles() -> None:
    message = "harness plugin 'x' failed to import; skipped"
    warning = PluginLoadWarning(message, plugin_name="plugin.x", distribution="harness-x")
    copy = pickle.loads(pickle.dumps(warning))
    assert (str(copy), copy.plugin_name, copy.distribution) == (str(warning), "plugin.x", "harness-x")


def test_a_broken_capability_breaks_only_the_stacks_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    fixtures = Path(__file__).parent / "fixtures" / "entrypoints"
    monkeypatch.syspath_prepend(str(fixtures))
    monkeypatch.delenv(entrypoints_module.LOAD_ENV, raising=False)
    monkeypatch.delenv(entrypoints_module.DISABLE_ENV, raising=False)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", HarnessExperimentalWarning)
            agent = Agent(TestModel(), capabilities=["sliding_window:max_messages=80"])
            assert [capability_name(c) for c in agent.plugin_manager.capabilities] == ["sliding_window"]
            with pytest.raises(PluginLoadError, match="fixture_broken"):
                Agent(TestModel(), capabilities=["fixture_broken"])
    finally:
        for module in list(sys.modules):
            if module.startswith(("harness_fixture_good", "harness_fixture_broken")):
                del sys.modules[module]


def test_hook_discovery_cached_per_class_still_sees_what_an_instance_sets_itself() -> None:
    # every default manager registers the installed observers, so what a class holds is
    # looked up once per class; an instance's own attributes are looked at every time
    class Observer:
        @hookimpl
        def on_tool(self, ctx: object, event: object) -> None:
            del ctx, event

    plain, extended = Observer(), Observer()

    def after_node(ctx: object, node: object) -> None:
        del ctx, node

    extended.after_node = hookimpl(after_node)  # pyright: ignore[reportAttributeAccessIssue]
    first, second = harness.PluginManager(), harness.PluginManager()
    first.register(plain, name="plain")
    second.register(extended, name="extended")
    assert [i.hooks for i in first.list_plugins()] == [("on_tool",)]
    assert [i.hooks for i in second.list_plugins()] == [("after_node", "on_tool")]
    registered = second.pluggy_manager.hook.after_node.get_hookimpls()
    assert [impl.plugin_name for impl in registered] == ["extended"]
