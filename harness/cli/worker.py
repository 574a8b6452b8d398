"""``harness worker ENGINE ...``: run a worker of a durable-execution engine plugin.

The engines are plugins (``harness-dbos``, ``harness-temporal``): each answers the
``resolve_engine`` hook with its own worker command, which gets the rest of the command
line. ``harness worker dbos --help`` shows that engine's options; ``harness worker --help``
this command's, with the engines installed. An engine no plugin runs is a usage error
(exit 2) naming the installed ones; the engine command's own errors (a bad option, an
unreachable server) are one ``error:`` line like every other command's.
"""

from __future__ import annotations

__all__ = ["worker"]

import click

from harness.cli._app import EXIT_OK, EXIT_PROBLEM, cli, console, escaped
from harness.hooks.defaults import add_installed, default_plugin_manager
from harness.hooks.entrypoints import provides
from harness.hooks.installed import installed_selection

_KNOWN = {"dbos": "harness-dbos", "temporal": "harness-temporal"}


def _installed() -> list[str]:
    """The engines installed plugins declare (their ``engine.<NAME>`` entry points), none imported."""
    names = {
        key
        for ep, _ in installed_selection().selected
        for kind, key in [provides(ep.name)]
        if kind == "engine"
    }
    return sorted(names)


def _help(ctx: click.Context) -> str:
    installed = _installed()
    engines = ", ".join(installed) if installed else f"none (install {' or '.join(_KNOWN.values())})"
    return f"{ctx.get_help()}\n\nInstalled engines: {engines}."


@cli.command(
    "worker",
    context_settings={
        "ignore_unknown_options": True,
        "allow_interspersed_args": False,
        "help_option_names": [],
    },
    epilog="""\b
Examples:
  harness worker dbos --system-db postgresql://db/dbos --store app=postgresql://db/agents
  harness worker temporal --address 127.0.0.1:7233 --agent app.agents:agent
  harness worker dbos --help
""",
)
@click.argument("engine")
@click.argument("arguments", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def worker(ctx: click.Context, engine: str, arguments: tuple[str, ...]) -> None:
    """Run a worker of ENGINE (``dbos``, ``temporal``, or any engine plugin) with its own ARGUMENTS."""
    if engine in ("--help", "-h"):
        click.echo(_help(ctx))
        ctx.exit(EXIT_OK)
    manager = default_plugin_manager()
    add_installed(manager, "engine", engine)  # only the plugins of engine.<ENGINE> entry points
    command = manager.resolve_engine(engine)
    if command is None:
        known = _KNOWN.get(engine.strip().lower())
        installed = _installed()
        hint = f"; install {known}" if known else ""
        listed = ", ".join(installed) if installed else "none"
        raise click.UsageError(
            f"no installed plugin runs workers for engine {engine!r}{hint} (installed engines: {listed})",
            ctx,
        )
    if not isinstance(command, click.Command):
        console().print(
            f"[red]the plugin for engine {escaped(engine)!r} answered resolve_engine with a "
            f"{type(command).__name__}, not a click command[/red]"
        )
        ctx.exit(EXIT_PROBLEM)
    # Not standalone: the engine's usage errors and harness errors reach ``main``, which
    # prints them as one line like any other command's; its exit code is the command's.
    code = command.main(list(arguments), prog_name=f"harness worker {engine}", standalone_mode=False)
    if isinstance(code, int) and code:
        ctx.exit(code)
