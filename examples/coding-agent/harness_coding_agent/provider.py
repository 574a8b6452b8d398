"""A plugin answering the ``resolve_model`` hook with the scripted model for ``"scripted"``.

Register it on the plugin manager that resolves model strings::

    from harness.models.resolve import resolve_model
    from harness.hooks import PluginManager
    from harness_coding_agent import provider

    manager = PluginManager()
    manager.register(provider)
    model = resolve_model("scripted", plugin_manager=manager)

``harness run`` does exactly this, so ``--model scripted`` (its default) needs no API key.
"""

from __future__ import annotations

__all__ = ["SCRIPTED_CONTEXT_WINDOW", "resolve_model"]

from harness.core import Model
from harness.hooks import hookimpl
from harness_coding_agent.scripted import SCRIPTED_MODEL_NAME, scripted_model

SCRIPTED_CONTEXT_WINDOW = 8_000
"""The context window the scripted model reports (small, so compaction shows)."""


@hookimpl
def resolve_model(model_string: str) -> Model | None:
    """The scripted model for ``"scripted"``; ``None`` (someone else's turn) otherwise."""
    if model_string == SCRIPTED_MODEL_NAME:
        return scripted_model(context_window=SCRIPTED_CONTEXT_WINDOW)
    return None
