"""``harness compact``: apply a capability stack to a history file."""

from __future__ import annotations

__all__ = ["compact"]

from pathlib import Path

import click
from rich.table import Table

from harness.cli._app import cli, console
from harness.history import check_invariants
from harness.stacks import tiered_stack
from harness.tokens import get_token_counter
from harness.wire import load_messages


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
    out = console()
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
    out.print(f"stack: {', '.join(names) or '(no capability plugins installed)'}")
    out.print(table)
    out.print(
        f"{path.name}: {result.tokens_before:,} → {result.tokens_after:,} tokens "
        f"(target {int(window * target):,}); invariants: "
        f"{'clean' if not check_invariants(result.messages) else 'BROKEN'}"
    )
    if output is not None:
        if output.resolve() == path.resolve():
            raise click.UsageError("--output must not be the input file")
        output.write_bytes(dump_messages(result.messages))
        out.print(f"wrote {output}")
