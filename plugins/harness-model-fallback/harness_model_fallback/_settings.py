"""Which provider family a model belongs to, and the settings only that family accepts.

Both built-in providers copy every key of ``ModelSettings.extra`` into the request body
(``extra_headers`` and ``extra_query`` excepted), and both APIs refuse a body field they
do not know with HTTP 400. Settings written for one family therefore have to lose that
family's own keys before they go to a model of another family.
"""

from __future__ import annotations

__all__ = ["PROVIDER_SETTINGS", "SettingsAdapter", "provider_family", "strip_settings"]

import sys
from collections.abc import Callable, Collection, Mapping
from types import MappingProxyType
from typing import TypeAlias

import attrs

from harness.core import Model, ModelSettings

PROVIDER_SETTINGS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "openai": frozenset(
            {
                "audio",
                "frequency_penalty",
                "logit_bias",
                "logprobs",
                "max_completion_tokens",
                "metadata",  # a string map here, {"user_id": ...} at Anthropic
                "modalities",
                "n",
                "parallel_tool_calls",
                "prediction",
                "presence_penalty",
                "prompt_cache_key",
                "reasoning_effort",
                "response_format",
                "safety_identifier",
                "seed",
                "service_tier",  # both have it, with other values
                "stop",
                "store",
                "stream_options",
                "tool_choice",  # "auto" here, {"type": "auto"} at Anthropic
                "top_logprobs",
                "user",
                "verbosity",
                "web_search_options",
            }
        ),
        "anthropic": frozenset(
            {
                "container",
                "context_management",
                "mcp_servers",
                "metadata",
                "service_tier",
                "stop_sequences",
                "thinking",
                "tool_choice",
                "top_k",
            }
        ),
    }
)
"""The default strip rules: by provider family, the ``ModelSettings.extra`` keys written for it.

A key listed for a family is dropped when the request goes to a model of another family
(see :func:`strip_settings`). Keys both APIs accept with the same meaning (``top_p``) are
listed nowhere and always kept; keys both have with different shapes (``tool_choice``,
``metadata``, ``service_tier``) are listed for both, so they are dropped on any change of
family.
"""

_BUILT_IN: tuple[tuple[str, str, str], ...] = (
    ("openai", "harness.models.openai", "OpenAIModel"),
    ("anthropic", "harness.models.anthropic", "AnthropicModel"),
)

SettingsAdapter: TypeAlias = Callable[[ModelSettings, Model, Model], ModelSettings]
"""``adapt(settings, original_model, next_model) -> settings`` for the next model."""


def provider_family(model: Model) -> str | None:
    """``"openai"`` for an ``OpenAIModel`` (OpenAI-compatible servers included), ``"anthropic"`` for an
    ``AnthropicModel``, ``None`` for any other model (``FunctionModel``, ``TestModel``, a plugin's).

    The provider modules are only looked up if they are already imported (a model of theirs
    exists only then), so this never imports an SDK.
    """  # noqa: D205 - the summary names both families
    for family, module_name, class_name in _BUILT_IN:
        module = sys.modules.get(module_name)
        cls: object = getattr(module, class_name, None) if module is not None else None
        if isinstance(cls, type) and isinstance(model, cls):
            return family
    return None


def strip_settings(
    settings: ModelSettings,
    origin: str | None,
    target: str | None,
    rules: Mapping[str, Collection[str]] = PROVIDER_SETTINGS,
) -> ModelSettings:
    """``settings`` without the ``extra`` keys a model of family ``target`` would reject.

    The settings were written for a model of family ``origin``. When ``target`` is the same
    family they are kept whole. Otherwise every key ``rules[origin]`` lists is dropped; when
    ``origin`` is unknown (``None``, or a family ``rules`` does not name), every key listed
    for a family other than ``target`` and not for ``target`` itself is dropped. Keys no
    rule lists are kept, as are the portable fields (``max_tokens``, ``temperature``,
    ``timeout``).

    Args:
        settings: The settings the request was made with.
        origin: The family of the model they were written for.
        target: The family of the model they go to now.
        rules: By family, the keys written for it (default :data:`PROVIDER_SETTINGS`).

    Returns:
        ``settings`` itself when nothing is dropped, else a copy without the keys.
    """
    if not settings.extra or (origin is not None and origin == target):
        return settings
    if origin is not None and origin in rules:
        drop: Collection[str] = rules[origin]
    else:
        own = rules.get(target, ()) if target is not None else ()
        drop = {key for family, keys in rules.items() if family != target for key in keys} - set(own)
    kept = {key: value for key, value in settings.extra.items() if key not in drop}
    if len(kept) == len(settings.extra):
        return settings
    return attrs.evolve(settings, extra=kept)
