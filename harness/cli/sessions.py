"""``harness sessions``: saved sessions."""

from __future__ import annotations

__all__ = ["sessions"]

from pathlib import Path

import click
from rich.table import Table

from harness.cli._app import cli, console


@cli.command()
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Session folder (default: $XDG_DATA_HOME/harness/sessions).",
)
def sessions(directory: Path | None) -> None:
    """List saved sessions, newest first."""
    out = console()
    from harness.session import list_sessions

    listing = list_sessions(directory)
    table = Table("session", "last modified", "messages", "model", "path")
    for info in listing.sessions:
        table.add_row(
            info.session_id,
            info.last_modified,
            str(info.message_count),
            info.current_model or "-",
            str(info.path),
        )
    out.print(table)
    for problem in listing.problems:
        out.print(f"[yellow]unreadable:[/yellow] {problem.path}: {problem.reason}")
