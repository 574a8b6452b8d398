"""The layered core, checked: no import cycles, lazy top level, one home for errors, small modules.

``lint-imports`` (run by ``.ci/run``) checks that every import points down the layers of
``[tool.importlinter]``; these tests check what it does not: cycles between any two
modules (counting imports inside functions and under ``TYPE_CHECKING``), that a low layer
imports without the loop, the size of each module, each module's ``__all__``, and that
every public exception is defined in ``harness.errors``.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import inspect
import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import harness

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "harness"
MAX_LINES = 600
WHOLE_REASON = "better whole"  # a module over MAX_LINES says why in its docstring, with these words


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imported_modules(name: str, path: Path) -> Iterator[str]:
    """Every harness module ``name`` imports anywhere: top level, in functions, under TYPE_CHECKING."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("harness"):
                    yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            if not (source == "harness" or source.startswith("harness.")):
                continue
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                yield submodule if submodule in MODULES else source


def import_graph() -> dict[str, set[str]]:
    return {
        name: {target for target in imported_modules(name, path) if target in MODULES and target != "harness"}
        for name, path in MODULES.items()
    }


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; returns every component with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set[str]()}
    assert strongly_connected(graph) == [["a", "b", "c"]]
    assert strongly_connected({"a": {"b"}, "b": set[str]()}) == []


def test_no_import_cycle_inside_harness() -> None:
    graph = import_graph()
    assert [name for name, targets in graph.items() if name in targets] == [], "a module imports itself"
    assert strongly_connected(graph) == [], "import cycles (function-level and type-only imports count)"


def test_nothing_inside_harness_imports_the_top_level_package() -> None:
    offenders = [
        name
        for name, path in MODULES.items()
        if name != "harness" and "harness" in set(imported_modules(name, path))
    ]
    assert offenders == [], "harness/__init__.py is the curated API for users; import the owning module"


@pytest.mark.parametrize(
    ("module", "must_not_load"),
    [
        ("harness.history", ("harness.run", "harness.hooks", "harness.tokens", "harness.session")),
        ("harness.tokens", ("harness.run", "harness.hooks", "harness.history")),
        ("harness.wire", ("harness.run", "harness.hooks", "harness.tokens")),
        (
            "harness.core",
            ("harness.run", "harness.hooks", "harness.history", "harness.tokens", "harness.wire"),
        ),
        ("harness.errors", ("harness.core", "harness.run")),
        ("harness.capabilities", ("harness.run", "harness.hooks", "harness.models")),
        ("harness.models.function", ("harness.run", "harness.models.openai", "harness.models.anthropic")),
        ("harness", ("harness.run", "harness.hooks", "harness.core")),
    ],
)
def test_importing_a_low_layer_does_not_load_the_layers_above(
    module: str, must_not_load: tuple[str, ...]
) -> None:
    code = (
        f"import json, sys; import {module}; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('harness'))))"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(completed.stdout)
    leaked = [m for m in loaded if any(m == bad or m.startswith(bad + ".") for bad in must_not_load)]
    assert leaked == [], f"import {module} also loaded {leaked}"


def _contracts() -> dict[str, dict[str, Any]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {contract["type"]: contract for contract in config["contracts"]}


def test_every_plugin_is_under_the_plugin_contracts() -> None:
    """A plugin missing from the contracts would escape 'never imported by the core' and 'independent'."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    plugins = {p.name.replace("-", "_") for p in (ROOT / "plugins").glob("harness-*") if p.is_dir()}
    assert set(config["root_packages"]) == {"harness", *plugins}
    contracts = _contracts()
    assert contracts["forbidden"]["source_modules"] == ["harness"]
    assert set(contracts["forbidden"]["forbidden_modules"]) == plugins
    assert set(contracts["independence"]["modules"]) == plugins


def test_lint_imports_refuses_a_core_module_that_imports_a_plugin(tmp_path: Path) -> None:
    """The forbidden contract catches what the layers contract cannot see (plugins are outside it)."""
    copy = tmp_path / "tree"
    shutil.copytree(ROOT / "harness", copy / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    for plugin in (ROOT / "plugins").glob("harness-*"):
        package = plugin / plugin.name.replace("-", "_")
        shutil.copytree(package, copy / package.name, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "harness" / "core" / "leak.py").write_text(
        '"""A leak."""\n\n__all__: list[str] = []\nimport harness_tiered\n'
    )
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    lint = Path(sys.executable).with_name("lint-imports")
    completed = subprocess.run(
        [str(lint), "--no-cache"],
        cwd=copy,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(copy)},
    )
    assert completed.returncode != 0
    assert "the core never imports a plugin BROKEN" in completed.stdout
    assert "harness.core.leak -> harness_tiered" in completed.stdout


def test_the_layers_contract_lists_every_package() -> None:
    contract = _contracts()["layers"]
    assert contract["type"] == "layers"
    assert contract["exhaustive"] is True
    listed = {name.strip() for layer in contract["layers"] for name in layer.split("|")}
    top_level = {name.split(".")[1] for name in MODULES if name.count(".") >= 1}
    assert listed == top_level


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_module_is_small_or_says_why(name: str) -> None:
    path = MODULES[name]
    lines = len(path.read_text().splitlines())
    if lines > MAX_LINES:
        docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
        assert WHOLE_REASON in docstring, f"{path.relative_to(ROOT)} has {lines} lines (> {MAX_LINES})"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_module_has_an_explicit_all(name: str) -> None:
    tree = ast.parse(MODULES[name].read_text())
    names = [
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    ]
    assert "__all__" in names, f"{name} has no __all__"


def test_every_public_exception_and_warning_is_defined_in_errors() -> None:
    misplaced: list[str] = []
    for name in MODULES:
        if any(part.startswith("_") for part in name.split(".")):
            continue  # private modules may keep private helpers
        module = importlib.import_module(name)
        for attribute in getattr(module, "__all__", ()):
            value = getattr(module, attribute, None)
            is_error = inspect.isclass(value) and issubclass(value, BaseException | Warning)
            if is_error and value.__module__ != "harness.errors":
                misplaced.append(f"{name}.{attribute} (defined in {value.__module__})")
    assert misplaced == []


def test_public_api_resolves_and_version_comes_from_metadata() -> None:
    for name in harness.__all__:
        assert getattr(harness, name) is not None, name
    assert harness.__version__ == importlib.metadata.version("harness-loop")
    with pytest.raises(AttributeError, match="no attribute 'tool_answer_ids'"):
        _ = harness.tool_answer_ids  # a helper, not part of the curated API
    for name in (
        "MaxIterationsExceeded",
        "UserAbort",
        "RunError",
        "ToolRetry",
        "Tool",
        "RunContext",
        "Model",
    ):
        assert name in harness.__all__, f"users catch and import {name} most"
