"""``harness plugins``: installed plugins and capabilities, and the ones that failed to load."""

from __future__ import annotations

__all__ = ["plugin_rows", "plugins"]

import sys
from typing import Any

import click
from rich.table import Table

from harness.cli._app import EXIT_PROBLEM, cli, console, escaped
from harness.cli._json import echo_json
from harness.errors import PluginLoadError, is_experimental
from harness.hooks.manager import PluginManager


def _experimental(entry_point: str | None) -> bool:
    module = (entry_point or "").split(":", 1)[0].strip()
    return bool(module) and is_experimental(module)


def _broken_row(error: PluginLoadError) -> dict[str, Any]:
    return {
        "name": error.plugin_name,
        "distribution": error.distribution,
        "version": error.version,
        "kind": None,
        "hooks": [],
        "experimental": _experimental(error.entry_point),
        "entry_point": error.entry_point,
        "error": str(error),
    }


def plugin_rows(manager: PluginManager | None = None) -> list[dict[str, Any]]:
    """One JSON-ready object per installed plugin (``harness plugins --json``), broken ones last.

    Keys: ``name``, ``distribution``, ``version``, ``kind`` (``"capability"`` for a
    capability class published through an entry point, ``"plugin"`` for a registered
    plugin object or module, ``None`` for one that failed to load), ``hooks`` (implemented
    hooks, sorted), ``experimental`` (the module or its package called
    :func:`harness.warn_experimental` when loaded), ``entry_point`` (``module:attribute``)
    and ``error`` (``None``, or why the plugin failed to load: the
    :class:`~harness.errors.PluginLoadError` message, which names the cause and how to
    disable the plugin).

    Args:
        manager: A manager whose entry points are loaded (default: a new one, loaded with
            ``errors="collect"`` so that one broken plugin does not hide the others); the
            failures it collected are listed too.
    """
    if manager is None:
        manager = PluginManager()
        manager.load_entrypoint_plugins(errors="collect")
    rows: list[dict[str, Any]] = []
    for info in manager.list_plugins():
        rows.append(
            {
                "name": info.name,
                "distribution": info.distribution,
                "version": info.version,
                "kind": "plugin" if info.kind == "plugin" else "capability",
                "hooks": list(info.hooks),
                "experimental": _experimental(info.entry_point),
                "entry_point": info.entry_point,
                "error": None,
            }
        )
    rows.extend(_broken_row(error) for error in manager.load_errors())
    return rows


@cli.command(
    epilog="""\b
Examples:
  harness plugins
  harness plugins --json | jq '.plugins[] | select(.experimental) | .name'
  harness plugins --json | jq -r '.plugins[] | select(.error) | .error'
  HARNESS_DISABLE_PLUGINS=summarizing harness plugins
"""
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print JSON instead of a table: the list is under the key plugins.",
)
def plugins(as_json: bool) -> None:
    """List installed harness plugins and capabilities (entry-point group ``harness``).

    Shows each plugin's distribution and version, the hooks it implements and whether it
    is experimental (its package calls harness.warn_experimental). A plugin that fails to
    load is listed too, with its error (the others still load); the exit code is then 1.
    HARNESS_LOAD_PLUGINS and HARNESS_DISABLE_PLUGINS filter what is loaded;
    HARNESS_TRACE_PLUGINS=1 traces every hook call to stderr.
    """
    rows = plugin_rows()
    broken = [row for row in rows if row["error"] is not None]
    if as_json:
        echo_json({"plugins": rows})
    elif not rows:
        console().print("no harness plugins installed (entry-point group 'harness')")
    else:
        _print_table(rows, broken)
    if broken:
        sys.exit(EXIT_PROBLEM)


def _print_table(rows: list[dict[str, Any]], broken: list[dict[str, Any]]) -> None:
    out = console()
    table = Table("name", "distribution", "version", "kind", "hooks", "experimental", "status")
    for row in rows:
        table.add_row(
            escaped(row["name"] or "-"),
            escaped(row["distribution"] or "-"),
            escaped(row["version"] or "-"),
            row["kind"] or "-",
            ", ".join(row["hooks"]) or "-",
            "yes" if row["experimental"] else "no",
            "[red]failed to load[/red]" if row["error"] is not None else "ok",
        )
    out.print(table)
    if broken:
        out.print(f"{len(broken)} plugin{'s' if len(broken) > 1 else ''} failed to load:")
        for row in broken:
            out.print(f"  {escaped(row['name'] or '-')}: {escaped(row['error'])}", soft_wrap=True)
