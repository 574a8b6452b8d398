"""``harness demo``: the offline main job."""

from __future__ import annotations

__all__ = ["demo"]

import asyncio
import json
import sys
import tempfile
from importlib import resources
from pathlib import Path

import click
from rich.table import Table

from harness.cli._app import cli, console
from harness.messages import CanonicalMessage
from harness.stacks import default_stack
from harness.wire import load_messages


def _read_transcript(path: Path | None) -> tuple[str, list[CanonicalMessage]]:
    if path is None:
        data = resources.files("harness.demo").joinpath("transcript.json").read_bytes()
        return "embedded demo transcript", load_messages(data)
    return str(path), load_messages(path.read_bytes())


@cli.command()
@click.option(
    "--transcript",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="A pydantic-ai message-history JSON file to replay instead of the embedded one.",
)
@click.option(
    "--window",
    type=int,
    default=8_000,
    show_default=True,
    help="Context window (tokens) the replayed model pretends to have.",
)
@click.option(
    "--session-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where to save the session (default: a temporary folder).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def demo(transcript: Path | None, window: int, session_dir: Path | None, as_json: bool) -> None:
    """Replay an agent session through the loop and the default capability stack, offline."""
    out = console()
    from harness.demo.runner import run_demo

    label, history = _read_transcript(transcript)
    capabilities, names = default_stack(context_window=window)
    directory = session_dir or Path(tempfile.mkdtemp(prefix="harness-demo-"))
    report = asyncio.run(run_demo(history, capabilities, window=window, session_dir=directory))
    if as_json:
        click.echo(json.dumps(report.as_json(), indent=2))
        return
    out.print(
        f"[bold]harness demo[/bold]: replaying {label} ({len(history)} messages, "
        f"{report.transcript_tokens:,} tokens) with a {window:,}-token window"
    )
    out.print(f"capability stack (experimental plugins): {', '.join(names) or '(none installed)'}")
    table = Table("request", "history msgs", "tokens sent", "of window", "events")
    for row in report.requests:
        table.add_row(
            str(row.index),
            str(row.messages),
            f"{row.tokens:,}",
            f"{row.tokens / window:.0%}",
            "; ".join(row.events) or "-",
        )
    out.print(table)
    out.print(
        f"peak {report.peak_tokens:,} tokens ({report.peak_tokens / window:.0%} of the window) over "
        f"{len(report.requests)} requests; {report.event_count} compaction events saved "
        f"{report.tokens_saved:,} tokens; invariants: {'clean' if report.invariants_clean else 'BROKEN'}"
    )
    out.print(f"final answer: {report.output}")
    out.print(
        f"session saved to {report.session_path} and reloaded with identical messages: "
        f"{report.session_roundtrip}"
    )
    if not report.invariants_clean or not report.session_roundtrip:
        sys.exit(1)
