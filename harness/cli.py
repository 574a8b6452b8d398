"""The ``harness`` command line: demo, transcript statistics, compaction dry runs, plugins, sessions."""

from __future__ import annotations

__all__ = ["main"]

import asyncio
import json
import sys
import tempfile
import warnings
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from harness.errors import HarnessError, HarnessExperimentalWarning
from harness.history import check_invariants
from harness.messages import CanonicalMessage
from harness.plugins import PluginManager
from harness.stacks import default_stack, tiered_stack
from harness.tokens import get_token_counter
from harness.wire import load_messages


def _console() -> Console:
    """A console that does not squeeze tables when the output is not a terminal."""
    return Console() if sys.stdout.isatty() else Console(width=200, soft_wrap=True)


def _read_transcript(path: Path | None) -> tuple[str, list[CanonicalMessage]]:
    if path is None:
        data = resources.files("harness.demo").joinpath("transcript.json").read_bytes()
        return "embedded demo transcript", load_messages(data)
    return str(path), load_messages(path.read_bytes())


@click.group()
@click.version_option(package_name="harness-loop")
def cli() -> None:
    """harness: a minimal agent loop with pluggy hooks and context-window capabilities."""
    # Running the CLI is the opt-in: the capability plugins it loads are all experimental,
    # and one warning per plugin would bury the output (the README says they are).
    warnings.filterwarnings("ignore", category=HarnessExperimentalWarning)


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
    console = _console()
    from harness.demo.runner import run_demo

    label, history = _read_transcript(transcript)
    capabilities, names = default_stack(context_window=window)
    directory = session_dir or Path(tempfile.mkdtemp(prefix="harness-demo-"))
    report = asyncio.run(run_demo(history, capabilities, window=window, session_dir=directory))
    if as_json:
        click.echo(json.dumps(report.as_json(), indent=2))
        return
    console.print(
        f"[bold]harness demo[/bold]: replaying {label} ({len(history)} messages, "
        f"{report.transcript_tokens:,} tokens) with a {window:,}-token window"
    )
    console.print(f"capability stack (experimental plugins): {', '.join(names) or '(none installed)'}")
    table = Table("request", "history msgs", "tokens sent", "of window", "events")
    for row in report.requests:
        table.add_row(
            str(row.index),
            str(row.messages),
            f"{row.tokens:,}",
            f"{row.tokens / window:.0%}",
            "; ".join(row.events) or "-",
        )
    console.print(table)
    console.print(
        f"peak {report.peak_tokens:,} tokens ({report.peak_tokens / window:.0%} of the window) over "
        f"{len(report.requests)} requests; {report.event_count} compaction events saved "
        f"{report.tokens_saved:,} tokens; invariants: {'clean' if report.invariants_clean else 'BROKEN'}"
    )
    console.print(f"final answer: {report.output}")
    console.print(
        f"session saved to {report.session_path} and reloaded with identical messages: "
        f"{report.session_roundtrip}"
    )
    if not report.invariants_clean or not report.session_roundtrip:
        sys.exit(1)


@cli.command()
@click.argument(
    "paths", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option("--model", default=None, help="Model name that picks the tokenizer (default cl100k_base).")
def stats(paths: tuple[Path, ...], model: str | None) -> None:
    """Print token statistics of message-history JSON files."""
    console = _console()
    counter = get_token_counter(model)
    table = Table("file", "messages", "parts", "tool calls", "tokens", "largest part", "invariants")
    for path in paths:
        messages = load_messages(path.read_bytes())
        kinds: Counter[str] = Counter(part.part_kind for m in messages for part in m.parts)
        largest = max((counter.count_part(p) for m in messages for p in m.parts), default=0)
        violations = check_invariants(messages)
        table.add_row(
            path.name,
            str(len(messages)),
            str(sum(kinds.values())),
            str(kinds["tool-call"]),
            f"{counter.count_messages(messages):,}",
            f"{largest:,}",
            "clean" if not violations else f"{len(violations)} violations",
        )
    console.print(table)
    console.print(f"tokenizer: {counter.encoding_name} ({'exact' if counter.exact else 'estimate'})")


@cli.command()
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--window", type=int, default=None, help="Context window; default: the history's own size.")
@click.option(
    "--target", type=float, default=0.3, show_default=True, help="Target size as a fraction of the window."
)
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the compacted history here (never over the input).",
)
def compact(path: Path, window: int | None, target: float, output: Path | None) -> None:
    """Dry-run the default stack on a history file and show what each capability did."""
    console = _console()
    from harness.compaction import compact_sync
    from harness.wire import dump_messages

    messages = load_messages(path.read_bytes())
    size = get_token_counter().count_messages(messages)
    window = window or size
    capabilities, names = tiered_stack(context_window=window, target_fraction=target)
    result = compact_sync(messages, capabilities, context_window=window, force=True)
    table = Table("strategy", "messages", "tokens", "saved", "reason")
    for event in result.events:
        table.add_row(
            event.strategy,
            f"{event.messages_before} → {event.messages_after}",
            f"{event.tokens_before:,} → {event.tokens_after:,}",
            f"{event.tokens_saved:,}",
            event.reason,
        )
    console.print(f"stack: {', '.join(names) or '(no capability plugins installed)'}")
    console.print(table)
    console.print(
        f"{path.name}: {result.tokens_before:,} → {result.tokens_after:,} tokens "
        f"(target {int(window * target):,}); invariants: "
        f"{'clean' if not check_invariants(result.messages) else 'BROKEN'}"
    )
    if output is not None:
        if output.resolve() == path.resolve():
            raise click.UsageError("--output must not be the input file")
        output.write_bytes(dump_messages(result.messages))
        console.print(f"wrote {output}")


@cli.command()
def plugins() -> None:
    """List installed harness plugins and capabilities (entry-point group ``harness``)."""
    console = _console()
    manager = PluginManager()
    manager.load_entrypoint_plugins()
    table = Table("name", "distribution", "version", "kind", "hooks")
    for info in manager.list_plugins():
        table.add_row(
            info.name, info.distribution or "-", info.version or "-", info.kind, ", ".join(info.hooks)
        )
    console.print(table)


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
    console = _console()
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
    console.print(table)
    for problem in listing.problems:
        console.print(f"[yellow]unreadable:[/yellow] {problem.path}: {problem.reason}")


def main(argv: list[str] | None = None) -> Any:
    """Entry point of the ``harness`` command; harness errors print as one clear line."""
    try:
        return cli.main(args=argv, prog_name="harness", standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.Abort:
        sys.exit(130)
    except HarnessError as exc:
        _console().print(f"[red]error:[/red] {type(exc).__name__}: {exc}")
        sys.exit(2)
