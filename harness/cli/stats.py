"""``harness stats``: token statistics of several history or session files at once."""

from __future__ import annotations

__all__ = ["stats"]

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from harness.cli._app import EXIT_PROBLEM, cli, console, escaped, read_history_file
from harness.history import check_invariants
from harness.tokens import TokenCounter


@cli.command(
    epilog="""\b
Examples:
  harness stats runs/*.json
  harness stats --json a.json b.json | jq '.[].tokens'
"""
)
@click.argument(
    "paths", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option("--model", default=None, help="Model name that picks the tokenizer (default cl100k_base).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of a table.")
def stats(paths: tuple[Path, ...], model: str | None, as_json: bool) -> None:
    """Print one line of token statistics per history or session file.

    For the details of one file see `harness inspect`. Exits with 1 when a file breaks
    an invariant, 2 when a file cannot be read.
    """
    counter = TokenCounter(model)
    rows: list[dict[str, Any]] = []
    for path in paths:
        history = read_history_file(path)
        messages = history.messages
        kinds: Counter[str] = Counter(part.part_kind for m in messages for part in m.parts)
        largest = max((counter.count_part(p) for m in messages for p in m.parts), default=0)
        violations = check_invariants(messages, persisted=history.kind == "session")
        rows.append(
            {
                "file": str(path),
                "format": history.kind,
                "messages": len(messages),
                "parts": sum(kinds.values()),
                "tool_calls": kinds["tool-call"],
                "tokens": counter.count_messages(messages),
                "largest_part_tokens": largest,
                "violations": len(violations),
            }
        )
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    else:
        table = Table(
            "file", "format", "messages", "parts", "tool calls", "tokens", "largest part", "invariants"
        )
        for row in rows:
            table.add_row(
                escaped(Path(row["file"]).name),
                row["format"],
                str(row["messages"]),
                str(row["parts"]),
                str(row["tool_calls"]),
                f"{row['tokens']:,}",
                f"{row['largest_part_tokens']:,}",
                "clean" if not row["violations"] else f"{row['violations']} violations",
            )
        out = console()
        out.print(table)
        out.print(f"tokenizer: {counter.encoding_name} ({'exact' if counter.exact else 'estimate'})")
    if any(row["violations"] for row in rows):
        sys.exit(EXIT_PROBLEM)
