"""Ready-made capability stacks built from the installed capability plugins.

The core depends on no plugin: these helpers describe their stacks as
:class:`~harness.config.StackEntry` lists (the same thing a ``--stack`` string or a
``harness.toml`` gives), leave out the capabilities that are not installed, and build
them with :func:`harness.config.build_stack`. With every capability plugin installed,
the default stack is this short-form stack (see :func:`default_stack_spec`)::

    tiered[dedupe_file_reads clear_tool_results:keep_pairs=3,max_fraction=0.8
           summarizing:keep_messages=6,max_fraction=0.8
           sliding_window:keep_messages=6,max_fraction=0.8]:target_fraction=0.5,max_fraction=0.8
    limit_warner:max_context_fraction=0.9
"""

from __future__ import annotations

__all__ = [
    "default_stack_entries",
    "default_stack_spec",
    "missing_capabilities",
    "require_installed",
    "tiered_stack_entries",
]

from collections.abc import Collection, Iterable, Sequence
from typing import cast

from harness.capabilities._stack_entries import StackEntry
from harness.capabilities._stack_grammar import format_stack, is_entry_list
from harness.config._build import installed_capability_classes
from harness.errors import StackConfigError
from harness.hooks.bundled import BUNDLED_PLUGINS, install_command

TIERED_NAMES = ("tiered", "dedupe_file_reads", "clear_tool_results", "summarizing", "sliding_window")
"""The capabilities of the full tiered stack, :func:`tiered_stack_entries` with everything installed."""


def tiered_stack_entries(
    *,
    target_fraction: float = 0.5,
    trigger_fraction: float | None = None,
    installed: Collection[str] | None = None,
) -> list[StackEntry]:
    """Cheapest-first compaction: dedupe, clear, summarize, slide.

    The summarizing tier asks the agent's model for its summaries (a replayed or scripted
    run switches it to the offline structural digest).

    Args:
        target_fraction: Size to compact down to, as a fraction of the window.
        trigger_fraction: When to compact (default: ``min(1, target_fraction + 0.3)``).
        installed: Entry-point names to choose from (default: the installed ones).

    Returns:
        One ``tiered`` entry holding the installed tiers, or the installed tiers
        themselves when ``tiered`` is not installed (empty when none is).
    """
    found = set(installed_capability_classes() if installed is None else installed)
    trigger = trigger_fraction if trigger_fraction is not None else min(1.0, target_fraction + 0.3)
    candidates = [
        StackEntry("dedupe_file_reads", {}, "default stack"),
        StackEntry("clear_tool_results", {"keep_pairs": 3, "max_fraction": trigger}, "default stack"),
        StackEntry("summarizing", {"keep_messages": 6, "max_fraction": trigger}, "default stack"),
        StackEntry("sliding_window", {"keep_messages": 6, "max_fraction": trigger}, "default stack"),
    ]
    tiers = [entry for entry in candidates if entry.name in found]
    if "tiered" in found and tiers:
        params = {"tiers": tiers, "target_fraction": target_fraction, "max_fraction": trigger}
        return [StackEntry("tiered", params, "default stack")]
    return tiers


def default_stack_entries(
    *, target_fraction: float = 0.5, installed: Collection[str] | None = None
) -> list[StackEntry]:
    """The demo's stack: :func:`tiered_stack_entries` plus a ``limit_warner`` at 90 % of the window.

    Args:
        target_fraction: As for :func:`tiered_stack_entries`.
        installed: Entry-point names to choose from (default: the installed ones).
    """
    found = set(installed_capability_classes() if installed is None else installed)
    entries = tiered_stack_entries(target_fraction=target_fraction, installed=found)
    if "limit_warner" in found:
        entries.append(StackEntry("limit_warner", {"max_context_fraction": 0.9}, "default stack"))
    return entries


def default_stack_spec(*, installed: Collection[str] | None = None) -> str:
    """:func:`default_stack_entries` in the short form, e.g. for a ``--stack`` default."""
    return format_stack(default_stack_entries(installed=installed))


def _names(entries: Iterable[StackEntry]) -> Iterable[str]:
    for entry in entries:
        yield entry.name
        for value in entry.params.values():
            if is_entry_list(value):
                yield from _names(cast("Sequence[StackEntry]", value))


def missing_capabilities(
    entries: Iterable[StackEntry] | Iterable[str], *, installed: Collection[str] | None = None
) -> list[str]:
    """The capability names of ``entries`` (nested tiers included) that are not installed, in order.

    Args:
        entries: Stack entries, or capability names.
        installed: Entry-point names to check against (default: the installed ones).
    """
    found = set(installed_capability_classes() if installed is None else installed)
    given = list(entries)
    names = [item for item in given if isinstance(item, str)]
    names += list(_names(item for item in given if isinstance(item, StackEntry)))
    return [name for name in dict.fromkeys(names) if name not in found]


def require_installed(
    entries: Iterable[StackEntry] | Iterable[str],
    *,
    what: str,
    source: str,
    installed: Collection[str] | None = None,
) -> None:
    """Refuse a stack whose capabilities are not all installed, saying which distributions to install.

    Args:
        entries: Stack entries, or capability names.
        what: How the stack is named in the message (``"the tiered preset"``).
        source: Where the stack came from, for :class:`~harness.errors.StackConfigError`.
        installed: Entry-point names to check against (default: the installed ones).

    Raises:
        StackConfigError: A capability is missing; the message names each one and, for the
            bundled ones, the distribution and the command that installs it.
    """
    missing = missing_capabilities(entries, installed=installed)
    if not missing:
        return
    listed = ", ".join(
        f"{name!r} ({BUNDLED_PLUGINS[name]})" if name in BUNDLED_PLUGINS else repr(name) for name in missing
    )
    bundled = [BUNDLED_PLUGINS[name] for name in missing if name in BUNDLED_PLUGINS]
    install = f"; from a clone of harness: {install_command(bundled)}" if bundled else ""
    raise StackConfigError(
        f"{source}: {what} needs capabilities that are not installed: {listed}{install}", source=source
    )
