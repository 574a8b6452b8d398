"""Turn model strings such as ``"openai:gpt-4o-mini"`` into models, and know context windows.

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
       :class:`harness.models.test.TestModel` (no network).

Context windows come from :data:`KNOWN_CONTEXT_WINDOWS` (longest matching name prefix);
update it with :func:`register_context_window`, or pass ``context_window=`` to a model.
"""

from __future__ import annotations

__all__ = [
    "BUILTIN_PREFIXES",
    "KNOWN_CONTEXT_WINDOWS",
    "context_window_for",
    "register_context_window",
    "resolve_model",
]

import importlib
import inspect
import os
from typing import TYPE_CHECKING

from harness.errors import ModelResolutionError, ProviderNotInstalledError
from harness.models import Model

if TYPE_CHECKING:
    from harness.plugins import PluginManager

BUILTIN_PREFIXES: tuple[str, ...] = ("openai:", "anthropic:", "ollama:", "test")
"""Prefixes the built-in fallback understands (``test`` also alone)."""

DEFAULT_OLLAMA_BASE_URL = "http://localhost:11434/v1"

KNOWN_CONTEXT_WINDOWS: dict[str, int] = {
    # OpenAI
    "gpt-5": 400_000,
    "gpt-5-chat": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4-32k": 32_768,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o1-preview": 128_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    # Anthropic: Claude models have (at least) 200k tokens; for 1M-token windows pass context_window=.
    "claude": 200_000,
}
"""Context windows in tokens by model-name prefix; the longest matching prefix wins.

A prefix matches the whole name or a name continuing with ``-``, ``_``, ``:`` or ``@``
(``gpt-4o`` matches ``gpt-4o-mini-2024-07-18``; ``gpt-5`` does not match ``gpt-5.1``, whose
window is not in the table, so it stays unknown rather than guessed). Names are matched
lower-cased, without a ``provider:`` prefix and without an
``organisation/`` part (``openai/gpt-4o`` on OpenRouter matches ``gpt-4o``). Local models
(Ollama, vLLM...) are deliberately absent: their window depends on how the server was
started, so pass ``context_window=`` to the model instead.
"""


_BOUNDARY = frozenset("-:@_")


def _normalise(model_name: str) -> str:
    name = model_name.strip().lower()
    if ":" in name and name.split(":", 1)[0] in {p.rstrip(":") for p in BUILTIN_PREFIXES}:
        name = name.split(":", 1)[1]
    return name.rsplit("/", 1)[-1]


def context_window_for(model_name: str) -> int | None:
    """The context window of ``model_name`` from :data:`KNOWN_CONTEXT_WINDOWS`.

    Args:
        model_name: A model name, e.g. ``"gpt-4o-mini-2024-07-18"`` or ``"anthropic:claude-sonnet-4-6"``.

    Returns:
        Tokens, or ``None`` when no known prefix matches.
    """
    name = _normalise(model_name)
    best: str | None = None
    for prefix in KNOWN_CONTEXT_WINDOWS:
        key = prefix.lower()
        if not name.startswith(key) or (len(name) > len(key) and name[len(key)] not in _BOUNDARY):
            continue
        if best is None or len(key) > len(best):
            best = key
    if best is None:
        return None
    for prefix, tokens in KNOWN_CONTEXT_WINDOWS.items():
        if prefix.lower() == best:
            return tokens
    return None  # pragma: no cover - best always comes from the table


def register_context_window(prefix: str, tokens: int) -> None:
    """Add or change a context window in :data:`KNOWN_CONTEXT_WINDOWS`.

    Args:
        prefix: Model-name prefix (matched lower-cased), e.g. ``"llama3.1"``.
        tokens: The window in tokens.

    Raises:
        ValueError: ``prefix`` is blank or ``tokens`` is below 1.
    """
    if not prefix.strip():
        raise ValueError("register_context_window: prefix must not be blank")
    if tokens < 1:
        raise ValueError(f"register_context_window: tokens must be at least 1, got {tokens}")
    KNOWN_CONTEXT_WINDOWS[prefix.strip().lower()] = tokens


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
        model: A :class:`~harness.models.Model`, or a string such as ``"openai:gpt-4o-mini"``,
            ``"anthropic:claude-sonnet-4-6"``, ``"ollama:llama3.2"`` or ``"test"``.
        plugin_manager: Asked first, through its ``resolve_model`` hook.

    Raises:
        ModelResolutionError: No plugin and no built-in provider understood the string, a
            plugin answered something that is not a model, or ``model`` is neither.
        ProviderNotInstalledError: The provider's SDK is missing (install the extra it names).
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
