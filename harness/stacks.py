"""Ready-made capability stacks built from the installed capability plugins.

The core depends on no plugin: these helpers look the capability classes up through the
``harness`` entry-point group and skip the ones that are not installed, returning the names of
those they used.
"""

from __future__ import annotations

__all__ = ["default_stack", "installed_capabilities", "tiered_stack"]

from typing import Any

from harness.plugins import PluginManager


def installed_capabilities() -> dict[str, type]:
    """Capability classes published through entry points, by entry-point name."""
    manager = PluginManager()
    manager.load_entrypoint_plugins()
    return manager.available_capabilities()


def tiered_stack(
    *, context_window: int, target_fraction: float = 0.5, trigger_fraction: float | None = None
) -> tuple[list[object], list[str]]:
    """Cheapest-first compaction: dedupe, clear, summarize (structural digest), slide.

    Args:
        context_window: The model's context window in tokens.
        target_fraction: Size to compact down to, as a fraction of the window.
        trigger_fraction: When to compact (default: ``min(1, target_fraction + 0.3)``).

    Returns:
        The capabilities (one ``TieredCompaction``, or whatever tiers are installed when it
        is not) and the names of the plugins used.
    """
    found = installed_capabilities()
    trigger = trigger_fraction if trigger_fraction is not None else min(1.0, target_fraction + 0.3)
    common: dict[str, Any] = {"max_fraction": trigger, "context_window": context_window}
    tiers: list[object] = []
    names: list[str] = []
    if "dedupe_file_reads" in found:
        tiers.append(found["dedupe_file_reads"]())
        names.append("dedupe_file_reads")
    if "clear_tool_results" in found:
        tiers.append(found["clear_tool_results"](keep_pairs=3, **common))
        names.append("clear_tool_results")
    if "summarizing" in found:
        tiers.append(found["summarizing"](keep_messages=6, **common))
        names.append("summarizing")
    if "sliding_window" in found:
        tiers.append(found["sliding_window"](keep_messages=6, **common))
        names.append("sliding_window")
    if "tiered" in found and tiers:
        tiered = found["tiered"](
            tiers=tiers, target_fraction=target_fraction, max_fraction=trigger, context_window=context_window
        )
        return [tiered], [f"tiered({' → '.join(names)})"]
    return tiers, names


def default_stack(*, context_window: int) -> tuple[list[object], list[str]]:
    """The demo's stack: :func:`tiered_stack` plus a ``LimitWarner`` near the window's end."""
    capabilities, names = tiered_stack(context_window=context_window)
    found = installed_capabilities()
    if "limit_warner" in found:
        capabilities.append(found["limit_warner"](max_context_fraction=0.9, context_window=context_window))
        names.append("limit_warner")
    return capabilities, names
