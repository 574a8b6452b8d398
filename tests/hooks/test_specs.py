"""Every hook is specified, documented (datasette's test_docs idea) and reachable through the facade."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest

import harness.hooks.specs as hookspecs
from harness.hooks import ASYNC_HOOKS, PROJECT_NAME, PluginManager

README = Path(__file__).parents[2] / "plugins" / "README.md"

SPECS: dict[str, Any] = {
    name: value for name, value in vars(hookspecs).items() if hasattr(value, f"{PROJECT_NAME}_spec")
}

FACADE = {
    "before_model_request": "run_before_model_request",
    "after_node": "notify_after_node",
    "on_tool": "notify_tool",
    "on_compaction": "notify_compaction",
    "count_tokens": "count_tokens",
    "resolve_model": "resolve_model",
    "resolve_store": "resolve_store",
    "resolve_engine": "resolve_engine",
    "wrap_model_request": "wrap_model_request",
    "wrap_tool_call": "wrap_tool_call",
    "wrap_run": "wrap_run",
    "after_model_response": "run_after_model_response",
}
WRAPPERS = {"wrap_model_request", "wrap_tool_call", "wrap_run"}
"""Their facade methods take the wrapped call as one more, last, argument."""


def signature_text(function: Any) -> str:
    """``name(arg: type, ...) -> type`` as written in the source (annotations are strings)."""
    signature = inspect.signature(function)
    params = ", ".join(f"{p.name}: {p.annotation}" for p in signature.parameters.values())
    return f"{function.__name__}({params}) -> {signature.return_annotation}"


def test_the_expected_hooks_exist() -> None:
    assert set(SPECS) == set(FACADE)
    assert sorted(hookspecs.__all__) == sorted(SPECS)


@pytest.mark.parametrize("name", sorted(FACADE))
def test_hook_docstring_has_signature_ordering_return_and_async(name: str) -> None:
    spec = SPECS[name]
    doc = inspect.getdoc(spec)
    assert doc, f"hook {name} has no docstring"
    assert f"Signature: ``{signature_text(spec)}``" in doc
    for section in ("Ordering:", "Return value:", "Async:", "Args:"):
        assert section in doc, f"hook {name}: docstring lacks {section!r}"
    for parameter in inspect.signature(spec).parameters:
        assert re.search(rf"^\s+{parameter}: \S", doc, re.MULTILINE), f"{name}: {parameter} undocumented"
    assert "Called" in doc, f"hook {name}: docstring does not say when it is called"


def test_only_the_decision_hooks_are_firstresult() -> None:
    firstresult = {
        name for name, spec in SPECS.items() if getattr(spec, f"{PROJECT_NAME}_spec")["firstresult"]
    }
    assert firstresult == {"count_tokens", "resolve_model", "resolve_store", "resolve_engine"}
    for name in firstresult:
        assert "firstresult" in (inspect.getdoc(SPECS[name]) or "")
    assert set(SPECS) - firstresult == ASYNC_HOOKS | WRAPPERS


@pytest.mark.parametrize(("hook", "method"), sorted(FACADE.items()))
def test_facade_has_one_method_per_hook(hook: str, method: str) -> None:
    function = getattr(PluginManager, method)
    hook_params = list(inspect.signature(SPECS[hook]).parameters)
    method_params = list(inspect.signature(function).parameters)[1:]
    if hook in WRAPPERS:
        method_params = method_params[:-1]
    assert method_params == hook_params
    if hook in ASYNC_HOOKS | WRAPPERS:
        assert inspect.iscoroutinefunction(function)


@pytest.mark.parametrize("name", sorted(FACADE))
def test_plugin_guide_documents_every_hook(name: str) -> None:
    guide = README.read_text(encoding="utf-8")
    assert f"`{signature_text(SPECS[name])}`" in guide, f"plugins/README.md does not document {name}"
