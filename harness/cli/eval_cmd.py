"""``harness eval``: replay transcripts through stacks and measure recall, tokens, cache cost, validity."""

from __future__ import annotations

__all__ = ["evaluate_command", "plot_labels", "write_tradeoff_png"]

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.measure import Measurement
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.cli._app import EXIT_PROBLEM, EXIT_USAGE, cli, console, error_console, escaped
from harness.cli.eval_table import figures_columns, figures_table, fitted_columns
from harness.errors import EvalRunError, HistoryFileError

if TYPE_CHECKING:
    from harness.eval import EvalReport, RunFigures, StackFigures


def plot_labels(
    points: Sequence[tuple[float, float, str]], *, tolerance: float = 0.01
) -> list[tuple[float, float, str]]:
    """One label per place: the labels of points that (nearly) coincide are joined (``8k/16k/32k``).

    A stack that compacts nothing (``none``) costs the same and recalls everything at every
    budget, so its points lie on top of each other; separate labels would be drawn over one
    another.

    Args:
        points: ``(x, y, label)`` of one series, in order.
        tolerance: How close two points are to share a label, as a fraction of the
            series' span on each axis (``0`` for exactly equal points).
    """
    if not points:
        return []
    xs = [x for x, _, _ in points]
    ys = [y for _, y, _ in points]
    dx = (max(xs) - min(xs)) * tolerance or 1e-9
    dy = (max(ys) - min(ys)) * tolerance or 1e-9
    places: list[tuple[float, float, list[str]]] = []
    for x, y, label in points:
        for px, py, labels in places:
            if abs(px - x) <= dx and abs(py - y) <= dy:
                labels.append(label)
                break
        else:
            places.append((x, y, [label]))
    return [(x, y, "/".join(labels)) for x, y, labels in places]


def write_tradeoff_png(report: EvalReport, path: Path, *, provider: str = "anthropic") -> Path:
    """Plot each stack's cache-priced cost against its older-continuation recall, a point per budget.

    Raises:
        PlotUnavailableError: matplotlib is not installed.
        OSError: The file cannot be written.
    """
    from harness.cli.demo.chart import require_matplotlib

    plt = require_matplotlib()
    rules = report.prices.providers.get(provider)
    label = rules.label if rules is not None else provider
    series: dict[tuple[str, str], list[StackFigures]] = {}
    for figures in report.summary():
        series.setdefault((figures.side, figures.stack), []).append(figures)
    figure, axes = plt.subplots(figsize=(8, 5), dpi=110)
    try:
        for (side, stack), points in series.items():
            points.sort(key=lambda f: f.budget)
            xs = [f.costs.get(provider, 0.0) / 1e6 for f in points]
            ys = [100 * (f.recall_of("older_continuation") or 0.0) for f in points]
            marker = "o" if side == "harness" else "s"
            name = stack if side == "harness" else f"reference {stack}"
            axes.plot(xs, ys, marker=marker, linestyle="-" if side == "harness" else "--", label=name)
            budgets = [f"{f.budget // 1000}k" for f in points]
            for x, y, text in plot_labels(list(zip(xs, ys, budgets, strict=True))):
                axes.annotate(text, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
        axes.set_xlabel(f"{label}-priced cost (millions of base input tokens)")
        axes.set_ylabel("older continuation recall (%)")
        axes.set_title("harness eval: cost against what survived compaction", fontsize=10)
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize=8)
        figure.tight_layout()
        figure.savefig(path)
    finally:
        plt.close(figure)
    return path


@cli.command(name="eval")
@click.argument(
    "files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option(
    "--stack",
    "stacks",
    multiple=True,
    metavar="SPEC",
    help=(
        "A stack to evaluate (repeatable): a preset (tiered, clear+window, none) or a short-form "
        "stack string as --stack takes elsewhere. Default: the three presets."
    ),
)
@click.option(
    "--budget",
    "budgets",
    multiple=True,
    type=click.IntRange(min=100),
    metavar="TOKENS",
    help="A context window given to every stack (repeatable). Default: 8000, 16000 and 32000.",
)
@click.option(
    "--reference",
    is_flag=True,
    help=(
        "Also run pydantic-ai-harness 0.62's equivalent stacks (of the tiered and clear+window "
        "presets evaluated, else both) on the same files, in their own environment (created from "
        "PyPI on first use)."
    ),
)
@click.option(
    "--prices",
    "prices_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="A TOML prices file merged over the packaged one (see the README).",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE.png",
    help="Also write cost against older-continuation recall, a point per stack and budget (plot extra).",
)
@click.option(
    "--processes",
    type=click.IntRange(min=1),
    default=None,
    help="Worker processes (default: one per CPU).",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Show a progress bar on stderr (default: when stderr is a terminal and not --json).",
)
@click.option(
    "--wide",
    is_flag=True,
    help="Print every column of the tables, however wide (default: the columns that fit the terminal).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON instead of tables.")
def evaluate_command(
    files: tuple[Path, ...],
    stacks: tuple[str, ...],
    budgets: tuple[int, ...],
    reference: bool,
    prices_file: Path | None,
    plot: Path | None,
    processes: int | None,
    progress: bool | None,
    wide: bool,
    as_json: bool,
) -> None:
    """Replay transcripts through stacks offline and measure what each stack kept and cost.

    Each FILE (a message history in any format harness reads) is replayed request by
    request through each stack at each budget, exactly as ``harness replay`` does, and
    every context sent is measured: probe recall (task, constraints, artifacts, errors,
    continuation, older continuation), tokens, the prompt-cache-priced cost (Anthropic and
    OpenAI rules) with the cache busts, and invalid contexts. The README section
    "Evaluating compaction" defines every figure.

    Exit status: 0 when every sent context kept the invariants; 1 when one did not; 2 on
    a usage error or an unreadable file (each bad file gets one ``error:`` line on stderr
    and the others are still measured and reported).

    \b
    Examples:
      harness eval session.json
      harness eval corpus/*.json --stack tiered --stack "sliding_window:keep_messages=20" --budget 8000
      harness eval corpus/*.json --reference --plot tradeoff.png
      harness eval session.json --json --prices my-prices.toml
    """  # noqa: D301 - click needs the \b marker
    from harness.cli._json import echo_json
    from harness.eval import DEFAULT_BUDGETS, DEFAULT_STACKS, evaluate

    if plot is not None:
        from harness.cli.demo.chart import require_matplotlib

        require_matplotlib()
    chosen_budgets = budgets or DEFAULT_BUDGETS
    chosen_stacks = stacks or DEFAULT_STACKS
    out = console()
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
    total = len(files) * len(set(chosen_stacks)) * len(set(chosen_budgets))
    with bar:
        task = bar.add_task("replaying", total=total)

        def done(figures: RunFigures) -> None:
            bar.advance(task)

        def failed(error: HistoryFileError | EvalRunError) -> None:
            failures.append(error)
            bar.console.print(f"error: {type(error).__name__}: {error}", markup=False, highlight=False)

        failures: list[HistoryFileError | EvalRunError] = []
        report = evaluate(
            [str(f) for f in files],
            chosen_stacks,
            chosen_budgets,
            prices_file=prices_file,
            processes=processes,
            on_done=done,
            on_error=failed,
        )
        if failures and not report.runs:
            sys.exit(EXIT_USAGE)
        if reference:
            from harness.eval.reference import REFERENCE_STACKS, run_reference

            bar.update(task, description="pydantic-ai-harness 0.62")
            chosen = [s.label for s in report.stacks if s.label in REFERENCE_STACKS]
            report = run_reference(report, stacks=chosen or REFERENCE_STACKS, processes=processes)
    if plot is not None:
        write_tradeoff_png(report, plot)
    if as_json:
        document = report.as_json()
        document["plot"] = str(plot) if plot is not None else None
        echo_json(document)
    else:
        providers = {key: rules.label for key, rules in report.prices.providers.items()}
        requests = sum(r.requests for r in report.runs if r.side == "harness")
        runs = max(1, len(report.stacks) * len(report.budgets))
        out.print(
            f"[bold]harness eval[/bold]: {len(report.files)} file(s), {requests // runs:,} requests "
            f"per stack and budget, {report.seconds:.1f}s"
        )
        summary = report.summary()
        columns = figures_columns(providers, sides=any(f.side != "harness" for f in summary))
        every = columns
        if not wide:  # fit the console: the most important columns, no cell wrapped or cut
            columns = fitted_columns(out, summary, max(report.budgets, default=0), columns, out.width)
        for budget in report.budgets:
            table = figures_table([f for f in summary if f.budget == budget], budget, columns)
            if wide:
                table.width = Measurement.get(out, out.options.update_width(100_000), table).maximum
                out.print(table, crop=False)  # as wide as every cell on one line needs
            else:
                out.print(table)
        left_out = [c.header for c in every if c not in columns]
        if left_out:
            shown = ", ".join(left_out)
            out.print(f"[dim]columns left out to fit {out.width}: {shown} (--wide shows them)[/dim]")
        for stack in report.stacks:
            out.print(f"  {escaped(stack.label)}: {escaped(stack.spec or '(no capability)')}")
        out.print(f"invalid contexts: {report.invalid_contexts}")
        if plot is not None:
            out.print(f"chart written to {escaped(plot)}")
    if failures:
        sys.exit(EXIT_USAGE)
    if report.invalid_contexts:
        sys.exit(EXIT_PROBLEM)
