"""``harness replay``: re-run a recorded transcript with a stack and measure every request."""

from __future__ import annotations

__all__ = ["DEFAULT_REPLAY_BUDGET", "replay"]

import asyncio
import sys
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.cli._app import (
    EXIT_PROBLEM,
    HISTORY_PATH,
    cli,
    console,
    error_console,
    escaped,
    history_format_option,
    load_history_file,
    resolve_cli_stack,
    stack_option,
)
from harness.cli._json import echo_json
from harness.cli.demo.measure import RequestMeasure

if TYPE_CHECKING:
    from harness.wire import FormatChoice

DEFAULT_REPLAY_BUDGET = 8_000
"""Tokens given to the stack when ``--budget`` is not passed."""


@cli.command()
@click.argument("file", required=False, type=HISTORY_PATH)
@history_format_option
@stack_option
@click.option(
    "--budget",
    type=click.IntRange(min=100),
    default=DEFAULT_REPLAY_BUDGET,
    show_default=True,
    metavar="TOKENS",
    help="Context window given to the stack; requests above it make the exit status 1.",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE.png",
    help="Also write the with/without chart to this PNG (needs the plot extra).",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Show a progress bar on stderr (default: when stderr is a terminal and not --json).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON instead of tables.")
def replay(
    file: Path | None,
    history_format: FormatChoice,
    stack: str | None,
    config: Path | None,
    stack_name: str | None,
    budget: int,
    plot: Path | None,
    progress: bool | None,
    as_json: bool,
) -> None:
    """Re-run a recorded transcript through the agent loop with a stack, offline.

    FILE is a message history (harness's wire format, which is pydantic-ai's JSON dump;
    OpenAI or Anthropic messages; a Claude Code transcript; see --format) or a saved
    session, - for standard input; without it the transcript embedded for the demo is replayed.
    The model answers with the recorded responses and the tools with the recorded
    results, while the stack edits the history as it would live. The transcript is
    replayed twice, without and with the stack, and every model request is reported
    with the tokens sent each way. The recording's system prompt is sent as the agent's.

    Exit status: 0 when every request stayed within --budget and the history kept its
    invariants; 1 otherwise; 2 on a usage error or an unreadable file.

    \b
    Examples:
      harness replay session.json
      harness replay session.json --budget 32000 --plot tokens.png
      harness replay session.json --stack "dedupe_file_reads clear_tool_results:keep_pairs=3,max_fraction=0.8"
      harness replay --json
    """  # noqa: D301 - click needs the \b marker
    from harness.cli.demo.chart import (
        comparison_table,
        event_lines,
        require_matplotlib,
        summary_line,
        terminal_chart,
        write_png,
    )
    from harness.cli.demo.runner import run_replay
    from harness.config import format_stack
    from harness.config.stacks import default_stack_spec
    from harness.replay.model import ReplayModel

    if plot is not None:
        require_matplotlib()
    if file is None:
        from harness.wire import load_messages

        label = "the embedded demo transcript"
        history = load_messages(resources.files("harness.cli.demo").joinpath("transcript.json").read_bytes())
    else:
        label = str(file)
        history = load_history_file(file, format=history_format)
    capabilities, entries = resolve_cli_stack(
        stack, config, stack_name, default=default_stack_spec(), context_window=budget
    )
    out = console()
    responses = len(ReplayModel(history).responses)
    if not as_json:
        out.print(
            f"[bold]harness replay[/bold]: {escaped(label)} ({len(history)} messages, {responses} recorded "
            f"responses), budget {budget:,} tokens"
        )
        out.print(f"stack (experimental plugins): {escaped(format_stack(entries) or '(none)')}")

    show_progress = progress if progress is not None else (not as_json and sys.stderr.isatty())
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=error_console(force_terminal=show_progress),
        transient=True,
        disable=not show_progress,
    )

    with bar:
        task = bar.add_task("replaying without the stack", total=2 * max(responses, 1))

        def on_request(label: str, measure: RequestMeasure) -> None:
            if label == "with":
                bar.update(task, description="replaying with the stack")
            bar.advance(task)

        report = asyncio.run(
            run_replay(history, capabilities=capabilities, budget=budget, on_request=on_request)
        )
    if plot is not None:
        write_png(report.comparison, plot, title=Path(label).name if file is not None else "harness replay")
    if as_json:
        data = report.as_json()
        data["file"] = str(file) if file is not None else None
        data["stack"] = format_stack(entries)
        data["plot"] = str(plot) if plot is not None else None
        echo_json(data)
    else:
        for line in event_lines(report.comparison):
            out.print(f"  [cyan]compaction[/cyan] {escaped(line)}")
        out.print(comparison_table(report.comparison))
        out.print(terminal_chart(report.comparison, columns=out.width))
        out.print(summary_line(report.comparison))
        out.print(f"invariants: {'clean' if report.invariants_clean else 'BROKEN'}")
        if report.stopped is not None:
            out.print(f"[yellow]note:[/yellow] {escaped(report.stopped)}")
        if report.comparison.unpaired:
            out.print(
                f"[red]the runs differ:[/red] {report.comparison.unpaired} requests were made by one run only"
            )
        if plot is not None:
            out.print(f"chart written to {escaped(plot)}")
    if not report.ok:
        sys.exit(EXIT_PROBLEM)
