"""``harness plugins``: installed plugins."""

from __future__ import annotations

__all__ = ["plugins"]

from rich.table import Table

from harness.cli._app import cli, console
from harness.plugins import PluginManager


@cli.command()
def plugins() -> None:
    """List installed harness plugins and capabilities (entry-point group ``harness``)."""
    out = console()
    manager = PluginManager()
    manager.load_entrypoint_plugins()
    table = Table("name", "distribution", "version", "kind", "hooks")
    for info in manager.list_plugins():
        table.add_row(
            info.name, info.distribution or "-", info.version or "-", info.kind, ", ".join(info.hooks)
        )
    out.print(table)
