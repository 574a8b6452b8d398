"""``harness plugins``: installed plugins and capabilities."""

from __future__ import annotations

__all__ = ["plugin_rows", "plugins"]

import json
from typing import Any

import click
from rich.table import Table

from harness.cli._app import cli, console, escaped
from harness.errors import is_experimental
from harness.hooks.manager import PluginManager


def plugin_rows(manager: PluginManager | None = None) -> list[dict[str, Any]]:
    """One JSON-ready object per installed plugin (``harness plugins --json``).

    Keys: ``name``, ``distribution``, ``version``, ``kind`` (``"capability"`` for a
    capability class published through an entry point, ``"plugin"`` for a registered
    plugin object or module), ``hooks`` (implemented hooks, sorted), ``experimental``
    (the module or its package called
    :func:`harness.warn_experimental` when loaded) and ``entry_point`` (``module:attribute``).

    Args:
        manager: A manager whose entry points are loaded (default: a new one, loaded).
    """
    if manager is None:
        manager = PluginManager()
        manager.load_entrypoint_plugins()
    rows: list[dict[str, Any]] = []
    for info in manager.list_plugins():
        module = (info.entry_point or "").split(":", 1)[0].strip()
        rows.append(
            {
                "name": info.name,
                "distribution": info.distribution,
                "version": info.version,
                "kind": "plugin" if info.kind == "plugin" else "capability",
                "hooks": list(info.hooks),
                "experimental": bool(module) and is_experimental(module),
                "entry_point": info.entry_point,
            }
        )
    return rows


@cli.command(
    epilog="""\b
Examples:
  harness plugins
  harness plugins --json | jq '.[] | select(.experimental) | .name'
  HARNESS_DISABLE_PLUGINS=summarizing harness plugins
"""
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of a table.")
def plugins(as_json: bool) -> None:
    """List installed harness plugins and capabilities (entry-point group ``harness``).

    Shows each plugin's distribution and version, the hooks it implements and whether it
    is experimental (its package calls harness.warn_experimental). HARNESS_LOAD_PLUGINS
    and HARNESS_DISABLE_PLUGINS filter what is loaded; HARNESS_TRACE_PLUGINS=1 traces
    every hook call to stderr.
    """
    rows = plugin_rows()
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    out = console()
    if not rows:
        out.print("no harness plugins installed (entry-point group 'harness')")
        return
    table = Table("name", "distribution", "version", "kind", "hooks", "experimental")
    for row in rows:
        table.add_row(
            escaped(row["name"]),
            escaped(row["distribution"] or "-"),
            escaped(row["version"] or "-"),
            row["kind"],
            ", ".join(row["hooks"]) or "-",
            "yes" if row["experimental"] else "no",
        )
    out.print(table)
