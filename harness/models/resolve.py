"""Turn model strings such as ``"openai:gpt-4o-mini"`` into models.

Resolution order for a string:

1. The ``resolve_model`` hook of the given plugin manager (``firstresult``): the first
   plugin returning a model wins, so plugins can add providers or replace built-in ones.
2. The built-in providers, when every plugin returned ``None``:

   ``openai:<model>``
       :class:`harness.models.openai.OpenAIModel` (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``).
   ``anthropic:<model>``
       :class:`harness.models.anthropic.AnthropicModel` (``ANTHROPIC_API_KEY``).
   ``ollama:<model>``
       ``OpenAIModel`` against a local Ollama server (``OLLAMA_BASE_URL``, default
       ``http://localhost:11434/v1``).
   ``test`` or ``test:<name>``
       :class:`harness.models.test.TestModel` (no network, no key; a context window of
       :data:`~harness.models.test.TEST_CONTEXT_WINDOW` tokens).

Context windows come from :mod:`harness.models.context_windows`.
"""

from __future__ import annotations

__all__ = [
    "BUILTIN_PREFIXES",
    "resolve_model",
]

import importlib
import inspect
import os
from typing import TYPE_CHECKING

from harness.core.model import Model
from harness.errors import ModelResolutionError, ProviderNotInstalledError
from harness.hooks.defaults import DefaultPluginManager, add_installed

if TYPE_CHECKING:
    from harness.hooks.manager import PluginManager

BUILTIN_PREFIXES: tuple[str, ...] = ("openai:", "anthropic:", "ollama:", "test")
"""Prefixes the built-in fallback understands (``test`` also alone)."""

DEFAULT_OLLAMA_BASE_URL = "http://localhost:11434/v1"


def _require_sdk(model_string: str, module: str) -> None:
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise ProviderNotInstalledError(model_string, module) from exc


def _builtin(model_string: str) -> Model | None:
    provider, sep, name = model_string.partition(":")
    if provider == "test":
        from harness.models.test import TestModel

        return TestModel(model_name=name.strip() or "test") if sep else TestModel()
    if not sep:
        return None
    name = name.strip()
    if provider in ("openai", "anthropic", "ollama") and not name:
        raise ModelResolutionError(
            model_string,
            f"model string {model_string!r} names no model after {provider + ':'!r} "
            f"(for example {provider + ':' + _EXAMPLES[provider]!r})",
            BUILTIN_PREFIXES,
        )
    if provider == "openai":
        _require_sdk(model_string, "openai")
        from harness.models.openai import OpenAIModel

        return OpenAIModel(name)
    if provider == "ollama":
        _require_sdk(model_string, "openai")
        from harness.models.openai import OpenAIModel

        base_url = os.environ.get("OLLAMA_BASE_URL") or DEFAULT_OLLAMA_BASE_URL
        return OpenAIModel(name, base_url=base_url, api_key="ollama", provider_name="ollama")
    if provider == "anthropic":
        _require_sdk(model_string, "anthropic")
        from harness.models.anthropic import AnthropicModel

        return AnthropicModel(name)
    return None


_EXAMPLES = {"openai": "gpt-4o-mini", "anthropic": "claude-sonnet-4-6", "ollama": "llama3.2"}


def _unknown(model_string: str) -> ModelResolutionError:
    known = ", ".join(repr(p) for p in BUILTIN_PREFIXES)
    hint = ""
    lowered = model_string.lower()
    if ":" not in model_string:
        if lowered.startswith(("gpt", "o1", "o3", "o4", "chatgpt")):
            hint = f"; did you mean 'openai:{model_string}'?"
        elif lowered.startswith("claude"):
            hint = f"; did you mean 'anthropic:{model_string}'?"
    return ModelResolutionError(
        model_string,
        f"cannot resolve model {model_string!r}: no plugin's resolve_model hook answered and the "
        f"built-in providers know the prefixes {known}{hint}",
        BUILTIN_PREFIXES,
    )


def resolve_model(model: str | Model, *, plugin_manager: PluginManager | None = None) -> Model:
    """Return ``model`` itself, or the model a model string names.

    Args:
        model: A :class:`~harness.core.model.Model`, or a string such as ``"openai:gpt-4o-mini"``,
            ``"anthropic:claude-sonnet-4-6"``, ``"ollama:llama3.2"`` or ``"test"``.
        plugin_manager: Asked first, through its ``resolve_model`` hook. A default manager
            (:func:`~harness.hooks.defaults.default_plugin_manager`, what ``Agent(...)`` makes)
            first registers the installed ``model.<prefix>`` plugins of the string's prefix.

    Raises:
        ModelResolutionError: No plugin and no built-in provider understood the string, a
            plugin answered something that is not a model, or ``model`` is neither.
        ProviderNotInstalledError: The provider's SDK is missing (install the extra it names).
        PluginLoadError: The installed ``model.<prefix>`` plugin of the prefix failed to import.
    """
    if not isinstance(model, str):
        if isinstance(model, Model):  # pyright: ignore[reportUnnecessaryIsInstance]
            return model
        raise ModelResolutionError(
            repr(model),
            f"expected a Model or a model string such as 'openai:gpt-4o-mini', got {type(model).__name__}",
            BUILTIN_PREFIXES,
        )
    model_string = model.strip()
    if not model_string:
        raise ModelResolutionError(model, "the model string is empty", BUILTIN_PREFIXES)
    if plugin_manager is not None:
        if ":" in model_string and isinstance(plugin_manager, DefaultPluginManager):
            # a provider published as model.<prefix> is imported when its prefix is first used
            add_installed(plugin_manager, "model", model_string.split(":", 1)[0])
        answer = plugin_manager.resolve_model(model_string)
        if answer is not None:
            if inspect.isawaitable(answer):
                close = getattr(answer, "close", None)
                if callable(close):
                    close()
                raise ModelResolutionError(
                    model_string,
                    f"a resolve_model implementation returned an awaitable for {model_string!r}; "
                    "the hook must be synchronous",
                    BUILTIN_PREFIXES,
                )
            if not isinstance(answer, Model):
                raise ModelResolutionError(
                    model_string,
                    f"a resolve_model implementation returned {type(answer).__name__} for "
                    f"{model_string!r}; expected a Model (model_name, context_window, request)",
                    BUILTIN_PREFIXES,
                )
            return answer
    resolved = _builtin(model_string)
    if resolved is None:
        raise _unknown(model_string)
    return resolved
