"""``harness sessions``: saved sessions."""

from __future__ import annotations

__all__ = ["sessions"]

from pathlib import Path

import click
from rich.table import Table

from harness.cli._app import cli, console, escaped
from harness.cli._json import echo_json


@cli.command(
    epilog="""\b
Examples:
  harness sessions
  harness sessions --dir ./sessions --json | jq -r '.sessions[0].path'
"""
)
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    envvar="HARNESS_SESSION_DIR",
    help="Session folder (default: $XDG_DATA_HOME/harness/sessions; env HARNESS_SESSION_DIR).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON: the sessions and the unreadable files.")
def sessions(directory: Path | None, as_json: bool) -> None:
    """List saved sessions, newest first, and the files that failed to load."""
    from harness.session import list_sessions

    listing = list_sessions(directory)
    if as_json:
        document = {
            "sessions": [
                {
                    "session_id": info.session_id,
                    "last_modified": str(info.last_modified),
                    "messages": info.message_count,
                    "model": info.current_model,
                    "path": str(info.path),
                }
                for info in listing.sessions
            ],
            "problems": [{"path": str(p.path), "reason": p.reason} for p in listing.problems],
        }
        echo_json(document)
        return
    out = console()
    table = Table("session", "last modified", "messages", "model", "path")
    for info in listing.sessions:
        table.add_row(
            escaped(info.session_id),
            escaped(info.last_modified),
            str(info.message_count),
            escaped(info.current_model or "-"),
            escaped(info.path),
        )
    out.print(table)
    for problem in listing.problems:
        out.print(f"[yellow]unreadable:[/yellow] {escaped(problem.path)}: {escaped(problem.reason)}")
