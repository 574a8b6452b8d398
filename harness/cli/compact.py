"""``harness compact``: apply a capability stack to a history or session file."""

from __future__ import annotations

__all__ = ["compact", "compact_report"]

import json
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
import click
from rich.table import Table

from harness.cli._app import (
    EXIT_PROBLEM,
    HistoryFile,
    cli,
    console,
    escaped,
    read_history_file,
    resolve_cli_stack,
    stack_option,
)
from harness.config import StackEntry, format_stack
from harness.config.stacks import tiered_stack_entries
from harness.errors import HistoryFileError
from harness.history import check_invariants
from harness.run.compaction import CompactionResult, compact_sync
from harness.session import atomic_write_bytes
from harness.tokens import TokenCounter
from harness.wire import dump_messages


def compact_report(
    history: HistoryFile,
    result: CompactionResult,
    entries: Sequence[StackEntry],
    *,
    window: int,
    dry_run: bool,
    written: Path | None,
) -> dict[str, Any]:
    """The manifest ``harness compact`` prints, as a JSON-ready mapping.

    One item per :class:`~harness.capabilities.context.CompactionEvent` (``capability`` is the
    event's ``strategy``), with the ids of the tool calls cleared and dropped, plus the
    totals and the invariant report of the result.
    """
    violations = check_invariants(result.messages, persisted=history.kind == "session")
    return {
        "file": str(history.path),
        "format": history.kind,
        "stack": format_stack(entries),
        "window": window,
        "dry_run": dry_run,
        "written": None if written is None else str(written),
        "messages_before": len(history.messages),
        "messages_after": len(result.messages),
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
        "edits": [
            {
                "capability": event.strategy,
                "reason": event.reason,
                "messages_before": event.messages_before,
                "messages_after": event.messages_after,
                "tokens_before": event.tokens_before,
                "tokens_after": event.tokens_after,
                "tool_calls_cleared": len(event.cleared_tool_call_ids),
                "tool_calls_dropped": len(event.removed_tool_call_ids),
                "cleared_tool_call_ids": list(event.cleared_tool_call_ids),
                "dropped_tool_call_ids": list(event.removed_tool_call_ids),
            }
            for event in result.events
        ],
        "request_scoped_parts": len(result.request_scoped),
        "invariants": {
            "clean": not violations,
            "violations": [
                {"kind": v.kind, "message_index": v.message_index, "detail": v.detail} for v in violations
            ],
        },
    }


def _print(report: Mapping[str, Any]) -> None:
    out = console()
    out.print(f"stack: {escaped(report['stack'] or '(empty)')}")
    table = Table(
        "capability", "messages", "tokens", "saved", "calls cleared", "calls dropped", "reason", title="edits"
    )
    for edit in report["edits"]:
        table.add_row(
            escaped(edit["capability"]),
            f"{edit['messages_before']} → {edit['messages_after']}",
            f"{edit['tokens_before']:,} → {edit['tokens_after']:,}",
            f"{edit['tokens_before'] - edit['tokens_after']:,}",
            str(edit["tool_calls_cleared"]),
            str(edit["tool_calls_dropped"]),
            escaped(edit["reason"]),
        )
    if report["edits"]:
        out.print(table)
    else:
        out.print("no capability edited the history")
    clean = report["invariants"]["clean"]
    out.print(
        f"{escaped(report['file'])}: {report['messages_before']} → {report['messages_after']} messages, "
        f"{report['tokens_before']:,} → {report['tokens_after']:,} tokens (window {report['window']:,}); "
        f"invariants: {'[green]clean[/green]' if clean else '[red]BROKEN[/red]'}"
    )


def _serialise(history: HistoryFile, result: CompactionResult) -> bytes:
    if history.session is None:
        return dump_messages(result.messages)
    session = attrs.evolve(
        history.session,
        messages=list(result.messages),
        total_tokens=result.tokens_after,
        last_modified=datetime.now(UTC),
    )
    return json.dumps(session.to_dict(), ensure_ascii=False, indent=1).encode()


def _target(path: Path, out: Path | None, in_place: bool, force: bool) -> Path | None:
    if in_place:
        if out is not None:
            raise click.UsageError("--out and --in-place exclude each other")
        return path
    if out is None:
        return None
    if out.resolve() == path.resolve():
        raise click.UsageError("--out names the input file; pass --in-place to overwrite it (a .bak is kept)")
    if out.is_dir():
        raise click.UsageError(f"--out {out} is a folder")
    if out.exists() and not force:
        raise click.UsageError(f"--out {out} exists; pass --force to overwrite it")
    return out


@cli.command(
    epilog="""\b
Examples:
  harness compact history.json --dry-run
  harness compact history.json --stack "dedupe_file_reads clear_tool_results:keep_pairs=3,max_fraction=0.8" \\
      --window 128000 --out compacted.json
  harness compact session.json --config harness.toml --stack-name small --in-place
  harness compact history.json --json --dry-run | jq '.edits[].tokens_after'
"""
)
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@stack_option
@click.option(
    "--window",
    type=click.IntRange(min=1),
    default=None,
    help="Context window in tokens (for fraction triggers and targets); default: the file's own size.",
)
@click.option("--model", default=None, help="Model name that picks the tokenizer (default cl100k_base).")
@click.option(
    "--if-needed",
    is_flag=True,
    help="Let each capability's trigger decide (default: compact now, as a /compact command does).",
)
@click.option("--dry-run", is_flag=True, help="Show the manifest; write nothing.")
@click.option(
    "--out",
    "--output",
    "out",
    type=click.Path(dir_okay=True, path_type=Path),
    default=None,
    help="Write the result to this new file (atomically).",
)
@click.option("--in-place", is_flag=True, help="Overwrite the input atomically, keeping <name>.bak.")
@click.option("--force", is_flag=True, help="Let --out overwrite an existing file.")
@click.option("--json", "as_json", is_flag=True, help="Print the manifest as JSON.")
def compact(
    path: Path,
    stack: str | None,
    config: Path | None,
    stack_name: str | None,
    window: int | None,
    model: str | None,
    if_needed: bool,
    dry_run: bool,
    out: Path | None,
    in_place: bool,
    force: bool,
    as_json: bool,
) -> None:
    """Apply a capability stack to a history or session file and show each edit.

    The stack comes from --stack, else --config, else a harness.toml (or pyproject.toml
    [tool.harness]) found from the current folder upwards, else the built-in tiered stack
    (dedupe, clear, summarize, slide down to half the window). The manifest lists each
    edit: capability, messages and tokens before and after, tool calls cleared or
    dropped.

    Nothing is written unless --out FILE (a new file; --force to replace one) or
    --in-place (the input, with a .bak) is given; --dry-run writes nothing in any case.
    A session file stays a session file. Exits with 1 if the result breaks an invariant
    (nothing is written then), 2 on a bad file or stack.
    """
    target = _target(path, out, in_place, force)
    history = read_history_file(path)
    counter = TokenCounter(model)
    size = counter.count_messages(history.messages)
    window = window or max(size, 1)
    default = format_stack(tiered_stack_entries(target_fraction=0.5))
    capabilities, entries = resolve_cli_stack(
        stack, config, stack_name, default=default, context_window=window
    )
    result = compact_sync(
        history.messages, capabilities, model_name=model, context_window=window, force=not if_needed
    )
    report = compact_report(history, result, entries, window=window, dry_run=dry_run, written=None)
    clean = report["invariants"]["clean"]
    if target is not None and not dry_run and clean:
        try:
            atomic_write_bytes(target, _serialise(history, result), backup=in_place)
        except OSError as exc:
            raise HistoryFileError(target, f"cannot write the result: {exc.strerror or exc}") from exc
        report["written"] = str(target)
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        _print(report)
        if report["written"]:
            kept = " (previous version kept as .bak)" if in_place else ""
            console().print(f"wrote {escaped(report['written'])}{kept}")
        elif dry_run:
            console().print("dry run: nothing written")
        elif target is None:
            console().print("nothing written: pass --out FILE or --in-place to save the result")
    if not clean:
        click.echo(
            "error: the compacted history breaks an invariant (see the manifest); nothing was written",
            err=True,
        )
        sys.exit(EXIT_PROBLEM)
