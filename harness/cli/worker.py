"""``harness worker ENGINE ...``: run a worker of a durable-execution engine plugin.

The engines are plugins (``harness-dbos``, ``harness-temporal``): each answers the
``resolve_engine`` hook with its own worker command, which gets the rest of the command
line. ``harness worker dbos --help`` shows that engine's options.
"""

from __future__ import annotations

__all__ = ["worker"]

import click

from harness.cli._app import EXIT_PROBLEM, cli, console, escaped
from harness.hooks.defaults import add_installed, default_plugin_manager

_KNOWN = {"dbos": "harness-dbos", "temporal": "harness-temporal"}


@cli.command(
    "worker",
    context_settings={
        "ignore_unknown_options": True,
        "allow_interspersed_args": False,
        "help_option_names": [],
    },
)
@click.argument("engine")
@click.argument("arguments", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def worker(ctx: click.Context, engine: str, arguments: tuple[str, ...]) -> None:
    """Run a worker of ENGINE (``dbos``, ``temporal``, or any engine plugin) with its own ARGUMENTS."""
    manager = default_plugin_manager()
    add_installed(manager, "engine", engine)  # only the plugins of engine.<ENGINE> entry points
    command = manager.resolve_engine(engine)
    if command is None:
        hint = f" (install {_KNOWN[engine.lower()]})" if engine.lower() in _KNOWN else ""
        console().print(f"[red]no installed plugin runs workers for engine {escaped(engine)!r}{hint}[/red]")
        ctx.exit(EXIT_PROBLEM)
    if not isinstance(command, click.Command):
        console().print(
            f"[red]the plugin for engine {escaped(engine)!r} answered resolve_engine with a "
            f"{type(command).__name__}, not a click command[/red]"
        )
        ctx.exit(EXIT_PROBLEM)
    command.main(list(arguments), prog_name=f"harness worker {engine}", standalone_mode=True)
