"""The plugins this repository ships, by entry-point name, and how to install each one.

The core depends on no plugin, so a core-only install (``pip install harness-loop``) knows the
bundled capabilities only by name. This table lets every place that needs a missing one
(``Agent(capabilities=["sliding_window"])``, ``--stack``, ``harness compact``'s default stack,
``harness eval``'s presets) say which distribution to install instead of "unknown capability".
``tests/hooks/test_bundled_plugins.py`` fails when it disagrees with the entry points the
``plugins/`` distributions declare.
"""

from __future__ import annotations

__all__ = ["BUNDLED_PLUGINS", "install_command", "missing_plugin_hint"]

import importlib.metadata
import types
from collections.abc import Iterable, Mapping
from typing import Final

BUNDLED_PLUGINS: Final[Mapping[str, str]] = types.MappingProxyType(
    {
        "anthropic_context_management": "harness-anthropic-context",
        "clamp_oversized_messages": "harness-clamp-oversized",
        "clear_tool_results": "harness-clear-tool-results",
        "compact_on_request": "harness-compact-on-request",
        "dedupe_file_reads": "harness-dedupe-file-reads",
        "limit_warner": "harness-limit-warner",
        "model_fallback": "harness-model-fallback",
        "recall": "harness-recall",
        "sliding_window": "harness-sliding-window",
        "summarizing": "harness-summarizing",
        "tiered": "harness-tiered",
        "tool_approval": "harness-tool-approval",
        "tool_limits": "harness-tool-limits",
        "engine.dbos": "harness-dbos",
        "engine.temporal": "harness-temporal",
        "plugin.otel": "harness-otel",
        "store.postgres": "harness-postgres",
        "store.postgresql": "harness-postgres",
    }
)
"""Every bundled plugin's entry-point name and the distribution that publishes it."""


def install_command(distributions: Iterable[str]) -> str:
    """How to install ``distributions`` (bundled plugin distributions) today.

    No release is on the package index yet, so the command installs from a clone of the
    harness repository (``pip install ./plugins/NAME`` from its top folder; a git URL with
    ``#subdirectory=plugins/NAME`` works the same way).

    Args:
        distributions: Distribution names such as ``harness-sliding-window``.

    Returns:
        One shell command, e.g. ``pip install ./plugins/harness-sliding-window``.
    """
    names = sorted(dict.fromkeys(distributions))
    return "pip install " + " ".join(f"./plugins/{name}" for name in names)


def _installed(distribution: str) -> bool:
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def missing_plugin_hint(names: Iterable[str]) -> str | None:
    """What to install for the bundled plugins among ``names``, or ``None`` when none is bundled.

    Args:
        names: Entry-point names no plugin manager knows. A bundled one whose
            distribution is installed (left out by an allow or block list) gets no hint.

    Returns:
        ``"it ships in harness-sliding-window, which is not installed: from a clone of harness,
        pip install ./plugins/harness-sliding-window"`` (the plural for several), or ``None``
        when none is bundled or every one is installed.
    """
    wanted = (BUNDLED_PLUGINS[name] for name in names if name in BUNDLED_PLUGINS)
    distributions = [name for name in dict.fromkeys(wanted) if not _installed(name)]
    if not distributions:
        return None
    if len(distributions) == 1:
        shipped = f"it ships in {distributions[0]}, which is not installed"
    else:
        shipped = f"they ship in {', '.join(distributions)}, which are not installed"
    return f"{shipped}: from a clone of harness, {install_command(distributions)}"
