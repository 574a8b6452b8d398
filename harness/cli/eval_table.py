"""``harness eval``'s tables: one per budget, fitted to the terminal, or every column with ``--wide``.

The full table has sixteen columns (about 230 characters). By default the columns are
added in order of importance for as long as the table fits the console's width (the
terminal's, ``$COLUMNS``, or 80 in a pipe), so no cell is ever wrapped or cut, and a line
under the tables names the columns left out. ``--wide`` prints every column, each cell on
one line, however wide that makes the table (``--json`` has every figure too).
"""

from __future__ import annotations

__all__ = ["Column", "figures_columns", "figures_table", "fitted_columns"]

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import attrs
from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from harness.cli._app import escaped

if TYPE_CHECKING:
    from harness.eval import StackFigures

_RECALL = (
    ("task", "task"),
    ("constraint", "constr."),
    ("artifact", "artifacts"),
    ("error", "errors"),
    ("continuation", "cont."),
    ("older_continuation", "older cont."),
)


@attrs.frozen
class Column:
    """One column of the figures table.

    Attributes:
        header: The column's header.
        cell: The cell of a row (rich markup allowed).
        priority: Lower is more important: kept first when the width is short.
        right: Right-justified (figures).
    """

    header: str
    cell: Callable[[StackFigures], str]
    priority: int
    right: bool = True


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _millions(value: float) -> str:
    return f"{value / 1e6:.2f}M" if value >= 1e6 else f"{value / 1e6:.3f}M"


def _recall(name: str) -> Callable[[StackFigures], str]:
    return lambda row: _percent(row.recall_of(name))


def _cost(key: str) -> Callable[[StackFigures], str]:
    return lambda row: _millions(row.costs.get(key, 0.0))


def _invalid(row: StackFigures) -> str:
    return f"[red]{row.invalid_contexts}[/red]" if row.invalid_contexts else "0"


def _over(row: StackFigures) -> str:
    return f"{row.over_budget} of {row.requests}"


def figures_columns(providers: dict[str, str], *, sides: bool) -> list[Column]:
    """Every column, in the full table's order.

    Args:
        providers: Pricing provider keys and their labels (``{"anthropic": "Anthropic"}``).
        sides: Include the ``side`` column (harness or the pydantic-ai-harness reference).
    """
    importance = {"older_continuation": 1, "continuation": 3, "task": 6, "artifact": 8, "error": 9}
    columns = [Column("side", lambda row: row.side, 0, right=False)] if sides else []
    columns.append(Column("stack", lambda row: escaped(row.stack), 0, right=False))
    columns += [Column(header, _recall(name), importance.get(name, 10)) for name, header in _RECALL]
    columns += [
        Column("input tokens", lambda row: f"{row.total_tokens:,}", 2),
        Column("peak", lambda row: f"{row.peak_tokens:,}", 4),
        Column("over budget", _over, 5),
        Column("unavoidable", lambda row: str(row.over_budget_unavoidable), 10),
    ]
    columns += [
        Column(f"{label} cost", _cost(key), 2 if i == 0 else 11)
        for i, (key, label) in enumerate(providers.items())
    ]
    columns += [
        Column("cache busts", lambda row: str(row.cache_busts), 12),
        Column("invalid", _invalid, 7),
        Column(
            "summaries (calls/sent)",
            lambda row: f"{row.summarizer_calls}/{row.summaries_sent}" if row.side == "harness" else "—",
            13,
        ),
    ]
    return columns


def figures_table(rows: Sequence[StackFigures], budget: int, columns: Sequence[Column]) -> Table:
    """One table for one budget: a row per (side, stack), the given columns, no cell wrapped."""
    table = Table(
        title=f"budget {budget:,} tokens", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False
    )
    for column in columns:
        table.add_column(column.header, justify="right" if column.right else "left", no_wrap=True)
    for row in rows:
        table.add_row(*(column.cell(row) for column in columns))
    return table


def _width(console: Console, table: Table) -> int:
    return Measurement.get(console, console.options.update_width(100_000), table).maximum


def fitted_columns(
    console: Console, rows: Sequence[StackFigures], budget: int, columns: Sequence[Column], width: int
) -> list[Column]:
    """The most important columns whose table fits ``width``, in the full table's order.

    Columns are taken by priority (then position) for as long as the table stays within
    ``width``; the ``side`` and ``stack`` columns are always kept.
    """
    ranked = sorted(range(len(columns)), key=lambda i: (columns[i].priority, i))
    chosen: set[int] = set()
    for index in ranked:
        trial = chosen | {index}
        table = figures_table(rows, budget, [columns[i] for i in sorted(trial)])
        if columns[index].priority == 0 or _width(console, table) <= width:
            chosen = trial
    return [columns[i] for i in sorted(chosen)]
