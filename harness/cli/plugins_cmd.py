"""``harness plugins``: installed plugins and capabilities."""

from __future__ import annotations

__all__ = ["experimental_module", "plugin_rows", "plugins"]

import ast
import functools
import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from harness.cli._app import cli, console, escaped
from harness.plugins import PluginManager


def _calls_warn_experimental(tree: ast.Module) -> bool:
    """Whether module-level code (not a function or class body) calls ``warn_experimental``."""
    definitions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    for statement in tree.body:
        if isinstance(statement, definitions):
            continue
        for node in ast.walk(statement):
            if isinstance(node, ast.Call):
                function = node.func
                name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", None)
                if name == "warn_experimental":
                    return True
    return False


@functools.cache
def experimental_module(module_name: str) -> bool:
    """Whether the module, or the top-level package it belongs to, calls ``warn_experimental``.

    Harness plugins declare themselves experimental by calling
    :func:`harness.warn_experimental` when imported; there is no other flag. The warning
    fires once per process, so instead of catching it this reads the source of the
    (already imported) module and of its top-level package and looks for the call; that
    works however often and in whatever order the plugins were imported.

    Args:
        module_name: A dotted module name, e.g. ``"harness_tiered.tiered"``.
    """
    names = {module_name, module_name.split(".", 1)[0]}
    for name in sorted(names):
        module = sys.modules.get(name)
        file: object = getattr(module, "__file__", None)
        if not isinstance(file, str) or not file.endswith(".py"):
            continue
        try:
            tree = ast.parse(Path(file).read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            continue
        if _calls_warn_experimental(tree):
            return True
    return False


def plugin_rows(manager: PluginManager | None = None) -> list[dict[str, Any]]:
    """One JSON-ready object per installed plugin (``harness plugins --json``).

    Keys: ``name``, ``distribution``, ``version``, ``kind`` (``"capability"`` for a
    capability class published through an entry point, ``"plugin"`` for a registered
    plugin object or module), ``hooks`` (implemented hooks, sorted), ``experimental``
    (see :func:`experimental_module`) and ``entry_point`` (``module:attribute``).

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
                "experimental": bool(module) and experimental_module(module),
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
