"""Model strings, the resolve_model hook, context windows and the retry helpers."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Sequence
from email.utils import formatdate
from typing import Any

import pytest

import harness.hooks.specs as hookspecs
from harness import Agent, PluginManager, hookimpl
from harness.core import CanonicalMessage, ModelSettings, ToolDefinition
from harness.errors import HarnessError, ModelResolutionError, PluginLoadError, ProviderNotInstalledError
from harness.hooks import PROJECT_NAME
from harness.models._retry import RetryPolicy, parse_retry_after
from harness.models.anthropic import AnthropicModel
from harness.models.context_windows import KNOWN_CONTEXT_WINDOWS, context_window_for, register_context_window
from harness.models.function import FunctionModel
from harness.models.openai import OpenAIModel
from harness.models.resolve import BUILTIN_PREFIXES, resolve_model
from harness.models.test import TestModel


class EchoModel:
    """A third-party model a plugin provides."""

    def __init__(self, name: str) -> None:
        self.model_name = name
        self.context_window = 1234

    async def request(
        self, messages: Sequence[CanonicalMessage], tools: Sequence[ToolDefinition], settings: ModelSettings
    ) -> CanonicalMessage:
        return CanonicalMessage.response()


class EchoProvider:
    @hookimpl
    def resolve_model(self, model_string: str) -> Any:
        if model_string.startswith("echo:"):
            return EchoModel(model_string.removeprefix("echo:"))
        return None


def test_builtin_prefixes() -> None:
    openai_model = resolve_model("openai:gpt-4o-mini")
    assert isinstance(openai_model, OpenAIModel)
    assert (openai_model.model_name, openai_model.provider_name) == ("gpt-4o-mini", "openai")
    assert openai_model.context_window == 128_000
    anthropic_model = resolve_model("anthropic:claude-sonnet-4-6")
    assert isinstance(anthropic_model, AnthropicModel)
    assert anthropic_model.context_window == 200_000
    assert isinstance(resolve_model("test"), TestModel)
    named = resolve_model("test:tiny")
    assert isinstance(named, TestModel)
    assert named.model_name == "tiny"
    assert resolve_model("  openai:gpt-4o  ").model_name == "gpt-4o"


def test_ollama_prefix_uses_local_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_BASE_URL", raising=False)
    model = resolve_model("ollama:llama3.2")
    assert isinstance(model, OpenAIModel)
    assert model.provider_name == "ollama"
    assert model.max_tokens_field == "max_tokens"
    assert model.context_window is None
    monkeypatch.setenv("OLLAMA_BASE_URL", "http://gpu-box:11434/v1")
    body_model = resolve_model("ollama:qwen2.5")
    assert isinstance(body_model, OpenAIModel)
    assert body_model._base_url == "http://gpu-box:11434/v1"


def test_model_objects_pass_through() -> None:
    model = FunctionModel(lambda messages, info: "hi")
    assert resolve_model(model) is model


@pytest.mark.parametrize("bad", ["mistral:large", "gemini:pro", "llama3"])
def test_unknown_prefix_names_the_string_and_known_prefixes(bad: str) -> None:
    with pytest.raises(ModelResolutionError) as info:
        resolve_model(bad)
    message = str(info.value)
    assert repr(bad) in message
    for prefix in BUILTIN_PREFIXES:
        assert repr(prefix) in message
    assert info.value.model_string == bad
    assert info.value.known_prefixes == BUILTIN_PREFIXES
    assert isinstance(info.value, HarnessError)


def test_bare_model_names_get_a_hint() -> None:
    with pytest.raises(ModelResolutionError, match="did you mean 'openai:gpt-4o'"):
        resolve_model("gpt-4o")
    with pytest.raises(ModelResolutionError, match="did you mean 'anthropic:claude-opus-4-6'"):
        resolve_model("claude-opus-4-6")


@pytest.mark.parametrize("bad", ["", "   ", "openai:", "anthropic:  "])
def test_empty_strings_are_rejected(bad: str) -> None:
    with pytest.raises(ModelResolutionError):
        resolve_model(bad)


def test_non_model_objects_are_rejected() -> None:
    with pytest.raises(ModelResolutionError, match="expected a Model"):
        resolve_model(42)  # pyright: ignore[reportArgumentType]


def test_plugins_add_providers_and_win_over_builtins() -> None:
    pm = PluginManager()
    pm.register(EchoProvider())
    echo = resolve_model("echo:abc", plugin_manager=pm)
    assert isinstance(echo, EchoModel)
    assert echo.model_name == "abc"
    assert isinstance(resolve_model("openai:gpt-4o", plugin_manager=pm), OpenAIModel)

    class Override:
        @hookimpl
        def resolve_model(self, model_string: str) -> Any:
            return EchoModel("override") if model_string.startswith("openai:") else None

    pm.register(Override())
    overridden = resolve_model("openai:gpt-4o", plugin_manager=pm)
    assert isinstance(overridden, EchoModel)
    assert overridden.model_name == "override"


def test_plugin_answering_junk_is_a_typed_error() -> None:
    class Junk:
        @hookimpl
        def resolve_model(self, model_string: str) -> Any:
            return "not a model"

    pm = PluginManager()
    pm.register(Junk())
    with pytest.raises(ModelResolutionError, match="returned str"):
        resolve_model("anything", plugin_manager=pm)


def test_async_plugin_is_a_typed_error() -> None:
    class Async:
        @hookimpl
        async def resolve_model(self, model_string: str) -> Any:
            return EchoModel(model_string)

    pm = PluginManager()
    with pytest.raises(PluginLoadError, match="resolve_model must be synchronous"):
        pm.register(Async())
    # Registered behind the manager's back (straight into pluggy), it is still caught.
    pm.pluggy_manager.register(Async())
    with pytest.raises(ModelResolutionError, match="must be synchronous"):
        resolve_model("x:y", plugin_manager=pm)


@pytest.mark.parametrize(
    ("model_string", "module", "extra"),
    [
        ("openai:gpt-4o", "openai", "openai"),
        ("ollama:x", "openai", "openai"),
        ("anthropic:claude-opus-4-6", "anthropic", "anthropic"),
    ],
)
def test_missing_sdk_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, model_string: str, module: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ProviderNotInstalledError) as info:
        resolve_model(model_string)
    assert f"pip install 'harness-loop[{extra}]'" in str(info.value)
    assert info.value.extra == extra


def test_agent_accepts_model_strings() -> None:
    pm = PluginManager()
    pm.register(EchoProvider())
    agent = Agent("echo:model-x", plugin_manager=pm)
    assert isinstance(agent.model, EchoModel)
    assert isinstance(Agent("openai:gpt-4o-mini").model, OpenAIModel)
    with pytest.raises(ModelResolutionError):
        Agent("nope:nothing")


async def test_agent_runs_with_the_test_model_string() -> None:
    def ping() -> str:
        """Answer pong."""
        return "pong"

    result = await Agent("test", tools=[ping]).run("go")
    assert result.output == "done"
    assert any(p.part_kind == "tool-return" for m in result.all_messages for p in m.parts)


@pytest.mark.parametrize(
    ("name", "window"),
    [
        ("gpt-4o-mini", 128_000),
        ("gpt-4o-2024-08-06", 128_000),
        ("openai:gpt-4.1-nano", 1_047_576),
        ("gpt-4", 8_192),
        ("gpt-4-0613", 8_192),
        ("gpt-4-turbo-2024-04-09", 128_000),
        ("o1-mini", 128_000),
        ("o3-mini", 200_000),
        ("openai/gpt-4o", 128_000),
        ("anthropic:claude-opus-4-6", 200_000),
        ("Claude-Haiku-4-5", 200_000),
        ("gpt-5-mini", 400_000),
        ("gpt-5.1", None),  # not in the table: unknown rather than guessed from "gpt-5"
        ("gpt-4x", None),
        ("llama3.2", None),
    ],
)
def test_context_window_table(name: str, window: int | None) -> None:
    assert context_window_for(name) == window


def test_context_windows_are_overridable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("harness.models.context_windows.KNOWN_CONTEXT_WINDOWS", dict(KNOWN_CONTEXT_WINDOWS))
    register_context_window("llama3.2", 131_072)
    assert context_window_for("llama3.2:3b") == 131_072
    assert OpenAIModel("llama3.2", base_url="http://localhost:1/v1").context_window == 131_072
    assert OpenAIModel("gpt-4o", context_window=50_000).context_window == 50_000
    assert AnthropicModel("claude-opus-4-6", context_window=1_000_000).context_window == 1_000_000
    with pytest.raises(ValueError, match="tokens"):
        register_context_window("x", 0)
    with pytest.raises(ValueError, match="context_window"):
        OpenAIModel("gpt-4o", context_window=0)


def test_hookspec_is_documented_firstresult_and_sync() -> None:
    spec = hookspecs.resolve_model
    options = getattr(spec, f"{PROJECT_NAME}_spec")
    assert options["firstresult"] is True
    doc = inspect.getdoc(spec) or ""
    assert "Signature: ``resolve_model(model_string: str) -> Model | None``" in doc
    for section in (
        "Called",
        "Ordering:",
        "Return value:",
        "Async:",
        "Args:",
        "Stops at first non-None result",
    ):
        assert section in doc
    assert "resolve_model" in hookspecs.__all__


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "2.5"}) == 2.5
    assert parse_retry_after({"retry-after-ms": "150", "retry-after": "9"}) == 0.15
    assert parse_retry_after({"retry-after": "-3"}) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None
    assert parse_retry_after(None) is None
    now = 1_700_000_000.0
    assert parse_retry_after({"retry-after": formatdate(now + 30, usegmt=True)}, now=now) == pytest.approx(30)


def test_retry_policy_backoff_and_validation() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=3.0, jitter=0.0)
    assert [policy.delay(n, None) for n in (1, 2, 3, 4)] == [1.0, 2.0, 3.0, 3.0]
    assert policy.delay(1, 7.0) == 7.0  # retry-after wins over the backoff ceiling
    jittery = RetryPolicy(base_delay=1.0, jitter=0.5)
    assert all(1.0 <= jittery.delay(1, None) <= 1.5 for _ in range(50))
    with pytest.raises(ValueError, match="max_retries"):
        RetryPolicy(max_retries=-1)
