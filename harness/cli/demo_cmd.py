"""``harness demo``: the example coding agent explores a real folder, offline."""

from __future__ import annotations

__all__ = ["demo"]

import asyncio
import sys
from pathlib import Path

import click

from harness.capabilities.context import CompactionEvent
from harness.cli._app import EXIT_PROBLEM, cli, console, escaped, resolve_cli_stack, stack_option
from harness.cli._json import echo_json
from harness.cli.sessions.options import opened_store, store_options, store_url_for


def _yes_no(value: bool) -> str:
    return "yes" if value else "[red]no[/red]"


_MEMORY = "sqlite:///:memory:"
"""Where ``--no-store`` keeps the session: a private in-memory SQLite store."""


def _given(ctx: click.Context, *names: str) -> bool:
    """Whether one of these options came from the command line (not an environment variable)."""
    from click.core import ParameterSource

    return any(ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE for name in names)


@cli.command()
@click.option(
    "--budget",
    type=click.IntRange(min=500),
    default=8_000,
    show_default=True,
    help="Context window (tokens) the stack keeps every request under.",
)
@click.option(
    "--root",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="Folder the agent explores (default: the installed harness package's source files).",
)
@stack_option
@store_options()
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the with/without chart to this PNG (needs the plot extra).",
)
@click.option(
    "--no-store",
    is_flag=True,
    help="Keep the session in memory only: nothing is added to the session store.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON instead of tables.")
@click.pass_context
def demo(
    ctx: click.Context,
    budget: int,
    root: Path | None,
    stack: str | None,
    config: Path | None,
    stack_name: str | None,
    store: str | None,
    session_dir: Path | None,
    plot: Path | None,
    no_store: bool,
    as_json: bool,
) -> None:
    """Run the example coding agent over real source files, offline, with no API key.

    A deterministic scripted model drives the agent of the harness-coding-agent package:
    its tools really list folders, read and search files and run read-only commands,
    while a capability stack (dedupe, clearing, structural-digest summaries, a sliding
    window, tiered; plus the limit warner) keeps every request under --budget tokens. The
    same task runs once without the stack, so each request is shown with and without it.

    The session of the run with the stack is stored like any `harness run` session
    (--store, default sessions.db in the XDG data folder), checkpointed at every step,
    then reloaded and compared; `harness sessions show ID --transcript` shows its raw log
    and what each compaction replaced. --no-store keeps it in memory (still checkpointed,
    reloaded and compared), so repeated demos leave nothing behind.

    Exit status: 0 when every request stayed within the budget, the history kept its
    invariants, the session reloaded identically and both runs answered the same; 1
    otherwise; 2 on a usage error.

    \b
    Examples:
      harness demo
      harness demo --budget 6000 --plot demo.png
      harness demo --root ~/src/project --json
      harness demo --stack "clear_tool_results:keep_pairs=2,max_fraction=0.7"
      harness demo --store sqlite:///demo.db
      harness demo --no-store
    """  # noqa: D301 - click needs the \b marker
    from harness.cli.demo.chart import (
        comparison_table,
        require_matplotlib,
        summary_line,
        terminal_chart,
        write_png,
    )
    from harness.cli.demo.runner import default_root, load_coding_agent, run_demo
    from harness.config.stacks import default_stack_spec

    load_coding_agent()
    if no_store and _given(ctx, "store", "session_dir"):
        raise click.UsageError("--no-store cannot be combined with --store or --session-dir")
    if plot is not None:
        require_matplotlib()
    out = console()
    folder = (root or default_root()).resolve()
    capabilities, entries = resolve_cli_stack(
        stack, config, stack_name, default=default_stack_spec(), context_window=budget
    )
    from harness.config import format_stack

    if not as_json:
        out.print(
            f"[bold]harness demo[/bold]: the example coding agent explores {escaped(folder)}\n"
            "offline: a deterministic scripted model decides, the tools run for real"
        )
        out.print(f"stack (experimental plugins): {escaped(format_stack(entries) or '(none)')}")
        out.print(f"budget: {budget:,} tokens per request\n")

    requests_seen = 0

    def on_event(event: CompactionEvent) -> None:
        if not as_json:
            from harness.cli.demo.measure import describe_event

            described = escaped(describe_event(event))
            out.print(f"  [cyan]compaction before request {requests_seen + 1}:[/cyan] {described}")

    def on_request(measure: object, plain: object) -> None:
        nonlocal requests_seen
        from harness.cli.demo.measure import RequestMeasure

        requests_seen += 1
        if as_json or not isinstance(measure, RequestMeasure):
            return
        without = f"{plain.tokens:,}" if isinstance(plain, RequestMeasure) else "?"
        out.print(
            f"  request {measure.index:>2}: {measure.tokens:>6,} tokens sent ({without} without the stack)"
        )

    with opened_store(_MEMORY if no_store else store_url_for(ctx)) as opened:
        report = asyncio.run(
            run_demo(
                root=folder,
                capabilities=capabilities,
                budget=budget,
                store=opened,
                on_request=on_request,
                on_event=on_event,
            )
        )
    if plot is not None:
        write_png(report.comparison, plot, title="harness demo")
    if as_json:
        data = report.as_json()
        data["stack"] = format_stack(entries)
        data["plot"] = str(plot) if plot is not None else None
        echo_json(data)
    else:
        out.print()
        out.print(comparison_table(report.comparison))
        out.print(terminal_chart(report.comparison, columns=out.width))
        out.print(summary_line(report.comparison))
        out.print(
            f"\n[bold]final answer[/bold] ({report.tool_calls} tool calls):\n{escaped(report.output or '')}\n"
        )
        same = report.output == report.output_without
        where = f" ({escaped(report.session_path)})" if report.session_path is not None else ""
        if no_store:
            out.print(
                f"session {escaped(report.session_id)} kept in memory only (--no-store): raw log "
                f"{report.log_length} messages, {report.edits} compaction edits over it"
            )
        else:
            out.print(
                f"session {escaped(report.session_id)} saved in {escaped(report.store)}{where}: raw log "
                f"{report.log_length} messages, {report.edits} compaction edits over it; see it with: "
                f"harness sessions show {escaped(report.session_id)} --transcript"
            )
        out.print(
            f"invariants: {'clean' if report.invariants_clean else 'BROKEN'}; "
            f"session reloaded identical: {_yes_no(report.session_roundtrip)}; "
            f"same answer without the stack: {_yes_no(same)}"
        )
        if plot is not None:
            out.print(f"chart written to {escaped(plot)}")
    if not report.ok:
        sys.exit(EXIT_PROBLEM)
