"""ModelFallback's parameters, the provider families, the strip rules, and the package surface."""

from __future__ import annotations

import importlib.metadata
from typing import Any

import harness_model_fallback
import pytest
from harness_model_fallback import (
    KIND_ERRORS,
    KINDS,
    PROVIDER_SETTINGS,
    ModelFallback,
    error_kind,
    provider_family,
    strip_settings,
)

from harness import Agent
from harness.core import ModelSettings
from harness.errors import (
    ModelAuthenticationError,
    ModelBadRequestError,
    ModelContextLengthError,
    ModelRateLimitError,
    ModelTimeoutError,
    ModelUnavailableError,
)
from harness.hooks import PluginManager
from harness.models.function import FunctionModel
from harness.models.test import TestModel


def spare() -> TestModel:
    return TestModel(model_name="spare")


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"models": "openai:gpt-4o"}, TypeError, r"not a string; did you mean \['openai:gpt-4o'\]"),
        ({"models": spare()}, TypeError, "models must be a list of models or model strings"),
        ({"models": []}, ValueError, "models must name at least one model"),
        ({"models": [spare(), 3]}, TypeError, r"models\[1\] must be a harness Model or a model string"),
        (
            {"models": [spare()], "on": "rate_limit"},
            TypeError,
            "on must be a list of error kinds, not a string",
        ),
        ({"models": [spare()], "on": []}, ValueError, "on must name at least one error kind"),
        ({"models": [spare()], "on": ["rate"]}, ValueError, "unknown error kind 'rate'; expected one of"),
        ({"models": [spare()], "on": 3}, TypeError, "on must be a list of error kinds, got int"),
        ({"models": [spare()], "strip": ["thinking"]}, TypeError, "strip must be a mapping"),
        (
            {"models": [spare()], "strip": {"openai": "seed"}},
            TypeError,
            r"strip\['openai'\] must be a collection",
        ),
        (
            {"models": [spare()], "strip": {"openai": [1]}},
            TypeError,
            r"must hold setting names \(strings\), got 1",
        ),
        (
            {"models": [spare()], "strip": {1: ["seed"]}},
            TypeError,
            "strip keys must be provider family names",
        ),
        ({"models": [spare()], "requests_only": "yes"}, TypeError, "requests_only must be True or False"),
        ({"models": [spare()], "family_of": "openai"}, TypeError, "family_of must be a function"),
        ({"models": [spare()], "adapt_settings": 1}, TypeError, "adapt_settings must be a function"),
    ],
)
def test_bad_parameters_are_refused_with_a_message_naming_them(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        ModelFallback(**kwargs)


def test_on_is_kept_in_the_canonical_order_without_duplicates() -> None:
    fallback = ModelFallback(models=[spare()], on=["timeout", "rate_limit", "timeout"])
    assert fallback.on == ("rate_limit", "timeout")
    assert ModelFallback(models=[spare()]).on == KINDS


def test_each_kind_has_its_error_class_and_subclasses_count() -> None:
    assert {
        "rate_limit": ModelRateLimitError,
        "unavailable": ModelUnavailableError,
        "timeout": ModelTimeoutError,
        "context_length": ModelContextLengthError,
    } == KIND_ERRORS
    assert error_kind(ModelContextLengthError("p", "m")) == "context_length"
    assert error_kind(ModelBadRequestError("p", "m")) is None
    assert error_kind(ModelAuthenticationError("p", "m")) is None
    assert error_kind(RuntimeError("x")) is None


def test_provider_family_of_the_real_models() -> None:
    pytest.importorskip("openai")
    pytest.importorskip("anthropic")
    from harness.models.anthropic import AnthropicModel
    from harness.models.openai import OpenAIModel

    assert provider_family(OpenAIModel("gpt-4o-mini", api_key="k")) == "openai"
    assert provider_family(
        OpenAIModel("llama3.2", base_url="http://127.0.0.1:1/v1", provider_name="ollama")
    ) == ("openai")
    assert provider_family(AnthropicModel("claude-sonnet-4-6", api_key="k")) == "anthropic"
    assert provider_family(TestModel()) is None
    assert provider_family(FunctionModel(lambda m, i: "x")) is None


def test_strip_settings_by_example() -> None:
    settings = ModelSettings(extra={"reasoning_effort": "low", "thinking": {"type": "enabled"}, "top_p": 0.9})
    assert dict(strip_settings(settings, "openai", "anthropic").extra) == {
        "thinking": {"type": "enabled"},
        "top_p": 0.9,
    }
    assert dict(strip_settings(settings, "anthropic", "openai").extra) == {
        "reasoning_effort": "low",
        "top_p": 0.9,
    }
    assert dict(strip_settings(settings, None, "openai").extra) == {"reasoning_effort": "low", "top_p": 0.9}
    assert dict(strip_settings(settings, None, None).extra) == {"top_p": 0.9}
    assert strip_settings(settings, "openai", "openai") is settings
    shared = ModelSettings(extra={"tool_choice": "auto", "metadata": {"user": "u"}})
    assert dict(strip_settings(shared, "openai", "anthropic").extra) == {}  # same name, other shape
    assert strip_settings(shared, None, "openai") is shared


def test_the_default_rules_cover_what_the_issue_names() -> None:
    for key in ("reasoning_effort", "logprobs", "parallel_tool_calls"):
        assert key in PROVIDER_SETTINGS["openai"]
    for key in ("thinking", "top_k"):
        assert key in PROVIDER_SETTINGS["anthropic"]
    assert "top_p" not in PROVIDER_SETTINGS["openai"] | PROVIDER_SETTINGS["anthropic"]
    with pytest.raises(TypeError):
        PROVIDER_SETTINGS["openai"] = frozenset()  # type: ignore[index]  # pyright: ignore[reportIndexIssue]


def test_the_entry_point_loads_the_plugin() -> None:
    (entry,) = [ep for ep in importlib.metadata.entry_points(group="harness") if ep.name == "model_fallback"]
    assert entry.value == "harness_model_fallback:ModelFallback"
    assert entry.load() is ModelFallback
    manager = PluginManager()
    manager.load_entrypoint_plugins()
    assert manager.available_capabilities()["model_fallback"] is ModelFallback
    assert ModelFallback.name == "model_fallback"


def test_the_package_exports_what_it_documents() -> None:
    for name in harness_model_fallback.__all__:
        assert getattr(harness_model_fallback, name) is not None


@pytest.mark.parametrize("stack", ["model_fallback:models=test:spare", "model_fallback:models=test:spare|"])
def test_one_fallback_model_in_a_stack_string_is_a_one_item_list(stack: str) -> None:
    # a single value for a list parameter is its one-item list, as for exclude_tools=bash
    agent = Agent(TestModel(), capabilities=[stack])
    (fallback,) = [c for c in agent.plugin_manager.capabilities if isinstance(c, ModelFallback)]
    (model,) = fallback.models
    assert isinstance(model, TestModel)
    assert model.model_name == "spare"
