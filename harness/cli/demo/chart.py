"""The with/without token chart: bars in the terminal, a PNG with matplotlib.

The terminal chart needs nothing beyond rich. The PNG needs matplotlib, an optional
dependency (the ``plot`` extra: ``pip install 'harness-loop[plot]'``); it is imported only
when a PNG is asked for, with the non-interactive Agg backend.
"""

from __future__ import annotations

from harness.errors import PlotUnavailableError

__all__ = [
    "PLOT_INSTALL_HINT",
    "comparison_table",
    "event_lines",
    "require_matplotlib",
    "summary_line",
    "terminal_chart",
    "write_png",
]

import importlib
from pathlib import Path
from types import ModuleType

from rich.table import Table
from rich.text import Text

from harness.cli._json import percent, saved_words
from harness.cli.demo.measure import Comparison, describe_event

PLOT_INSTALL_HINT = "pip install 'harness-loop[plot]'"
"""How to install what :func:`write_png` needs."""

_FULL = "█"
_SHADE = "░"
_MARK = "│"


def require_matplotlib() -> ModuleType:
    """Import ``matplotlib.pyplot`` with the Agg backend.

    Raises:
        PlotUnavailableError: matplotlib is not installed; the message holds the install hint.
    """
    try:
        matplotlib = importlib.import_module("matplotlib")
    except ImportError as exc:
        raise PlotUnavailableError(
            f"--plot needs matplotlib, which is not installed; install the plot extra: {PLOT_INSTALL_HINT}"
        ) from exc
    matplotlib.use("Agg")
    return importlib.import_module("matplotlib.pyplot")


def _buckets(comparison: Comparison, max_rows: int) -> list[tuple[str, int, int, bool]]:
    """(label, tokens with, tokens without, had events) per row; long runs grouped by their maximum."""
    rows = comparison.requests
    size = max(1, -(-len(rows) // max_rows))
    out: list[tuple[str, int, int, bool]] = []
    for start in range(0, len(rows), size):
        group = rows[start : start + size]
        first, last = group[0].index, group[-1].index
        label = str(first) if first == last else f"{first}-{last}"
        out.append(
            (
                label,
                max(r.tokens_with for r in group),
                max(r.tokens_without for r in group),
                any(r.compacted for r in group),
            )
        )
    return out


_FIGURES = len(f" {0:>7,} / {0:>7,}")
_COMPACTED = "  ← compacted"


def terminal_chart(
    comparison: Comparison, *, width: int = 48, max_rows: int = 40, columns: int | None = None
) -> Text:
    """Horizontal bars per request: tokens sent with the stack, and the extra without it.

    Args:
        comparison: The measured runs.
        width: Characters of the longest bar.
        max_rows: More requests than this are grouped (each row shows a group's maximum).
        columns: The width of the output (e.g. ``console.width``): bars are shortened so
            that every row fits it (down to 10 characters).

    Returns:
        A rich :class:`~rich.text.Text` (plain characters when printed to a file).
    """
    budget = comparison.budget
    scale_max = max(comparison.peak_without, comparison.peak_with, budget or 0, 1)
    rows = _buckets(comparison, max_rows)
    label_width = max((len(label) for label, *_ in rows), default=1)
    if columns is not None:
        width = max(10, min(width, columns - label_width - 2 - _FIGURES - len(_COMPACTED)))
    chart = Text()
    legend = f"tokens sent per request: {_FULL} with the stack, {_SHADE} more without it"
    if budget is not None:
        legend += f", {_MARK} budget {budget:,}"
    chart.append(legend + "\n", style="bold")
    mark = round(budget / scale_max * width) if budget is not None else None
    for label, with_tokens, without_tokens, had_events in rows:
        solid = round(with_tokens / scale_max * width)
        total = max(solid, round(without_tokens / scale_max * width))
        chart.append(f"{label:>{label_width}} ")
        span = max(width, mark or 0) + 1
        for column in range(span):
            if column == mark:
                chart.append(_MARK, style="yellow")
            elif column < solid:
                chart.append(_FULL, style="red" if budget is not None and with_tokens > budget else "green")
            elif column < total:
                chart.append(_SHADE, style="dim")
            else:
                chart.append(" ")
        chart.append(f" {with_tokens:>7,} / {without_tokens:>7,}")
        if had_events:
            chart.append(_COMPACTED, style="cyan")
        chart.append("\n")
    return chart


def write_png(comparison: Comparison, path: Path, *, title: str = "Tokens sent per model request") -> Path:
    """Plot tokens per request with and without the stack (and the budget) as a PNG.

    Raises:
        PlotUnavailableError: matplotlib is not installed.
        OSError: The file cannot be written.
    """
    plt = require_matplotlib()
    requests = [r.index for r in comparison.requests]
    figure, axes = plt.subplots(figsize=(9, 4.5), dpi=110)
    try:
        axes.plot(
            requests,
            [r.tokens_without for r in comparison.requests],
            color="#c0392b",
            label="without the stack",
        )
        axes.plot(
            requests, [r.tokens_with for r in comparison.requests], color="#27ae60", label="with the stack"
        )
        compacted = [r for r in comparison.requests if r.compacted]
        if compacted:
            axes.scatter(
                [r.index for r in compacted],
                [r.tokens_with for r in compacted],
                color="#2980b9",
                zorder=3,
                s=18,
                label="compaction before the request",
            )
        if comparison.budget is not None:
            axes.axhline(
                comparison.budget, color="#7f8c8d", linestyle="--", label=f"budget {comparison.budget:,}"
            )
        axes.set_xlabel("model request")
        axes.set_ylabel("tokens sent")
        axes.set_title(
            f"{title}: {comparison.total_with:,} vs {comparison.total_without:,} tokens "
            f"({_saved_short(comparison)})",
            fontsize=10,
        )
        axes.set_ylim(bottom=0)
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
        figure.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, format="png")
    finally:
        plt.close(figure)
    return path


def comparison_table(comparison: Comparison) -> Table:
    """The with/without table: one row per request, then the totals.

    ``edits`` counts the compaction edits made before the request (a roll-up event, which
    repeats its tiers' edits, is not counted); :func:`event_lines` describes them.
    """
    table = Table(
        "request",
        "messages",
        "without",
        "with",
        "saved",
        "edits",
        title="tokens sent per request, without and with the stack",
    )
    for row in comparison.requests:
        over = comparison.budget is not None and row.tokens_with > comparison.budget
        table.add_row(
            str(row.index),
            f"{row.messages_without} → {row.messages_with}",
            f"{row.tokens_without:,}",
            f"[red]{row.tokens_with:,}[/red]" if over else f"{row.tokens_with:,}",
            f"{row.saved:,}",
            str(row.edits) if row.compacted else "-",
        )
    table.add_section()
    table.add_row(
        "total",
        "",
        f"{comparison.total_without:,}",
        f"{comparison.total_with:,}",
        f"{comparison.saved:,} ({_saved_short(comparison)})",
        str(comparison.edit_count),
    )
    table.add_row("peak", "", f"{comparison.peak_without:,}", f"{comparison.peak_with:,}", "", "")
    return table


def event_lines(comparison: Comparison) -> list[str]:
    """One line per compaction event: ``before request 7: clear_tool_results: 13→13 messages, ...``."""
    return [
        f"before request {row.index}: {describe_event(event)}"
        for row in comparison.requests
        for event in row.events
    ]


def summary_line(comparison: Comparison) -> str:
    """One line of totals: what the requests cost with and without the stack, and the peak."""
    budget = comparison.budget
    within = (
        f"; every request within the {budget:,}-token budget"
        if budget is not None and not comparison.over_budget
        else f"; over the {budget:,}-token budget: {_numbered(comparison.over_budget)}"
        if budget is not None
        else ""
    )
    line = (
        f"{len(comparison.requests)} requests: {comparison.total_with:,} input tokens with the stack vs "
        f"{comparison.total_without:,} without, {saved_words(comparison.saved, comparison.saved_fraction)}; "
        f"peak {comparison.peak_with:,} vs {comparison.peak_without:,}{within}"
    )
    if comparison.first_request_over_budget and budget is not None:
        first = comparison.requests[0].tokens_with
        line += (
            f"\nthe first request alone holds {first:,} tokens, over the {budget:,}-token budget: it has "
            "nothing a capability may remove (the system prompt, the tools and the first prompt), so no "
            f"stack can fit it; give a budget of at least {first:,}"
        )
    return line


def _numbered(numbers: tuple[int, ...]) -> str:
    """``request 2``, ``requests 1, 3-5, 9 (5 requests)``: which requests, never read as a count."""
    if len(numbers) == 1:
        return f"request {numbers[0]}"
    return f"requests {_ranges(numbers)} ({len(numbers)} requests)"


def _ranges(numbers: tuple[int, ...]) -> str:
    """``1, 3, 4, 5, 9`` as ``"1, 3-5, 9"``."""
    spans: list[list[int]] = []
    for number in numbers:
        if spans and number == spans[-1][1] + 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def _saved_short(comparison: Comparison) -> str:
    """``"12% saved"``, ``"3% added"`` or ``"nothing saved"``: never ``"-0% saved"``."""
    if comparison.saved > 0:
        return f"{percent(comparison.saved_fraction)} saved"
    if comparison.saved < 0:
        return f"{percent(comparison.saved_fraction)} added"
    return "nothing saved"
