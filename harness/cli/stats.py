"""``harness stats``: token statistics of history files."""

from __future__ import annotations

__all__ = ["stats"]

from collections import Counter
from pathlib import Path

import click
from rich.table import Table

from harness.cli._app import cli, console
from harness.history import check_invariants
from harness.tokens import get_token_counter
from harness.wire import load_messages


@cli.command()
@click.argument(
    "paths", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option("--model", default=None, help="Model name that picks the tokenizer (default cl100k_base).")
def stats(paths: tuple[Path, ...], model: str | None) -> None:
    """Print token statistics of message-history JSON files."""
    out = console()
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
    out.print(table)
    out.print(f"tokenizer: {counter.encoding_name} ({'exact' if counter.exact else 'estimate'})")
