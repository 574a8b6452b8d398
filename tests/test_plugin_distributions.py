"""Every capability distribution under plugins/ is laid out and declared consistently."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import tomllib
from pathlib import Path

import pytest

from harness.capabilities import Capability
from harness.core.markers import PROJECT_NAME
from harness.hooks.entrypoints import provides

PLUGINS = Path(__file__).resolve().parents[1] / "plugins"
ALL_DISTRIBUTIONS = sorted(p for p in PLUGINS.iterdir() if (p / "pyproject.toml").is_file())
STORE_DISTRIBUTIONS = {"harness-postgres": "PostgresStore"}
"""Session-store distributions (a module entry point answering ``resolve_store``), with their store class."""
ENGINE_DISTRIBUTIONS = {"harness-dbos": "DBOSEngine", "harness-temporal": "TemporalEngine"}
"""Durable-engine distributions (an entry-point module answering ``resolve_engine``), with their engine."""
MIDDLEWARE_DISTRIBUTIONS = {
    "harness-model-fallback": ("ModelFallback", "wrap_model_request"),
    "harness-tool-limits": ("ToolLimits", "wrap_tool_call"),
    "harness-tool-approval": ("ToolApproval", "wrap_tool_call"),
}
"""Middleware distributions (a configured class whose wrapper wraps model or tool calls), with its hook."""
OBSERVER_DISTRIBUTIONS = {"harness-otel": "OTelPlugin"}
"""Observer distributions (an instance registered through its entry point), with their plugin class."""
DISTRIBUTIONS = [
    p
    for p in ALL_DISTRIBUTIONS
    if p.name not in STORE_DISTRIBUTIONS
    and p.name not in ENGINE_DISTRIBUTIONS
    and p.name not in MIDDLEWARE_DISTRIBUTIONS
    and p.name not in OBSERVER_DISTRIBUTIONS
]


def _entry_points() -> dict[str, str]:
    return {ep.name: ep.value for ep in importlib.metadata.entry_points(group="harness")}


def test_there_are_six_capability_distributions() -> None:
    assert [p.name for p in DISTRIBUTIONS] == [
        "harness-anthropic-context",
        "harness-clamp-oversized",
        "harness-clear-tool-results",
        "harness-compact-on-request",
        "harness-dedupe-file-reads",
        "harness-limit-warner",
        "harness-recall",
        "harness-sliding-window",
        "harness-summarizing",
        "harness-tiered",
    ]


@pytest.mark.parametrize("folder", DISTRIBUTIONS, ids=[p.name for p in DISTRIBUTIONS])
def test_distribution_layout(folder: Path) -> None:
    project = tomllib.loads((folder / "pyproject.toml").read_text())["project"]
    assert project["name"] == folder.name
    package = folder.name.replace("-", "_")
    assert (folder / package / "__init__.py").is_file()
    assert (folder / package / "py.typed").is_file()
    assert any(dep.startswith("harness-loop") and "<" in dep for dep in project["dependencies"]), (
        "depends on the core with a compatible version range"
    )
    entry_points = project["entry-points"]["harness"]
    assert len(entry_points) == 1
    [(name, target)] = entry_points.items()
    assert provides(name) == ("capability", name), "a capability's entry point is its bare name"
    assert target.startswith(f"{package}:")
    assert _entry_points()[name] == target, "installed entry point matches pyproject"
    readme = (folder / "README.md").read_text()
    cls = getattr(importlib.import_module(package), target.split(":")[1])
    assert issubclass(cls, Capability)
    assert cls.name == name, "the capability registers under its entry-point name"
    assert cls.__name__ in readme
    assert "Parameter" in readme or "parameter" in readme


def _declared(distribution: str) -> tuple[Path, str, str, str]:
    """Check what every plugin distribution declares; return folder, package, entry-point name, target."""
    folder = PLUGINS / distribution
    project = tomllib.loads((folder / "pyproject.toml").read_text())["project"]
    assert project["name"] == distribution
    package = distribution.replace("-", "_")
    assert (folder / package / "py.typed").is_file()
    assert (folder / "LICENSE").is_file()
    assert any(dep.startswith("harness-loop") and "<" in dep for dep in project["dependencies"])
    [(name, target)] = project["entry-points"]["harness"].items()
    return folder, package, name, target


def _declared_all(distribution: str) -> dict[str, str]:
    """Every ``harness`` entry point ``distribution`` declares (a store declares one per scheme)."""
    return dict(
        tomllib.loads((PLUGINS / distribution / "pyproject.toml").read_text())["project"]["entry-points"][
            "harness"
        ]
    )


@pytest.mark.parametrize("distribution", sorted(MIDDLEWARE_DISTRIBUTIONS))
def test_middleware_distribution_layout(distribution: str) -> None:
    folder, package, name, target = _declared(distribution)
    class_name, hook = MIDDLEWARE_DISTRIBUTIONS[distribution]
    assert target == f"{package}:{class_name}"
    assert _entry_points()[name] == target
    cls = getattr(importlib.import_module(package), class_name)
    assert getattr(cls, "name", name) == name, "it registers under its entry-point name"
    impl = getattr(getattr(cls, hook), f"{PROJECT_NAME}_impl")
    assert impl["wrapper"] is True, f"{hook} is a new-style wrapper"
    readme = (folder / "README.md").read_text()
    assert class_name in readme
    assert "```python" in readme, "the README has a runnable example"


@pytest.mark.parametrize("distribution", sorted(OBSERVER_DISTRIBUTIONS))
def test_observer_distribution_layout(distribution: str) -> None:
    folder, package, name, target = _declared(distribution)
    module_name, attribute = target.split(":")
    assert module_name == package
    assert _entry_points()[name] == target
    instance = getattr(importlib.import_module(package), attribute)
    cls = getattr(importlib.import_module(package), OBSERVER_DISTRIBUTIONS[distribution])
    assert isinstance(instance, cls), "an observer's entry point is an instance, registered when loaded"
    assert name.startswith("plugin."), "plugin.<name>: registered in every default plugin manager"
    assert getattr(instance, "name", name) == provides(name)[1]
    assert OBSERVER_DISTRIBUTIONS[distribution] in (folder / "README.md").read_text()


@pytest.mark.parametrize("distribution", sorted(STORE_DISTRIBUTIONS))
def test_store_distribution_layout(distribution: str) -> None:
    folder = PLUGINS / distribution
    declared = _declared_all(distribution)
    [target] = set(declared.values())
    assert ":" not in target, "a store plugin's entry point names its module, registered as a plugin"
    for name in declared:
        assert _entry_points()[name] == target
        assert provides(name)[0] == "store", "store.<scheme>: one entry point per URL scheme it answers"
    module = importlib.import_module(target)
    assert hasattr(module.resolve_store, f"{PROJECT_NAME}_impl"), "the module implements resolve_store"
    assert STORE_DISTRIBUTIONS[distribution] in (folder / "README.md").read_text()


@pytest.mark.parametrize("distribution", sorted(ENGINE_DISTRIBUTIONS))
def test_engine_distribution_layout(distribution: str) -> None:
    folder, package, name, target = _declared(distribution)
    assert ":" not in target, "an engine plugin's entry point names its module, registered as a plugin"
    assert _entry_points()[name] == target
    kind, engine = provides(name)
    assert kind == "engine", "engine.<name>: imported only by harness worker <name>"
    module = importlib.import_module(target)
    assert hasattr(module.resolve_engine, f"{PROJECT_NAME}_impl"), "the module implements resolve_engine"
    assert module.resolve_engine(name=engine) is not None, "it answers its own entry-point name"
    assert module.resolve_engine(name="no-such-engine") is None
    assert ENGINE_DISTRIBUTIONS[distribution] in (folder / "README.md").read_text()
    assert hasattr(importlib.import_module(package), ENGINE_DISTRIBUTIONS[distribution])


PUBLIC_PACKAGES = {
    "harness",
    "harness.errors",
    "harness.core",
    "harness.history",
    "harness.tokens",
    "harness.wire",
    "harness.session",
    "harness.tools",
    "harness.capabilities",
    "harness.hooks",
    "harness.testing",
    "harness.run",
    "harness.models",
    "harness.config",
    "harness.durable",
    "harness.stores",
    # The durable engines' kill-test scenario.
    "harness.testing.durable",
    # The helpers a SQL store backend shares with SqliteStore: row conversion and searchable text.
    "harness.stores.rows",
    "harness.session.text",
    # What every store backend implements alike: the search grammar and the run lease's rules.
    "harness.session.query",
    "harness.session.lease",
}
"""What a plugin may import from: the layer packages' curated APIs, never their modules."""


def _core_imports(source: Path) -> list[tuple[str, list[str]]]:
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "harness" or node.module.startswith("harness."):
                found.append((node.module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names if alias.name.startswith("harness."))
    return found


@pytest.mark.parametrize("folder", ALL_DISTRIBUTIONS, ids=[p.name for p in ALL_DISTRIBUTIONS])
def test_plugins_import_only_the_public_core_api(folder: Path) -> None:
    package = folder / folder.name.replace("-", "_")
    for source in package.glob("*.py"):
        for module, names in _core_imports(source):
            assert module in PUBLIC_PACKAGES, f"{source.name} imports {module}, not a public layer package"
            exported = set(importlib.import_module(module).__all__)
            for name in names:
                assert name in exported, (
                    f"{source.name} imports {name} from {module}, which does not export it"
                )


def test_declared_ordering_names_exist() -> None:
    """A misspelt runs_before/runs_after name would be silently ignored; catch it here."""
    names = set(_entry_points())
    for name, target in _entry_points().items():
        if ":" not in target:
            continue  # a module plugin (a session store): no ordering
        module, attribute = target.split(":")
        cls = getattr(importlib.import_module(module), attribute)
        for declared in (*getattr(cls, "runs_before", ()), *getattr(cls, "runs_after", ())):
            assert declared in names, f"{name} orders itself against unknown capability {declared!r}"
