"""``harness hooks``: every hook specification, how it is called and who implements it."""

from __future__ import annotations

__all__ = ["hook_rows", "hooks"]

import inspect
from collections.abc import Callable, Mapping
from typing import Any, cast

import click
from rich.table import Table

from harness.cli._app import cli, console, escaped
from harness.cli._json import echo_json
from harness.core.markers import PROJECT_NAME
from harness.hooks import specs as hookspecs
from harness.hooks.dispatch import ASYNC_HOOKS
from harness.hooks.manager import PluginManager
from harness.hooks.middleware import WRAPPER_HOOKS

_SPEC_ATTR = f"{PROJECT_NAME}_spec"


def _signature(name: str, function: Callable[..., object]) -> str:
    signature = inspect.signature(function)
    parameters: list[str] = []
    for parameter in signature.parameters.values():
        annotation: object = parameter.annotation
        text = parameter.name
        if annotation is not inspect.Parameter.empty:
            text += f": {annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)}"
        parameters.append(text)
    result: object = signature.return_annotation
    returns = "" if result is inspect.Signature.empty else f" -> {result}"
    return f"{name}({', '.join(parameters)}){returns}"


def hook_rows(manager: PluginManager | None = None) -> list[dict[str, Any]]:
    """One JSON-ready object per hook specification (``harness hooks --json``).

    Keys: ``name``; ``kind`` (``"firstresult"``, ``"historic"``, ``"wrapper"`` for the
    middleware hooks, or ``"plain"``); ``calling`` (``"awaited by harness"`` for the hooks
    :class:`~harness.hooks.manager.PluginManager` calls itself, awaiting ``async def``
    implementations, ``"driven by harness (sync generator)"`` for the wrappers, or
    ``"sync (pluggy)"``);
    ``signature``; ``summary`` (first docstring line); ``implementers`` (names of the
    installed plugins and capability classes implementing it).

    Args:
        manager: A manager whose entry points are loaded (default: a new one, loaded with
            ``errors="collect"``: a plugin that fails to load implements nothing, and
            ``harness plugins`` shows why).
    """
    if manager is None:
        manager = PluginManager()
        manager.load_entrypoint_plugins(errors="collect")
    implementers: dict[str, list[str]] = {}
    for info in manager.list_plugins():
        for hook in info.hooks:
            implementers.setdefault(hook, []).append(info.name)
    rows: list[dict[str, Any]] = []
    for name, value in vars(hookspecs).items():
        options: object = getattr(value, _SPEC_ATTR, None)
        if not isinstance(options, Mapping) or not callable(value):
            continue
        opts = cast("Mapping[str, object]", options)
        kind = "firstresult" if opts.get("firstresult") else "historic" if opts.get("historic") else "plain"
        if name in WRAPPER_HOOKS:
            kind = "wrapper"
        doc = inspect.getdoc(value) or ""
        rows.append(
            {
                "name": name,
                "kind": kind,
                "calling": _calling(name),
                "signature": _signature(name, value),
                "summary": doc.splitlines()[0] if doc else "",
                "implementers": implementers.get(name, []),
            }
        )
    return rows


def _calling(name: str) -> str:
    if name in WRAPPER_HOOKS:
        return "driven by harness (sync generator)"
    return "awaited by harness" if name in ASYNC_HOOKS else "sync (pluggy)"


@cli.command(
    epilog="""\b
Examples:
  harness hooks
  harness hooks --json | jq '.hooks[] | {name, implementers}'
"""
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print JSON instead of a table: the list is under the key hooks."
)
def hooks(as_json: bool) -> None:
    """List every hook specification with its kind, signature and implementers.

    Kinds: firstresult (the first non-None answer wins), historic (replayed to late
    registrations), wrapper (middleware: @hookimpl(wrapper=True) generators around each
    model call, tool call or run) or plain. Hooks "awaited by harness" accept async def
    implementations; the others are called synchronously. A plugin that fails to load
    implements nothing; a note on stderr names it (``harness plugins`` shows why).
    """
    manager = PluginManager()
    manager.load_entrypoint_plugins(errors="collect")
    rows = hook_rows(manager)
    broken = [error.plugin_name or "?" for error in manager.load_errors()]
    if broken:
        click.echo(
            f"warning: {len(broken)} harness plugin{'s' if len(broken) > 1 else ''} failed to load "
            f"and {'are' if len(broken) > 1 else 'is'} not listed: {', '.join(broken)} "
            "(run `harness plugins` to see why)",
            err=True,
        )
    if as_json:
        echo_json({"hooks": rows})
        return
    table = Table("hook", "kind", "calling", "signature", "implementers", "summary")
    for row in rows:
        table.add_row(
            row["name"],
            row["kind"],
            row["calling"],
            escaped(row["signature"]),
            escaped(", ".join(row["implementers"]) or "-"),
            escaped(row["summary"]),
        )
    console().print(table)
