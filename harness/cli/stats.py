"""``harness stats``: token statistics of several history or session files at once."""

from __future__ import annotations

__all__ = ["stats"]

import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.table import Table

from harness.cli._app import (
    EXIT_PROBLEM,
    EXIT_USAGE,
    HISTORY_PATH,
    cli,
    console,
    escaped,
    history_format_option,
    one_line,
    read_history_file,
)
from harness.cli._json import echo_json
from harness.errors import HarnessError
from harness.history import check_invariants
from harness.tokens import TokenCounter

if TYPE_CHECKING:
    from harness.wire import FormatChoice


@cli.command(
    epilog="""\b
Examples:
  harness stats runs/*.json
  harness stats --json a.json b.json | jq '.files[].tokens'
"""
)
@click.argument("paths", nargs=-1, required=True, type=HISTORY_PATH)
@history_format_option
@click.option("--model", default=None, help="Model name that picks the tokenizer (default cl100k_base).")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print JSON instead of a table: one row per file under files, unreadable files under errors.",
)
def stats(paths: tuple[Path, ...], history_format: FormatChoice, model: str | None, as_json: bool) -> None:
    """Print one line of token statistics per history or session file.

    Every file is read as `harness inspect` reads it (any accepted format, detected unless
    --format says; JSON Lines; gzip; - for standard input). For the details of one file
    see `harness inspect`. A file that cannot be read gets one `error:` line on stderr
    (and an entry under `errors` with --json) and the others are still reported. Exits
    with 2 when a file cannot be read, else 1 when a file breaks an invariant.
    """
    counter = TokenCounter(model)
    rows: list[dict[str, Any]] = []
    failed: list[dict[str, str]] = []
    for path in paths:
        try:
            history = read_history_file(path, format=history_format)
        except HarnessError as exc:
            message = one_line(str(exc))
            click.echo(f"error: {type(exc).__name__}: {message}", err=True)
            failed.append({"file": str(path), "error": type(exc).__name__, "message": message})
            continue
        messages = history.messages
        kinds: Counter[str] = Counter(part.part_kind for m in messages for part in m.parts)
        largest = max((counter.count_part(p) for m in messages for p in m.parts), default=0)
        violations = check_invariants(messages, persisted=history.kind == "session")
        rows.append(
            {
                "file": str(path),
                "format": history.kind,
                "message_format": history.format,
                "skipped_records": sum(history.skipped.values()),
                "messages": len(messages),
                "parts": sum(kinds.values()),
                "tool_calls": kinds["tool-call"],
                "tokens": counter.count_messages(messages),
                "largest_part_tokens": largest,
                "violations": len(violations),
            }
        )
    if as_json:
        echo_json({"files": rows, "errors": failed})
    elif rows:
        table = Table(
            "file", "format", "messages", "parts", "tool calls", "tokens", "largest part", "invariants"
        )
        for row in rows:
            table.add_row(
                escaped(Path(row["file"]).name),
                row["format"] if row["format"] == "session" else row["message_format"],
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
    if failed:
        sys.exit(EXIT_USAGE)
    if any(row["violations"] for row in rows):
        sys.exit(EXIT_PROBLEM)
